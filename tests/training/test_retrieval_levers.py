"""The training-free retrieval levers of train/retrieval_levers.py: each re-scoring does what it says,
and its ``dense`` row is exactly the LoCoMo evaluation of a DenseRanker."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from memnets.nn.encoder import MemoryEncoder
from memnets.training.data.formats import load_conversations
from memnets.training.retrieval.dense import DenseRanker
from memnets.training.retrieval.metrics import evaluate_retriever, summarize

ROOT = Path(__file__).resolve().parents[2]
JSONL = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_conversations.jsonl"


@pytest.fixture(scope="module")
def levers_module():
    spec = importlib.util.spec_from_file_location("retrieval_levers", ROOT / "train" / "retrieval_levers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_zscore_per_query(levers_module):
    scores = np.array([[1.0, 2.0, 3.0], [5.0, 5.0, 5.0]])
    z = levers_module.zscore(scores)
    assert np.allclose(z[0], [-1.2247449, 0.0, 1.2247449]) and np.allclose(z[1], 0.0)


def test_neighbours_add_the_best_adjacent_score_within_a_session(levers_module):
    scores = np.array([[0.0, 1.0, 0.0, 0.0, 2.0]])
    sessions = np.array([1, 1, 1, 2, 2])
    out = levers_module.neighbours(scores, sessions, beta=0.5)
    # turn 0 and 2 sit next to the 1.0; turn 2 does not see turn 3 (another session); turn 3 sees 2.0
    assert np.allclose(out, [[0.5, 1.0, 0.5, 1.0, 2.0]])


def test_prf_without_feedback_is_the_dense_score(levers_module):
    rng = np.random.default_rng(0)
    memories = rng.normal(size=(6, 4))
    memories /= np.linalg.norm(memories, axis=1, keepdims=True)
    queries = memories[:2] + 0.1
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    assert np.allclose(levers_module.prf(queries, memories, gamma=0.0), queries @ memories.T)
    moved = levers_module.prf(queries, memories, gamma=1.0)
    assert not np.allclose(moved, queries @ memories.T)


def test_dense_row_equals_the_dense_ranker_evaluation(levers_module, tiny_model_dir):
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir)
    conversations = load_conversations(JSONL)
    rows, seconds, timing = levers_module.levers(encoder, conversations)
    expected = evaluate_retriever(DenseRanker(encoder), conversations, name="dense")
    assert summarize("dense", rows["dense"]).overall == pytest.approx(expected.overall)
    assert timing["queries"] == expected.counts["questions"] == 12
    assert set(rows) == set(seconds) and all(len(r) == 12 for r in rows.values())
    assert {"bm25 alone", "bm25 z-fusion 0.2", "prf 0.5", "neighbours 0.2"} <= set(rows)


def test_maxsim_scores_each_question_token_by_its_best_match(levers_module):
    rng = np.random.default_rng(0)
    tokens = rng.normal(size=(5, 8))
    tokens /= np.linalg.norm(tokens, axis=1, keepdims=True)
    queries = np.zeros((1, 3, 8))
    queries[0, :2] = tokens[:2]  # two real tokens and one padding row
    memories = np.zeros((2, 4, 8))
    memories[0, :3] = tokens[[1, 4, 0]]  # holds both question tokens, in another order
    memories[1, :2] = tokens[2:4]
    scores = levers_module.maxsim(queries, memories)
    assert scores[0, 0] == pytest.approx(1.0)  # padding neither counts in the mean nor wins a max
    expected = np.mean([max(tokens[i] @ tokens[2], tokens[i] @ tokens[3], 0.0) for i in (0, 1)])
    assert scores[0, 1] == pytest.approx(expected)


def test_token_states_zero_padding_and_special_tokens(levers_module, tiny_model_dir):
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir)
    states = levers_module.token_states(encoder, ["a much longer memory about the lake", "short"], "memory")
    ids = encoder.tokenize(["a much longer memory about the lake", "short"], "memory")["input_ids"]
    real = ~np.isin(ids.numpy(), encoder.tokenizer.all_special_ids)
    norms = np.linalg.norm(states, axis=-1)
    assert np.allclose(norms[real], 1.0, atol=1e-5) and np.allclose(norms[~real], 0.0)
