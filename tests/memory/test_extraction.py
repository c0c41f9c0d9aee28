"""The optional LLM extraction (memnets.memory.extraction) against a real local OpenAI-compatible server.

The server (memnets.training.fake_llm.FakeChatServer) answers what each test scripts; the LLM client is the
real OpenAIChatLLM over HTTP, and the memory a real memnets.open folder with the tiny encoder.
"""

from __future__ import annotations

import json
import time

import pytest
from bench_helpers import result, run_bench

import memnets
from memnets.llm import OpenAIChatLLM
from memnets.memory import extraction_prompts as prompts
from memnets.memory.extraction import MAX_FACTS, SOURCE_MESSAGES, Extraction, ExtractionError
from memnets.memory.texts import MAX_TEXT_CHARS
from memnets.training.fake_llm import FakeChatServer

CONVERSATION = [
    {"role": "system", "content": "You are a helpful assistant.", "id": "s0"},
    {"role": "user", "content": "I adopted a beagle last week.", "id": "m1"},
    {"role": "assistant", "content": "Congratulations! What is its name?", "id": "m2"},
    {"role": "user", "name": "Ann", "content": [{"type": "text", "text": "His name is Rex."}], "id": "m3"},
]


def facts(*items: tuple[str, list[int]]) -> str:
    return json.dumps({"facts": [{"text": text, "messages": numbers} for text, numbers in items]})


def decisions(*items: dict) -> str:
    return json.dumps({"decisions": list(items)})


@pytest.fixture()
def server():
    with FakeChatServer() as running:
        yield running


@pytest.fixture()
def memory(tmp_path, encoder):
    with memnets.open(tmp_path / "memory", encoder=encoder) as opened:
        yield opened


def llm(server, timeout: float = 30.0) -> OpenAIChatLLM:
    return OpenAIChatLLM(server.url, "fake", api_key_env=None, timeout=timeout)


def test_each_fact_keeps_the_ids_of_its_messages_and_goes_through_the_write_path(server, memory):
    server.script(facts(("Ann adopted a beagle named Rex", [0, 2])))
    changes = Extraction(llm(server), decide="rules").add(memory, CONVERSATION, user="ann", metadata={"app": "x"})

    assert [(c.event, c.memory.content) for c in changes] == [("ADD", "Ann adopted a beagle named Rex")]
    stored = memory.get(changes[0].memory.id, user="ann")
    assert stored.metadata == {"app": "x", SOURCE_MESSAGES: ["m1", "m3"]}  # numbers 0 and 2 of the messages shown
    # the fact call: the one system prompt, the messages numbered without the system one, the speaker's name kept
    [request] = server.requests
    assert request["messages"][0] == {"role": "system", "content": prompts.FACTS_SYSTEM}
    assert request["messages"][1]["content"] == prompts.facts_prompt(
        [
            ("user", "I adopted a beagle last week."),
            ("assistant", "Congratulations! What is its name?"),
            ("Ann", "His name is Rex."),
        ]
    )
    assert "[2] Ann: His name is Rex." in request["messages"][1]["content"]


def test_rules_decide_with_the_consistency_rule_and_one_llm_call_per_add(server, memory):
    extraction = Extraction(llm(server), decide="rules")
    server.script(facts(("Ann adopted a beagle named Rex", [2])))
    [first] = extraction.add(memory, CONVERSATION, user="ann")
    server.script(facts(("Ann adopted a beagle named Max", [0]), ("Ann adopted a beagle named Max", [0])))
    changed, repeated = extraction.add(memory, [{"role": "user", "content": "We renamed him Max."}], user="ann")

    assert len(server.requests) == 2  # no decision call with decide="rules"
    # the changed name: the same sentence frame, so the write path's rule makes it the memory's new version
    assert (changed.event, changed.memory.id, changed.previous) == ("UPDATE", first.memory.id, first.memory.content)
    assert repeated.event == "NONE" and repeated.memory.id == first.memory.id
    assert [m.content for m in memory.history(first.memory.id, user="ann")] == [
        "Ann adopted a beagle named Rex",
        "Ann adopted a beagle named Max",
    ]


