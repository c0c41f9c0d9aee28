"""`memnets memories LOCATION COMMAND` on a real folder (SQLite + FAISS) and a real PostgreSQL,
written through memnets.open and read back through the command (and the other way round)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime

import pytest
from successor_helpers import KS, QUESTION, LikelyLyonJudge, LyonJudge, check_current_first, facts

import memnets
from memnets.cli import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, main

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def fill(memory) -> str:
    """Ann's three memories (one updated twice) and one of Bob's; returns the id of the updated one."""
    tea = memory.add("Ann drinks green tea", user="ann", t=T0, metadata={"topic": "food"})
    memory.add("Ann lives in Lisbon", user="ann", t=T0.replace(hour=13), importance=0.9)
    memory.add("Ann plays chess on Sundays", user="ann", t=T0.replace(hour=14), kind="message")
    memory.update(tea.id, "Ann drinks black tea", user="ann", t=T0.replace(day=2))
    memory.update(tea.id, user="ann", metadata={"topic": "drinks"}, t=T0.replace(day=3))
    memory.add("Bob plays the violin", user="bob", t=T0)
    return tea.id


@pytest.fixture()
def folder(tmp_path, tiny_model_dir):
    folder = tmp_path / "memory"
    with memnets.open(folder, encoder=tiny_model_dir) as memory:
        tea = fill(memory)
    return folder, tea


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(["memories", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_users_list_show_history_as_json(folder, tiny_model_dir, capsys):
    folder, tea = folder
    at = [folder, "--encoder", tiny_model_dir]
    code, out, _ = run(capsys, *at, "users", "--json")
    assert code == EXIT_OK and json.loads(out) == ["ann", "bob"]

    code, out, _ = run(capsys, *at, "list", "--user", "ann", "--json")
    listed = json.loads(out)
    assert code == EXIT_OK
    # in creation order: the tea memory keeps its creation time through its versions
    assert [m["content"] for m in listed] == [
        "Ann drinks black tea",
        "Ann lives in Lisbon",
        "Ann plays chess on Sundays",
    ]
    assert all(m["owner"] == "ann" for m in listed)
    code, out, _ = run(capsys, *at, "list", "--user", "ann", "--kind", "message", "--json")
    assert [m["content"] for m in json.loads(out)] == ["Ann plays chess on Sundays"]

    code, out, _ = run(capsys, *at, "show", "--user", "ann", tea, "--json")
    shown = json.loads(out)
    assert shown["content"] == "Ann drinks black tea" and shown["metadata"] == {"topic": "drinks"}

    code, out, _ = run(capsys, *at, "history", "--user", "ann", tea, "--json")
    versions = json.loads(out)
    assert [v["content"] for v in versions] == ["Ann drinks green tea", "Ann drinks black tea", "Ann drinks black tea"]
    assert [v["metadata"] for v in versions] == [{"topic": "food"}, {"topic": "food"}, {"topic": "drinks"}]


def test_search_finds_the_exact_text_first_and_tables_print(folder, tiny_model_dir, capsys):
    folder, _ = folder
    at = [folder, "--encoder", tiny_model_dir]
    code, out, _ = run(capsys, *at, "search", "--user", "ann", "Ann lives in Lisbon", "-k", "2", "--json")
    hits = json.loads(out)
    assert code == EXIT_OK and len(hits) == 2 and hits[0]["content"] == "Ann lives in Lisbon"
    assert hits[0]["score"] >= hits[1]["score"]
    code, out, _ = run(capsys, *at, "list", "--user", "ann")
    assert code == EXIT_OK and "memories of ann" in out and "Ann lives in Lisbon" in out and "Bob" not in out


def test_search_never_answers_a_stale_fact_above_its_successor(tmp_path, tiny_model_dir, capsys):
    """Leo's memories (successor_helpers) written with a judge that ended "Leeds" by "Lyon": `search -k`
    at 1, 3 and 10 answers the successor first, the stale fact right after it, one order, scores non-increasing."""
    folder = tmp_path / "memory"
    with memnets.open(folder, encoder=tiny_model_dir, supersession=LyonJudge()) as memory:
        for text, when in facts():
            memory.add(text, user="leo", t=when)
    answers = {}
    for k in KS:
        code, out, _ = run(
            capsys, folder, "--encoder", tiny_model_dir, "search", "--user", "leo", QUESTION, "-k", k, "--json"
        )
        assert code == EXIT_OK
        answers[k] = [(hit["content"], hit["score"]) for hit in json.loads(out)]
    check_current_first(answers)


def table_rows(out: str) -> list[dict[str, str]]:
    """The rows of a printed table as {column: cell}, a cell folded over several lines joined again."""
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("┃"))
    columns = [cell.strip() for cell in header.split("┃")[1:-1]]
    rows: list[list[str]] = []
    for line in (line for line in lines if line.startswith("│")):
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if cells[0]:
            rows.append(cells)
        else:  # the next line of a folded row
            rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells)]
    return [dict(zip(columns, row)) for row in rows]


def search_and_history(capsys, at: list, memory_id: str) -> tuple[list[dict], list[dict]]:
    """The rows of `search QUESTION -k 2` over Leo's memories and of `history MEMORY_ID` (both exit 0)."""
    code, searched, _ = run(capsys, *at, "search", "--user", "leo", QUESTION, "-k", "2")
    assert code == EXIT_OK
    code, history, _ = run(capsys, *at, "history", "--user", "leo", memory_id)
    assert code == EXIT_OK
    return table_rows(searched), table_rows(history)


