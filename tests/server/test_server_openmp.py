"""A `memnets serve http` process runs torch's and FAISS's OpenMP threads with the PASSIVE wait policy
(they sleep when idle instead of spinning on the cores the event loop and the clients need), unless
the user set OMP_WAIT_POLICY. libgomp prints the spin count it runs with (OMP_DISPLAY_ENV=VERBOSE) when
it loads: 0 under PASSIVE; its default (no policy set) spins 300,000 times and prints 'PASSIVE' all the same."""

from __future__ import annotations

import os
import re

import pytest

from memnets.server.testing import ServerProcess


def spin_counts(process: ServerProcess) -> set[int]:
    """The spin count of every OpenMP runtime the server loaded (torch's, FAISS's), from its log."""
    return {int(count) for count in re.findall(r"GOMP_SPINCOUNT = '(\d+)'", process.output())}


@pytest.mark.parametrize(("given", "spins"), [(None, False), ("ACTIVE", True)])
def test_the_server_s_openmp_threads_sleep_unless_the_user_chose(given, spins, tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    env = {"OMP_DISPLAY_ENV": "VERBOSE", **({"OMP_WAIT_POLICY": given} if given else {})}
    with ServerProcess(tmp_path / "memory", "--encoder", str(tiny_model_dir), env=env) as process:
        process.wait_ready()
        counts = spin_counts(process)
    assert counts and all((count > 0) == spins for count in counts)


def thread_counts(process: ServerProcess) -> list[str]:
    """The thread count of every OpenMP runtime the server's processes loaded, from its log (the workers
    write to it at once, so a line may be cut by another's: only whole counts are read)."""
    return re.findall(r"OMP_NUM_THREADS = '(\d+)'", process.output())


@pytest.mark.parametrize("given", [None, "3"])
def test_workers_share_the_cores_unless_the_user_chose(given, tiny_model_dir, tmp_path, monkeypatch):
    """Two workers each run their OpenMP runtimes on half the cores (at least one thread), not on all of
    them: two encoders on every core would wait at each other's barriers. A given OMP_NUM_THREADS is kept."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    env = {"OMP_DISPLAY_ENV": "VERBOSE", **({"OMP_NUM_THREADS": given} if given else {})}
    args = ("--encoder", str(tiny_model_dir), "--workers", "2")
    with ServerProcess(tmp_path / "memory", *args, env=env) as process:
        process.wait_ready().wait_workers(2)
        counts = thread_counts(process)
    expected = given or str(max(1, len(os.sched_getaffinity(0)) // 2))
    assert len(counts) >= 2 and set(counts) == {expected}, counts
