"""InfoNCE: hand computation, false-negative masking, symmetric term, temperature, ST equivalence."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from memnets.nn.losses import InfoNCELoss, Temperature, false_negative_mask, info_nce_loss


def _unit(*shape, seed=0):
    torch.manual_seed(seed)
    return F.normalize(torch.randn(*shape), dim=-1)


def test_loss_matches_hand_computation_with_hard_negatives():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    p = torch.tensor([[0.6, 0.8], [0.8, 0.6]])
    n = torch.tensor([[[1.0, 0.0]], [[-1.0, 0.0]]])  # [B=2, H=1, d]
    tau = 0.5
    # candidates: p0, p1, n0, n1
    s0 = [0.6, 0.8, 1.0, -1.0]
    s1 = [0.8, 0.6, 0.0, 0.0]
    expected0 = -math.log(math.exp(s0[0] / tau) / sum(math.exp(s / tau) for s in s0))
    expected1 = -math.log(math.exp(s1[1] / tau) / sum(math.exp(s / tau) for s in s1))
    loss = info_nce_loss(q, p, n, temperature=tau)
    assert loss.item() == pytest.approx((expected0 + expected1) / 2, rel=1e-6)


def test_false_negatives_leave_the_denominator():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    p = torch.tensor([[0.6, 0.8], [0.8, 0.6]])
    n = torch.tensor([[[1.0, 0.0]], [[-1.0, 0.0]]])
    tau = 0.5
    # query 0 has positives {10, 12}: key 12 is the hard negative of query 1 -> masked for query 0.
    # query 1 has positives {11, 10}: the in-batch positive of query 0 (key 10) -> masked for query 1.
    loss = info_nce_loss(
        q,
        p,
        n,
        temperature=tau,
        positive_keys=torch.tensor([10, 11]),
        query_positive_keys=torch.tensor([[10, 12], [11, 10]]),
        hard_negative_keys=torch.tensor([[13], [12]]),
    )
    s0 = [0.6, 0.8, 1.0]  # n1 (key 12) dropped
    s1 = [0.6, 0.0, 0.0]  # p0 (key 10) dropped
    expected0 = -math.log(math.exp(s0[0] / tau) / sum(math.exp(s / tau) for s in s0))
    expected1 = -math.log(math.exp(s1[0] / tau) / sum(math.exp(s / tau) for s in s1))
    assert loss.item() == pytest.approx((expected0 + expected1) / 2, rel=1e-6)


def test_mask_never_hides_the_target_and_ignores_padding():
    mask = false_negative_mask(torch.tensor([[5, -1], [5, 6]]), torch.tensor([5, 6, -1]), torch.tensor([0, 1]))
    assert mask.tolist() == [[False, False, False], [True, False, False]]


def test_symmetric_term_by_hand():
    q = _unit(3, 4, seed=1)
    p = _unit(3, 4, seed=2)
    tau = 0.1
    forward = F.cross_entropy(q @ p.T / tau, torch.arange(3))
    backward = F.cross_entropy(p @ q.T / tau, torch.arange(3))
    got = info_nce_loss(q, p, temperature=tau, symmetric=True)
    assert got.item() == pytest.approx(((forward + backward) / 2).item(), rel=1e-6)


def test_symmetric_masks_queries_sharing_a_positive():
    q = _unit(3, 4, seed=3)
    p = _unit(3, 4, seed=4)
    keys = torch.tensor([0, 1, 2])
    # query 2 is a second question whose evidence includes memory 0
    query_keys = torch.tensor([[0, -1], [1, -1], [2, 0]])
    got = info_nce_loss(q, p, temperature=0.1, symmetric=True, positive_keys=keys, query_positive_keys=query_keys)
    scores = q @ p.T / 0.1
    scores[2, 0] = float("-inf")
    reverse = p @ q.T / 0.1
    reverse[0, 2] = float("-inf")
    expected = (F.cross_entropy(scores, torch.arange(3)) + F.cross_entropy(reverse, torch.arange(3))) / 2
    assert got.item() == pytest.approx(expected.item(), rel=1e-6)


def test_matches_sentence_transformers_mnrl(tiny_model_dir):
    from sentence_transformers import SentenceTransformer, losses, models

    transformer = models.Transformer(str(tiny_model_dir))
    st = SentenceTransformer(
        modules=[transformer, models.Pooling(transformer.get_embedding_dimension(), "mean"), models.Normalize()],
        device="cpu",
    )
    mnrl = losses.MultipleNegativesRankingLoss(st, scale=20.0)
    q = _unit(5, 8, seed=5)
    p = _unit(5, 8, seed=6)
    n = _unit(5, 8, seed=7)
    reference = mnrl.compute_loss_from_embeddings([q, p, n], labels=None)
    assert info_nce_loss(q, p, n, temperature=1 / 20).item() == pytest.approx(reference.item(), rel=1e-5)


def test_learnable_temperature_is_clamped_and_trains():
    temperature = Temperature(0.05, learnable=True, min_value=0.02, max_value=0.5)
    assert temperature().item() == pytest.approx(0.05)
    with torch.no_grad():
        temperature.log_scale.fill_(math.log(1 / 0.001))
    assert temperature().item() == pytest.approx(0.02)

    loss_fn = InfoNCELoss(temperature=0.2, learnable_temperature=True)
    q = _unit(4, 8, seed=8)
    loss_fn(q, q.clone()).backward()  # perfect positives: sharper softmax lowers the loss
    assert loss_fn.temperature.log_scale.grad.item() < 0  # gradient descent raises log(1/tau)
    assert not InfoNCELoss().temperature.learnable
    assert len(list(InfoNCELoss().parameters())) == 0


def test_loss_decreases_when_positives_move_closer():
    q = _unit(4, 8, seed=10)
    far = info_nce_loss(q, _unit(4, 8, seed=11))
    near = info_nce_loss(q, F.normalize(q + 0.1 * _unit(4, 8, seed=11), dim=-1))
    assert near < far


def test_bad_shapes_and_arguments_are_named():
    q = _unit(2, 4)
    with pytest.raises(ValueError, match="query and positive"):
        info_nce_loss(q, _unit(3, 4))
    with pytest.raises(ValueError, match="hard_negatives"):
        info_nce_loss(q, q, _unit(2, 1, 5))
    with pytest.raises(ValueError, match="temperature"):
        info_nce_loss(q, q, temperature=0.0)
    with pytest.raises(ValueError, match="positive_keys"):
        info_nce_loss(q, q, query_positive_keys=torch.tensor([[0], [1]]))
    with pytest.raises(ValueError, match="temperature"):
        Temperature(0.001, min_value=0.01)
