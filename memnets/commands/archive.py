"""`memnets archive rotate-key`: re-encrypt an archive folder in place under a new key.

Thin over :func:`memnets.store.archive.rotate_key` (one SQLite transaction: a crash leaves the
archive under exactly one of the two keys). Keys never go on the command line, where other users
could read them from the process list: a passphrase comes from an environment variable or a
prompt, a raw 16/24/32-byte key from a file.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys

from memnets.console import add_output_options, parse_args


def rotate_key_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memnets archive rotate-key",
        description="Re-encrypt every memory of an archive folder under a new key, in one transaction. "
        "Also the way to raise the passphrase KDF cost of an older archive: rotate to the same "
        "passphrase. Stop the processes using the archive first; they must reopen with the new key.",
    )
    parser.add_argument("directory", help="the archive folder (holds archive.sqlite3)")
    for which in ("old", "new"):
        group = parser.add_mutually_exclusive_group()
        group.add_argument(
            f"--{which}-key-env", metavar="VAR", help=f"environment variable holding the {which} passphrase"
        )
        group.add_argument(
            f"--{which}-key-file", metavar="PATH", help=f"file holding the {which} raw key (16, 24 or 32 bytes)"
        )
    parser.add_argument(
        "--scrypt-n",
        type=int,
        default=None,
        metavar="N",
        help="scrypt cost for a new passphrase (a power of two; default: 2^17, OWASP's minimum)",
    )
    return add_output_options(parser)


def _key(env: str | None, file: str | None, which: str) -> bytes | str:
    """The key named by --{which}-key-env / --{which}-key-file, else a passphrase typed at a prompt."""
    if env is not None:
        value = os.environ.get(env)
        if not value:
            raise LookupError(f"environment variable {env} (--{which}-key-env) is not set")
        return value
    if file is not None:
        with open(file, "rb") as handle:
            return handle.read()
    value = getpass.getpass(f"{which} passphrase: ")
    if which == "new" and getpass.getpass("new passphrase again: ") != value:
        raise LookupError("the two new passphrases differ")
    return value


def rotate_key_main(argv: list[str]) -> int:
    args = parse_args(rotate_key_parser(), argv)
    from memnets.store.archive import DB_FILE, rotate_key
    from memnets.store.crypto import DEFAULT_KDF
    from memnets.store.errors import ArchiveError

    if not os.path.isfile(os.path.join(args.directory, DB_FILE)):
        print(f"memnets archive rotate-key: {args.directory} holds no archive ({DB_FILE} not found)", file=sys.stderr)
        return 2
    try:
        old_key = _key(args.old_key_env, args.old_key_file, "old")
        new_key = _key(args.new_key_env, args.new_key_file, "new")
    except (LookupError, OSError) as error:
        print(f"memnets archive rotate-key: {error}", file=sys.stderr)
        return 2
    kdf = DEFAULT_KDF if args.scrypt_n is None else {**DEFAULT_KDF, "n": args.scrypt_n}
    try:
        count = rotate_key(args.directory, old_key, new_key, kdf=kdf)
    except (ArchiveError, ValueError) as error:
        print(f"memnets archive rotate-key: {error}", file=sys.stderr)
        return 1
    stretched = (
        f" (passphrase stretched by scrypt n={kdf['n']}, r={kdf['r']}, p={kdf['p']})"
        if isinstance(new_key, str)
        else ""
    )
    print(f"re-encrypted {count} memories in {args.directory} under the new key{stretched}")
    return 0
