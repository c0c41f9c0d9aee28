"""The one ranker registry (memnets.training.retrieval.rankers) and the side-by-side retrieval evaluation."""

from __future__ import annotations

import pytest

from memnets.training.data.locomo import load_locomo
from memnets.training.evaluation.retrieval import compare_rankers
from memnets.training.retrieval.bm25 import BM25Ranker
from memnets.training.retrieval.metrics import evaluate_retriever
from memnets.training.retrieval.rankers import RANKERS, build_ranker, parse_spec, register_ranker


class InOrder:
    """Ranks the turns in conversation order, whatever the query."""

    def rank(self, conversation, queries):
        return [[turn.dia_id for turn in conversation.turns] for _ in queries]


@pytest.fixture()
def in_order_kind():
    register_ranker("inorder", lambda path: InOrder())
    yield "inorder"
    RANKERS.pop("inorder")


def test_parse_spec_names_kinds_and_paths(tmp_path):
    assert parse_spec("bm25") == ("bm25", "bm25", None)
    assert parse_spec(f"mine=dense:{tmp_path}") == ("mine", "dense", str(tmp_path))
    assert parse_spec(f"dense:{tmp_path}") == (f"dense:{tmp_path}", "dense", str(tmp_path))
    with pytest.raises(ValueError, match="unknown kind 'nope'"):
        parse_spec("nope")
    with pytest.raises(ValueError, match="does not exist"):
        parse_spec(f"dense:{tmp_path / 'missing'}")
    with pytest.raises(ValueError, match="bm25 takes no path"):
        build_ranker("bm25", str(tmp_path))
    with pytest.raises(ValueError, match="learned needs a pack folder"):
        build_ranker("learned")


def test_register_ranker_adds_a_kind_once(in_order_kind):
    assert isinstance(build_ranker(in_order_kind), InOrder)
    with pytest.raises(ValueError, match="already registered"):
        register_ranker(in_order_kind, lambda path: InOrder())
    with pytest.raises(ValueError, match="identifier"):
        register_ranker("not a kind", lambda path: InOrder())


def test_compare_rankers_equals_evaluating_each(tiny_locomo_path, in_order_kind):
    conversations = load_locomo(tiny_locomo_path)
    reports = compare_rankers(["bm25", f"first={in_order_kind}"], conversations)
    assert [r.name for r in reports] == ["bm25", "first"]
    assert reports[0].overall == evaluate_retriever(BM25Ranker(), conversations).overall
    assert reports[1].overall == evaluate_retriever(InOrder(), conversations).overall
    with pytest.raises(ValueError, match="unknown kind"):
        compare_rankers(["bm25", "nope"], conversations)  # checked before anything is built
