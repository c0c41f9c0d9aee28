"""The ranker kind ``memory[:PACK]``: a conversation ranked by the product's own memory, write path and search.

The other rankers (:mod:`memnets.training.retrieval.rankers`) score a conversation's turns and sort them, so on a
changed fact ("I live in Leeds", later "I moved to York") the stale turn may rank first. This one
measures what an agent using memnets would get: each conversation is written, session by session, into
a fresh memory (``memnets.open`` in a temporary folder, ``supersession="auto"`` unless a judge is given)
as chat messages, through the one write path (consistency: a repeat is "unchanged", a near match that
changes a fact "updated"; supersession: a newer memory ends an older one's validity), and each query is
``memory.search(query, k=...)``, whose order never ranks an ended memory above the memory that ended it
(:mod:`memnets.memory.search`).

Each turn is one message: its speaker as ``name``, its time as ``time``, role ``"assistant"`` for
LongMemEval's assistant turns and ``"user"`` for every other speaker (a LoCoMo conversation's two people
are both the memory's user). Messages carry no ``id``: an add keyed by an id skips the consistency step
(:mod:`memnets.memory.writes`), which is part of what is measured. A turn is mapped to the memory its
message's outcome names (:class:`~memnets.memory.messages.MessageOutcome`, in message order); one that the
write path merged into another memory ("unchanged", or the older text of an "updated" one) takes that
memory's place in the ranking, after the turn whose words the memory holds now. A turn left unwritten (no
text) or beyond the search's results follows, in the conversation's order, so every turn is ranked once.

``memnets eval retrieval memory`` (LoCoMo) or ``memory:checkpoints/pack --data FILE`` (LongMemEval)
runs it; the kind is registered when :mod:`memnets.training.evaluation.retrieval` or
:mod:`memnets.training.evaluation.longmemeval` is imported. With ``-v`` each conversation's time and write
outcomes are logged.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from memnets.training.data.locomo import Conversation, Turn
from memnets.training.retrieval.rankers import register_ranker

logger = logging.getLogger(__name__)

USER = "user"  # the memory's one user: each conversation gets a memory of its own
ASSISTANT = "assistant"  # the speaker of LongMemEval's assistant turns, written with this role


class MemoryRanker:
    """Ranks a conversation's turns by writing them into a fresh memory and searching it (module docstring).

    Args:
        pack: a pack folder or a loaded :class:`~memnets.pack.Pack` (encoder, heads, scorer, and for
            ``"auto"`` its change-of-fact judge), or None for the plain memory on ``encoder``.
        encoder: the encoder of a memory without a pack (default: the bundled all-MiniLM-L6-v2); not
            together with ``pack``.
        judge: ``memnets.open``'s ``supersession``: ``"auto"`` (the pack's judge, else the shipped default),
            a :class:`~memnets.memory.supersession.SupersessionJudge`, or None (no supersession).

    ``encoder`` is public, so that an evaluation may wrap it in a cache
    (:func:`memnets.training.evaluation.longmemeval.cache_encodings`); the pack's memory then encodes with it too.

    Example::

        ranker = MemoryRanker()
        [ranking] = ranker.rank(conversation, ["Where does the user live?"])  # dia_ids, best first
    """

    def __init__(self, pack=None, *, encoder=None, judge="auto"):
        if pack is not None and encoder is not None:
            raise ValueError("MemoryRanker: give pack or encoder, not both (a pack's heads were fitted to its encoder)")
        if isinstance(pack, (str, os.PathLike)):
            from memnets.pack import load_pack

            pack = load_pack(pack)
        if pack is None and encoder is None:
            from memnets.nn.encoder import DEFAULT_BACKBONE, MemoryEncoder

            encoder = MemoryEncoder.from_pretrained(DEFAULT_BACKBONE)
        self.pack, self.judge = pack, judge
        self.encoder = pack.encoder if pack is not None else encoder

    def rank(self, conversation: Conversation, queries: Sequence[str]) -> list[list[str]]:
        """For each query, every dia_id of ``conversation`` once, best first, as its memory's search orders them."""
        from memnets.api import open as open_memory

        started = time.perf_counter()
        pack = None if self.pack is None else dataclasses.replace(self.pack, encoder=self.encoder)
        with tempfile.TemporaryDirectory(prefix="memnets-memory-ranker-") as folder:
            location = Path(folder) / "memory"
            with open_memory(
                location, pack=pack, encoder=self.encoder if pack is None else None, supersession=self.judge
            ) as memory:
                holders, outcomes = write_conversation(memory, conversation)
                written = time.perf_counter()
                ended = sum(m.invalidated_by is not None for m in memory.list_memories(user=USER, limit=None))
                rankings = [ranking(memory, conversation, holders, query) for query in queries]
        logger.info(
            "memory ranker: %s: %d turns written in %.2f s (%s; %d memories ended by a newer one), %d queries in %.2f s",
            conversation.sample_id,
            len(conversation.turns),
            written - started,
            ", ".join(f"{count} {outcome}" for outcome, count in sorted(outcomes.items())),
            ended,
            len(queries),
            time.perf_counter() - written,
        )
        return rankings


