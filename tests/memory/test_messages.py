"""``AgentMemory.add(messages=[...])`` and ``add_many`` of messages (memnets.memory.messages): a chat
transcript becomes one memory per kept message, with its role, speaker, session and time, through
the one write path, one outcome per message; bad messages are refused before anything is written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

import memnets
from memnets.argerrors import ArgumentValueError, field_of
from memnets.memory.messages import MessageOutcome
from memnets.training.data.locomo import Turn

T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
EXACT = 0.9999  # the tiny random encoder puts every text near every other: merge identical texts only

TRANSCRIPT = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "name": "Ann", "content": "I adopted a beagle named Rex", "time": "2024-03-01T12:00:00Z"},
    {"role": "assistant", "content": "What a lovely name for a beagle!", "time": T0 + timedelta(minutes=1)},
    {"role": "tool", "content": '{"weather": "sunny"}'},
    {"role": "user", "name": "Ann", "content": [{"type": "text", "text": "He is two years old"}]},
]


@pytest.fixture()
def memory(encoder, tmp_path):
    with memnets.open(tmp_path / "memory", encoder=encoder, duplicate_threshold=EXACT) as opened:
        yield opened


def test_each_kept_message_is_a_memory_with_its_role_speaker_session_and_time(encoder, location):
    where, options = location
    with memnets.open(where, encoder=encoder, duplicate_threshold=EXACT, **options) as memory:
        outcomes = memory.add(
            messages=TRANSCRIPT, user="ann", session="s1", t=T0 + timedelta(hours=1), roles=("user", "assistant")
        )
        assert [(o.index, o.role, o.outcome, o.reason) for o in outcomes] == [
            (0, "system", "skipped", "role"),
            (1, "user", "added", None),
            (2, "assistant", "added", None),
            (3, "tool", "skipped", "role"),
            (4, "user", "added", None),
        ]
        assert all(isinstance(o, MessageOutcome) for o in outcomes)
        assert outcomes[0].memory is None and outcomes[3].memory is None
        stored = memory.list_memories(user="ann")
        assert [m.content for m in stored] == [
            "Ann: I adopted a beagle named Rex",
            "assistant: What a lovely name for a beagle!",
            "Ann: He is two years old",
        ]
        assert [m.metadata for m in stored] == [
            {"role": "user", "speaker": "Ann"},
            {"role": "assistant", "speaker": "assistant"},
            {"role": "user", "speaker": "Ann"},
        ]
        assert {m.session for m in stored} == {"s1"} and {m.agent for m in stored} == {None}
        # a message's own time, else the call's t plus its position in microseconds (the order is kept)
        assert [m.t for m in stored] == [T0, T0 + timedelta(minutes=1), T0 + timedelta(hours=1, microseconds=4)]
        assert [o.memory.id for o in outcomes if o.memory] == [m.id for m in stored]
        users = memory.list_memories(user="ann", filters={"metadata": {"role": "user"}})
        assert [m.content for m in users] == [stored[0].content, stored[2].content]


def test_a_message_is_embedded_as_the_encoder_was_trained_on_a_turn(memory, encoder):
    [outcome] = memory.add(messages=[{"role": "user", "name": "Ann", "content": "I love hiking"}], user="ann")
    turn = Turn(dia_id="D1:1", speaker="Ann", text="I love hiking", session=1, t=T0)
    assert outcome.memory.content == turn.content == "Ann: I love hiking"
    stored = memory.store.vectors([outcome.memory.id], "ann")[0]
    np.testing.assert_allclose(stored, encoder.encode([turn.content], kind="memory")[0], atol=1e-5)


def test_roles_asks_for_system_and_tool_messages(memory):
    outcomes = memory.add(messages=TRANSCRIPT, user="ann", roles=["system", "tool"])
    assert [o.outcome for o in outcomes] == ["added", "skipped", "skipped", "added", "skipped"]
    assert [m.content for m in memory.list_memories(user="ann")] == [
        "system: You are a helpful assistant.",
        'tool: {"weather": "sunny"}',
    ]


def test_content_parts_keep_their_text_and_a_message_without_text_is_skipped(memory):
    parts = [
        "Look at this:",
        {"type": "image_url", "image_url": {"url": "https://example.com/rex.png"}},
        {"type": "text", "text": "Rex at the beach"},
    ]
    outcomes = memory.add(
        messages=[
            {"role": "user", "content": parts},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1"}]},  # a tool call: no text
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
            {"role": "user", "content": "   "},
        ],
        user="ann",
        roles=("user", "assistant"),
    )
    assert [(o.outcome, o.reason) for o in outcomes] == [
        ("added", None),
        ("skipped", "no text"),
        ("skipped", "no text"),
        ("skipped", "no text"),
    ]
    assert outcomes[0].memory.content == "user: Look at this:\nRex at the beach"


def test_each_message_goes_through_the_consistency_rule(memory):
    first = memory.add(messages=[{"role": "user", "name": "Ann", "content": "I adopted a puppy named Rex"}], user="a")
    outcomes = memory.add(
        messages=[
            {"role": "user", "name": "Ann", "content": "I adopted a puppy named Rex"},  # said already
            {"role": "user", "name": "Ann", "content": "I adopted a puppy named Max"},  # a changed name
            {"role": "user", "name": "Ann", "content": "I adopted a puppy named Max"},  # this call said it
        ],
        user="a",
    )
    rex = first[0].memory
    assert [o.outcome for o in outcomes] == ["unchanged", "updated", "unchanged"]
    assert outcomes[0].memory.id == rex.id and outcomes[1].memory.id == rex.id
    assert [m.content for m in memory.list_memories(user="a")] == ["Ann: I adopted a puppy named Max"]
    assert [m.content for m in memory.history(rex.id, user="a")] == [rex.content, "Ann: I adopted a puppy named Max"]


def test_message_ids_make_writing_a_whole_history_again_change_nothing(encoder, location):
    where, options = location
    history = [
        {"role": "user", "content": "My sister lives in Lyon", "id": "m1"},
        {"role": "assistant", "content": "Lyon is lovely in spring", "id": "m2"},
    ]
    with memnets.open(where, encoder=encoder, duplicate_threshold=EXACT, **options) as memory:
        both = ("user", "assistant")
        assert [o.outcome for o in memory.add(messages=history, user="ann", roles=both)] == ["added", "added"]
        later = [*history, {"role": "user", "content": "She moved there in 2019", "id": "m3"}]
        outcomes = memory.add_many(later, user="ann", roles=both)  # add_many of messages: the same call
        assert [o.outcome for o in outcomes] == ["unchanged", "unchanged", "added"]
        assert [m.id for m in memory.list_memories(user="ann")] == ["m1", "m2", "m3"]


BAD = [
    ("not a list", {"role": "user", "content": "hi"}, TypeError, "messages must be a list"),
    ("not a mapping", ["hi"], TypeError, "messages[0] must be a mapping"),
    ("no role", [{"content": "hi"}], ValueError, "messages[0].role is missing"),
    ("no content", [{"role": "user"}], ValueError, "messages[0].content is missing"),
    ("role not text", [{"role": 3, "content": "hi"}], TypeError, "messages[0].role must be a str"),
    ("blank name", [{"role": "user", "content": "hi", "name": " "}], ValueError, "messages[0].name must be"),
    ("content a number", [{"role": "user", "content": 7}], TypeError, "messages[0].content must be a str or"),
    ("bad part", [{"role": "user", "content": [7]}], TypeError, "messages[0].content[0] must be"),
    ("text part", [{"role": "user", "content": [{"type": "text"}]}], TypeError, "messages[0].content[0].text"),
    ("bad time", [{"role": "user", "content": "hi", "time": "soon"}], ValueError, "messages[0].time 'soon'"),
    ("time a number", [{"role": "user", "content": "hi", "time": 5}], TypeError, "messages[0].time must be"),
    ("bad id", [{"role": "user", "content": "hi", "id": "a~1"}], ValueError, "messages[0].id 'a~1'"),
    (
        "too long",
        [{"role": "user", "content": "x" * 200_001}],
        ValueError,
        "messages[0].content has 200,001 characters",
    ),
]


def test_a_message_as_long_as_an_add_allows_is_stored_its_speaker_prefix_not_counted(memory):
    """The limit is the text's, as sent: a message's "user: " prefix, which the memory's text carries, does not
    count (it had refused 199,998 characters and named a length of 200,004 that the caller never sent)."""
    [outcome] = memory.add(messages=[{"role": "user", "content": "x" * 200_000}], user="ann")
    assert outcome.outcome == "added" and len(outcome.memory.content) > 200_000


@pytest.mark.parametrize("case, bad, error, names", BAD, ids=[case[0] for case in BAD])
def test_a_bad_message_is_named_and_nothing_of_the_call_is_written(memory, case, bad, error, names):
    good = {"role": "user", "content": "this one is fine"}
    messages = [good, *bad] if isinstance(bad, list) else bad
    if isinstance(bad, list):
        names = names.replace("messages[0]", "messages[1]")
    with pytest.raises(error, match=names.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
        memory.add(messages=messages, user="ann")
    assert memory.list_memories(user="ann") == []


def test_repeated_ids_unusable_arguments_and_bad_options_are_refused_before_writing(memory):
    twice = [{"role": "user", "content": "a", "id": "x"}, {"role": "user", "content": "b", "id": "x"}]
    with pytest.raises(ValueError, match=r"ids repeated within the call: \['x'\]"):
        memory.add(messages=twice, user="ann")
    one = [{"role": "user", "content": "hello there"}]
    with pytest.raises(ValueError, match=r"without \['text', 'id'\]"):
        memory.add("a text", messages=one, id="y", user="ann")
    with pytest.raises(ValueError, match=r"without \['ids'\]"):
        memory.add_many(one, ids=["z"], user="ann")
    with pytest.raises(ValueError, match="keep must be one of"):
        memory.add(messages=one, user="ann", keep="some")
    with pytest.raises(TypeError, match="roles must be a non-empty list"):
        memory.add(messages=one, user="ann", roles="user")
    with pytest.raises(TypeError, match="text must be a str or a Memory record"):
        memory.add(user="ann")
    with pytest.raises(ValueError, match="user"):  # checked even when every message is skipped
        memory.add(messages=[{"role": "system", "content": "hello"}], user="")
    assert memory.list_memories(user="ann") == []


def test_a_t_at_the_end_of_the_calendar_is_a_value_error_naming_t_and_the_message(memory):
    """Before: two messages at t = 9999-12-31 23:59:59.999999 raised a bare OverflowError ("date value out
    of range") from t + the second message's position, naming no argument, and no ValueError."""
    last = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
    messages = [{"role": "user", "content": "I adopted a beagle"}, {"role": "user", "content": "His name is Rex"}]
    with pytest.raises(
        ArgumentValueError, match=r"^t 9999-12-31T23:59:59.999999\+00:00 leaves no room for messages\[1\]"
    ):
        memory.add(messages=messages, user="ann", t=last)
    with pytest.raises(ValueError) as raised:
        memory.add_many(messages, user="ann", t=last)
    assert field_of(raised.value) == "t"
    assert memory.list_memories(user="ann") == []  # nothing of either call was written
    dated = [messages[0], {**messages[1], "time": last}]  # a message with its own time needs no room
    assert [o.memory.t for o in memory.add(messages=dated, user="ann", t=last)] == [last, last]


def test_keep_important_keeps_the_messages_the_importance_heuristic_scores_high(memory):
    messages = [
        {"role": "user", "content": "ok"},
        {"role": "user", "content": "I moved to Berlin in May 2021 with my two daughters and our old cat Felix"},
    ]
    outcomes = memory.add(messages=messages, user="ann", keep="important")  # no pack: the heuristic decides
    assert [(o.outcome, o.reason) for o in outcomes] == [("skipped", "unimportant"), ("added", None)]
    assert outcomes[1].memory.importance >= memory.config.write_through_threshold
    assert [m.content for m in memory.list_memories(user="ann")] == [outcomes[1].memory.content]


def test_keep_important_with_a_pack_keeps_what_its_importance_head_scores_at_the_threshold(pack, tmp_path):
    texts = ["red green blue", "one two three", "cat dog bird", "north south east", "sun moon star", "left right"]
    messages = [{"role": "user", "name": "Ann", "content": text} for text in texts]
    with memnets.open(tmp_path / "scored", pack=pack) as scoring:
        vectors = scoring.encoder.encode([f"Ann: {text}" for text in texts], kind="memory")
        scores = scoring.importance([f"Ann: {text}" for text in texts], vectors)
    threshold = float(np.median(scores))
    options = {"write_through_threshold": threshold, "duplicate_threshold": EXACT}
    with memnets.open(tmp_path / "memory", pack=pack, **options) as memory:
        outcomes = memory.add(messages=messages, user="ann", keep="important")
        kept = [o.index for o in outcomes if o.outcome == "added"]
        assert kept == [n for n, score in enumerate(scores) if score >= threshold] and 0 < len(kept) < len(texts)
        assert all(o.reason == "unimportant" for o in outcomes if o.index not in kept)
        assert len(memory.list_memories(user="ann")) == len(kept)
        everything = memory.add(messages=messages, user="bob")  # keep="all", the default
        assert [o.outcome for o in everything] == ["added"] * len(texts)


@pytest.fixture(scope="module")
def pack(tiny_model_dir, tmp_path_factory):
    """A pack of the tiny encoder with a random importance head (its scores differ from text to text)."""
    import torch

    from memnets.nn.encoder import MemoryEncoder
    from memnets.nn.heads import ImportanceHead
    from memnets.pack import export_pack

    torch.manual_seed(0)
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir)
    importance = ImportanceHead(encoder.dim, hidden_dims=(8,))
    return export_pack(tmp_path_factory.mktemp("pack") / "pack", encoder, importance=importance)
