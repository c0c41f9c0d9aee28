"""Gathering with gradients under real DDP (gloo, 2 CPU processes) equals one process on the whole batch.

The process group is set up and torn down so that no run depends on timing: rendezvous through a
file in the test's tmp folder (no probed port another process could take), a timeout on every
collective, a barrier before teardown so that no rank leaves while the other is still talking, and
every DDP wrapper freed (with its reducer and hooks) before ``destroy_process_group``; a gloo
worker that outlives its group aborts with "terminate called without an active exception".
"""

from __future__ import annotations

import gc
import os
import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

from memnets.nn.distributed import all_gather_no_grad, all_gather_with_grad, rank, world_size
from memnets.nn.losses import InfoNCELoss

WORLD = 2
TIMEOUT = timedelta(seconds=60)  # of each collective; the whole test gets SPAWN_DEADLINE_S
SPAWN_DEADLINE_S = 180


def _data(batch=6, hard=2, d_in=8):
    torch.manual_seed(0)
    model = torch.nn.Linear(d_in, 4)
    q, p, n = torch.randn(batch, d_in), torch.randn(batch, d_in), torch.randn(batch, hard, d_in)
    keys = torch.arange(batch)
    query_keys = torch.stack([keys, torch.full((batch,), -1)], dim=1)
    query_keys[batch - 1, 1] = 0  # the last query also has the first positive as evidence
    hard_keys = torch.arange(batch * hard).view(batch, hard) + 100
    hard_keys[0, 0] = 3  # a mined negative that is another query's positive
    return model, (q, p, n, keys, query_keys, hard_keys)


def _loss(model, loss_fn, q, p, n, keys, query_keys, hard_keys):
    def embed(x):
        return F.normalize(model(x), dim=-1)

    return loss_fn(
        embed(q),
        embed(p),
        embed(n),
        positive_keys=keys,
        query_positive_keys=query_keys,
        hard_negative_keys=hard_keys,
    )


class _LossModule(torch.nn.Module):
    def __init__(self, model, loss_fn):
        super().__init__()
        self.model, self.loss_fn = model, loss_fn

    def forward(self, *data):
        return _loss(self.model, self.loss_fn, *data)


def _reference_grads(symmetric, learnable):
    model, data = _data()
    loss_fn = InfoNCELoss(temperature=0.1, learnable_temperature=learnable, symmetric=symmetric)
    _loss(model, loss_fn, *data).backward()
    return [p.grad.clone() for p in model.parameters()] + [p.grad.clone() for p in loss_fn.parameters()]


CASES = [(False, False), (True, True)]  # (symmetric, learnable temperature)


def _worker(local_rank, rendezvous_file, references, result_dir):
    dist.init_process_group(
        "gloo", init_method=f"file://{rendezvous_file}", rank=local_rank, world_size=WORLD, timeout=TIMEOUT
    )
    try:
        for (symmetric, learnable), reference in zip(CASES, references):
            _check_case(local_rank, symmetric, learnable, reference)
        gathered = all_gather_with_grad(torch.full((local_rank + 1, 2), float(local_rank), requires_grad=True))
        ids = all_gather_no_grad(torch.tensor([local_rank] * (local_rank + 1)))
        assert gathered.shape == (3, 2) and ids.tolist() == [0, 1, 1] and world_size() == 2 and rank() == local_rank
        del gathered, ids
        open(os.path.join(result_dir, f"ok{local_rank}"), "w").close()
    finally:
        gc.collect()  # DDP wrappers and autograd graphs hold the group through reference cycles
        dist.barrier()  # no rank tears down while the other still uses the group
        dist.destroy_process_group()


def _check_case(local_rank, symmetric, learnable, reference):
    model, data = _data()
    loss_fn = InfoNCELoss(
        temperature=0.1, learnable_temperature=learnable, symmetric=symmetric, gather_across_devices=True
    )
    # uneven shares (4 + 2 rows) also exercise the padded gather
    share = slice(0, 4) if local_rank == 0 else slice(4, 6)
    local = [t[share] for t in data]
    ddp = torch.nn.parallel.DistributedDataParallel(_LossModule(model, loss_fn))
    # DDP averages gradients over ranks; weight each rank's mean so the average is the global mean
    (ddp(*local) * local[0].shape[0] * WORLD / 6).backward()
    grads = [p.grad for p in model.parameters()] + [p.grad for p in loss_fn.parameters()]
    del ddp  # the reducer must not outlive this case (see the module docstring)
    for got, want in zip(grads, reference):
        torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)


def test_ddp_gradients_equal_single_process(tmp_path):
    """Plain and symmetric-with-learnable-temperature InfoNCE, uneven shares, false-negative keys."""
    references = [_reference_grads(symmetric, learnable) for symmetric, learnable in CASES]
    results = tmp_path / "results"
    results.mkdir()
    context = mp.spawn(_worker, args=(str(tmp_path / "rendezvous"), references, str(results)), nprocs=WORLD, join=False)
    deadline = time.monotonic() + SPAWN_DEADLINE_S
    while not context.join(timeout=1):  # raises ProcessRaisedException / ProcessExitedException on failure
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail(f"DDP workers still running after {SPAWN_DEADLINE_S} s")
    assert sorted(os.listdir(results)) == ["ok0", "ok1"]


def test_single_process_functions_are_identity():
    t = torch.randn(3, 2, requires_grad=True)
    assert all_gather_with_grad(t) is t and all_gather_no_grad(t) is t
    assert world_size() == 1 and rank() == 0
