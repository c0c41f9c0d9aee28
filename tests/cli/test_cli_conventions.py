"""The `memnets` command's conventions (git / pip / uv): --version, help for every group and
command, help text on every option, one spelling per option, and the documented exit codes."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memnets.cli import COMMANDS, EXIT_BROKEN_PIPE, EXIT_FAILURE, EXIT_OK, EXIT_USAGE, groups, load, main

# commands whose options another parser owns, with where they are documented
FOREIGN_PARSERS = {
    "memnets.training.commands.fit:main": "LightningCLI's (memnets fit COMPONENT --help)",
    "memnets.training.commands.bench:main": "the benchmark runner's in bench/ of a checkout (memnets bench --help)",
}


def parser_of(target: str) -> argparse.ArgumentParser:
    """The parser a command's ``X_main`` (or ``main``) parses with: ``X_parser`` (or ``parser``) beside it."""
    module, function = target.split(":")
    return load(f"{module}:{function.removesuffix('main')}parser")()


def walk(parser: argparse.ArgumentParser):
    """(parser, action) for every option and positional of a parser and of its subcommands."""
    for action in parser._actions:
        yield parser, action
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from walk(sub)


OWN = [target for target, _ in COMMANDS.values() if target not in FOREIGN_PARSERS]


def test_version(capsys):
    from memnets import __version__

    assert main(["--version"]) == EXIT_OK
    assert capsys.readouterr().out.strip() == f"memnets {__version__}"
    assert main(["-V"]) == EXIT_OK


def test_the_command_runs_as_a_module_with_its_exit_codes():
    run = [sys.executable, "-m", "memnets"]
    assert subprocess.run([*run, "--version"], capture_output=True, text=True).returncode == EXIT_OK
    wrong = subprocess.run([*run, "frobnicate"], capture_output=True, text=True)
    assert wrong.returncode == EXIT_USAGE and "unknown command 'frobnicate'" in wrong.stderr


