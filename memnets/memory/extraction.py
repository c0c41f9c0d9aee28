"""Optional LLM extraction (mem0's scheme): facts from messages, then ADD / UPDATE / DELETE / NONE per fact.

Nothing in memnets calls an LLM on a write unless asked: this is the ``infer=True`` of the mem0 facade
(:mod:`memnets.compat.mem0`) and of anyone who builds an :class:`Extraction` with their own model.
One call of :meth:`Extraction.add`:

1. **Facts.** The LLM reads the messages (read as ``add(messages=...)`` reads them, numbered; system
   and tool messages left out) and answers
   the facts worth keeping, each with the numbers of the messages it came from
   (:mod:`memnets.memory.extraction_prompts` holds every prompt). Each fact keeps those messages'
   ids (a message's ``"id"``, else its position in the call) in its metadata, ``source_messages``.
2. **Decisions.** ``decide="llm"``: each fact is compared with its nearest memories of the user
   (``search``, the one re-rank rule) and the LLM decides, per fact, ADD, UPDATE (an existing memory
   gets the merged text), DELETE (an existing memory goes) or NONE. ``decide="rules"``: no second
   call; every fact is added and memnets' own consistency rule (:func:`memnets.memory.consistency.classify`)
   says whether it is new, changes a memory of the user (its old text kept in ``history``) or says
   what one says already. With either, a write goes through the one write path
   (``AgentMemory.add``/``update``/``delete``, :mod:`memnets.memory.writes`), which still applies
   that rule, so the event reported is what was written.
3. **All or nothing on the LLM's side.** Both answers are read and checked before anything is
   written: an LLM that fails, answers after ``deadline`` seconds, or answers something that is not
   the JSON asked for (an unknown fact or memory number, an event that is not one of the four, two
   decisions about one memory, more than :data:`MAX_FACTS` facts, a text to write that the write
   path refuses: a lone surrogate, over its length) raises :class:`ExtractionError` saying why, and
   nothing of that call is stored.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from memnets.llm import LLM, LLMError, LLMTimeoutError, complete_within
from memnets.memory import extraction_prompts as prompts
from memnets.memory.messages import CONVERSATION_ROLES, parse_messages
from memnets.memory.texts import check_text, check_tokens
from memnets.records import Memory

Event = Literal["ADD", "UPDATE", "DELETE", "NONE"]
EVENTS: tuple[Event, ...] = ("ADD", "UPDATE", "DELETE", "NONE")
OUTCOME_EVENTS: dict[str, Event] = {"added": "ADD", "updated": "UPDATE", "unchanged": "NONE"}
DECIDERS = ("llm", "rules")
SOURCE_MESSAGES = "source_messages"  # metadata field of a fact: the ids of the messages it came from
MAX_FACTS = 100  # the most facts one answer may list: each costs a search and a write
_FENCE = re.compile(r"^```[a-zA-Z]*+\s*+\n?(.*?)\n?```$", re.S)  # possessive: linear (was quadratic on "```   ...")


class ExtractionError(RuntimeError):
    """The LLM's answer could not be used (``reason``: "failed", "late" or "malformed"); nothing was stored."""

    def __init__(self, reason: str, message: str, answer: str | None = None):
        super().__init__(f"{message}; nothing of this call was stored")
        self.reason = reason
        self.answer = answer


@dataclass(frozen=True)
class Fact:
    """A fact the LLM found, with the ids of the messages it came from."""

    text: str
    messages: tuple[str, ...]


@dataclass(frozen=True)
class Decision:
    """What to do with a fact: ``event``, the existing memory an UPDATE or DELETE is about, an UPDATE's text."""

    fact: Fact
    event: Event
    target: Memory | None = None
    text: str | None = None


@dataclass(frozen=True)
class Change:
    """What a decision did: ``event`` as written, the memory stored (or removed, DELETE; None for a bare NONE),
    the text an UPDATE replaced."""

    fact: Fact
    event: Event
    memory: Memory | None
    previous: str | None = None


class FactWriter(Protocol):
    """The writes and reads extraction needs: :class:`memnets.AgentMemory`'s (the one write path)."""

    def add(
        self, text: str, *, user: str, metadata: dict | None = None, agent=None, session=None, **expiry
    ) -> Memory: ...

    def update(
        self, id: str, text: str | None = None, *, user: str, metadata=None, merge_metadata=False, **expiry
    ) -> Memory: ...

    def delete(self, id: str, *, user: str) -> bool: ...

    def search(self, query: str, *, user: str, k: int = 5, filters=None) -> list: ...

    def history(self, id: str, *, user: str) -> list[Memory]: ...


def message_lines(messages) -> tuple[list[tuple[str, str]], list[str]]:
    """(speaker, text) of each message the fact call reads, and their ids (given ``"id"``, else the position).

    Messages are read as ``add(messages=...)`` reads them (:func:`memnets.memory.messages.parse_messages`:
    the same shape, the same errors naming ``messages[i].field``); system and tool messages and those
    without text are left out.
    """
    lines, ids = [], []
    for n, message in enumerate(parse_messages(messages)):
        if message.role in CONVERSATION_ROLES and message.text:
            lines.append((message.speaker, message.text))
            ids.append(message.id if message.id is not None else str(n))
    return lines, ids


