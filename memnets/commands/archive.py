"""`memnets archive rotate-key`: re-encrypt an archive folder in place under a new key;
`memnets archive reembed`: move a store to a new encoder.

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

from memnets.console import CommandParser, add_output_options, parse_args


def rotate_key_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
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


def reembed_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="memnets archive reembed",
        description="Re-embed every memory of every user of a store with a new encoder (a pack's, or an "
        "encoder folder), in batches, then swap to it in one transaction. Searches keep answering from "
        "the old vectors until the swap. Killed, it resumes where it stopped when run again; on "
        "PostgreSQL several workers (processes or machines) may run it on the same store at once. "
        "Writers using the old encoder are refused after the swap: reopen them with the new one.",
    )
    parser.add_argument("location", help="the store: an archive folder or a postgresql:// URL")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--pack", metavar="DIR", help="the pack whose encoder to move to")
    source.add_argument("--encoder", metavar="DIR", help="an encoder folder (default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--batch-size", type=int, default=64, help="memories per batch (default 64)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--key-env", metavar="VAR", help="environment variable holding the store's passphrase")
    group.add_argument("--key-file", metavar="PATH", help="file holding the store's raw key (16, 24 or 32 bytes)")
    parser.add_argument("--table", help="PostgreSQL: the store's table name prefix")
    return add_output_options(parser)


def reembed_main(argv: list[str]) -> int:
    args = parse_args(reembed_parser(), argv)
    from memnets.api import reembed
    from memnets.store.errors import StoreError, StoreNotFoundError

    if args.batch_size < 1:
        print(f"memnets archive reembed: --batch-size must be >= 1, got {args.batch_size}", file=sys.stderr)
        return 2
    key = None
    if args.key_env is not None or args.key_file is not None:
        try:
            key = _key(args.key_env, args.key_file, "store")
        except (LookupError, OSError) as error:
            print(f"memnets archive reembed: {error}", file=sys.stderr)
            return 2
    options = {"table": args.table} if args.table else {}
    try:
        report = reembed(
            args.location, pack=args.pack, encoder=args.encoder, key=key, batch_size=args.batch_size, **options
        )
    except StoreNotFoundError:
        print(f"memnets archive reembed: {args.location} holds no memnets store; nothing was created", file=sys.stderr)
        return 2
    except (StoreError, ValueError, FileNotFoundError) as error:
        print(f"memnets archive reembed: {error}", file=sys.stderr)
        return 1
    state = (
        "swapped to the new encoder" if report.swapped else "not swapped yet (other workers hold batches; run again)"
    )
    print(f"re-embedded {report.embedded} of {report.total} rows in {report.seconds:.1f} s; {state}")
    return 0
