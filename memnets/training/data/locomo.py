"""Reader for LoCoMo (Maharana et al., ACL 2024; CC BY-NC 4.0, see data/locomo/README.md).

Turns a LoCoMo JSON file into typed conversations: sessions with their dates parsed, turns with
their image captions, QA items with normalised evidence ids, and observation facts. Evidence ids
that cannot be resolved to a turn are dropped and kept on the item (`dropped_evidence`), so that
nothing is lost silently; a malformed file raises `LocomoFormatError` naming the file, the sample
and the field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path

from memnets.text import lone_surrogate, turn_text
from memnets.training.data.location import find_data

CATEGORY_NAMES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}  # LoCoMo QA categories
DATE_FORMAT = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"
_SESSION_KEY = re.compile(r"session_(\d+)")
_DIA_ID = re.compile(r"D:?(\d+):(\d+)")


class DataFormatError(ValueError):
    """A conversation file (LoCoMo JSON or memnets JSONL) that does not follow its format."""


class LocomoFormatError(DataFormatError):
    """A LoCoMo file that does not follow the schema; the message names file, line, sample and field."""


@dataclass(frozen=True)
class Turn:
    """One dialogue turn: the unit of memory."""

    dia_id: str
    speaker: str
    text: str
    session: int
    t: datetime
    image_caption: str | None = None

    @property
    def said(self) -> str:
        """What the speaker said: the text, plus the photo's caption for image turns (a chat message's content)."""
        photo = f" [shares a photo of {self.image_caption}]" if self.image_caption else ""
        return f"{self.text}{photo}"

    @property
    def content(self) -> str:
        """The memory text: "{speaker}: {said}" (:attr:`said`)."""
        return turn_text(self.speaker, self.said)


@dataclass(frozen=True)
class Session:
    number: int
    t: datetime
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class QAItem:
    """A question with its evidence turns (normalised dia_ids) and the ids that did not resolve."""

    index: int
    question: str
    answer: str
    category: int
    evidence: tuple[str, ...]
    dropped_evidence: tuple[str, ...] = ()
    asked: datetime | None = None  # when the question is asked; None: after the last session (LoCoMo's case)


@dataclass(frozen=True)
class ObservationFact:
    """A generated fact about a speaker, tagged with the turn it came from."""

    speaker: str
    text: str
    dia_id: str
    session: int


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: tuple[Session, ...]
    qa: tuple[QAItem, ...]
    observations: tuple[ObservationFact, ...] = field(default=())
    dropped_observation_sources: tuple[str, ...] = field(default=())

    @cached_property
    def turns(self) -> tuple[Turn, ...]:
        """All turns in chronological order."""
        return tuple(turn for session in self.sessions for turn in session.turns)

    @cached_property
    def turn_index(self) -> dict[str, int]:
        """dia_id -> position in `turns`."""
        return {turn.dia_id: i for i, turn in enumerate(self.turns)}

    def turn(self, dia_id: str) -> Turn:
        return self.turns[self.turn_index[dia_id]]

    @property
    def dropped_evidence_count(self) -> int:
        return sum(len(item.dropped_evidence) for item in self.qa)


def memory_id(sample_id: str, dia_id: str) -> str:
    """The archive id of a LoCoMo turn, unique across conversations."""
    return f"{sample_id}/{dia_id}"


def split_evidence(raw: str) -> list[str]:
    """Normalise one evidence string into dia_ids.

    Splits on ';', ',' and whitespace, and rewrites the variants seen in LoCoMo: "D:11:26" -> "D11:26",
    "D30:05" -> "D30:5". Strings that are not dia_ids at all (e.g. "D") are returned unchanged so
    that the caller can count them as unresolvable.
    """
    ids = []
    for token in re.split(r"[;,\s]+", raw.strip()):
        if not token:
            continue
        match = _DIA_ID.fullmatch(token)
        ids.append(f"D{int(match[1])}:{int(match[2])}" if match else token)
    return ids


def _require(mapping: dict, key: str, kind: type, where: str):
    if not isinstance(mapping, dict) or key not in mapping:
        raise LocomoFormatError(f"{where}: missing field {key!r}")
    value = mapping[key]
    if not isinstance(value, kind):
        raise LocomoFormatError(f"{where}: field {key!r} should be {kind.__name__}, got {type(value).__name__}")
    surrogate = lone_surrogate(value) if isinstance(value, str) else None
    if surrogate is not None:
        raise LocomoFormatError(f"{where}: field {key!r} holds a lone surrogate at position {surrogate}")
    return value


def _parse_date(value: str, where: str) -> datetime:
    try:
        return datetime.strptime(value.strip(), DATE_FORMAT)
    except ValueError as error:
        raise LocomoFormatError(
            f"{where}: cannot parse date {value!r} (expected like '1:56 pm on 8 May, 2023')"
        ) from error


def _session_keys(conversation: dict, where: str) -> list[tuple[int, str]]:
    """(number, key) of each ``session_<n>`` list, by number. Keys that would be read as the same
    session (``session_01`` beside ``session_1``) and numbers in other than ASCII digits
    (``session_١``, which int() reads as 1) are errors naming them."""
    by_number: dict[int, str] = {}
    for key in conversation:
        match = _SESSION_KEY.fullmatch(key)
        if match is None:
            continue
        if not match[1].isascii():
            raise LocomoFormatError(f"{where}: field {key!r}: a session number must be written in ASCII digits")
        number = int(match[1])
        if number in by_number:
            raise LocomoFormatError(f"{where}: fields {by_number[number]!r} and {key!r} are both session {number}")
        by_number[number] = key
    return sorted(by_number.items())


def _parse_sessions(conversation: dict, where: str) -> tuple[Session, ...]:
    sessions, seen = [], {}
    for number, field_name in _session_keys(conversation, where):
        turns_raw = _require(conversation, field_name, list, where)
        t = _parse_date(
            _require(conversation, f"{field_name}_date_time", str, where), f"{where}, field {field_name}_date_time"
        )
        turns = []
        for k, raw in enumerate(turns_raw):
            turn_where = f"{where}, field {field_name}[{k}]"
            caption = raw.get("blip_caption") if isinstance(raw, dict) else None
            dia_id = _require(raw, "dia_id", str, turn_where)
            if dia_id in seen:  # two turns under one id: evidence would count twice (nDCG above 1)
                raise LocomoFormatError(f"{turn_where}: field 'dia_id' {dia_id!r} repeats {seen[dia_id]}")
            seen[dia_id] = f"{field_name}[{k}]"
            turns.append(
                Turn(
                    dia_id=dia_id,
                    speaker=_require(raw, "speaker", str, turn_where),
                    text=_require(raw, "text", str, turn_where),
                    session=number,
                    t=t,
                    image_caption=caption or None,
                )
            )
        sessions.append(Session(number=number, t=t, turns=tuple(turns)))
    if not sessions:
        raise LocomoFormatError(f"{where}: field 'conversation' has no session_<n> lists")
    return tuple(sessions)


def _parse_qa(items: list, known_ids: set[str], where: str) -> tuple[QAItem, ...]:
    parsed = []
    for index, raw in enumerate(items):
        item_where = f"{where}, field qa[{index}]"
        evidence_raw = _require(raw, "evidence", list, item_where)
        resolved, dropped = [], []
        for entry in evidence_raw:
            if not isinstance(entry, str):
                raise LocomoFormatError(f"{item_where}: evidence entries should be str, got {type(entry).__name__}")
            for dia_id in split_evidence(entry):
                target = resolved if dia_id in known_ids else dropped
                if dia_id not in target:
                    target.append(dia_id)
        answer = raw.get("answer", raw.get("adversarial_answer", ""))
        parsed.append(
            QAItem(
                index=index,
                question=_require(raw, "question", str, item_where),
                answer=str(answer),
                category=_require(raw, "category", int, item_where),
                evidence=tuple(resolved),
                dropped_evidence=tuple(dropped),
            )
        )
    return tuple(parsed)


def _parse_observations(
    raw: dict, known_ids: set[str], where: str
) -> tuple[tuple[ObservationFact, ...], tuple[str, ...]]:
    """The observation facts, one per resolvable source turn, and the source ids that did not resolve."""
    facts, dropped = [], []
    if not isinstance(raw, dict):
        raise LocomoFormatError(f"{where}: field 'observation' should be dict, got {type(raw).__name__}")
    for key, by_speaker in raw.items():
        match = re.fullmatch(r"session_(\d+)_observation", key)
        if match is None or not isinstance(by_speaker, dict):
            raise LocomoFormatError(
                f"{where}, field observation.{key}: expected session_<n>_observation -> {{speaker: [[fact, dia_id], ...]}}"
            )
        for speaker, entries in by_speaker.items():
            if not isinstance(entries, list):
                raise LocomoFormatError(
                    f"{where}, field observation.{key}.{speaker}: should be a list of [fact, dia_id], "
                    f"got {type(entries).__name__}"
                )
            for k, entry in enumerate(entries):
                if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)):
                    raise LocomoFormatError(f"{where}, field observation.{key}.{speaker}[{k}]: expected [fact, dia_id]")
                text, sources = entry
                if not all(isinstance(source, str) for source in (sources if isinstance(sources, list) else [sources])):
                    raise LocomoFormatError(
                        f"{where}, field observation.{key}.{speaker}[{k}]: the source should be a dia_id or a list of them"
                    )
                # A few facts cite several turns (a list, or "D4:17, D4:19"): one fact per source.
                for source in sources if isinstance(sources, list) else [sources]:
                    for dia_id in split_evidence(str(source)):
                        if dia_id in known_ids:
                            facts.append(
                                ObservationFact(speaker=speaker, text=str(text), dia_id=dia_id, session=int(match[1]))
                            )
                        else:
                            dropped.append(dia_id)
    return tuple(facts), tuple(dropped)


def parse_sample(sample: dict, where: str) -> Conversation:
    """One LoCoMo sample (dict) -> Conversation; `where` names the file for error messages."""
    sample_id = _require(sample, "sample_id", str, where)
    where = f"{where}, sample {sample_id}"
    conversation = _require(sample, "conversation", dict, where)
    sessions = _parse_sessions(conversation, where)
    known_ids = {turn.dia_id for session in sessions for turn in session.turns}
    observations, dropped_sources = _parse_observations(sample.get("observation") or {}, known_ids, where)
    return Conversation(
        sample_id=sample_id,
        speaker_a=_require(conversation, "speaker_a", str, where),
        speaker_b=_require(conversation, "speaker_b", str, where),
        sessions=sessions,
        qa=_parse_qa(_require(sample, "qa", list, where), known_ids, where),
        observations=observations,
        dropped_observation_sources=dropped_sources,
    )


def _samples_with_lines(text: str, path: Path) -> list[tuple[dict, int]]:
    """The top-level list's items with the line each starts on (for error messages)."""
    decoder = json.JSONDecoder()
    position = len(text) - len(text.lstrip())
    if text[position : position + 1] != "[":
        try:  # not a list: say what it is, or why it is not JSON
            kind = type(json.loads(text)).__name__
        except json.JSONDecodeError as error:
            raise LocomoFormatError(f"{path}: not valid JSON ({error})") from error
        except RecursionError:
            raise LocomoFormatError(f"{path}: nested too deeply to be LoCoMo JSON") from None
        raise LocomoFormatError(f"{path}: expected a JSON list of samples, got {kind}")
    items, position = [], position + 1
    line, counted = 1, 0  # the line of text[counted], advanced sample by sample (not recounted from the start)
    while True:
        position = _skip_space(text, position)
        if text.startswith("]", position):
            if _skip_space(text, position + 1) != len(text):
                raise LocomoFormatError(
                    f"{path}: not valid JSON (extra data after the list, line {_line(text, position + 1)})"
                )
            return items
        if items:
            if not text.startswith(",", position):
                raise LocomoFormatError(f"{path}: not valid JSON (expected ',' or ']' at line {_line(text, position)})")
            position = _skip_space(text, position + 1)
        try:
            item, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError as error:
            raise LocomoFormatError(f"{path}: not valid JSON ({error})") from error
        except RecursionError:
            raise LocomoFormatError(
                f"{path}: item {len(items)} (line {_line(text, position)}) is nested too deeply to be a sample"
            ) from None
        line, counted = line + text.count("\n", counted, position), position
        items.append((item, line))
        position = end


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position


