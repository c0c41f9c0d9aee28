"""The pairs a real conversation hands the change-of-fact judge, labelled, for training it (the pack's judge).

Written pairs teach what a change is; they do not teach what most candidate pairs of a chat look like: two
turns of one speaker weeks apart about the same subject that end nothing ("Congrats on the new car!" and "That
car looks awesome!"). A judge trained without them ended 460 of the 2,304 candidate pairs of conv-49, one in five
(docs/memory.md, "What was tried"). :func:`replayed_pairs` makes those pairs from LoCoMo conversations the way
the write path picks candidates (:mod:`memnets.memory.supersession`: each turn against the
:data:`~memnets.memory.supersession.CANDIDATES` nearest earlier turns of its speaker among the
:data:`~memnets.memory.supersession.CANDIDATE_POOL` nearest) and labels them by the mined pairs
(``data/supersession/locomo_mined.jsonl``, labelled by reading every session): a mined change is 1, a pair whose
newer turn is a mined change's newer turn is left out (another of its older turns may be changed by it too), the
rest 0. LoCoMo's text is CC BY-NC 4.0, so only the pack's judge trains on them, never the one memnets ships.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np

from memnets.memory.supersession import CANDIDATE_POOL, CANDIDATES
from memnets.training.data.locomo import Conversation


def candidate_pairs(turns: Sequence, vectors: np.ndarray) -> list[tuple[int, int]]:
    """(older, newer) turn indices: each turn against its speaker's earlier turns among the pool of its nearest
    earlier turns (of either speaker, as the write path searches the user's memories, then keeps the speaker's),
    as the write path picks them (``vectors``: the turns' unit vectors, in order)."""
    pairs = []
    for newer, turn in enumerate(turns):
        cosines = vectors[:newer] @ vectors[newer]
        pool = np.argsort(-cosines, kind="stable")[:CANDIDATE_POOL]
        kept = [i for i in pool if turns[i].speaker == turn.speaker]
        pairs += [(int(i), newer) for i in kept[:CANDIDATES]]
    return pairs


def replayed_pairs(
    conversations: Sequence[Conversation], mined: Sequence[dict], encode, negatives: int, seed: int = 0
) -> list[dict]:
    """Every mined change among the conversations' candidate pairs (label 1) and ``negatives`` of their other pairs
    (label 0, kind "replayed", drawn with ``seed``); ``encode``: texts -> unit vectors (the bundled encoder)."""
    changes = {(r["conversation"], r["older_dia_id"], r["newer_dia_id"]) for r in mined if r["label"] == 1}
    changed = {(conversation, newer) for conversation, _, newer in changes}
    found, others = [], []
    for conversation in conversations:
        turns = conversation.turns
        vectors = np.asarray(encode([turn.said for turn in turns]), dtype=np.float32)
        for older, newer in candidate_pairs(turns, vectors):
            a, b = turns[older], turns[newer]
            row = {"older": a.said, "newer": b.said, "speaker": b.speaker, "conversation": conversation.sample_id}
            if (conversation.sample_id, a.dia_id, b.dia_id) in changes:
                found.append(row | {"label": 1, "kind": "change"})
            elif (conversation.sample_id, b.dia_id) not in changed:
                others.append(row | {"label": 0, "kind": "replayed"})
    random.Random(seed).shuffle(others)
    return found + others[:negatives]


__all__ = ["candidate_pairs", "replayed_pairs"]