class Extraction:
    """Facts from messages and their decisions by ``llm`` (see the module docstring).

    Args:
        llm: the model (:class:`~memnets.llm.OpenAIChatLLM` for an OpenAI-compatible server).
        decide: "llm" (a second call decides per fact) or "rules" (memnets' consistency rule).
        neighbours: how many nearest memories each fact is compared with (``decide="llm"``).
        deadline: seconds one :meth:`add` may wait for the LLM in all: each call is given what is left (an
            :class:`~memnets.llm.OpenAIChatLLM` stops waiting then), and a later answer is refused.
        max_new_tokens: the answer length of each call.
    """

    def __init__(
        self,
        llm: LLM,
        *,
        decide: str = "llm",
        neighbours: int = 5,
        deadline: float | None = None,
        max_new_tokens: int = 1024,
    ):
        if decide not in DECIDERS:
            raise ValueError(f"Extraction: decide must be one of {DECIDERS}, got {decide!r}")
        if deadline is not None and not deadline > 0:
            raise ValueError(f"Extraction: deadline must be a positive number of seconds, got {deadline!r}")
        self.llm = llm
        self.decide = decide
        self.neighbours = neighbours
        self.deadline = deadline
        self.max_new_tokens = max_new_tokens

    def add(
        self,
        memory: FactWriter,
        messages: Sequence[Mapping[str, Any]],
        *,
        user: str,
        metadata: Mapping | None = None,
        agent: str | None = None,
        session: str | None = None,
        ttl=None,
    ) -> list[Change]:
        """Extract, decide, then write through ``memory``; one :class:`Change` per decision, in the facts' order.

        ``ttl`` (a timedelta or seconds, None: never): when what this call adds or updates expires."""
        started = time.monotonic()
        facts = self.facts(messages, started=started)
        decisions = self.decisions(memory, facts, user=user, agent=agent, session=session, started=started)
        for n, decision in enumerate(decisions):
            _check_writable(decision, n, getattr(memory, "encoder", None))
        expiry = {} if ttl is None else {"ttl": ttl}
        return [self._apply(memory, d, user, dict(metadata or {}), agent, session, expiry) for d in decisions]

    def facts(self, messages: Sequence[Mapping[str, Any]], *, started: float | None = None) -> list[Fact]:
        """The facts of ``messages`` (the first LLM call), checked."""
        lines, ids = message_lines(messages)
        if not lines:
            return []
        answer = self._ask("fact", prompts.FACTS_SYSTEM, prompts.facts_prompt(lines), started)
        items = _field(_json(answer, "fact"), "facts", answer)
        if len(items) > MAX_FACTS:
            raise _malformed(f"it lists {len(items)} facts, more than MAX_FACTS={MAX_FACTS}", answer)
        facts = []
        for n, item in enumerate(items):
            text = item.get("text") if isinstance(item, Mapping) else None
            numbers = item.get("messages") if isinstance(item, Mapping) else None
            if not isinstance(text, str) or not text.strip():
                raise _malformed(f"facts[{n}] has no 'text' string", answer)
            if not isinstance(numbers, list) or not numbers or not all(_index(i, len(ids)) for i in numbers):
                raise _malformed(f"facts[{n}]['messages'] must list message numbers in [0, {len(ids) - 1}]", answer)
            facts.append(Fact(text.strip(), tuple(dict.fromkeys(ids[i] for i in numbers))))
        return facts

    def decisions(
        self,
        memory: FactWriter,
        facts: Sequence[Fact],
        *,
        user: str,
        agent: str | None = None,
        session: str | None = None,
        started: float | None = None,
    ) -> list[Decision]:
        """One decision per fact: the second LLM call over the facts' nearest memories, or ADD each (``rules``)."""
        if self.decide == "rules" or not facts:
            return [Decision(fact, "ADD") for fact in facts]
        scope = {name: value for name, value in (("agent", agent), ("session", session)) if value is not None}
        near: dict[str, Memory] = {}
        for fact in facts:
            for hit in memory.search(fact.text, user=user, k=self.neighbours, filters=scope or None):
                near.setdefault(hit.memory.id, hit.memory)
        shown = list(near.values())
        prompt = prompts.decision_prompt([f.text for f in facts], [m.content for m in shown])
        answer = self._ask("decision", prompts.DECISION_SYSTEM, prompt, started)
        items = _field(_json(answer, "decision"), "decisions", answer)
        decided: dict[int, Decision] = {}
        targeted: set[int] = set()
        for n, item in enumerate(items):
            if not isinstance(item, Mapping) or not _index(item.get("fact"), len(facts)):
                raise _malformed(f"decisions[{n}] has no fact number in [0, {len(facts) - 1}]", answer)
            event = str(item.get("event", "")).upper().replace("NOOP", "NONE")
            if event not in EVENTS:
                raise _malformed(f"decisions[{n}]['event'] is {item.get('event')!r}, not one of {EVENTS}", answer)
            if item["fact"] in decided:
                raise _malformed(f"decisions[{n}] decides fact {item['fact']} a second time", answer)
            target = text = None
            if event in ("UPDATE", "DELETE"):
                number = item.get("memory")
                if not _index(number, len(shown)) or number in targeted:
                    raise _malformed(
                        f"decisions[{n}] ({event}) needs the number of an existing memory in [0, {len(shown) - 1}] "
                        "that no other decision changes",
                        answer,
                    )
                targeted.add(number)
                target = shown[number]
            if event == "UPDATE":
                text = item.get("text")
                if not isinstance(text, str) or not text.strip():
                    raise _malformed(f"decisions[{n}] (UPDATE) has no 'text' string", answer)
                text = text.strip()
            decided[item["fact"]] = Decision(facts[item["fact"]], event, target, text)
        missing = [n for n in range(len(facts)) if n not in decided]
        if missing:
            raise _malformed(f"no decision for facts {missing}", answer)
        return [decided[n] for n in range(len(facts))]

    def _ask(self, step: str, system: str, prompt: str, started: float | None) -> str:
        """The LLM's answer to one call, given what is left of the deadline (an LLM that takes a ``timeout``
        stops waiting then); its failure, or an answer past the deadline, is an ExtractionError."""
        left = (
            self.deadline - (time.monotonic() - started) if self.deadline is not None and started is not None else None
        )
        if left is not None and left <= 0:
            raise ExtractionError("late", f"the {self.deadline:g} s deadline passed before the LLM's {step} call")
        try:
            answer = complete_within(self.llm, prompt, seconds=left, system=system, max_new_tokens=self.max_new_tokens)
        except LLMError as error:
            late = isinstance(error, LLMTimeoutError)
            raise ExtractionError("late" if late else "failed", f"the LLM's {step} call failed: {error}") from error
        if left is not None and time.monotonic() - started > self.deadline:
            raise ExtractionError(
                "late", f"the LLM's {step} answer came after the {self.deadline:g} s deadline", answer
            )
        return answer

    def _apply(
        self, memory: FactWriter, decision: Decision, user: str, metadata: dict, agent, session, expiry: dict
    ) -> Change:
        fact, target = decision.fact, decision.target
        if decision.event == "ADD":
            metadata[SOURCE_MESSAGES] = list(fact.messages)
            stored = memory.add(fact.text, user=user, metadata=metadata, agent=agent, session=session, **expiry)
            event = OUTCOME_EVENTS[stored.outcome]
            previous = memory.history(stored.id, user=user)[-2].content if event == "UPDATE" else None
            return Change(fact, event, stored, previous)
        if decision.event == "UPDATE":
            sources = [*target.metadata.get(SOURCE_MESSAGES, []), *fact.messages]
            extra = {**metadata, SOURCE_MESSAGES: list(dict.fromkeys(sources))}
            stored = memory.update(target.id, decision.text, user=user, metadata=extra, merge_metadata=True, **expiry)
            return Change(fact, OUTCOME_EVENTS[stored.outcome], stored, target.content)
        if decision.event == "DELETE":
            memory.delete(target.id, user=user)
            return Change(fact, "DELETE", target)
        return Change(fact, "NONE", target)


