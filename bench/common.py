"""Shared plumbing of the benchmark scripts: the machine, versions, timing and result files."""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

# The checkout the scripts run from: `memnets bench` runs them with it as the working folder, and
# the artefacts they read (checkpoints/...) and write (bench/results) are relative to it.
REPO_ROOT = Path.cwd()
DEFAULT_OUT = REPO_ROOT / "bench" / "results"
CACHE_DIR = DEFAULT_OUT / "cache"  # embeddings computed once, shared by every --out


def parser(name: str, description: str) -> argparse.ArgumentParser:
    """The arguments every benchmark script takes: --quick, --out."""
    p = argparse.ArgumentParser(prog=f"python -m bench.{name}", description=description)
    p.add_argument("--quick", action="store_true", help="small sizes (seconds to a minute)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder for the JSON result (default: bench/results)")
    return p


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (Linux), else platform.processor()."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def total_ram_gb() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def gpu_name() -> str | None:
    import torch

    if torch.cuda.is_available():
        return ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
    return None


def machine() -> dict:
    """What the numbers were measured on, including the load at the time (shared machines)."""
    import torch

    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "ram_gb": total_ram_gb(),
        "gpu": gpu_name(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "torch_threads": torch.get_num_threads(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


def versions() -> dict:
    """Versions of the libraries the benchmarks exercise."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("memnets", "torch", "faiss-cpu", "transformers", "sentence-transformers", "numpy", "lightning"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    import faiss

    out["faiss"] = faiss.__version__  # whichever wheel (cpu or gpu) provides the module
    return out


def rss_mb() -> float:
    """Current resident set size of this process in MiB (Linux /proc), else the peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class single_thread:
    """Context manager: torch, BLAS and OpenMP (FAISS) limited to one thread.

    Batch-1 latency is measured this way: on a machine shared with other jobs, a second OpenMP or
    BLAS thread mostly waits for its core and turns a sub-millisecond search into a scheduler delay.
    """

    def __enter__(self):
        import torch
        from threadpoolctl import threadpool_limits

        self._torch_threads = torch.get_num_threads()
        torch.set_num_threads(1)
        self._limits = threadpool_limits(1)
        return self

    def __exit__(self, *exc):
        import torch

        self._limits.restore_original_limits()
        torch.set_num_threads(self._torch_threads)


def latency_summary(seconds: list[float] | np.ndarray) -> dict:
    """p50 / p99 / mean in milliseconds of per-call times, and how many calls."""
    ms = np.asarray(seconds, dtype=np.float64) * 1000
    return {
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "mean_ms": float(ms.mean()),
        "calls": int(ms.size),
    }


def write_result(out: Path, name: str, settings: dict, results: dict, notes: list[str] | None = None) -> Path:
    """Write ``<out>/<name>.json``: the results with machine, versions, settings and timestamps."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": name,
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "versions": versions(),
        "settings": settings,
        "results": results,
        "notes": notes or [],
    }
    path = out / f"{name}.json"
    path.write_text(json.dumps(payload, indent=1, default=_jsonable) + "\n")
    return path


def _jsonable(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} to JSON")