def test_search_and_history_show_validity_and_how_each_version_came_to_be(tmp_path, tiny_model_dir, capsys):
    """Search shows which fact still holds and which memory ended the other; history tells the judge's
    ending from a restatement (the same text, new metadata), a change (another text) and a reopening."""
    folder = tmp_path / "memory"
    with memnets.open(folder, encoder=tiny_model_dir, supersession=LyonJudge()) as memory:
        for n, (text, when) in enumerate(facts()):
            memory.add(text, user="leo", t=when, id=f"f{n}")
        memory.update("f0", user="leo", metadata={"checked": True})
        memory.update("f2", "I am learning Italian", user="leo")
    at = [folder, "--encoder", tiny_model_dir]
    searched, history = search_and_history(capsys, at, "f0")
    assert [(row["id"], row["validity"]) for row in searched] == [
        ("f1", "current"),
        ("f0", "ended 2024-02-01, by f1"),
    ]
    assert [(row["id"], row["change"]) for row in history] == [
        ("f0~1", "first said"),
        ("f0~2", "ended by the judge (1.00)"),
        ("f0", "restated"),
    ]
    assert history[-1]["validity"] == "ended 2024-02-01, by f1"
    code, out, _ = run(capsys, *at, "history", "--user", "leo", "f2", "--json")
    assert [(v["content"], v["change"]) for v in json.loads(out)] == [
        ("I am learning Spanish", "first said"),
        ("I am learning Italian", "changed"),
    ]
    with memnets.open(folder, encoder=tiny_model_dir) as memory:
        memory.update("f0", user="leo", valid_to=None)  # the judge's decision undone
    code, out, _ = run(capsys, *at, "history", "--user", "leo", "f0", "--json")
    versions = json.loads(out)
    assert [v["change"] for v in versions] == ["first said", "ended by the judge (1.00)", "restated", "reopened"]
    assert (versions[-1]["valid_to"], versions[-1]["invalidated_by"]) == (None, None)


def test_search_and_history_show_a_likely_replacement(tmp_path, tiny_model_dir, capsys):
    """A judge more likely than not, too unsure to end (LikelyLyonJudge): search shows "Leeds" still current and
    the memory that likely replaced it, below that one; history says how that version came to be."""
    folder = tmp_path / "memory"
    with memnets.open(folder, encoder=tiny_model_dir, supersession=LikelyLyonJudge()) as memory:
        for n, (text, when) in enumerate(facts()):
            memory.add(text, user="leo", t=when, id=f"f{n}")
    searched, history = search_and_history(capsys, [folder, "--encoder", tiny_model_dir], "f0")
    assert [(row["id"], row["validity"]) for row in searched] == [
        ("f1", "current"),
        ("f0", "current, likely replaced by f1"),
    ]
    assert [(row["id"], row["change"]) for row in history] == [
        ("f0~1", "first said"),
        ("f0", "likely replaced (0.70)"),
    ]


