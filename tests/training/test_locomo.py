"""The LoCoMo reader on the hand-written fixture and on malformed files."""

import json
from datetime import datetime

import pytest

from memnets.training.data.locomo import LocomoFormatError, load_locomo, memory_id, split_evidence


def test_sessions_turns_and_dates(tiny_locomo_path):
    tiny1, tiny2 = load_locomo(tiny_locomo_path)
    assert [s.number for s in tiny1.sessions] == [1, 2]  # session_3_date_time has no turns: ignored
    assert tiny1.sessions[0].t == datetime(2023, 5, 8, 13, 56)
    assert tiny1.sessions[1].t == datetime(2023, 6, 20, 10, 0)
    assert [t.dia_id for t in tiny1.turns] == ["D1:1", "D1:2", "D1:3", "D1:4", "D2:1", "D2:2", "D2:3", "D2:4"]
    assert tiny1.turn("D2:1").t == datetime(2023, 6, 20, 10, 0)
    assert len(tiny2.turns) == 3


def test_turn_content_carries_speaker_and_photo_caption(tiny_locomo_path):
    tiny1 = load_locomo(tiny_locomo_path)[0]
    assert tiny1.turn("D1:3").content == "Ann: He is a beagle. [shares a photo of a small dog on a couch]"
    assert tiny1.turn("D1:1").content == "Ann: I adopted a puppy named Rex yesterday."


def test_evidence_is_normalised_and_unresolvable_ids_are_kept_aside(tiny_locomo_path):
    qa = load_locomo(tiny_locomo_path)[0].qa
    assert qa[0].evidence == ("D1:3",)
    assert qa[1].evidence == ("D1:1", "D2:1")  # "D1:1; D2:1" split
    assert qa[2].evidence == ("D1:4", "D2:2")  # "D:1:4" and "D2:02" normalised
    assert qa[3].evidence == ("D2:3",) and qa[3].dropped_evidence == ("D9:9",)
    assert qa[4].evidence == () and qa[4].category == 5 and qa[4].answer == "Tom"


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("D1:3", ["D1:3"]),
        ("D8:6; D9:17", ["D8:6", "D9:17"]),
        ("D:11:26", ["D11:26"]),
        ("D30:05", ["D30:5"]),
        ("D9:1 D4:4", ["D9:1", "D4:4"]),
        ("D4:17, D4:19", ["D4:17", "D4:19"]),
        ("D", ["D"]),
    ],
)
def test_split_evidence(raw, expected):
    assert split_evidence(raw) == expected


def test_observations_point_at_their_source_turns(tiny_locomo_path):
    tiny1 = load_locomo(tiny_locomo_path)[0]
    assert [(o.speaker, o.dia_id, o.session) for o in tiny1.observations] == [
        ("Ann", "D1:1", 1),
        ("Bob", "D1:4", 1),
        ("Ann", "D2:3", 2),
    ]


def test_real_locomo_counts_match_its_readme():
    conversations = load_locomo()
    assert [c.sample_id for c in conversations] == [
        "conv-26",
        "conv-30",
        "conv-41",
        "conv-42",
        "conv-43",
        "conv-47",
        "conv-49",
        "conv-50",
    ]
    assert sum(len(c.sessions) for c in conversations) == 214
    assert sum(len(c.turns) for c in conversations) == 4526
    assert sum(len(c.qa) for c in conversations) == 1589
    dropped = sorted(d for c in conversations for item in c.qa for d in item.dropped_evidence)
    assert dropped == ["D", "D10:19", "D4:36"]


def test_sample_filter_keeps_file_order_and_rejects_unknown_ids(tiny_locomo_path):
    assert [c.sample_id for c in load_locomo(tiny_locomo_path, ["tiny-2"])] == ["tiny-2"]
    with pytest.raises(LocomoFormatError, match="no conversation"):
        load_locomo(tiny_locomo_path, ["conv-99"])


def test_memory_id():
    assert memory_id("conv-26", "D1:3") == "conv-26/D1:3"


def _write(tmp_path, data) -> str:
    path = tmp_path / "bad.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def _fixture(tiny_locomo_path):
    return json.loads(tiny_locomo_path.read_text())


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_locomo(tmp_path / "nope.json")


def test_invalid_json_names_the_file(tmp_path):
    path = _write(tmp_path, "[{")
    with pytest.raises(LocomoFormatError, match="bad.json.*not valid JSON"):
        load_locomo(path)


def test_missing_field_names_file_sample_and_field(tmp_path, tiny_locomo_path):
    data = _fixture(tiny_locomo_path)
    del data[1]["qa"]
    with pytest.raises(LocomoFormatError, match=r"bad\.json.*sample tiny-2.*'qa'"):
        load_locomo(_write(tmp_path, data))


def test_bad_turn_and_bad_date_name_their_field(tmp_path, tiny_locomo_path):
    data = _fixture(tiny_locomo_path)
    del data[0]["conversation"]["session_2"][1]["text"]
    with pytest.raises(LocomoFormatError, match=r"sample tiny-1, field session_2\[1\].*'text'"):
        load_locomo(_write(tmp_path, data))
    data = _fixture(tiny_locomo_path)
    data[0]["conversation"]["session_1_date_time"] = "yesterday"
    with pytest.raises(LocomoFormatError, match=r"session_1_date_time.*'yesterday'"):
        load_locomo(_write(tmp_path, data))


def test_wrong_type_is_named(tmp_path, tiny_locomo_path):
    data = _fixture(tiny_locomo_path)
    data[0]["qa"][0]["category"] = "four"
    with pytest.raises(LocomoFormatError, match=r"qa\[0\].*'category' should be int"):
        load_locomo(_write(tmp_path, data))
