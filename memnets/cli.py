"""The `memnets` command: a thin dispatcher.

Each subcommand lives in its own module with a `main(argv)` that parses its own arguments, so
the CLI imports (torch, Lightning, FAISS) only what the command that runs needs.
"""

from __future__ import annotations

import importlib
import sys

from memnets.data.location import DataNotFoundError
from memnets.extras import missing_extra_message

# (words of the command) -> "module:function"; each function takes the remaining argv.
COMMANDS: dict[tuple[str, ...], tuple[str, str]] = {
    ("data", "prepare"): ("memnets.commands.data:prepare_main", "build the cached datasets of the three tasks"),
    ("eval", "retrieval"): (
        "memnets.commands.evaluate:retrieval_main",
        "recall@k / MRR / nDCG of a retriever on a split",
    ),
    ("eval", "heads"): (
        "memnets.commands.evaluate:heads_main",
        "importance and recall-gate heads against their baselines on a split",
    ),
    ("fit",): (
        "memnets.commands.fit:main",
        "train a component with LightningCLI: fit {encoder,importance,gate} -c CONFIG",
    ),
    ("export",): ("memnets.commands.export:main", "bundle trained components into a memory pack"),
    ("run",): ("memnets.commands.run:main", "the whole pipeline from one config: data, fit, export, evaluate"),
    ("replay",): ("memnets.commands.replay:main", "stream a LoCoMo conversation through the memory manager"),
    ("bench",): ("memnets.commands.bench:main", "benchmarks of quality, speed and scale, with a report"),
    ("baseline", "st-mnrl"): (
        "memnets.commands.baseline:st_mnrl_main",
        "the sentence-transformers MNRL fine-tune to beat",
    ),
    ("serve", "mcp"): ("memnets.commands.serve:mcp_main", "serve a memory to MCP hosts over stdio or HTTP"),
    ("archive", "rotate-key"): (
        "memnets.commands.archive:rotate_key_main",
        "re-encrypt an archive folder under a new key",
    ),
    ("archive", "reembed"): (
        "memnets.commands.archive:reembed_main",
        "re-embed every memory of a store with a new encoder (resumable)",
    ),
}


def usage() -> str:
    lines = ["usage: memnets COMMAND [ARGS...]", "", "commands:"]
    for words, (_, help_text) in COMMANDS.items():
        lines.append(f"  {' '.join(words):<18} {help_text}")
    lines.append("")
    lines.append("Run `memnets COMMAND --help` for a command's options.")
    return "\n".join(lines)


def resolve(argv: list[str]) -> tuple[str, list[str]] | None:
    """The target of the longest command prefix of argv, and the arguments left for it."""
    for words in sorted(COMMANDS, key=len, reverse=True):
        if tuple(argv[: len(words)]) == words:
            return COMMANDS[words][0], argv[len(words) :]
    return None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in {"-h", "--help", "help"}:
        print(usage())
        return 0
    resolved = resolve(argv)
    if resolved is None:
        print(f"memnets: unknown command {' '.join(argv[:2])!r}\n\n{usage()}", file=sys.stderr)
        return 2
    target, rest = resolved
    module_name, function_name = target.split(":")
    try:
        function = getattr(importlib.import_module(module_name), function_name)
        return int(function(rest) or 0)
    except DataNotFoundError as error:  # no conversations given or found: a usage error
        print(f"memnets: {error}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as error:
        message = missing_extra_message(error, f"memnets {' '.join(argv[: len(argv) - len(rest)])}")
        if message is None:
            raise
        print(f"memnets: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
