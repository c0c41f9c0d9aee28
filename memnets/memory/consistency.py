"""The write path's consistency rule (step 2 of :mod:`memnets.memory.writes`): whether a new text is new.

:func:`classify` takes a new text (without an id) against the user's nearest memories of its kind: *unchanged*
(it says what one of them says: equal after :func:`normalise`, or a near match by the same speaker whose
:func:`facts` are the same), *updated* (a near match whose facts differ, or the same sentence :func:`frame` with
other names), or *added*; :func:`said_again` makes a stale fact said again after its end an update. An add keyed
by an existing id is *unchanged* when the record states the same (:func:`same_record`, after :func:`restated` gives
it the memory's validity), else *updated*; it must keep the memory's scope (:func:`check_same_scope`). The rule, its
figures and its examples are in memnets.memory.writes's docstring and docs/memory.md.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from memnets.argerrors import ArgumentValueError
from memnets.records import Memory, Outcome
from memnets.text import SEPARATOR, SPEAKER_PREFIX_MAX, strip_speaker

_NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred "
    "thousand million billion first second third fourth fifth sixth seventh eighth ninth tenth dozen "
    "half once twice"
).split()
_TIME_WORDS = (
    "january february march april june july august september october november december "
    "monday tuesday wednesday thursday friday saturday sunday weekend today tomorrow yesterday tonight "
    "morning afternoon evening night noon midnight am pm a.m. p.m. last next ago"
).split()
_NEGATIONS = "not no never none nobody nothing nowhere neither nor without cannot".split()
_FACT_WORDS = frozenset(_NUMBER_WORDS + _TIME_WORDS + _NEGATIONS)
_TOKEN = re.compile(r"\d+(?:[.,:/\-]\d+)*|[^\W\d_]+(?:['’][^\W\d_]+)*|[.!?]|[^\w\s.!?]+")


def normalise(text: str) -> str:
    """The text compared for equality: Unicode NFKC, case-folded, runs of whitespace as one space, stripped."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def facts(text: str) -> tuple[str, ...]:
    """The parts of a text that make it a different statement when they change, in order.

    Numbers (with their separators: ``10:30``, ``2024-03-01``, ``555-1234``, ``3.5``), number words,
    months, weekdays and relative times (``today``, ``tomorrow``, ``pm``, ...), negations (``not``,
    ``never``, ``n't``, ...), names (capitalised words that do not start a sentence; ``I`` is no
    name), all case-folded, and symbols (Unicode's S categories: emoji, stars, currency signs, ``<``;
    each run of them one fact: "here 😀" and "here 😭" say different things, which a tokenizer that reads both
    as one unknown token cannot tell). A ``"{speaker}: "`` prefix is not part of them (:func:`speaker` compares it).
    """
    return _parse(text)[0]


def frame(text: str) -> tuple[str, ...]:
    """The words around a text's :func:`facts`, case-folded, each fact as :data:`FACT_SLOT`: its sentence frame.

    Two texts with one frame say the same sentence about possibly other facts ("a puppy named Rex" /
    "a puppy named Max"): a changed name moves the cosine far more than a changed number (0.78 and
    0.54 with all-MiniLM-L6-v2, below any safe near-match threshold), so :func:`classify` matches
    frames as well as cosines for a change of names.
    """
    return _parse(text)[1]


FACT_SLOT = "\x00"  # a fact's place in a frame (no token of a text is this)
MIN_FRAME_WORDS = 3  # a frame match needs this many words besides the facts ("Bye Nate!" / "Bye Omar!" has one)


def _parse(text: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[bool, ...]]:
    """(:func:`facts`, :func:`frame`, which facts are names) of a text, in one pass over its tokens."""
    found: list[str] = []
    words: list[str] = []
    names: list[bool] = []
    sentence_start = True
    for token in _TOKEN.findall(unicodedata.normalize("NFKC", strip_speaker(text))):
        if token in ".!?":
            sentence_start = True
            words.append(token)
            continue
        if not token[0].isalnum():  # a run of other characters: its symbols are a fact, punctuation is nothing
            symbols = "".join(c for c in token if unicodedata.category(c).startswith("S"))
            if symbols:
                found.append(symbols)
                words.append(FACT_SLOT)
                names.append(False)
            continue
        word = token.casefold()
        if word.endswith(("n't", "n’t")):
            words.append(word[:-3])  # "don't": "do" is in the frame, the negation is a fact
            word = "not"
        name = token[0].isupper() and not sentence_start and token != "I" and word not in _FACT_WORDS
        if token[0].isdigit() or word in _FACT_WORDS or name:
            found.append(word)
            words.append(FACT_SLOT)
            names.append(name)
        else:
            words.append(word)
        sentence_start = False
    return tuple(found), tuple(words), tuple(names)


def _may_share_frame(text: str, frame_words: set[str]) -> bool:
    """Whether ``text`` holds every word of a frame as a substring: a cheap test that :func:`classify`
    runs before the full :func:`_parse` of a candidate (most near neighbours fail it). Never false for
    a text whose frame has those words, since a frame's words are case-folded pieces of its
    NFKC-normalised text and case folding works character by character."""
    folded = unicodedata.normalize("NFKC", strip_speaker(text)).casefold()
    return all(word in folded for word in frame_words)


