"""Both conversation formats (LoCoMo JSON, memnets JSONL) read alike, fail loudly, and train end to end.

The JSONL fixture (tests/fixtures/tiny_conversations.jsonl) holds the two conversations of the tiny
LoCoMo fixture, written in the JSONL format, plus two support chats; docs/data.md describes the format.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
import yaml
from fit_helpers import encoder_trainer_config

from memnets.cli import main
from memnets.nn.encoder import MemoryEncoder
from memnets.timeutil import as_utc
from memnets.training.data.builders import prepare_datasets
from memnets.training.data.config import load_data_config
from memnets.training.data.formats import detect_format, load_conversations
from memnets.training.data.jsonl import JsonlFormatError, load_jsonl
from memnets.training.data.locomo import DataFormatError, LocomoFormatError, load_locomo

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
JSONL = FIXTURES / "tiny_conversations.jsonl"


def _lines() -> list[dict]:
    return [json.loads(line) for line in JSONL.read_text().splitlines()]


def _write(tmp_path, records, name="bad.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_formats_are_told_apart_by_content(tmp_path, tiny_locomo_path):
    assert detect_format(tiny_locomo_path) == "locomo" and detect_format(JSONL) == "jsonl"
    renamed = tmp_path / "logs.json"  # the suffix does not matter
    renamed.write_text(JSONL.read_text())
    assert [c.sample_id for c in load_conversations(renamed)] == ["tiny-1", "tiny-2", "support-7", "support-8"]
    (tmp_path / "empty.jsonl").write_text("\n  \n")
    with pytest.raises(DataFormatError, match="empty"):
        load_conversations(tmp_path / "empty.jsonl")
    (tmp_path / "notes.txt").write_text("Ann: hello")
    with pytest.raises(DataFormatError, match=r"notes\.txt: neither a LoCoMo JSON list.*'Ann: hello'"):
        load_conversations(tmp_path / "notes.txt")
    with pytest.raises(FileNotFoundError):
        load_conversations(tmp_path / "missing.jsonl")


def test_jsonl_reads_like_the_same_conversations_in_locomo_format(tiny_locomo_path):
    from_locomo = {c.sample_id: c for c in load_locomo(tiny_locomo_path)}
    from_jsonl = {c.sample_id: c for c in load_conversations(JSONL, ["tiny-1", "tiny-2"])}
    assert list(from_jsonl) == ["tiny-1", "tiny-2"]
    for sample_id, expected in from_locomo.items():
        got = from_jsonl[sample_id]
        assert (got.speaker_a, got.speaker_b) == (expected.speaker_a, expected.speaker_b)
        assert [(t.dia_id, t.speaker, t.content, t.session) for t in got.turns] == [
            (t.dia_id, t.speaker, t.content, t.session) for t in expected.turns
        ]
        assert [as_utc(t.t) for t in got.turns] == [as_utc(t.t) for t in expected.turns]
        # LoCoMo's "D:1:4" and "D2:02" normalise to the ids the JSONL file names; "D9:9" resolves nowhere
        assert [(q.question, q.evidence, q.category) for q in got.qa] == [
            (q.question, q.evidence, q.category) for q in expected.qa
        ]
        assert [(o.text, o.dia_id, o.session) for o in got.observations] == [
            (o.text, o.dia_id, o.session) for o in expected.observations
        ]


def test_jsonl_optional_fields_zones_and_categories():
    support = {c.sample_id: c for c in load_jsonl(JSONL)}["support-7"]
    assert (support.speaker_a, support.speaker_b) == ("Maya", "Agent")
    first, second = support.sessions
    assert first.t.isoformat() == "2024-03-01T08:30:00+00:00"  # +01:00 converted to UTC
    assert support.turn("b3").t.isoformat() == "2024-03-09T16:07:00+00:00"  # a turn's own time
    assert support.turn("b2").t == second.t  # else its session's
    assert [q.category for q in support.qa] == [4, 4, 4, 1]  # names map to LoCoMo's numbers; default 4
    assert support.qa[3].evidence == ("b1", "b3") and support.observations == ()


def _broken(index: int, change) -> list:
    records = _lines()
    change(records[index])
    return records


def _drop(path: tuple, key: str):
    def change(record):
        target = record
        for step in path:
            target = target[step]
        del target[key]

    return change


MALFORMED = [
    # (description, records, line, expected message)
    (
        "missing speaker",
        _broken(2, _drop(("sessions", 1, "turns", 0), "speaker")),
        3,
        r"conversation 'support-7', field sessions\[1\]\.turns\[0\]: missing key\(s\) \['speaker'\]",
    ),
    (
        "typo in a key",
        _broken(1, lambda r: r["questions"][0].update(evidance=["D1:1"])),
        2,
        r"field questions\[0\]: unknown key\(s\) \['evidance'\]",
    ),
    (
        "evidence names no turn",
        _broken(3, lambda r: r["questions"][1].update(evidence=["a3", "z9"])),
        4,
        r"field questions\[1\]\.evidence\[1\]: names no turn of this conversation: 'z9'",
    ),
    (
        "duplicate turn id",
        _broken(1, lambda r: r["sessions"][0]["turns"][2].update(id="D1:1")),
        2,
        r"field sessions\[0\]\.turns\[2\]\.id: duplicate turn id 'D1:1'",
    ),
    (
        "bad time",
        _broken(0, lambda r: r["sessions"][1].update(time="June 20th")),
        1,
        r"field sessions\[1\]\.time: cannot parse time 'June 20th'",
    ),
    (
        "sessions out of order",
        _broken(0, lambda r: r["sessions"][1].update(time="2023-01-01T00:00:00")),
        1,
        r"field sessions\[1\]\.time: .*chronological order",
    ),
    (
        "wrong type",
        _broken(3, lambda r: r["sessions"][0]["turns"][1].update(text=42)),
        4,
        r"field sessions\[0\]\.turns\[1\]\.text: should be a string, got int",
    ),
    (
        "unknown category",
        _broken(2, lambda r: r["questions"][0].update(category="trivia")),
        3,
        r"field questions\[0\]\.category: should be 1-5 or one of",
    ),
    ("no sessions", _broken(1, lambda r: r.update(sessions=[])), 2, r"field sessions: must have at least one session"),
    (
        "duplicate conversation id",
        _broken(3, lambda r: r.update(id="tiny-2")),
        4,
        r"conversation id 'tiny-2' already used on line 2",
    ),
    ("not JSON", _lines()[:2] + ['{"id": "x", "sessions": [}'], 3, r"line 3: not valid JSON"),
    ("not an object", _lines()[:1] + ["[1, 2]"], 2, r"line 2: expected a JSON object, got list"),
]


@pytest.mark.parametrize("description, records, line, message", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_a_malformed_jsonl_file_names_the_line_and_the_field(tmp_path, description, records, line, message):
    path = _write(tmp_path, records)
    with pytest.raises(JsonlFormatError, match=rf"bad\.jsonl, line {line}\b") as error:
        load_conversations(path)
    assert isinstance(error.value, ValueError) and re.search(message, str(error.value)), str(error.value)


def test_a_malformed_locomo_file_names_the_line_of_its_sample(tmp_path, tiny_locomo_path):
    data = json.loads(tiny_locomo_path.read_text())
    del data[1]["conversation"]["session_1"][2]["text"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data, indent=1))
    starts = [number for number, text in enumerate(path.read_text().splitlines(), start=1) if text == " {"]
    line = starts[1]  # where the second sample starts
    with pytest.raises(
        LocomoFormatError, match=rf"item 1 \(line {line}\), sample tiny-2, field session_1\[2\].*'text'"
    ):
        load_conversations(path)
    path.write_text(json.dumps(data)[:-1] + ", 3")
    with pytest.raises(LocomoFormatError, match="not valid JSON"):
        load_conversations(path)


def test_selecting_conversations_keeps_file_order_and_names_unknown_ids():
    assert [c.sample_id for c in load_conversations(JSONL, ["support-8", "tiny-2"])] == ["tiny-2", "support-8"]
    with pytest.raises(DataFormatError, match=r"no conversation\(s\) \['conv-99'\].*support-7"):
        load_conversations(JSONL, ["conv-99"])


@pytest.fixture
def jsonl_config(tmp_path) -> Path:
    path = tmp_path / "my-data.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "path": str(JSONL),
                "cache_dir": str(tmp_path / "cache"),
                "splits": {"train": ["tiny-1", "support-7"], "validation": ["support-8"], "test": ["tiny-2"]},
                "gate": {"windows": [2, 4]},
            }
        )
    )
    return path


def test_prepare_builds_every_task_from_jsonl_with_the_configured_splits(jsonl_config):
    datasets = prepare_datasets(load_data_config(jsonl_config), progress=False)
    retrieval = datasets["retrieval"]["train"]
    # tiny-1: 6 evidence pairs + 3 observation facts; support-7: 5 evidence pairs
    assert len(retrieval) == 14 and set(retrieval["conv_id"]) == {"tiny-1", "support-7"}
    assert sum(k == "observation" for k in retrieval["query_kind"]) == 3
    importance = datasets["importance"]["validation"]
    assert len(importance) == 6 and sum(importance["label"]) == 3  # support-8: a1, a3, b3 are cited
    gate = datasets["gate"]["test"]
    assert set(gate["conv_id"]) == {"tiny-2"} and set(gate["window"]) <= {2, 4}


def test_prepare_fit_and_evaluate_end_to_end_on_jsonl(tmp_path, jsonl_config, tiny_model_dir, capsys):
    """`memnets data prepare`, `memnets fit encoder` and `memnets eval retrieval --data` on the JSONL fixture."""
    assert main(["data", "prepare", "-c", str(jsonl_config)]) == 0
    out = capsys.readouterr().out
    assert "retrieval" in out and "50.0%" in out  # validation importance: 3 of 6 turns cited

    fit = {
        "seed_everything": 0,
        "trainer": encoder_trainer_config(tmp_path, 2),
        "model": {"backbone": str(tiny_model_dir), "max_length": 32, "lr": 1e-3, "warmup_ratio": 0.0},
        "data": {
            "data_config": str(jsonl_config),
            "batch_size": 4,
            "hard_negatives": 1,
            "miner": "bm25",
            "mining_top_k": 3,
        },
    }
    (tmp_path / "fit.yaml").write_text(yaml.safe_dump(fit))
    assert main(["fit", "encoder", "-c", str(tmp_path / "fit.yaml")]) == 0
    rows = list(csv.DictReader((tmp_path / "runs" / "encoder" / "version_0" / "metrics.csv").open()))
    assert sum(bool(row.get("train/loss")) for row in rows) == 2 * 4  # 14 pairs in batches of 4, two epochs
    assert len([row for row in rows if row.get("val/recall@10")]) == 2  # validated on support-8
    assert MemoryEncoder.from_pretrained(tmp_path / "best").dim == 32

    report = tmp_path / "eval.json"
    assert (
        main(
            [
                "eval",
                "retrieval",
                "bm25",
                f"trained=dense:{tmp_path / 'best'}",
                "--data",
                str(JSONL),
                "-c",
                str(jsonl_config),
                "--split",
                "test",
                "--json",
                str(report),
            ]
        )
        == 0
    )
    payload = json.loads(report.read_text())
    assert payload["conversations"] == ["tiny-2"] and payload["split"] == "test"
    assert [r["name"] for r in payload["reports"]] == ["bm25", "trained"]
    assert all(r["counts"]["questions"] == 1 for r in payload["reports"])
    assert main(["eval", "retrieval", "bm25", "--data", str(JSONL)]) == 0  # no split: every conversation
    assert "every conversation of" in capsys.readouterr().out


def test_eval_retrieval_with_a_malformed_file_exits_with_the_line(tmp_path, capsys):
    path = _write(tmp_path, _broken(1, _drop(("questions", 0), "evidence")))
    assert main(["eval", "retrieval", "bm25", "--data", str(path)]) == 2
    assert "line 2, conversation 'tiny-2', field questions[0]: missing key(s) ['evidence']" in capsys.readouterr().err