def message(turn: Turn) -> dict:
    """The chat message of ``turn``: its speaker as ``name``, its words (:attr:`~Turn.said`) and time; role
    ``"assistant"`` for LongMemEval's assistant turns, else ``"user"``."""
    role = ASSISTANT if turn.speaker == ASSISTANT else USER
    return {"role": role, "name": turn.speaker, "content": turn.said, "time": turn.t}


def write_conversation(memory, conversation: Conversation) -> tuple[dict[str, list[str]], Counter]:
    """Write ``conversation`` into ``memory`` as ``USER``'s messages, one ``add`` per session.

    Returns ({memory id: the dia_ids of the turns it holds, the one whose words it holds now first, then the
    others newest first}, the count of each write outcome). A turn that was not written (no text) is in none.
    """
    held: dict[str, list[str]] = {}  # memory id -> its turns in write order
    current: dict[str, str] = {}  # memory id -> the turn whose words it holds now
    outcomes: Counter = Counter()
    for session in conversation.sessions:
        if not session.turns:
            continue
        try:
            turns = [message(turn) for turn in session.turns]
            answers = memory.add(
                messages=turns, user=USER, roles=("user", "assistant")
            )  # LongMemEval cites assistant turns
        except (TypeError, ValueError) as error:
            raise ValueError(f"memory ranker: {conversation.sample_id}, session {session.number}: {error}") from error
        for turn, answer in zip(session.turns, answers):
            outcomes[answer.outcome] += 1
            if answer.memory is None:
                continue
            # an older version (a backdated update) is held by the current memory of its id
            holder = answer.memory.superseded_by or answer.memory.id
            held.setdefault(holder, []).append(turn.dia_id)
            if answer.outcome in ("added", "updated") and answer.memory.superseded_by is None:
                current[holder] = turn.dia_id
    holders = {}
    for holder, turns in held.items():
        head = current.get(holder, turns[0])
        holders[holder] = [head, *(turn for turn in reversed(turns) if turn != head)]
    return holders, outcomes


def ranking(memory, conversation: Conversation, holders: dict[str, list[str]], query: str) -> list[str]:
    """Every dia_id of ``conversation`` once: the turns of ``memory``'s search results for ``query`` in their
    order (``holders``: :func:`write_conversation`'s), then the rest in the conversation's order."""
    from memnets.memory.arguments import MAX_K

    ranked: list[str] = []
    if holders:  # k: every memory written (the search's limit is MAX_K; turns beyond it follow in order)
        for hit in memory.search(query, user=USER, k=min(len(holders), MAX_K)):
            ranked.extend(holders.get(hit.memory.id, ()))
    found = set(ranked)
    return ranked + [turn.dia_id for turn in conversation.turns if turn.dia_id not in found]


def _memory(path: str | None) -> MemoryRanker:
    """The ``memory[:PACK]`` kind: the memory on a pack folder, or on the bundled encoder without one."""
    return MemoryRanker(path)


register_ranker("memory", _memory)

__all__ = ["MemoryRanker", "message", "ranking", "write_conversation"]
