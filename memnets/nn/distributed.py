"""Gathering embeddings across DDP ranks, with gradients, so contrastive losses see the global batch.

Under data parallelism each rank embeds only its share of a batch. For in-batch negatives every
query should be scored against the positives (and hard negatives) of *all* ranks, and the
gradient of those scores must flow back to the rank that produced each embedding.
:func:`all_gather_with_grad` does that: forward concatenates every rank's tensor (ranks may hold
different numbers of rows), backward sums the incoming gradients of all ranks (each rank computed a
loss on its own queries against the gathered candidates) and hands every rank the slice for its
own rows. Combined with DDP's gradient averaging this gives exactly the gradient of one process
computing the mean loss over the whole batch (tests/nn/test_distributed.py checks it on gloo).

Without an initialised process group (or with one process) every function returns its input, so
the same code runs on one CPU, one GPU or many.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def world_size() -> int:
    """Number of processes in the default group; 1 when not distributed."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def rank() -> int:
    """This process's rank in the default group; 0 when not distributed."""
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def _gather_sizes(rows: int, device: torch.device) -> list[int]:
    size = torch.tensor([rows], dtype=torch.long, device=device)
    sizes = [torch.zeros_like(size) for _ in range(world_size())]
    dist.all_gather(sizes, size)
    return [int(s.item()) for s in sizes]


def _gather_padded(tensor: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    """all_gather of tensors whose first dimension differs by rank (pad to the largest, then trim)."""
    longest = max(sizes)
    padded = tensor
    if tensor.shape[0] < longest:
        pad = tensor.new_zeros((longest - tensor.shape[0], *tensor.shape[1:]))
        padded = torch.cat([tensor, pad])
    parts = [torch.empty_like(padded) for _ in sizes]
    dist.all_gather(parts, padded.contiguous())
    return torch.cat([part[:n] for part, n in zip(parts, sizes)])


class _AllGatherWithGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor: torch.Tensor) -> torch.Tensor:
        sizes = _gather_sizes(tensor.shape[0], tensor.device)
        ctx.sizes = sizes
        ctx.rank = rank()
        return _gather_padded(tensor, sizes)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        grad = grad.contiguous()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        start = sum(ctx.sizes[: ctx.rank])
        return grad[start : start + ctx.sizes[ctx.rank]]


def all_gather_with_grad(tensor: torch.Tensor) -> torch.Tensor:
    """Concatenate ``tensor`` (shape ``[n_rank, ...]``) of every rank, in rank order, keeping gradients.

    Backward sums the gradients that all ranks computed for the gathered tensor and returns this
    rank's rows. Identity without a process group.
    """
    if world_size() == 1:
        return tensor
    return _AllGatherWithGrad.apply(tensor)


def all_gather_no_grad(tensor: torch.Tensor) -> torch.Tensor:
    """Concatenate ``tensor`` of every rank in rank order, without gradients (ids, masks)."""
    if world_size() == 1:
        return tensor
    return _gather_padded(tensor, _gather_sizes(tensor.shape[0], tensor.device))


def rank_offset(rows: int, device: torch.device | str = "cpu") -> int:
    """Index of this rank's first row in a tensor gathered by the functions above."""
    if world_size() == 1:
        return 0
    return sum(_gather_sizes(rows, torch.device(device))[: rank()])