def test_the_llm_decides_update_delete_and_add_against_the_nearest_memories(memory):
    tea = memory.add("Ann drinks green tea every morning", user="ann", metadata={SOURCE_MESSAGES: ["old"]})
    city = memory.add("Ann lives in Lyon", user="ann")
    shown: dict[str, int] = {}  # memory text -> its number in the decision prompt

    def respond(messages):
        if messages[0]["content"] == prompts.FACTS_SYSTEM:
            return facts(
                ("Ann drinks coffee every morning", [0]), ("Ann moved away from Lyon", [1]), ("Ann is 30", [1])
            )
        assert messages[0]["content"] == prompts.DECISION_SYSTEM
        listed = messages[1]["content"].split("Existing memories:\n")[1].split("\n\nNew facts:")[0]
        shown.update({line.split("] ", 1)[1]: int(line[1:].split("]")[0]) for line in listed.splitlines()})
        return decisions(
            {"fact": 0, "event": "UPDATE", "memory": shown[tea.content], "text": "Ann drinks coffee, not tea"},
            {"fact": 1, "event": "DELETE", "memory": shown[city.content]},
            {"fact": 2, "event": "ADD"},
        )

    messages = [
        {"role": "user", "content": "I switched to coffee.", "id": "a"},
        {"role": "user", "content": "x", "id": "b"},
    ]
    with FakeChatServer(respond=respond) as server:
        changes = Extraction(llm(server), decide="llm", neighbours=2).add(memory, messages, user="ann")

    assert set(shown) == {tea.content, city.content}  # the facts' nearest memories, each shown once
    assert [(c.event, c.memory.content) for c in changes] == [
        ("UPDATE", "Ann drinks coffee, not tea"),
        ("DELETE", "Ann lives in Lyon"),
        ("ADD", "Ann is 30"),
    ]
    assert changes[0].previous == "Ann drinks green tea every morning"
    updated = memory.get(tea.id, user="ann")
    assert updated.content == "Ann drinks coffee, not tea" and updated.metadata[SOURCE_MESSAGES] == ["old", "a"]
    assert [m.content for m in memory.history(tea.id, user="ann")][0] == "Ann drinks green tea every morning"
    assert memory.get(city.id, user="ann") is None
    assert sorted(m.content for m in memory.list_memories(user="ann")) == ["Ann drinks coffee, not tea", "Ann is 30"]


MALFORMED = {
    "not JSON": ("Sure! Ann likes dogs.", None, "not JSON"),
    "no facts list": ('{"facts": "Ann likes dogs"}', None, "no 'facts' list"),
    "a fact without text": ('{"facts": [{"messages": [0]}]}', None, "has no 'text'"),
    "a message number out of range": (facts(("Ann likes dogs", [7])), None, r"message numbers in \[0, 0\]"),
    "an unknown event": (facts(("Ann likes dogs", [0])), decisions({"fact": 0, "event": "MERGE"}), "not one of"),
    "an unknown memory": (
        facts(("Ann likes dogs", [0])),
        decisions({"fact": 0, "event": "DELETE", "memory": 5}),
        "number of an existing memory",
    ),
    "a fact decided twice": (
        facts(("Ann likes dogs", [0])),
        decisions({"fact": 0, "event": "ADD"}, {"fact": 0, "event": "NONE"}),
        "a second time",
    ),
    "one memory changed twice": (
        facts(("Ann likes dogs", [0]), ("Ann likes cats", [0])),
        decisions(
            {"fact": 0, "event": "DELETE", "memory": 0}, {"fact": 1, "event": "UPDATE", "memory": 0, "text": "y"}
        ),
        "no other decision changes",
    ),
    "a fact without decision": (
        facts(("Ann likes dogs", [0]), ("Ann likes cats", [0])),
        decisions({"fact": 1, "event": "ADD"}),
        r"no decision for facts \[0\]",
    ),
}


