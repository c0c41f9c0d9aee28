"""Every script in examples/ runs as a user runs it: its own process, from an empty working folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the bundled MiniLM and a tiny training run: a few minutes on 2 cores

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, *args: str, cwd: Path) -> str:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, f"{name} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def test_quickstart(tmp_path):
    out = run_example("quickstart.py", str(tmp_path / "memory"), cwd=tmp_path)
    first_hit = out.splitlines()[0]
    assert "Rex" in first_hit  # the metadata filter leaves the pet memory, and search finds it
    assert "users: ['ann']" in out and "after delete_all: []" in out


def test_langgraph_agent(tmp_path):
    out = run_example("langgraph_agent.py", str(tmp_path / "memory"), cwd=tmp_path)
    last = out.strip().splitlines()[-1]
    assert last.startswith("'Can you suggest a dinner place") and "Lisbon" in last


def test_train_on_jsonl_then_load_the_pack(tmp_path):
    out = run_example("train_on_jsonl.py", "--quick", cwd=tmp_path)
    pack = tmp_path / "checkpoints" / "examples" / "pack"
    assert (pack / "manifest.json").is_file() and "learned" in out and "recall@10" in out.replace("R@10", "recall@10")
    loaded = run_example("load_pack.py", str(pack), str(tmp_path / "memory"), cwd=tmp_path)
    assert "format" in loaded and loaded.count("importance") == 2  # two hits, each with the head's importance


def test_langgraph_messages(tmp_path):
    out = run_example("langgraph_messages.py", str(tmp_path / "memory"), cwd=tmp_path)
    lines = out.strip().splitlines()
    # the second turn writes the thread's whole history again: only its new user message is added (the
    # assistant's replies are skipped: the default roles, docs/memory.md)
    assert [line.strip() for line in lines if "stored:" in line] == [
        "stored: {'added': 1, 'skipped': 1}",
        "stored: {'added': 1, 'skipped': 2, 'unchanged': 1}",
        "stored: {'added': 1, 'skipped': 1}",
    ]
    friday = next(line for line in lines if line.startswith("[friday] agent:"))
    assert "Alice: My sister Ana plays the cello" in friday  # recalled from Monday's conversation
