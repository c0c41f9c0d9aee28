"""memnets.open with a pack: the pack's importance head scores adds, its gate and learned scorer reach
the managers, and search re-ranks a candidate set from the store with the LearnedScorer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

import memnets
from memnets.memory.signals import HeadGate, HeadImportance
from memnets.scoring import LearnedScorer, ScorerWeights

T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
TEXTS = [
    "red green blue",
    "one two three",
    "cat dog bird",
    "north south east",
    "sun moon star",
    "left right up",
    "apple pear plum",
    "river lake sea",
]


@pytest.fixture(scope="module")
def pack(tiny_model_dir, tmp_path_factory):
    import torch

    from memnets.nn.encoder import MemoryEncoder
    from memnets.nn.heads import ImportanceHead, RecallGateHead
    from memnets.pack import export_pack

    encoder = MemoryEncoder.from_pretrained(tiny_model_dir)
    torch.manual_seed(0)
    importance = ImportanceHead(encoder.dim, hidden_dims=(8,))
    gate = RecallGateHead(encoder.dim, hidden_dims=(8,), attention_dim=4, threshold=0.5)
    # recency weighs heavily, so the learned order differs from plain cosine
    weights = ScorerWeights(recency=3.0, relevance=1.0, importance=0.5)
    return export_pack(
        tmp_path_factory.mktemp("pack") / "pack",
        encoder,
        importance=importance,
        gate=gate,
        scorer_weights=weights,
        thresholds={"importance": 0.3, "gate": 0.5, "duplicate": 0.99},
    )


def test_search_re_ranks_store_candidates_with_the_learned_scorer(pack, tmp_path):
    with memnets.open(tmp_path / "m", pack=pack, duplicate_threshold=None, fetch_factor=2) as memory:
        assert isinstance(memory.scorer, LearnedScorer) and isinstance(memory.importance, HeadImportance)
        assert memory.config.write_through_threshold == pytest.approx(0.3)  # the pack's threshold
        added = [memory.add(text, user="ann", t=T0 + timedelta(days=i)) for i, text in enumerate(TEXTS)]
        vector = memory.encoder.encode([TEXTS[0]]).numpy()
        head = memory.importance.head.predict_proba(vector)
        assert added[0].importance == pytest.approx(float(np.asarray(head).reshape(-1)[0]), abs=1e-6)

        hits = memory.search(TEXTS[0], user="ann", k=3)
        # by hand: the store's 2 * 3 nearest by cosine, scored by the learned scorer, best 3
        query = memory.encoder.encode([TEXTS[0]], kind="query").numpy()[0]
        candidates = memory.store.search(query, 6, "ann")
        ids = [m.id for m, _ in candidates]
        scores = memory.scorer.score(
            [m for m, _ in candidates],
            TEXTS[0],
            datetime.now(UTC),
            query_vector=query,
            memory_vectors=memory.store.vectors(ids, "ann"),
        )
        expected = [ids[i] for i in np.argsort(-np.asarray(scores), kind="stable")[:3]]
        assert [h.memory.id for h in hits] == expected
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        cosine_order = [m.id for m, _ in candidates[:3]]
        assert [h.memory.id for h in hits] != cosine_order  # recency changed the order
        manager = memory.manager("ann")
        assert manager.scorer is memory.scorer and isinstance(manager.gate, HeadGate)
        assert manager.config.write_through_threshold == pytest.approx(0.3)
        assert memory.config.duplicate_threshold is None  # given: it wins over the pack's
    with memnets.open(tmp_path / "m", pack=pack) as memory:
        assert memory.config.duplicate_threshold == pytest.approx(0.99)  # the pack's, for its encoder
