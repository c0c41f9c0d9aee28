"""`memnets memories LOCATION COMMAND`: look into a memory folder or a PostgreSQL database.

Thin over ``memnets.open``: every command is one AgentMemory call (``users``, ``list_memories``,
``search``, ``get``, ``history``, ``delete``/``delete_all``) or the JSON lines of
:mod:`memnets.portable` (``export``, ``import``), printed as a table or, with ``--json``, as JSON.

Examples:
  memnets memories ./memory users
  memnets memories ./memory list --user ann
  memnets memories ./memory search --user ann "Where does Ann live?" -k 3
  memnets memories postgresql://db/memnets --key-env MEMNETS_KEY show --user ann 3f2a...
  memnets memories ./memory export --user ann -o ann.jsonl
  memnets memories ./other import --create --user ann ann.jsonl

A LOCATION that holds no memory is refused (exit 2) and left as it was: only `import --create`
makes one. Commands that do not embed a text (all but search and import) do not load the encoder.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime
from pathlib import Path

from rich.table import Table

from memnets.commands.options import at_least, non_empty_text
from memnets.console import CommandParser, add_output_options, parse_args, print_table
from memnets.records import MEMORY_KINDS
from memnets.timeutil import as_utc

PROG = "memnets memories"
CONTENT_WIDTH = 70  # characters of a memory's content shown in a table row
EMBEDS = {"search", "import"}  # the commands that encode text, and so load the encoder


def parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("location", metavar="LOCATION", help="the memory: a folder or a postgresql:// URL")
    parser.add_argument(
        "--key-env",
        default=None,
        metavar="VAR",
        help="name of an environment variable holding the memory's encryption passphrase",
    )
    parser.add_argument(
        "--table",
        default=None,
        help="postgresql:// only: the name prefix of the memory's tables (default memnets)",
    )
    encoder = parser.add_mutually_exclusive_group()
    encoder.add_argument(
        "--encoder",
        default=None,
        help="the encoder folder the memory was filled with (default: the bundled all-MiniLM-L6-v2)",
    )
    encoder.add_argument("--pack", default=None, help="the memory pack the memory was filled with")
    add_output_options(parser)

    user = argparse.ArgumentParser(add_help=False)
    user.add_argument("--user", required=True, help="the user (owner) whose memories to read or change")
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("--json", action="store_true", help="print JSON instead of a table")
    when = argparse.ArgumentParser(add_help=False)
    when.add_argument(
        "--as-of", type=iso_time, default=None, help="the versions valid at this ISO 8601 time (older ones too)"
    )
    when.add_argument("--known-at", type=iso_time, default=None, help="as written by this ISO 8601 time")

    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, help="what to do (each has its own --help)"
    )
    commands.add_parser(
        "users", parents=[output], help="the users with memories", description="Every user with a memory, sorted."
    )
    listing = commands.add_parser(
        "list",
        parents=[user, output, when],
        help="a user's memories, oldest first",
        description="A user's current memories, oldest first.",
    )
    listing.add_argument("--limit", type=at_least(0), default=50, help="how many to show (default 50)")
    listing.add_argument("--offset", type=at_least(0), default=0, help="how many to skip first (default 0)")
    listing.add_argument("--kind", default=None, choices=MEMORY_KINDS, help="only memories of this kind")
    search = commands.add_parser(
        "search",
        parents=[user, output, when],
        help="a user's memories that best answer a query",
        description="The k memories of a user that best answer a query, best first, with their scores.",
    )
    search.add_argument("query", type=non_empty_text, help="the question or text to search for")
    search.add_argument("-k", type=at_least(1), default=5, help="how many memories (default 5)")
    show = commands.add_parser(
        "show", parents=[user, output], help="every field of one memory", description="Every field of one memory."
    )
    show.add_argument("id", help="the memory's id")
    history = commands.add_parser(
        "history",
        parents=[user, output],
        help="every version of one memory, oldest first",
        description="Every version of one memory: the older ones oldest first, then the current one.",
    )
    history.add_argument("id", help="the memory's id")
    delete = commands.add_parser(
        "delete",
        parents=[user, output],
        help="delete memories for good (with their history)",
        description="Delete memories of a user for good, with their older versions and what was derived from them.",
    )
    delete.add_argument("ids", nargs="*", metavar="ID", help="ids of the memories to delete")
    delete.add_argument("--all", action="store_true", help="delete every memory of the user (needs --yes)")
    delete.add_argument("--yes", action="store_true", help="confirm --all")
    export = commands.add_parser(
        "export",
        parents=[user],
        help="a user's memories as JSON lines",
        description="Write every current memory of a user, with its older versions, as one JSON line "
        "(docs/cli.md). `import` reads the same lines.",
    )
    export.add_argument("-o", "--output", type=Path, default=None, help="file to write (default: standard output)")
    importing = commands.add_parser(
        "import",
        parents=[user],
        help="add memories from JSON lines written by export",
        description="Add a user's memories from the JSON lines `export` writes, history included; "
        "texts are encoded with this memory's encoder. Every line is checked before anything is written.",
    )
    importing.add_argument("file", help="the JSON lines file, or - for standard input")
    importing.add_argument(
        "--create", action="store_true", help="create the memory at LOCATION if it holds none (default: refuse)"
    )
    return parser


def command_help(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """``argv`` as argparse reads ``memnets memories search --help``: a command's help, asked for with no LOCATION
    (argparse would take the command's name for the LOCATION and print this command's help instead)."""
    [commands] = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    asks_help = any(arg in ("-h", "--help") for arg in argv[1:])
    return ["LOCATION", *argv] if argv and argv[0] in commands.choices and asks_help else argv


def main(argv: list[str]) -> int:
    command = parser()
    args = parse_args(command, command_help(command, argv))
    if args.command == "delete" and bool(args.ids) == bool(args.all):
        command.error("delete: give memory ids or --all, not both and not neither")
    if args.command == "delete" and args.all and not args.yes:
        command.error(f"delete --all deletes every memory of user {args.user!r} for good: add --yes to confirm")
    key = None
    if args.key_env is not None:
        key = os.environ.get(args.key_env)
        if not key:
            command.error(f"--key-env: the environment variable {args.key_env} is not set")
    lines = None
    if args.command == "import":
        from memnets.portable import parse_lines

        source = "standard input" if args.file == "-" else args.file
        try:
            text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
            lines = parse_lines(text.splitlines(), args.user, source)
        except (OSError, ValueError) as error:
            print(f"{PROG} import: {error}", file=sys.stderr)
            return 1

    from memnets.commands.memory_opening import open_memory
    from memnets.store.errors import ArchiveError, StoreNotFoundError

    try:
        memory = open_memory(
            args.location,
            key=key,
            encoder=args.encoder,
            pack=args.pack,
            options={"table": args.table} if args.table is not None else {},
            embeds=args.command in EMBEDS,
            create=getattr(args, "create", False),
        )
    except StoreNotFoundError:
        create = " (import --create makes one)" if args.command == "import" else ""
        print(f"{PROG}: {args.location} holds no memnets memory; nothing was created{create}", file=sys.stderr)
        return 2
    except (OSError, ValueError, TypeError, ArchiveError) as error:
        print(f"{PROG}: cannot open {args.location}: {error}", file=sys.stderr)
        return 1
    with memory:
        try:
            return RUN[args.command](memory, args, lines)
        except (KeyError, ValueError) as error:  # the library's bad-input errors name the argument
            message = error.args[0] if isinstance(error, KeyError) and error.args else error
            print(f"{PROG} {args.command}: {message}", file=sys.stderr)
            return 1


# ---------------------------------------------------------------------- the commands
def run_users(memory, args, _) -> int:
    users = memory.users()
    if args.json:
        print(json.dumps(users))
    else:
        print("\n".join(users) if users else "(no users)")
    return 0


def iso_time(text: str) -> datetime:
    """An ISO 8601 time argument (naive: UTC), read as every time is (:func:`memnets.timeutil.as_utc`)."""
    try:
        return as_utc(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from None


def run_list(memory, args, _) -> int:
    filters = {"kind": args.kind} if args.kind else None
    listed = memory.list_memories(
        user=args.user,
        limit=args.limit,
        offset=args.offset,
        filters=filters,
        as_of=args.as_of,
        known_at=args.known_at,
    )
    show_memories(listed, args, title=f"memories of {args.user} ({len(listed)} from {args.offset})")
    return 0


def run_search(memory, args, _) -> int:
    hits = memory.search(args.query, user=args.user, k=args.k, as_of=args.as_of, known_at=args.known_at)
    show_memories(
        [hit.memory for hit in hits], args, title=f"{args.user}: {args.query}", scores=[hit.score for hit in hits]
    )
    return 0


def run_show(memory, args, _) -> int:
    from memnets.portable import memory_to_json

    found = memory.get(args.id, user=args.user)
    if found is None:
        print(f"{PROG} show: user {args.user!r} has no memory {args.id!r}", file=sys.stderr)
        return 1
    record = memory_to_json(found)
    if args.json:
        print(json.dumps(record, ensure_ascii=False, indent=2))
        return 0
    table = Table(title=f"memory {found.id} of {args.user}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for name, value in record.items():
        table.add_row(name, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
    print_table(table)
    return 0


def run_history(memory, args, _) -> int:
    from memnets.memory.validity import changes

    versions = memory.history(args.id, user=args.user)
    if not versions:
        print(f"{PROG} history: user {args.user!r} has no memory {args.id!r}", file=sys.stderr)
        return 1
    title = f"history of {args.id} ({len(versions)} versions, oldest first)"
    show_memories(versions, args, title=title, changes=changes(versions))
    return 0


def run_delete(memory, args, _) -> int:
    if args.all:
        count = memory.delete_all(user=args.user)
        missing: list[str] = []
    else:
        missing = [id for id in args.ids if not memory.delete(id, user=args.user)]
        count = len(args.ids) - len(missing)
    if args.json:
        print(json.dumps({"deleted": count, "missing": missing}))
    else:
        noun = "memory" if count == 1 else "memories"
        print(f"deleted {count} {noun} of {args.user}" + (f"; not found: {', '.join(missing)}" if missing else ""))
    return 1 if missing else 0


def run_export(memory, args, _) -> int:
    from memnets.portable import export_lines

    out = sys.stdout if args.output is None else args.output.open("w", encoding="utf-8")
    count = 0
    try:
        for line in export_lines(memory, args.user):
            out.write(line + "\n")
            count += 1
    finally:
        if out is not sys.stdout:
            out.close()
    if args.output is not None:
        print(f"wrote {count} memories of {args.user} to {args.output}")
    return 0


def run_import(memory, args, lines) -> int:
    from memnets.portable import import_memories

    count, versions = import_memories(memory, args.user, lines)
    print(f"imported {count} memories of {args.user} ({versions} older versions) into {args.location}")
    return 0


RUN = {
    "users": run_users,
    "list": run_list,
    "search": run_search,
    "show": run_show,
    "history": run_history,
    "delete": run_delete,
    "export": run_export,
    "import": run_import,
}


def show_memories(
    memories, args, *, title: str, scores: list[float] | None = None, changes: list[str] | None = None
) -> None:
    """A table of memories (id, created and updated times, kind, importance, score, validity, change, content),
    or their JSON with --json (with ``score`` and ``change`` where given).

    Both times, because ``t`` is when a memory was first written: the versions of an updated
    memory share it and differ in ``updated_at``. The validity says whether a memory's fact still
    holds, and which memory ended it (:func:`~memnets.memory.validity.in_words`); ``changes`` (a
    history's) how each version came to be (:func:`~memnets.memory.validity.changes`)."""
    from memnets.memory.validity import in_words
    from memnets.portable import memory_to_json

    if args.json:
        records = [memory_to_json(m) for m in memories]
        for name, values in (("score", scores), ("change", changes)):
            for record, value in zip(records, values or []):
                record[name] = value
        print(json.dumps(records, ensure_ascii=False, indent=2))
        return
    table = Table(title=title)
    id_width = max((len(m.id) for m in memories), default=2)
    table.add_column("id", no_wrap=True, min_width=id_width)  # an id is copied into show/delete: never cut
    for column in ("created", "updated", "kind", "importance", *(["score"] if scores else [])):
        table.add_column(column, justify="right" if column in ("importance", "score") else "left")
    table.add_column("validity", overflow="fold")  # the id of the memory that ended it, whole
    if changes:
        table.add_column("change")
    table.add_column("content", overflow="fold")  # the column that gives way to a narrow terminal
    for n, m in enumerate(memories):
        content = m.content if len(m.content) <= CONTENT_WIDTH else m.content[: CONTENT_WIDTH - 1] + "…"
        row = [m.id, f"{m.created_at:%Y-%m-%d %H:%M}", f"{m.updated_at:%Y-%m-%d %H:%M}", m.kind, f"{m.importance:.2f}"]
        if scores:
            row.append(f"{scores[n]:.3f}")
        row.append(in_words(m))
        if changes:
            row.append(changes[n])
        table.add_row(*row, content)
    print_table(table)