def test_show_and_delete_of_a_missing_memory_fail_with_exit_1(folder, tiny_model_dir, capsys):
    folder, _ = folder
    at = [folder, "--encoder", tiny_model_dir]
    code, _, err = run(capsys, *at, "show", "--user", "ann", "nope")
    assert code == EXIT_FAILURE and "user 'ann' has no memory 'nope'" in err
    code, out, _ = run(capsys, *at, "delete", "--user", "ann", "nope", "--json")
    assert code == EXIT_FAILURE and json.loads(out) == {"deleted": 0, "missing": ["nope"]}


def test_delete_one_and_all(folder, tiny_model_dir, capsys):
    folder, tea = folder
    at = [folder, "--encoder", tiny_model_dir]
    code, out, _ = run(capsys, *at, "delete", "--user", "ann", tea)
    assert code == EXIT_OK and out.startswith("deleted 1 memory of ann")
    code, _, err = run(capsys, *at, "delete", "--user", "ann", "--all")
    assert code == EXIT_USAGE and "add --yes" in err
    code, out, _ = run(capsys, *at, "delete", "--user", "ann", "--all", "--yes")
    assert code == EXIT_OK
    with memnets.open(folder, encoder=tiny_model_dir) as memory:
        assert memory.list_memories(user="ann") == [] and memory.history(tea, user="ann") == []
        assert [m.content for m in memory.list_memories(user="bob")] == ["Bob plays the violin"]


def test_export_then_import_round_trips_a_user_with_history(folder, tiny_model_dir, tmp_path, capsys):
    folder, tea = folder
    exported = tmp_path / "ann.jsonl"
    code, out, _ = run(capsys, folder, "--encoder", tiny_model_dir, "export", "--user", "ann", "-o", exported)
    assert code == EXIT_OK and out.strip() == f"wrote 3 memories of ann to {exported}"
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    assert [len(line["versions"]) for line in lines] == [2, 0, 0]

    other = tmp_path / "other"
    code, out, _ = run(capsys, other, "--encoder", tiny_model_dir, "import", "--create", "--user", "ann", exported)
    assert code == EXIT_OK and "imported 3 memories of ann (2 older versions)" in out
    code, again, _ = run(capsys, other, "--encoder", tiny_model_dir, "export", "--user", "ann")
    assert again == exported.read_text()  # the same lines: ids, times, metadata, importance, versions
    with memnets.open(other, encoder=tiny_model_dir) as memory:
        assert [m.content for m in memory.history(tea, user="ann")] == [
            "Ann drinks green tea",
            "Ann drinks black tea",
            "Ann drinks black tea",
        ]
        assert memory.users() == ["ann"]


def test_import_checks_every_line_before_writing(tmp_path, tiny_model_dir, capsys):
    good = {"id": "a", "t": T0.isoformat(), "content": "Ann drinks tea"}
    bad = {"id": "b", "t": "yesterday", "content": "Ann reads"}
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    target = tmp_path / "memory"
    code, _, err = run(capsys, target, "--encoder", tiny_model_dir, "import", "--user", "ann", source)
    assert code == EXIT_FAILURE and f"{source} line 2: t 'yesterday' is not an ISO 8601 time" in err
    assert not target.exists()  # nothing opened, nothing written
    source.write_text(json.dumps({**good, "colour": "red"}) + "\n")
    code, _, err = run(capsys, target, "--encoder", tiny_model_dir, "import", "--user", "ann", source)
    assert code == EXIT_FAILURE and "line 1: unknown fields ['colour']" in err


