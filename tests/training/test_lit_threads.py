"""The torch thread count of training processes: the rule, the user's settings, bad values."""

from __future__ import annotations

import pytest

from memnets.training.lit.threads import TorchThreads, choose_threads


def test_torchs_count_is_shared_by_the_local_processes():
    assert choose_threads(2, 1, None, None)[0] == 2  # one process keeps torch's count
    assert choose_threads(2, 2, None, None)[0] == 1  # DDP on 2 cores: 1 thread each, not 2 x 2
    assert choose_threads(16, 3, None, None)[0] == 5
    assert choose_threads(2, 4, None, None)[0] == 1  # never 0
    threads, why = choose_threads(8, 2, None, None)
    assert threads == 4 and "8" in why and "2 processes" in why


def test_the_config_wins_then_the_users_omp_num_threads():
    assert choose_threads(8, 2, 3, 6) == (3, "torch_threads.per_process")
    assert choose_threads(8, 2, None, 6) == (6, "OMP_NUM_THREADS=6")
    with pytest.raises(ValueError, match="local_processes"):
        choose_threads(8, 0, None, None)


def test_the_callback_reads_the_environment_as_the_command_starts(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", " 3 ")
    assert TorchThreads().environment == 3
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert TorchThreads().environment is None and TorchThreads(per_process=2).per_process == 2


@pytest.mark.parametrize("value", [0, -1, "two", 1.5, True])
def test_bad_thread_counts_name_their_setting(value, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    with pytest.raises(ValueError, match=r"torch_threads\.per_process must be a positive integer"):
        TorchThreads(per_process=value)
    monkeypatch.setenv("OMP_NUM_THREADS", str(value))
    with pytest.raises(ValueError, match="OMP_NUM_THREADS must be a positive integer"):
        TorchThreads()