def test_output_closed_early_is_a_quiet_exit_141():
    """`memnets ... | head -1`: the reader closed the pipe; no traceback, the exit of a tool killed by SIGPIPE."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command writes
    try:
        done = subprocess.run(
            [sys.executable, "-m", "memnets", "--version"],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},  # written at once, as a long listing is
        )
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (EXIT_BROKEN_PIPE, "")


@pytest.mark.parametrize("group", groups())
def test_every_group_has_help(group, capsys):
    assert main([group, "--help"]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith(f"usage: memnets {group} COMMAND")
    for words in COMMANDS:
        if words[0] == group and len(words) > 1:
            assert f"  {words[1]} " in out
    assert main(["help", group]) == EXIT_OK
    assert main([group]) == EXIT_USAGE
    assert "a command is missing" in capsys.readouterr().err
    assert main([group, "frobnicate"]) == EXIT_USAGE
    assert f"memnets {group}: error: unknown command 'frobnicate'" in capsys.readouterr().err


@pytest.mark.parametrize("target", OWN)
def test_every_command_has_help_and_every_option_says_what_it_does(target, capsys):
    words = next(words for words, (t, _) in COMMANDS.items() if t == target)
    parser = parser_of(target)
    assert parser.prog == f"memnets {' '.join(words)}"
    missing = [
        f"{sub.prog}: {'/'.join(action.option_strings) or action.dest}"
        for sub, action in walk(parser)
        if not (action.help and action.help.strip()) and action.help != argparse.SUPPRESS
    ]
    assert missing == []
    assert main([*words, "--help"]) == EXIT_OK
    assert capsys.readouterr().out.startswith(f"usage: memnets {' '.join(words)}")


@pytest.mark.parametrize("target", OWN)
def test_one_spelling_per_option(target):
    """Configs are -c/--config, output is -v/-q everywhere; no command has a second name for them."""
    for _, action in walk(parser_of(target)):
        if action.dest == "config":
            assert action.option_strings[:2] == ["-c", "--config"], action.option_strings
        for option in action.option_strings:
            assert "_" not in option, f"{option}: options are spelled with dashes"
    options = {option for _, action in walk(parser_of(target)) for option in action.option_strings}
    assert {"-v", "--verbose", "-q", "--quiet"} <= options


def test_eval_heads_takes_the_data_config_as_c_and_the_old_spelling_as_an_alias():
    parser = parser_of("memnets.training.commands.evaluate:heads_main")
    assert parser.parse_args(["-c", "x.yaml"]).config == "x.yaml"
    assert parser.parse_args(["--data-config", "x.yaml"]).config == "x.yaml"


def test_fit_usage_line_says_what_to_type(capsys):
    assert main(["fit", "encoder", "--help"]) == EXIT_OK
    assert capsys.readouterr().out.startswith("usage: memnets fit encoder [-c CONFIG]")
    assert main(["fit", "--help"]) == EXIT_OK
    assert "memnets fit {encoder, encoder_top, gate, importance, supersession} -c CONFIG" in capsys.readouterr().out
    assert main(["fit", "nope"]) == EXIT_USAGE


def test_a_fit_usage_error_is_the_message_without_lightnings_usage_block(capsys):
    """LightningCLI's parser printed its usage (84 lines in all) above the message; now it is memnets' one line."""
    assert main(["fit", "encoder", "-c", "encoder/cpu", "--bogus"]) == EXIT_USAGE
    assert capsys.readouterr().err == "memnets fit encoder: error: unrecognized arguments: --bogus\n"


def test_usage_errors_exit_2(capsys):
    assert main(["export", "--encoder", "x", "--no-such-option"]) == EXIT_USAGE
    assert "unrecognized arguments: --no-such-option" in capsys.readouterr().err
    assert main(["--frobnicate"]) == EXIT_USAGE
    assert "unknown option '--frobnicate'" in capsys.readouterr().err


def conversation_file(tmp_path, questions: list[dict]):
    """A one-conversation memnets JSONL file with these questions."""
    path = tmp_path / "conversations.jsonl"
    turns = [
        {"id": "D1:1", "speaker": "Ann", "text": "I adopted a puppy named Rex."},
        {"id": "D1:2", "speaker": "Bob", "text": "I play the violin."},
    ]
    record = {"id": "c1", "sessions": [{"time": "2023-05-08T13:56:00", "turns": turns}], "questions": questions}
    path.write_text(json.dumps(record) + "\n")
    return path


@pytest.mark.parametrize(
    ("questions", "why"),
    [
        ([], "hold no questions"),
        (
            [{"question": "Who has a dog?", "answer": "Ann", "evidence": [], "category": 1}],
            "none of its 1 question(s) in categories 1,2,3,4 has evidence turns",
        ),
        (
            [{"question": "What is Bob's cat called?", "answer": "-", "evidence": ["D1:2"], "category": 5}],
            "all in categories 5, none in the scored ones (1,2,3,4)",
        ),
    ],
    ids=["no-questions", "no-evidence", "all-adversarial"],
)
def test_eval_retrieval_on_a_file_with_no_scorable_question_is_one_line_and_exit_1(tmp_path, capsys, questions, why):
    data = conversation_file(tmp_path, questions)
    assert main(["eval", "retrieval", "bm25", "--data", str(data)]) == EXIT_FAILURE
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert err.startswith(f"memnets eval retrieval: {data}: no question can be scored: ") and why in err


def test_a_mistyped_command_is_one_line_with_the_nearest_command():
    run = [sys.executable, "-m", "memnets"]
    for argv, line in (
        (["memoires"], "memnets: error: unknown command 'memoires' (did you mean 'memories'?)"),
        (["eval", "retrival"], "memnets eval: error: unknown command 'retrival' (did you mean 'retrieval'?)"),
        (["frobnicate"], "memnets: error: unknown command 'frobnicate'; `memnets --help` lists the commands"),
    ):
        wrong = subprocess.run([*run, *argv], capture_output=True, text=True)
        assert wrong.returncode == EXIT_USAGE and wrong.stderr.count("\n") == 1, wrong.stderr
        assert wrong.stderr.startswith(line), wrong.stderr


def documented_commands() -> set[tuple[str, ...]]:
    """The commands docs/cli.md's first table names: the words of each backticked name up to its first
    argument (``{...}``, ``LOCATION``, ``...``)."""
    text = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    table = text.split("| group or command |", 1)[1].split("\n\n", 1)[0]
    commands = set()
    for row in table.splitlines()[2:]:
        for name in re.findall(r"`([^`]+)`", row.split("|")[1]):
            commands.add(tuple(itertools.takewhile(lambda word: re.fullmatch(r"[a-z][a-z-]*", word), name.split())))
    return commands


def test_docs_and_help_list_the_same_commands(capsys):
    """Every command `memnets --help` lists is in docs/cli.md's table and the other way round (the table lacked
    `serve http` and `archive reembed`), and both name the same `fit` components as `memnets fit --help`."""
    from memnets.training.lit.cli import COMPONENTS

    assert main(["--help"]) == EXIT_OK
    listed = {
        tuple(line.split("  ")[1].split()) for line in capsys.readouterr().out.splitlines() if line.startswith("  ")
    }
    assert listed == set(COMMANDS) == documented_commands()
    assert main(["fit", "--help"]) == EXIT_OK
    fit_help = capsys.readouterr().out
    text = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    documented = set(re.search(r"`fit \{([a-z_,]+)\}`", text).group(1).split(","))
    in_top_help = set(re.search(r"fit \{([a-z_,]+)\}", COMMANDS[("fit",)][1]).group(1).split(","))
    assert (
        documented
        == in_top_help
        == set(COMPONENTS)
        == set(re.search(r"\{([a-z_, ]+)\}", fit_help).group(1).split(", "))
    )


def test_docs_list_the_subcommands_of_memories_that_its_help_lists():
    parser = parser_of("memnets.commands.memories:main")
    choices = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    text = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    block = text.split("memnets memories LOCATION [", 1)[1].split("```", 1)[0]
    assert {line.split()[0] for line in block.splitlines()[1:] if line.strip()} == set(choices)
