"""The edges of memnets.open / AgentMemory a user meets first: unknown options named as memnets.open's, times
in every form the messages and REST take, a transcript with an empty message refused whole, a long text added
in work linear in its length, and which messages a transcript stores by default."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

import memnets

EXACT = 0.9999
T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture()
def memory(encoder, tmp_path):
    with memnets.open(tmp_path / "memory", encoder=encoder, duplicate_threshold=EXACT) as opened:
        yield opened


def test_an_unknown_option_is_named_as_memnets_opens(tmp_path, encoder):
    with pytest.raises(TypeError, match=r"^memnets.open\(\) got unexpected keyword argument\(s\) 'colour'") as error:
        memnets.open(tmp_path / "m", encoder=encoder, colour="red")
    assert "Archive.__init__" not in str(error.value) and "duplicate_threshold" in str(error.value)
    assert not (tmp_path / "m").exists()  # refused before anything was made
    with pytest.raises(TypeError, match=r"^memnets.reembed\(\) got unexpected keyword argument\(s\) 'colour'"):
        memnets.reembed(tmp_path / "m", encoder=encoder, colour="red")


@pytest.mark.parametrize(
    "given", ["2024-03-01T12:00:00+00:00", "2024-03-01T13:00:00+01:00", "2024-03-01T12:00:00", T0], ids=str
)
def test_t_as_of_and_known_at_take_what_messages_and_rest_take(memory, given):
    written = memory.add("I moved to Lyon", user="ann", t=given)
    assert written.t == T0
    assert [h.memory.id for h in memory.search("Lyon", user="ann", as_of=given)] == [written.id]
    assert [m.id for m in memory.list_memories(user="ann", known_at=given)] == [written.id]
    [outcome] = memory.add(messages=[{"role": "user", "content": "I love tea", "time": given}], user="bob")
    assert outcome.memory.t == T0


def test_a_date_is_its_midnight_in_utc_everywhere(memory):
    written = memory.add("I moved to Lyon", user="ann", t=date(2024, 3, 1))
    assert written.t == datetime(2024, 3, 1, tzinfo=UTC)
    assert memory.search("Lyon", user="ann", as_of=date(2024, 2, 29)) == []
    assert [m.id for m in memory.list_memories(user="ann", known_at=date(2024, 3, 2))] == [written.id]
    assert memory.list_memories(user="ann", filters={"since": "2024-03-02"}) == []


@pytest.mark.parametrize("name", ["t", "as_of", "known_at"])
def test_a_time_that_is_not_iso_is_named(memory, name):
    call = memory.add if name == "t" else memory.search
    with pytest.raises(ValueError, match=rf"{name} 'yesterday' is not an ISO 8601 time"):
        call("Lyon", user="ann", **{name: "yesterday"})


def test_a_message_with_content_none_refuses_the_whole_call_naming_it(memory):
    messages = [
        {"role": "user", "content": "I moved to Lyon"},
        {"role": "assistant", "content": "Nice!"},
        {"role": "assistant", "content": None},
    ]
    with pytest.raises(ValueError, match=r"messages\[2\] \(role 'assistant'\) has content None"):
        memory.add(messages=messages, user="ann")
    assert memory.list_memories(user="ann") == []  # nothing of the call was written
    calls_a_tool = {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1"}]}  # OpenAI's shape
    outcomes = memory.add(messages=[messages[0], calls_a_tool], user="ann", roles=("user", "assistant"))
    assert [(o.outcome, o.reason) for o in outcomes] == [("added", None), ("skipped", "no text")]


def test_a_long_text_costs_encoder_work_linear_in_its_length(memory, monkeypatch):
    """A long text is one encoder pass per window (memnets.chunking), all in one batch: the encoder's
    work, which is where the time of adding a 145,000-character text goes (docs/memory.md, "Long
    texts"), grows with the text's length and nothing faster. Counted, not timed."""
    encoder = memory.encoder
    batches: list[list[str]] = []
    real = encoder.encode

    def counting(texts, kind="memory"):
        batches.append(list(texts))
        return real(texts, kind=kind)

    monkeypatch.setattr(encoder, "encode", counting)
    sentence = "Caroline went to the support group on 7 May 2023 and it was powerful. "
    work = {}
    for size in (10_000, 20_000, 40_000):
        batches.clear()
        text = (sentence * (size // len(sentence) + 1))[:size]
        memory.add(text, user=f"u{size}")
        texts = [t for batch in batches for t in batch]
        tokens = sum(min(len(encoder.tokenizer(t)["input_ids"]), encoder.max_length) for t in texts)
        text_tokens = len(encoder.tokenizer(text, add_special_tokens=False)["input_ids"])
        assert len(batches) <= 3  # the text, its windows (one batch), a nearest-memory query at most
        assert tokens <= 1.25 * text_tokens + 2 * encoder.max_length  # each token once, plus the windows' overlap
        work[size] = tokens
    assert 1.9 <= work[20_000] / work[10_000] <= 2.1 and 1.9 <= work[40_000] / work[20_000] <= 2.1


def test_a_transcript_stores_what_the_user_said_unless_asked_for_more(memory):
    chat = [
        {"role": "user", "content": "I adopted a beagle named Rex"},
        {"role": "assistant", "content": "Fun!"},
        {"role": "user", "content": "We go hiking every Sunday"},
        {"role": "assistant", "content": "Got it, I'll remember that you hike on Sundays."},
    ]
    outcomes = memory.add(messages=chat, user="ann")
    assert [(o.role, o.outcome, o.reason) for o in outcomes] == [
        ("user", "added", None),
        ("assistant", "skipped", "role"),
        ("user", "added", None),
        ("assistant", "skipped", "role"),
    ]
    recalled = [h.memory.content for h in memory.search("What did Ann say about hiking?", user="ann", k=5)]
    assert sorted(recalled) == ["user: I adopted a beagle named Rex", "user: We go hiking every Sunday"]
    both = memory.add(messages=chat, user="bob", roles=("user", "assistant"))  # the assistant's own facts, asked for
    assert [o.outcome for o in both] == ["added"] * 4


@pytest.mark.slow
def test_a_question_naming_the_user_finds_the_memory_it_asks_about(tmp_path):
    """With the default encoder, "Erin: ..." on every memory of hers lifts them all alike (0.49 for a move to
    Lyon against 0.12 without the prefix), yet the question's own subject still ranks first. The prefix stays:
    on LoCoMo's validation conversation the text with it ranks best (bench/experiments/speaker_prefix.py,
    docs/memory.md, "Messages")."""
    said = ["I moved to Lyon in March", "My dog is a beagle named Rex", "I work as a nurse at the city hospital"]
    for search in ("auto", "dense"):  # hybrid (the default) and the encoder alone
        with memnets.open(tmp_path / search, search=search) as memory:
            memory.add(messages=[{"role": "user", "name": "Erin", "content": text} for text in said], user="erin")
            hits = memory.search("What is Erin's dog called?", user="erin", k=3)
        assert hits[0].memory.content == "Erin: My dog is a beagle named Rex", search