def _line(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def select_conversations(
    conversations: list[Conversation], sample_ids, path: Path, error: type[DataFormatError] = DataFormatError
) -> list[Conversation]:
    """Keep only ``sample_ids`` (None = all), in the file's order; an unknown id raises ``error`` naming the file."""
    if sample_ids is None:
        return conversations
    by_id = {c.sample_id: c for c in conversations}
    missing = [s for s in sample_ids if s not in by_id]
    if missing:
        raise error(f"{path}: no conversation(s) {missing}; the file has {sorted(by_id)}")
    wanted = set(sample_ids)
    return [c for c in conversations if c.sample_id in wanted]


def load_locomo(
    path: str | Path | None = None, sample_ids: list[str] | tuple[str, ...] | None = None
) -> list[Conversation]:
    """Read a LoCoMo JSON file (None: the data file `find_data` finds); optionally keep only `sample_ids`.

    Conversations stay in the file's order. Raises FileNotFoundError for a missing file and LocomoFormatError for bad JSON or schema; schema
    errors name the line where the sample starts and the field.
    """
    path = find_data(path)
    samples = _samples_with_lines(path.read_text(encoding="utf-8"), path)
    conversations, seen = [], {}
    for i, (sample, line) in enumerate(samples):
        where = f"{path}, item {i} (line {line})"
        conversation = parse_sample(sample, where)
        if conversation.sample_id in seen:  # its questions would be counted twice
            raise LocomoFormatError(
                f"{where}: field 'sample_id' {conversation.sample_id!r} repeats {seen[conversation.sample_id]}"
            )
        seen[conversation.sample_id] = f"item {i} (line {line})"
        conversations.append(conversation)
    return select_conversations(conversations, sample_ids, path, LocomoFormatError)
