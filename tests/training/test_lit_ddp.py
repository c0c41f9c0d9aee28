"""Encoder training under Lightning DDP on CPU: 2 processes on gloo, through `memnets fit encoder -c encoder/ddp_cpu`.

The fit runs as a user runs it, a `python -m memnets` process (Lightning's launcher starts rank 1 by
running the same command again), in a scratch working directory so that the config's relative
outputs (`checkpoints/...`) land there. The tiny model has BERT's pooler, which mean pooling never
runs: DDP stopped on its missing gradients until the encoder module froze it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fit_helpers import tiny_data_config
from safetensors.torch import load_file

from memnets.nn.encoder import MemoryEncoder
from memnets.training.lit.encoder import EncoderModule

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 300  # the whole fit, both processes; a hung collective is killed with its process group
THREADS_LINE = re.compile(r"training with (\d+) torch threads per process \(torch's (\d+) threads // 2 processes")


def _fit(cwd: Path, args: list[str]) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"OMP_NUM_THREADS", "MASTER_ADDR", "MASTER_PORT"}}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    log = cwd / "fit.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "memnets", "fit", "encoder", *args],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # rank 1 is rank 0's child: one group to kill
        )
        try:
            code = process.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            pytest.fail(f"the DDP fit was still running after {DEADLINE_S} s:\n{log.read_text()[-4000:]}")
    return code, log.read_text()


@pytest.mark.slow
def test_ddp_fit_on_cpu_writes_training_json_and_a_loadable_encoder(tmp_path, tiny_model_dir, tiny_locomo_path):
    assert MemoryEncoder.from_pretrained(tiny_model_dir).backbone.pooler is not None  # the case DDP stopped on
    data_config = tiny_data_config(tmp_path, tiny_locomo_path)
    args = ["-c", "encoder/ddp_cpu", "--model.backbone", str(tiny_model_dir), "--model.max_length", "32"]
    args += ["--model.lr", "1e-3", "--data.data_config", str(data_config), "--data.miner", "bm25"]
    args += ["--data.mining_top_k", "3", "--data.batch_size", "2", "--trainer.max_epochs", "1", "-v"]
    code, log = _fit(tmp_path, args)
    assert code == 0, log[-4000:]

    best = tmp_path / "checkpoints" / "encoder" / "best"
    info = json.loads((best / "training.json").read_text())
    assert info["world_size"] == 2 and info["epochs_trained"] == 1
    steps = torch.load(tmp_path / info["best_checkpoint"], map_location="cpu", weights_only=True)["global_step"]
    assert steps >= 1 and info["pairs_seen"] == steps * 2 * 2  # both ranks' pairs: 2 per rank per step
    # each rank chose its threads, torch's count shared by the 2 processes, and the steps ran with it
    choices = [(int(threads), int(machine)) for threads, machine in THREADS_LINE.findall(log)]
    assert len(choices) == 2 and all(threads == max(1, machine // 2) for threads, machine in choices), log[-4000:]
    assert info["torch_threads"] == choices[0][0]
    assert (tmp_path / info["run_dir"] / "encoder" / "training.json").is_file()

    trained = MemoryEncoder.from_pretrained(best)
    texts = ["Alice: I adopted a cat.", "what pet did Alice get?"]
    vectors = trained.encode(texts, kind="query")
    assert vectors.shape == (2, 32) and torch.allclose(vectors.norm(dim=1), torch.ones(2))
    assert not torch.allclose(vectors, MemoryEncoder.from_pretrained(tiny_model_dir).encode(texts, kind="query"))
    # the frozen pooler is exported as it was, not dropped
    start, end = load_file(tiny_model_dir / "model.safetensors"), load_file(best / "model.safetensors")
    pooler = [name for name in start if "pooler" in name]
    assert pooler and all(torch.equal(start[name], end[name]) for name in pooler)


def test_every_trainable_parameter_gets_a_gradient_and_the_fingerprint_is_kept(tiny_model_dir):
    """What DDP without find_unused_parameters needs: no trainable parameter the loss does not reach."""
    module = EncoderModule(backbone=str(tiny_model_dir), max_length=32)
    queries = module.embed(["what pet did Alice get?", "where does Bob live?"], "query")
    memories = module.embed(["Alice: I adopted a cat.", "Bob: I moved to Paris."], "memory")
    module.loss_fn(queries, memories).backward()
    missing = [name for name, p in module.named_parameters() if p.requires_grad and p.grad is None]
    assert missing == []
    frozen = [name for name, p in module.encoder.named_parameters() if not p.requires_grad]
    assert frozen and all(name.startswith("backbone.pooler.") for name in frozen)
    # freezing changes no weight: a store filled by the untrained encoder still matches it
    assert module.encoder.fingerprint == MemoryEncoder.from_pretrained(tiny_model_dir, max_length=32).fingerprint