def _check_writable(decision: Decision, n: int, encoder) -> None:
    """ExtractionError unless the text ``decision`` (that of fact ``n``) would write, an ADD's fact or an UPDATE's
    merged text, passes the write path's checks (:func:`~memnets.memory.texts.check_text`, and the tokenizer
    of ``encoder`` when the writer has one): all decisions are checked before the first is applied, so that a
    bad one cannot leave the earlier ones written (a DELETE applied, then an UPDATE refused)."""
    text = {"ADD": decision.fact.text, "UPDATE": decision.text}.get(decision.event)
    if text is None:
        return
    try:
        check_tokens(check_text(text, "text"), encoder)
    except (TypeError, ValueError) as error:  # InvalidMemoryError is a ValueError
        raise ExtractionError(
            "malformed",
            f"the LLM's answer is malformed: the decision for fact {n} ({decision.event}) has a text "
            f"the write path refuses: {error}",
        ) from error


def _index(value, size: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < size


def _malformed(what: str, answer: str) -> ExtractionError:
    return ExtractionError("malformed", f"the LLM's answer is malformed: {what} (answer: {answer!r:.300})", answer)


def _json(answer: str, step: str) -> dict:
    """The JSON object of an answer (a surrounding code fence is allowed)."""
    text = answer.strip()
    fenced = _FENCE.match(text)
    try:
        parsed = json.loads(fenced.group(1) if fenced else text)
    except json.JSONDecodeError as error:
        raise _malformed(f"the {step} answer is not JSON ({error})", answer) from error
    if not isinstance(parsed, dict):
        raise _malformed(f"the {step} answer is not a JSON object", answer)
    return parsed


def _field(parsed: dict, name: str, answer: str) -> list:
    if not isinstance(parsed.get(name), list):
        raise _malformed(f"no {name!r} list", answer)
    return parsed[name]


__all__ = ["Change", "Decision", "Extraction", "ExtractionError", "Fact", "FactWriter", "message_lines"]
