"""Reader for memnets' JSONL conversation format: a user's own conversations, one per line.

LoCoMo's JSON (``memnets.training.data.locomo``) is one big list with numbered ``session_<n>`` keys; logs of
an agent are easier to write as JSON Lines, one conversation per line::

    {"id": "maya-2024-03",
     "sessions": [{"time": "2024-03-01T09:30:00",
                   "turns": [{"id": "s1-1", "speaker": "Maya", "text": "I start at the bakery on Monday."},
                             {"id": "s1-2", "speaker": "Agent", "text": "Good luck!"}]}],
     "questions": [{"question": "Where does Maya work?", "evidence": ["s1-1"], "answer": "a bakery",
                    "category": "single-hop"}],
     "observations": [{"text": "Maya works at a bakery.", "evidence": ["s1-1"]}]}

Fields (docs/data.md has the full description):

- ``id`` (str): the conversation id, unique in the file; the data config's splits name these ids.
- ``sessions`` (non-empty list, in chronological order): ``time`` (ISO 8601; without a zone it is
  UTC) and ``turns``, each with ``id`` (str, unique in the conversation), ``speaker``, ``text``,
  and optionally ``image_caption`` and ``time`` (defaults to the session's).
- ``questions`` (list, may be empty): ``question``, ``evidence`` (turn ids; an empty list is allowed
  and such a question is left out of retrieval metrics), optionally ``answer`` and ``category``
  (1-5 or its name: multi-hop, temporal, open-domain, single-hop, adversarial; default 4) and
  ``time`` (when it is asked, ISO 8601; default: after the last session): the evaluations hide the
  sessions that start after it.
- ``observations`` (optional list): facts about the speakers with the turn ids they come from; each
  becomes a (fact -> turn) training pair, as LoCoMo's observations do.

Everything is checked: an unknown key, a missing or mistyped field, a duplicate id, an evidence id
that names no turn or an unparseable time raises :class:`JsonlFormatError` naming the file, the
line, the conversation and the field (e.g. ``sessions[0].turns[2].speaker``).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from memnets.text import lone_surrogate
from memnets.timeutil import as_utc
from memnets.training.data.locomo import (
    CATEGORY_NAMES,
    Conversation,
    DataFormatError,
    ObservationFact,
    QAItem,
    Session,
    Turn,
)

CATEGORY_IDS = {name: category for category, name in CATEGORY_NAMES.items()}
DEFAULT_CATEGORY = 4
_KEYS = {
    "conversation": ({"id", "sessions"}, {"questions", "observations"}),
    "session": ({"time", "turns"}, set()),
    "turn": ({"id", "speaker", "text"}, {"image_caption", "time"}),
    "question": ({"question", "evidence"}, {"answer", "category", "time"}),
    "observation": ({"text", "evidence"}, {"speaker"}),
}


class JsonlFormatError(DataFormatError):
    """A JSONL conversation file that does not follow the format; the message names file, line and field."""


class _Line:
    """Error context of one line: ``fail(field, problem)`` raises with file, line and conversation."""

    def __init__(self, path: Path, number: int):
        self.path, self.number, self.conversation = path, number, None

    def fail(self, field: str, problem: str):
        conversation = f", conversation {self.conversation!r}" if self.conversation else ""
        where = f", field {field}" if field else ""
        raise JsonlFormatError(f"{self.path}, line {self.number}{conversation}{where}: {problem}")

    def obj(self, value, kind: str, field: str) -> dict:
        """``value`` checked to be an object with the required keys of ``kind`` and no unknown ones."""
        if not isinstance(value, dict):
            self.fail(field, f"expected a JSON object, got {_type(value)}")
        required, optional = _KEYS[kind]
        missing = sorted(required - value.keys())
        if missing:
            self.fail(field, f"missing key(s) {missing}")
        unknown = sorted(value.keys() - required - optional)
        if unknown:
            self.fail(field, f"unknown key(s) {unknown}; a {kind} has {sorted(required | optional)}")
        return value

    def string(self, mapping: dict, key: str, field: str, empty: bool = False) -> str:
        value = mapping[key]
        if not isinstance(value, str):
            self.fail(f"{field}.{key}".lstrip("."), f"should be a string, got {_type(value)}")
        if not empty and not value.strip():
            self.fail(f"{field}.{key}".lstrip("."), "must not be empty")
        surrogate = lone_surrogate(value)
        if surrogate is not None:
            self.fail(f"{field}.{key}".lstrip("."), f"holds a lone surrogate at position {surrogate}")
        return value

    def items(self, mapping: dict, key: str, field: str) -> list:
        value = mapping[key]
        if not isinstance(value, list):
            self.fail(f"{field}.{key}".lstrip("."), f"should be a list, got {_type(value)}")
        return value

    def time(self, mapping: dict, key: str, field: str) -> datetime:
        value = self.string(mapping, key, field)
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            self.fail(f"{field}.{key}", f"cannot parse time {value!r} (expected ISO 8601, like '2024-03-01T09:30:00')")
        try:
            return as_utc(moment)
        except ValueError:  # e.g. 9999-12-31T23:59:59-23:59, past year 9999 in UTC
            self.fail(f"{field}.{key}", f"time {value!r} is out of range in UTC (years 1-9999)")

    def ids(self, value, known: dict[str, int], field: str) -> tuple[str, ...]:
        """Evidence: a turn id or a list of them, each naming a turn of this conversation."""
        entries = [value] if isinstance(value, str) else value
        if not isinstance(entries, list):
            self.fail(field, f"should be a turn id or a list of turn ids, got {_type(value)}")
        result = []
        for k, entry in enumerate(entries):
            if not isinstance(entry, str):
                self.fail(f"{field}[{k}]", f"should be a turn id (string), got {_type(entry)}")
            if entry not in known:
                self.fail(f"{field}[{k}]", f"names no turn of this conversation: {entry!r}")
            if entry not in result:
                result.append(entry)
        return tuple(result)


def _type(value) -> str:
    return "null" if value is None else type(value).__name__


def _category(value, line: _Line, field: str) -> int:
    if isinstance(value, str) and value in CATEGORY_IDS:
        return CATEGORY_IDS[value]
    if isinstance(value, int) and not isinstance(value, bool) and value in CATEGORY_IDS.values():
        return value
    line.fail(field, f"should be 1-5 or one of {sorted(CATEGORY_IDS)}, got {value!r}")


def parse_conversation(record, line: _Line) -> Conversation:
    """One decoded line -> Conversation; ``line`` names file and line in errors."""
    record = line.obj(record, "conversation", "")
    line.conversation = line.string(record, "id", "")
    sessions, turn_session, previous = [], {}, None  # turn_session: turn id -> session number
    raw_sessions = line.items(record, "sessions", "")
    if not raw_sessions:
        line.fail("sessions", "must have at least one session")
    for s, raw_session in enumerate(raw_sessions):
        where = f"sessions[{s}]"
        raw_session = line.obj(raw_session, "session", where)
        t = line.time(raw_session, "time", where)
        if previous is not None and t < previous:
            line.fail(
                f"{where}.time",
                f"{raw_session['time']!r} is earlier than the session before; sessions go in chronological order",
            )
        previous = t
        turns = []
        for k, raw_turn in enumerate(line.items(raw_session, "turns", where)):
            turn_where = f"{where}.turns[{k}]"
            raw_turn = line.obj(raw_turn, "turn", turn_where)
            turn_id = line.string(raw_turn, "id", turn_where)
            if turn_id in turn_session:
                line.fail(f"{turn_where}.id", f"duplicate turn id {turn_id!r}")
            turn_session[turn_id] = s + 1
            caption = (
                line.string(raw_turn, "image_caption", turn_where, empty=True) if "image_caption" in raw_turn else None
            )
            turns.append(
                Turn(
                    dia_id=turn_id,
                    speaker=line.string(raw_turn, "speaker", turn_where),
                    text=line.string(raw_turn, "text", turn_where, empty=True),
                    session=s + 1,
                    t=line.time(raw_turn, "time", turn_where) if "time" in raw_turn else t,
                    image_caption=caption or None,
                )
            )
        sessions.append(Session(number=s + 1, t=t, turns=tuple(turns)))
    if not turn_session:
        line.fail("sessions", "no session has any turn")

    qa = []
    for q, raw in enumerate(line.items(record, "questions", "") if "questions" in record else []):
        where = f"questions[{q}]"
        raw = line.obj(raw, "question", where)
        answer = raw.get("answer", "")
        if not isinstance(answer, (str, int, float)) or isinstance(answer, bool):
            line.fail(f"{where}.answer", f"should be a string or a number, got {_type(answer)}")
        qa.append(
            QAItem(
                index=q,
                question=line.string(raw, "question", where),
                answer=str(answer),
                category=_category(raw["category"], line, f"{where}.category")
                if "category" in raw
                else DEFAULT_CATEGORY,
                evidence=line.ids(raw["evidence"], turn_session, f"{where}.evidence"),
                asked=line.time(raw, "time", where) if "time" in raw else None,
            )
        )

    speakers = list(dict.fromkeys(turn.speaker for session in sessions for turn in session.turns))
    observations = []
    for o, raw in enumerate(line.items(record, "observations", "") if "observations" in record else []):
        where = f"observations[{o}]"
        raw = line.obj(raw, "observation", where)
        text = line.string(raw, "text", where)
        speaker = line.string(raw, "speaker", where) if "speaker" in raw else ""
        for turn_id in line.ids(raw["evidence"], turn_session, f"{where}.evidence"):
            observations.append(
                ObservationFact(speaker=speaker, text=text, dia_id=turn_id, session=turn_session[turn_id])
            )
    return Conversation(
        sample_id=line.conversation,
        speaker_a=speakers[0],
        speaker_b=speakers[1] if len(speakers) > 1 else "",
        sessions=tuple(sessions),
        qa=tuple(qa),
        observations=tuple(observations),
    )


def load_jsonl(path: str | Path) -> list[Conversation]:
    """Read a JSONL conversation file (blank lines are skipped), in the file's order.

    Raises FileNotFoundError for a missing file and :class:`JsonlFormatError` for anything malformed.
    """
    path = Path(path)
    conversations, first_line = [], {}
    with path.open(encoding="utf-8") as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            line = _Line(path, number)
            try:
                record = json.loads(text)
            except json.JSONDecodeError as error:
                line.fail(
                    "", f"not valid JSON ({error.msg} at column {error.colno}); each line holds one whole conversation"
                )
            except RecursionError:
                line.fail("", "nested too deeply to be a conversation")
            conversation = parse_conversation(record, line)
            if conversation.sample_id in first_line:
                line.fail(
                    "id",
                    f"conversation id {conversation.sample_id!r} already used on line {first_line[conversation.sample_id]}",
                )
            first_line[conversation.sample_id] = number
            conversations.append(conversation)
    if not conversations:
        raise JsonlFormatError(f"{path}: no conversation in the file (it is empty)")
    return conversations
