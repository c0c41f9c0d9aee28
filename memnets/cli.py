"""The `memnets` command: a thin dispatcher, in the conventions of git, pip and uv.

Each command lives in its own module with a ``main(argv)`` that parses its own arguments (and a
``parser()`` beside it that builds them, which the tests walk), so the CLI imports (torch,
Lightning, FAISS) only what the command that runs needs. The training commands live in
``memnets.training.commands``: named here by string only, they are imported when one runs, so the serving
side (this module included) imports nothing of the training side (tests/package/test_layering.py). Commands of several words form a group
(``memnets eval retrieval``); ``memnets GROUP --help`` lists a group's commands.

Exit codes: 0 success, 1 failure (the command ran and could not do its job: a file without a
scorable question, a wrong key, a memory that is not there), 2 usage (an unknown command or
option, a bad argument value), 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys

from memnets.argerrors import MissingInputError
from memnets.extras import missing_extra_message

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what git's and a shell tool's exit says when a reader stopped early
HELP_WORDS = {"-h", "--help", "help"}

# (words of the command) -> ("module:function", help); each function takes the remaining argv.
COMMANDS: dict[tuple[str, ...], tuple[str, str]] = {
    ("data", "prepare"): (
        "memnets.training.commands.data:prepare_main",
        "build the cached datasets of the three tasks",
    ),
    ("eval", "retrieval"): (
        "memnets.training.commands.evaluate:retrieval_main",
        "recall@k / MRR / nDCG of a retriever on a split",
    ),
    ("eval", "answers"): (
        "memnets.training.commands.answers:main",
        "answer accuracy with your model, judged as LongMemEval / LoCoMo do",
    ),
    ("eval", "heads"): (
        "memnets.training.commands.evaluate:heads_main",
        "importance and recall-gate heads against their baselines on a split",
    ),
    ("fit",): (
        "memnets.training.commands.fit:main",
        "train a component with LightningCLI: fit {encoder,encoder_top,importance,gate,supersession} -c CONFIG",
    ),
    ("export",): ("memnets.training.commands.export:main", "bundle trained components into a memory pack"),
    ("run",): ("memnets.training.commands.run:main", "the whole pipeline from one config: data, fit, export, evaluate"),
    ("replay",): ("memnets.training.commands.replay:main", "stream a LoCoMo conversation through the memory manager"),
    ("bench",): ("memnets.training.commands.bench:main", "benchmarks of quality, speed and scale, with a report"),
    ("baseline", "st-mnrl"): (
        "memnets.training.commands.baseline:st_mnrl_main",
        "the sentence-transformers MNRL fine-tune to beat",
    ),
    ("memories",): (
        "memnets.commands.memories:main",
        "look into a memory folder or database: list, search, show, history, delete, export, import",
    ),
    ("serve", "mcp"): ("memnets.commands.serve:mcp_main", "serve a memory to MCP hosts over stdio or HTTP"),
    ("serve", "http"): ("memnets.commands.serve:http_main", "serve a memory over REST (/v1), with /ui and /metrics"),
    ("archive", "rotate-key"): (
        "memnets.commands.archive:rotate_key_main",
        "re-encrypt an archive folder under a new key",
    ),
    ("archive", "reembed"): (
        "memnets.commands.archive:reembed_main",
        "re-embed every memory of a store with a new encoder (resumable)",
    ),
}

GROUPS: dict[str, str] = {
    "data": "datasets built from conversations",
    "eval": "evaluate retrievers and heads on a split",
    "baseline": "baselines the trained components must beat",
    "serve": "serve a memory to other programs",
    "archive": "maintenance of an embedded archive folder",
}

EXIT_CODES = "exit codes: 0 success, 1 failure, 2 usage error, 130 interrupted, 141 output closed early"


def version() -> str:
    from memnets import __version__

    return f"memnets {__version__}"


def usage() -> str:
    lines = ["usage: memnets [--version] [--help] COMMAND [ARGS...]", "", "commands:"]
    for words, (_, help_text) in COMMANDS.items():
        lines.append(f"  {' '.join(words):<20} {help_text}")
    lines += ["", "Run `memnets COMMAND --help` (or `memnets GROUP --help`) for its options.", EXIT_CODES]
    return "\n".join(lines)


def group_usage(group: str) -> str:
    """The help of a group: its commands, one line each."""
    lines = [f"usage: memnets {group} COMMAND [ARGS...]", "", GROUPS.get(group, ""), "", "commands:"]
    for words, (_, help_text) in COMMANDS.items():
        if words[0] == group and len(words) > 1:
            lines.append(f"  {' '.join(words[1:]):<16} {help_text}")
    lines += ["", f"Run `memnets {group} COMMAND --help` for a command's options.", EXIT_CODES]
    return "\n".join(lines)


def groups() -> list[str]:
    """The first words of the commands of several words."""
    return list(dict.fromkeys(words[0] for words in COMMANDS if len(words) > 1))


def resolve(argv: list[str]) -> tuple[str, list[str]] | None:
    """The target of the longest command prefix of argv, and the arguments left for it."""
    for words in sorted(COMMANDS, key=len, reverse=True):
        if tuple(argv[: len(words)]) == words:
            return COMMANDS[words][0], argv[len(words) :]
    return None


def load(target: str):
    """The function named by a ``"module:function"`` target."""
    module_name, function_name = target.split(":")
    return getattr(importlib.import_module(module_name), function_name)


def main(argv: list[str] | None = None) -> int:
    """The ``memnets`` command: ``argv`` (default: the process's) run, its exit code returned."""
    try:
        return _run(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:  # `memnets ... | head -1`: the reader has what it wanted; quiet, as git is
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more for Python's exit to flush
        return EXIT_BROKEN_PIPE


def _run(argv: list[str]) -> int:
    """:func:`main` of given arguments: the usage, the version, or the command they name, run."""
    if not argv or argv[0] in {"-h", "--help"}:
        print(usage())
        return EXIT_OK
    if argv[0] == "help":  # `memnets help eval retrieval` is `memnets eval retrieval --help`
        return _run([*argv[1:], "--help"]) if argv[1:] else _run([])
    if argv[0] in {"-V", "--version"}:
        print(version())
        return EXIT_OK
    resolved = resolve(argv)
    if resolved is None:
        return _not_a_command(argv)
    target, rest = resolved
    try:
        return int(load(target)(rest) or 0)
    except SystemExit as exit:  # argparse's --help (0) and usage errors (2)
        if exit.code is None or isinstance(exit.code, int):
            return int(exit.code or 0)
        print(exit.code, file=sys.stderr)
        return EXIT_FAILURE
    except MissingInputError as error:  # no conversations given or found: a usage error
        print(f"memnets: {error}", file=sys.stderr)
        return EXIT_USAGE
    except ModuleNotFoundError as error:
        message = missing_extra_message(error, f"memnets {' '.join(argv[: len(argv) - len(rest)])}")
        if message is None:
            raise
        print(f"memnets: {message}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print("memnets: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _not_a_command(argv: list[str]) -> int:
    """One line on stderr for a first word (or a group's second word) that is no command, with the nearest
    command when one is close (``memoires`` -> ``memories``), and exit 2."""
    first = argv[0]
    if first in groups():
        rest = argv[1:]
        if rest and rest[0] in HELP_WORDS:
            print(group_usage(first))
            return EXIT_OK
        names = [words[1] for words in COMMANDS if words[0] == first and len(words) > 1]
        problem = f"unknown command {rest[0]!r}{did_you_mean(rest[0], names)}" if rest else "a command is missing"
        print(f"memnets {first}: error: {problem}; `memnets {first} --help` lists its commands", file=sys.stderr)
        return EXIT_USAGE
    if first.startswith("-"):
        problem = f"unknown option {first!r} (options go after the command)"
    else:
        problem = f"unknown command {first!r}{did_you_mean(first, [words[0] for words in COMMANDS])}"
    print(f"memnets: error: {problem}; `memnets --help` lists the commands", file=sys.stderr)
    return EXIT_USAGE


def did_you_mean(word: str, names: list[str]) -> str:
    """`` (did you mean 'NAME'?)`` for the name nearest to a mistyped ``word``, or "" when none is near."""
    near = difflib.get_close_matches(word, list(dict.fromkeys(names)), n=1, cutoff=0.6)
    return f" (did you mean {near[0]!r}?)" if near else ""


if __name__ == "__main__":
    sys.exit(main())
