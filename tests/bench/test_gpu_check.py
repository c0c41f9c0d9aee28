"""scripts/gpu_check.sh: its report of parts that passed, failed, ran out of time or were skipped, and
(slow) a whole run in CPU mode at the tiny sizes, with the GPU parts skipped and saying why. Like every
test of bench/, these run its script (bench.experiments.gpu_check) as a process, never import it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bench_helpers import run_bench

ROOT = Path(__file__).resolve().parents[2]


def _write(path: Path, payload) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload))


def test_assemble_reports_each_part_as_ok_failed_timed_out_or_skipped(tmp_path):
    work = tmp_path / "work"
    _write(work / "probe.json", {"cuda": True, "gpu_skipped": None, "device": "a GPU"})
    _write(work / "tests.json", {"counts": {"passed": 7, "failed": 0, "skipped": 0}, "exit_code": 0})
    _write(work / "tests.status.json", {"exit_code": 0, "seconds": 20, "limit_s": 75})
    _write(work / "encoders.status.json", {"exit_code": 124, "seconds": 150, "limit_s": 150})  # no result written
    _write(work / "faiss.json", {"gpu": {"skipped": "no faiss-gpu"}, "cpu": {"kind": "ivf", "recall@10": 0.99}})
    _write(work / "faiss.status.json", {"exit_code": 1, "seconds": 3, "limit_s": 45})
    # the pipeline stopped by its limit: its run record still says which steps ran
    steps = [
        {"step": "data", "seconds": 9.0, "status": "ok"},
        {"step": "encoder", "seconds": None, "status": "not run"},
    ]
    _write(work / "pipeline" / "run.json", {"total_s": 9.0, "steps": steps})
    _write(work / "pipeline.status.json", {"exit_code": 124, "seconds": 200, "limit_s": 200})

    out, started = tmp_path / "out.json", time.time() - 5
    done = run_bench("bench.experiments.gpu_check", "assemble", "--work", work, "--out", out, "--started", started)
    report = json.loads(out.read_text())
    assert report["mode"] == "gpu" and report["gpu_parts_skipped"] is None and report["seconds"] >= 5
    states = {name: part["status"] for name, part in report["parts"].items()}
    assert states == {"tests": "ok", "encoders": "timed out", "faiss": "failed", "pipeline": "timed out"}
    assert report["parts"]["encoders"]["result"] is None and report["parts"]["encoders"]["limit_s"] == 150
    assert report["parts"]["pipeline"]["result"]["steps"]["data"] == {"seconds": 9.0, "status": "ok"}
    lines = done.stdout.splitlines()
    assert "  tests: ok (20 s): 7 passed, 0 failed, 0 skipped" in lines
    assert "  faiss: failed (3 s): cpu ivf R@10 0.99; gpu skipped" in lines
    assert "  pipeline: timed out (200 s): data ok, encoder not run" in lines


@pytest.mark.slow
def test_the_script_runs_in_cpu_mode_with_the_gpu_parts_skipped(tmp_path):
    out = tmp_path / "check.json"
    env = dict(os.environ, GPU_CHECK_TINY="1", CUDA_VISIBLE_DEVICES="", PYTHON=sys.executable)
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_check.sh"), str(out)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "GPU parts skipped: no CUDA device" in done.stdout
    report = json.loads(out.read_text())
    assert report["mode"] == "cpu" and report["probe"]["tiny"] is True
    parts = report["parts"]
    assert {name: part["status"] for name, part in parts.items()} == {
        "tests": "ok",
        "encoders": "ok",
        "faiss": "ok",
        "pipeline": "skipped",
    }
    counts = parts["tests"]["result"]["counts"]
    assert counts["failed"] == counts["passed"] == 0 and counts["skipped"] >= 5  # each gpu test skips itself
    backends = parts["encoders"]["result"]["backends"]
    assert backends["cpu/torch"]["texts_per_s"] > 0 and backends["cpu/torch"]["cosine_to_exact"]["min"] > 0.9999
    assert backends["cpu/int8"]["cosine_to_exact"]["mean"] > 0.98
    assert all("no CUDA device" in row["skipped"] for key, row in backends.items() if key.startswith("cuda/"))
    faiss = parts["faiss"]["result"]
    assert faiss["cpu"]["recall@10"] > 0.9 and "no CUDA device" in faiss["gpu"]["skipped"]
    assert "train on a GPU" in parts["pipeline"]["result"]["skipped"]
    assert report["seconds"] < 480