def test_a_wrong_key_is_exit_1_and_a_missing_variable_exit_2(tmp_path, tiny_model_dir, capsys, monkeypatch):
    folder = tmp_path / "sealed"
    with memnets.open(folder, encoder=tiny_model_dir, key="right passphrase") as memory:
        memory.add("Ann's secret", user="ann")
    monkeypatch.setenv("MEMNETS_TEST_KEY", "wrong passphrase")
    code, _, err = run(capsys, folder, "--encoder", tiny_model_dir, "--key-env", "MEMNETS_TEST_KEY", "users")
    assert code == EXIT_FAILURE and f"cannot open {folder}" in err
    monkeypatch.setenv("MEMNETS_TEST_KEY", "right passphrase")
    code, out, _ = run(capsys, folder, "--encoder", tiny_model_dir, "--key-env", "MEMNETS_TEST_KEY", "users")
    assert code == EXIT_OK and out.strip() == "ann"
    code, _, err = run(capsys, folder, "--key-env", "MEMNETS_NOT_SET_ANYWHERE", "users")
    assert code == EXIT_USAGE and "MEMNETS_NOT_SET_ANYWHERE is not set" in err


def test_postgres_location(pg_url, tiny_model_dir, tmp_path, capsys):
    table = "cli_memories"
    with memnets.open(pg_url, encoder=tiny_model_dir, table=table) as memory:
        memory.delete_all(user="ann")
        tea = fill(memory)
    at = [pg_url, "--table", table, "--encoder", tiny_model_dir]
    code, out, _ = run(capsys, *at, "history", "--user", "ann", tea, "--json")
    assert code == EXIT_OK and len(json.loads(out)) == 3
    exported = tmp_path / "ann.jsonl"
    assert run(capsys, *at, "export", "--user", "ann", "-o", exported)[0] == EXIT_OK
    folder = tmp_path / "copy"
    assert (
        run(capsys, folder, "--encoder", tiny_model_dir, "import", "--create", "--user", "ann", exported)[0] == EXIT_OK
    )
    code, again, _ = run(capsys, folder, "--encoder", tiny_model_dir, "export", "--user", "ann")
    assert again == exported.read_text()


@pytest.mark.parametrize("command", [["users"], ["list", "--user", "ann"], ["search", "--user", "ann", "tea"]])
def test_a_location_that_holds_no_memory_is_refused_and_left_as_it_was(tmp_path, tiny_model_dir, command, capsys):
    typo = tmp_path / "typo-folder"
    code, out, err = run(capsys, typo, "--encoder", tiny_model_dir, *command)
    assert code == EXIT_USAGE and out == ""
    assert f"{typo} holds no memnets memory; nothing was created" in err
    assert not typo.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run(capsys, empty, *command)[0] == EXIT_USAGE
    assert list(empty.iterdir()) == []  # no archive file left behind


def test_import_makes_a_memory_only_with_create(tmp_path, tiny_model_dir, capsys):
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"id": "a", "t": T0.isoformat(), "content": "Ann drinks tea"}) + "\n")
    target = tmp_path / "new"
    code, _, err = run(capsys, target, "--encoder", tiny_model_dir, "import", "--user", "ann", source)
    assert code == EXIT_USAGE and "(import --create makes one)" in err and not target.exists()
    code, out, _ = run(capsys, target, "--encoder", tiny_model_dir, "import", "--create", "--user", "ann", source)
    assert code == EXIT_OK and "imported 1 memories of ann" in out