@pytest.mark.parametrize("case", MALFORMED, ids=list(MALFORMED))
def test_a_malformed_answer_stores_nothing_of_the_call_and_says_why(server, memory, case):
    kept = memory.add("Ann had a cat named Tom", user="ann")
    fact_answer, decision_answer, why = MALFORMED[case]
    server.script(fact_answer, *([decision_answer] if decision_answer else []))
    extraction = Extraction(llm(server), decide="llm")
    with pytest.raises(ExtractionError, match=why) as raised:
        extraction.add(memory, [{"role": "user", "content": "I like dogs and cats."}], user="ann")
    assert raised.value.reason == "malformed"
    assert "nothing of this call was stored" in str(raised.value)
    assert [m.content for m in memory.list_memories(user="ann")] == [kept.content]
    assert memory.get(kept.id, user="ann") == kept


UNWRITABLE = {  # a text the write path refuses, in the decision after a DELETE or an ADD
    "a lone surrogate in an UPDATE": ("llm", "Ann drinks coffee \ud800 now", r"fact 1 \(UPDATE\).*not valid Unicode"),
    "an UPDATE over the length cap": ("llm", "c" * (MAX_TEXT_CHARS + 1), r"fact 1 \(UPDATE\).*over the limit"),
    "a lone surrogate in an added fact": ("rules", "Ann drinks \udfff coffee", r"fact 1 \(ADD\).*not valid Unicode"),
}


@pytest.mark.parametrize("case", UNWRITABLE, ids=list(UNWRITABLE))
def test_a_decision_the_write_path_refuses_leaves_the_earlier_ones_unwritten(memory, case):
    decide, text, why = UNWRITABLE[case]
    city = memory.add("Ann lives in Lyon", user="ann")
    tea = memory.add("Ann drinks green tea every morning", user="ann")
    before = memory.list_memories(user="ann")

    def respond(messages):
        if messages[0]["content"] == prompts.FACTS_SYSTEM:
            return facts(("Ann moved away from Lyon", [0]), ("Ann drinks coffee" if decide == "llm" else text, [0]))
        listed = messages[1]["content"].split("Existing memories:\n")[1].split("\n\nNew facts:")[0]
        shown = {line.split("] ", 1)[1]: int(line[1:].split("]")[0]) for line in listed.splitlines()}
        return decisions(
            {"fact": 0, "event": "DELETE", "memory": shown[city.content]},
            {"fact": 1, "event": "UPDATE", "memory": shown[tea.content], "text": text},
        )

    with FakeChatServer(respond=respond) as server:
        extraction = Extraction(llm(server), decide=decide, max_new_tokens=4096)  # room for the long text
        with pytest.raises(ExtractionError, match=why) as raised:
            extraction.add(memory, [{"role": "user", "content": "I moved; coffee now."}], user="ann")
    assert raised.value.reason == "malformed"
    assert memory.list_memories(user="ann") == before  # the DELETE's memory is there, nothing added
    assert memory.get(city.id, user="ann") == city and len(memory.history(tea.id, user="ann")) == 1


def test_a_fenced_json_answer_is_read(server, memory):
    server.script("```json\n" + facts(("Ann likes dogs", [0])) + "\n```")
    [change] = Extraction(llm(server), decide="rules").add(memory, [{"role": "user", "content": "dogs!"}], user="ann")
    assert change.memory.content == "Ann likes dogs"


def test_a_late_answer_stores_nothing_and_says_so(memory):
    with FakeChatServer([facts(("Ann likes dogs", [0]))], delay=1.0) as slow:
        with pytest.raises(ExtractionError, match="did not answer within 0.2 s") as raised:
            Extraction(llm(slow, timeout=0.2), decide="rules").add(memory, [{"role": "user", "content": "x"}], user="a")
    assert raised.value.reason == "late"
    assert memory.users() == []


