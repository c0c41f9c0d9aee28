"""Contrastive losses for the memory encoder, as pure functions of embeddings.

The encoder is trained so that a query (a question, or an observation about the dialogue) lands
closest to the memory turn that answers it. With unit vectors and cosine similarity ``s``, the
InfoNCE loss of one query ``q`` with positive memory ``m+`` and negatives ``m-`` is::

    L(q) = -log  exp(s(q, m+) / tau) / ( exp(s(q, m+) / tau) + sum_{m-} exp(s(q, m-) / tau) )

i.e. cross-entropy over the candidates with the positive as the target class. This is what
sentence-transformers calls ``MultipleNegativesRankingLoss`` (with ``scale = 1 / tau``); the
additions here are the ones the memory task needs:

* **Hard negatives.** Besides the other positives of the batch ("in-batch negatives"), every
  query is scored against all mined hard negatives of the batch (other turns of the same
  conversation that look relevant but are not evidence).
* **No false negatives.** A question can have several evidence turns, and two questions can
  share one; such a turn is a positive, not a negative. Given integer *keys* (one per distinct
  memory) for candidates and for every positive of each query, candidates that are positives of
  the query are left out of its denominator (only its own target stays).
* **Temperature.** Fixed, or learnable (:class:`Temperature`, log-parametrised and clamped, as
  CLIP's logit scale) so training picks how peaked the distribution should be.
* **Symmetric term.** Optionally the memory -> query direction too (each positive against all
  queries of the batch), averaged with the query -> memory term.
* **Global batch under DDP.** With ``gather_across_devices=True`` candidates (and queries for the
  symmetric term) of all ranks are gathered with gradients (:mod:`memnets.nn.distributed`); each
  rank computes the loss of its own queries, which, after DDP averages gradients, equals the
  gradient of one process on the whole batch.

Inputs:
    ============================================  ===========================================
    tensor                                         shape
    ============================================  ===========================================
    query embeddings (unit norm)                   [B, d]
    positive embeddings, row i for query i         [B, d]
    hard negatives (optional)                      [B, H, d] or [M, d] (shared by all queries)
    positive_keys (optional)                       [B] long, key of positive i
    query_positive_keys (optional)                 [B, K] long, keys of all positives of query i,
                                                   padded with -1
    hard_negative_keys (optional)                  [B, H] or [M] long (-1 = unknown)
    ============================================  ===========================================

Relations:
    - ``info_nce_loss`` with no hard negatives, ``tau = 1/scale`` and no keys equals
      sentence-transformers' ``MultipleNegativesRankingLoss`` (tests/nn/test_losses.py checks it).

Recommendations:
    - Batches should not repeat a query or a positive (:class:`memnets.training.lit.data.NoDuplicatesBatchSampler`
      builds such batches); the key mask is the safety net for what a sampler cannot see (a
      mined hard negative that is another query's positive).
    - Batches drawn from one conversation make in-batch negatives hard; turns of other
      conversations are mostly easy negatives.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from memnets.nn.distributed import all_gather_no_grad, all_gather_with_grad, rank_offset


class Temperature(torch.nn.Module):
    """The softmax temperature ``tau``, fixed or learnable.

    Stored as ``log(1/tau)`` (like CLIP's logit scale) so gradient steps are multiplicative; the
    value is clamped to ``[min_value, max_value]`` when read, which keeps a learnable temperature
    from collapsing (``tau -> 0`` makes the loss blow up) or flattening the distribution.

    Args:
        value: initial ``tau`` (0.05 is sentence-transformers' default ``scale = 20``).
        learnable: train ``tau`` with the model.
        min_value, max_value: clamp range of ``tau``.
    """

    def __init__(self, value: float = 0.05, learnable: bool = False, min_value: float = 0.01, max_value: float = 1.0):
        super().__init__()
        if not 0 < min_value <= value <= max_value:
            raise ValueError(
                f"temperature must satisfy 0 < min_value <= value <= max_value, got {min_value}, {value}, {max_value}"
            )
        self.min_value = min_value
        self.max_value = max_value
        log_scale = torch.tensor(math.log(1.0 / value))
        if learnable:
            self.log_scale = torch.nn.Parameter(log_scale)
        else:
            self.register_buffer("log_scale", log_scale)

    @property
    def learnable(self) -> bool:
        return isinstance(self.log_scale, torch.nn.Parameter)

    def forward(self) -> torch.Tensor:
        return (-self.log_scale).exp().clamp(self.min_value, self.max_value)


def _check_shapes(query: torch.Tensor, positive: torch.Tensor, hard_negatives: torch.Tensor | None) -> None:
    if query.ndim != 2 or positive.shape != query.shape:
        raise ValueError(
            f"query and positive must both be [B, d]; got query {tuple(query.shape)}, positive {tuple(positive.shape)}"
        )
    if hard_negatives is not None and (hard_negatives.ndim not in (2, 3) or hard_negatives.shape[-1] != query.shape[1]):
        raise ValueError(
            f"hard_negatives must be [B, H, d] or [M, d] with d={query.shape[1]}; got {tuple(hard_negatives.shape)}"
        )


def false_negative_mask(
    query_positive_keys: torch.Tensor, candidate_keys: torch.Tensor, labels: torch.Tensor
) -> torch.Tensor:
    """``[B, C]`` bool: True where candidate ``c`` is a positive of query ``i`` other than its target.

    ``query_positive_keys`` is ``[B, K]`` padded with -1; candidate keys of -1 never match.
    """
    matches = (candidate_keys[None, None, :] == query_positive_keys[:, :, None]) & (
        query_positive_keys[:, :, None] >= 0
    )
    mask = matches.any(dim=1)
    mask[torch.arange(len(labels), device=labels.device), labels] = False
    return mask


def _cross_entropy(scores: torch.Tensor, labels: torch.Tensor, exclude: torch.Tensor | None) -> torch.Tensor:
    if exclude is not None:
        scores = scores.masked_fill(exclude, float("-inf"))
    return F.cross_entropy(scores, labels)


def info_nce_loss(
    query: torch.Tensor,
    positive: torch.Tensor,
    hard_negatives: torch.Tensor | None = None,
    *,
    temperature: float | torch.Tensor = 0.05,
    symmetric: bool = False,
    positive_keys: torch.Tensor | None = None,
    query_positive_keys: torch.Tensor | None = None,
    hard_negative_keys: torch.Tensor | None = None,
    gather_across_devices: bool = False,
) -> torch.Tensor:
    """InfoNCE of queries against their positives, in-batch negatives and hard negatives.

    ``L = mean_i -log exp(s(q_i, p_i)/tau) / sum_c exp(s(q_i, c)/tau)`` where ``c`` runs over all
    positives of the batch and all hard negatives of the batch, minus the candidates that
    ``query_positive_keys`` marks as further positives of ``q_i``. With ``symmetric=True`` the loss is
    the mean of that and the memory -> query term ``mean_i -log exp(s(p_i, q_i)/tau) / sum_j exp(s(p_i, q_j)/tau)``
    (queries ``j`` that also have ``p_i`` as a positive are left out).

    Args:
        query: ``[B, d]`` query embeddings (unit norm: dot product = cosine).
        positive: ``[B, d]`` the positive memory of each query.
        hard_negatives: ``[B, H, d]`` per-query hard negatives or ``[M, d]``; every query is
            scored against all of them.
        temperature: ``tau``, a float or a (learnable) scalar tensor.
        symmetric: add the memory -> query term.
        positive_keys: ``[B]`` integer key of each positive (one key per distinct memory).
        query_positive_keys: ``[B, K]`` keys of every positive of each query, ``-1`` padded.
            Needed (with the candidate keys) to mask false negatives; without it nothing is masked.
        hard_negative_keys: keys of the hard negatives, shaped like their first dimensions.
        gather_across_devices: gather candidates (and queries) of all DDP ranks with gradients.

    Returns:
        Scalar loss (mean over this rank's queries).
    """
    _check_shapes(query, positive, hard_negatives)
    if isinstance(temperature, (int, float)) and temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    batch = query.shape[0]
    masking = query_positive_keys is not None
    if masking and positive_keys is None:
        raise ValueError("query_positive_keys needs positive_keys (the keys of the in-batch candidates)")
    if masking and hard_negatives is not None and hard_negative_keys is None:
        raise ValueError("query_positive_keys with hard_negatives needs hard_negative_keys")

    gather = all_gather_with_grad if gather_across_devices else (lambda t: t)
    gather_ids = all_gather_no_grad if gather_across_devices else (lambda t: t)
    offset = rank_offset(batch, query.device) if gather_across_devices else 0
    labels = torch.arange(batch, device=query.device) + offset

    candidates = [gather(positive)]
    keys = [gather_ids(positive_keys)] if masking else []
    if hard_negatives is not None:
        candidates.append(gather(hard_negatives.reshape(-1, query.shape[1])))
        if masking:
            keys.append(gather_ids(hard_negative_keys.reshape(-1)))
    candidates = torch.cat(candidates)
    scores = query @ candidates.T / temperature
    exclude = false_negative_mask(query_positive_keys, torch.cat(keys), labels) if masking else None
    loss = _cross_entropy(scores, labels, exclude)
    if not symmetric:
        return loss

    all_queries = gather(query)
    reverse_scores = positive @ all_queries.T / temperature
    reverse_exclude = None
    if masking:
        all_query_keys = gather_ids(query_positive_keys)
        reverse_exclude = _reverse_mask(positive_keys, all_query_keys, labels)
    return (loss + _cross_entropy(reverse_scores, labels, reverse_exclude)) / 2


def _reverse_mask(positive_keys: torch.Tensor, all_query_keys: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``[B, Q]`` bool: True where query ``j`` (not the target) also has positive ``i`` as a positive."""
    mask = ((all_query_keys[None, :, :] == positive_keys[:, None, None]) & (positive_keys[:, None, None] >= 0)).any(-1)
    mask[torch.arange(len(labels), device=labels.device), labels] = False
    return mask


class InfoNCELoss(torch.nn.Module):
    """:func:`info_nce_loss` with its temperature as a (possibly learnable) submodule.

    Args:
        temperature: initial ``tau``.
        learnable_temperature: train ``tau`` (clamped to ``[min_temperature, max_temperature]``).
        symmetric: add the memory -> query term.
        gather_across_devices: use the global batch under DDP (see :mod:`memnets.nn.distributed`).

    Example::

        loss_fn = InfoNCELoss(temperature=0.05, learnable_temperature=True)
        loss = loss_fn(encoder(**q_batch), encoder(**p_batch), hard_negatives=encoder(**n_batch).view(B, H, -1))
    """

    def __init__(
        self,
        temperature: float = 0.05,
        learnable_temperature: bool = False,
        symmetric: bool = False,
        gather_across_devices: bool = False,
        min_temperature: float = 0.01,
        max_temperature: float = 1.0,
    ):
        super().__init__()
        self.temperature = Temperature(temperature, learnable_temperature, min_temperature, max_temperature)
        self.symmetric = symmetric
        self.gather_across_devices = gather_across_devices

    def forward(
        self,
        query: torch.Tensor,
        positive: torch.Tensor,
        hard_negatives: torch.Tensor | None = None,
        *,
        positive_keys: torch.Tensor | None = None,
        query_positive_keys: torch.Tensor | None = None,
        hard_negative_keys: torch.Tensor | None = None,
    ) -> torch.Tensor:
        return info_nce_loss(
            query,
            positive,
            hard_negatives,
            temperature=self.temperature(),
            symmetric=self.symmetric,
            positive_keys=positive_keys,
            query_positive_keys=query_positive_keys,
            hard_negative_keys=hard_negative_keys,
            gather_across_devices=self.gather_across_devices,
        )