def speaker(memory: Memory) -> tuple[str | None, str | None]:
    """Who says a memory: its ``agent`` field and the ``"{speaker}: "`` prefix of its text (see :mod:`memnets.text`)."""
    head = memory.content[:SPEAKER_PREFIX_MAX]
    prefix = memory.content.split(SEPARATOR, 1)[0].strip().casefold() if SEPARATOR in head else None
    return memory.agent, prefix


def same_scope(a: Memory, b: Memory) -> bool:
    """Whether two memories of a user share their scope (agent and session).

    A memory of another agent or session is never the one a new memory repeats or updates: each
    scope keeps its own statements, so deleting one scope (``delete_all(agent=...)``) takes nothing
    another scope said, and a token narrowed to one agent never sees or changes another's memory.
    """
    return a.agent == b.agent and a.session == b.session


def classify(
    memory: Memory, candidates: Sequence[tuple[Memory, float]], threshold: float | None
) -> tuple[Outcome, Memory | None]:
    """What adding ``memory`` (without an id) does, against ``candidates`` (memory, cosine), best first.

    ("unchanged", the memory that says the same), ("updated", the memory it changes) or
    ("added", None); see the module docstring. ``threshold`` None turns the check off (always added).
    """
    if threshold is None:
        return "added", None
    text = normalise(memory.content)
    same = [
        (c, s)
        for c, s in candidates
        if c.kind == memory.kind and c.superseded_by is None and c.id != memory.id and same_scope(c, memory)
    ]
    for candidate, _ in same:
        if normalise(candidate.content) == text:
            return said_again(candidate, memory), candidate
    said_by = speaker(memory)
    near = [c for c, s in same if s >= threshold and speaker(c) == said_by]
    stated, shape, names = _parse(memory.content)
    for candidate in near:
        if facts(candidate.content) == stated:
            return said_again(candidate, memory), candidate
    if near:
        return "updated", near[0]
    if sum(word != FACT_SLOT and word not in ".!?" for word in shape) < MIN_FRAME_WORDS:
        return "added", None
    frame_words = {word for word in shape if word != FACT_SLOT and word not in ".!?"}
    for candidate, _ in same:  # the same sentence with other names, however far its cosine
        if speaker(candidate) != said_by or not _may_share_frame(candidate.content, frame_words):
            continue
        their, their_shape, their_names = _parse(candidate.content)
        if their_shape != shape:
            continue
        changed = [n for n, (a, b) in enumerate(zip(stated, their)) if a != b]
        if not changed:
            return said_again(candidate, memory), candidate
        if all(names[n] and their_names[n] for n in changed):
            return "updated", candidate
    return "added", None


def check_same_scope(existing: Memory, new: Memory, what: str, field: str) -> None:
    """ValueError naming ``field`` unless ``new`` (a next version of ``existing``, or what replaces it) is of its scope
    (:func:`same_scope`): a memory's versions keep one scope, so deleting a scope takes every one of them, and a token
    narrowed to one agent reads no history of another's."""
    if not same_scope(existing, new):
        raise ArgumentValueError(
            f"add: {what} is a memory of agent {existing.agent!r}, session {existing.session!r}; this one's is agent "
            f"{new.agent!r}, session {new.session!r} (a memory's versions keep its scope, which "
            "delete_all(agent=..., session=...) takes whole)",
            field=field,
        )


def said_again(said: Memory, memory: Memory) -> Outcome:
    """What ``memory`` does where ``said`` states it already: "unchanged", or "updated" where ``said``'s fact had
    ended before ``memory`` holds from (a stale fact said again holds again: a new version, valid from then; it had
    been taken for a repeat, and the fact that ended it stayed first)."""
    return "updated" if said.valid_to is not None and said.valid_to <= memory.valid_from else "unchanged"


VALIDITY = (
    "valid_from",
    "valid_to",
    "invalidated_by",
    "invalidation_score",
    "likely_replaced_by",
    "likely_replaced_score",
)


def restated(current: Memory, new: Memory) -> Memory:
    """``new``, keyed by ``current``'s id, with ``current``'s validity (:data:`VALIDITY`: when it began, an end, the
    judge's links) where it says ``current``'s text and says nothing of its validity (no end, no link, no start before
    ``current``'s): a statement written again under its id (a chat history sent whole each turn, a LangGraph put of
    the same value) reopens nothing. A new text is judged afresh; a record that carries an end or a link (an export
    read back), or a backdated statement, keeps its own."""
    decided = new.valid_to is not None or new.invalidated_by is not None or new.likely_replaced_by is not None
    if new.content != current.content or decided or new.valid_from < current.valid_from:
        return new
    return new.replace(**{name: getattr(current, name) for name in VALIDITY})


def same_record(current: Memory, new: Memory) -> bool:
    """Whether ``new`` (keyed by ``current``'s id) states what ``current`` does: text and every field but times."""
    fields = (
        "content",
        "kind",
        "importance",
        "metadata",
        "agent",
        "action",
        "objects",
        "location",
        "links",
        "session",
        "ttl",
        "valid_to",
        "invalidated_by",
        "likely_replaced_by",
    )
    return all(getattr(current, name) == getattr(new, name) for name in fields)


__all__ = [
    "FACT_SLOT",
    "MIN_FRAME_WORDS",
    "VALIDITY",
    "check_same_scope",
    "classify",
    "facts",
    "frame",
    "normalise",
    "restated",
    "said_again",
    "same_record",
    "same_scope",
    "speaker",
]