class UnboundedLLM:
    """An LLM whose ``complete`` takes no ``timeout`` (as one of a user's own may): it runs to its end."""

    name = "unbounded"

    def __init__(self, llm: OpenAIChatLLM):
        self.llm = llm

    def complete(self, prompt: str, *, system: str | None = None, max_new_tokens: int = 128) -> str:
        return self.llm.complete(prompt, system=system, max_new_tokens=max_new_tokens)


def test_an_answer_after_the_deadline_stores_nothing(memory):
    with FakeChatServer([facts(("Ann likes dogs", [0]))], delay=0.3) as slow:
        extraction = Extraction(UnboundedLLM(llm(slow)), decide="rules", deadline=0.05)
        with pytest.raises(ExtractionError, match="after the 0.05 s deadline") as raised:
            extraction.add(memory, [{"role": "user", "content": "x"}], user="a")
    assert raised.value.reason == "late" and raised.value.answer == facts(("Ann likes dogs", [0]))
    assert memory.users() == []


def test_a_dripping_endpoint_is_cut_at_the_deadline(memory):
    # a byte every 50 ms: the client's 30 s socket timeout never fires; the answer would take ~12 s
    with FakeChatServer([facts(("Ann likes dogs", [0]))], drip=0.05) as dripping:
        extraction = Extraction(llm(dripping), decide="rules", deadline=2)
        started = time.monotonic()
        with pytest.raises(ExtractionError, match=r"fact call failed: .*did not answer within") as raised:
            extraction.add(memory, [{"role": "user", "content": "x"}], user="a")
        assert time.monotonic() - started < 2 + 2.0  # the deadline and some slack for a busy machine
    assert raised.value.reason == "late"
    assert memory.users() == []


def test_more_facts_than_the_cap_are_refused_naming_the_count(server, memory):
    server.script(facts(*[(f"Ann likes dog number {n}", [0]) for n in range(MAX_FACTS + 1)]))
    with pytest.raises(
        ExtractionError, match=rf"lists {MAX_FACTS + 1} facts, more than MAX_FACTS={MAX_FACTS}"
    ) as raised:
        Extraction(llm(server), decide="rules").add(memory, [{"role": "user", "content": "dogs"}], user="a")
    assert raised.value.reason == "malformed"
    assert memory.users() == []


def test_a_failing_endpoint_stores_nothing(server, memory):
    # nothing scripted: the server answers HTTP 500
    with pytest.raises(ExtractionError, match="fact call failed: .*HTTP 500") as raised:
        Extraction(llm(server)).add(memory, [{"role": "user", "content": "x"}], user="a")
    assert raised.value.reason == "failed"
    assert memory.users() == []


def test_nothing_to_read_calls_no_llm(server, memory):
    only_system = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "  "}]
    assert Extraction(llm(server)).add(memory, only_system, user="a") == []
    assert server.requests == []


def test_bad_arguments_name_themselves(server):
    with pytest.raises(ValueError, match="decide must be one of"):
        Extraction(llm(server), decide="vote")
    with pytest.raises(ValueError, match="deadline must be a positive"):
        Extraction(llm(server), deadline=0)
    with pytest.raises(TypeError, match=r"messages\[0\] must be a mapping"):
        Extraction(llm(server)).facts(["hello"])


def test_the_add_latency_benchmark_measures_every_mode(tiny_model_dir, tmp_path):
    args = ("--quick", "--encoder", tiny_model_dir, "--llm-delay", "0.01", "--out", tmp_path)
    printed = run_bench("bench.experiments.add_latency", *args).stdout
    payload = result(tmp_path, "add_latency")
    modes = payload["results"]
    assert list(modes) == ["keep=all", "keep=important", "infer, decide=rules", "infer, decide=llm"]
    assert [m["llm_calls"] for m in modes.values()] == [0, 0, 5, 10]  # none for memnets' own writes
    assert all(m["calls"] == 5 and m["messages"] == 10 for m in modes.values())
    assert modes["keep=important"]["memories_stored"] <= modes["keep=all"]["memories_stored"]
    assert payload["settings"]["importance"] == "the heuristic (no pack at checkpoints/)"
    assert "| infer, decide=llm |" in printed