def test_read_commands_do_not_load_the_encoder(folder, capsys):
    """Without --encoder the store's recorded encoder stands in: no torch, and a store filled by
    another encoder than the bundled one still lists (it would be an EncoderMismatchError)."""
    import subprocess
    import sys

    folder, tea = folder
    code = (
        "import sys; from memnets.cli import main; "
        f"codes = [main(['memories', {str(folder)!r}, *argv]) for argv in "
        f"(['users'], ['list', '--user', 'ann'], ['show', '--user', 'ann', {tea!r}], ['history', '--user', 'ann', {tea!r}])]; "
        "print(codes, 'torch' in sys.modules, 'transformers' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[0, 0, 0, 0] False False"


def test_tables_never_cut_an_id_on_a_narrow_terminal(folder, tiny_model_dir, capsys, monkeypatch):
    import re

    folder, tea = folder
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich draws for a terminal, of $COLUMNS columns
    monkeypatch.setenv("COLUMNS", "80")
    for command in (["list", "--user", "ann"], ["search", "--user", "ann", "tea"], ["history", "--user", "ann", tea]):
        code, out, _ = run(capsys, folder, "--encoder", tiny_model_dir, *command)
        text = re.sub(r"\x1b\[[0-9;]*m", "", out)
        assert code == EXIT_OK and tea in text, text
        assert max(len(line) for line in text.splitlines()) <= 80


def test_import_of_a_line_whose_content_is_a_number_is_a_clear_error(folder, tiny_model_dir, tmp_path, capsys):
    folder, _ = folder
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"id": "n", "t": T0.isoformat(), "content": 42}) + "\n")
    code, _, err = run(capsys, folder, "--encoder", tiny_model_dir, "import", "--user", "ann", source)
    assert code == EXIT_FAILURE
    assert (
        err.strip() == f"memnets memories import: {source} line 1: content must be a string (the memory's text), got 42"
    )


def memnets_process(*argv, code: str = "") -> subprocess.CompletedProcess:
    """``python -m memnets ARGV`` (or ``python -c CODE``) as a user runs it: a real process, its exit code and stderr."""
    command = [sys.executable, "-c", code] if code else [sys.executable, "-m", "memnets", *map(str, argv)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["list", "--user", "ann", "--limit", "-3"], "argument --limit: must be at least 0, got -3"),
        (["list", "--user", "ann", "--offset", "x"], "argument --offset: not an integer: 'x'"),
        (["search", "--user", "ann", "tea", "-k", "0"], "argument -k: must be at least 1, got 0"),
        (["list", "--user", "ann", "--kind", "observaton"], "argument --kind: invalid choice: 'observaton'"),
        (["delete", "--user", "ann", "--all"], "delete --all deletes every memory of user 'ann' for good: add --yes"),
        (["search", "--user", "ann", "  "], "argument query: must be non-empty text, got '  '"),
    ],
    ids=["negative-limit", "offset-not-a-number", "k-zero", "unknown-kind", "all-without-yes", "blank-query"],
)
def test_a_usage_error_is_one_line_naming_the_argument_and_exit_2(folder, argv, names):
    """No usage block above the message (argparse prints one by default): one line, the argument named, exit 2,
    as docs/cli.md's exit-code table says (an unknown --kind was exit 1)."""
    folder, _ = folder
    result = memnets_process("memories", folder, *argv)
    assert result.returncode == EXIT_USAGE, result.stderr
    assert result.stderr.count("\n") == 1 and "usage:" not in result.stderr, result.stderr
    assert result.stderr.startswith("memnets memories") and f": error: {names}" in result.stderr


def test_an_empty_query_is_refused_before_the_encoder_or_the_store_loads(folder):
    """`search ""` loaded the encoder (11 s with the bundled model) before it refused the query: every argument
    is now checked first, so neither torch nor the encoder module nor the store is imported."""
    folder, _ = folder
    code = (
        "import json, sys, time; from memnets.cli import main; start = time.perf_counter(); "
        f"rc = main(['memories', {str(folder)!r}, 'search', '--user', 'ann', '']); "
        "loaded = [m for m in ('torch', 'transformers', 'memnets.nn.encoder', 'memnets.store') if m in sys.modules]; "
        "print(json.dumps([rc, loaded, time.perf_counter() - start]))"
    )
    result = memnets_process(code=code)
    rc, loaded, seconds = json.loads(result.stdout.strip().splitlines()[-1])
    assert (rc, loaded) == (EXIT_USAGE, []), result.stdout + result.stderr
    assert seconds < 1.0, seconds
    assert "argument query: must be non-empty text" in result.stderr


@pytest.mark.parametrize("command", ["search", "list", "history", "import"])
def test_a_command_s_help_asked_for_with_no_location_is_that_command_s(capsys, command):
    """argparse read `memnets memories search --help` as LOCATION "search" and printed the parent's help."""
    code, out, _ = run(capsys, command, "--help")
    assert code == EXIT_OK and out.startswith(f"usage: memnets memories LOCATION {command} ")
