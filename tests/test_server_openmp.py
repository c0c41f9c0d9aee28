"""A `memnets serve http` process runs torch's and FAISS's OpenMP threads with the PASSIVE wait policy
(they sleep when idle instead of spinning on the cores the event loop and the clients need), unless
the user set OMP_WAIT_POLICY. libgomp prints the spin count it runs with (OMP_DISPLAY_ENV=VERBOSE) when
it loads: 0 under PASSIVE; its default (no policy set) spins 300,000 times and prints 'PASSIVE' all the same."""

from __future__ import annotations

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
