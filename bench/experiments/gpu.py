"""GPU benchmark: encoding (torch fp32, fp16, bf16), FAISS search on the GPU, and one training step
at configs/encoder/gpu.yaml, on the first CUDA device. For a machine with a GPU; without one it
says so and exits 1, writing nothing.

- encode: texts/s of every LoCoMo turn at batch 64 and batch-1 p50 / p99 per backend, cosine to fp32;
- index: FaissRetriever with ``use_gpu=True`` (faiss-gpu) at 100k and 1M scaled MiniLM vectors,
  build seconds, batch-1 p50 and batch-1024 queries/s, recall@10 against exact search;
- training: bench.training's timed Lightning steps at the GPU config (that script, run as a child process).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import (
    CACHE_DIR,
    REPO_ROOT,
    brute_numpy,
    latency_summary,
    parser,
    real_embeddings,
    scaled,
    script_env,
    turn_texts,
    write_result,
)

GPU_BACKENDS = ("torch", "fp16", "bf16")
INDEX_SIZES = (100_000, 1_000_000)


def encode_gpu(texts: list[str], batch_size: int = 64, single: int = 200) -> dict:
    import torch

    from memnets.nn.encoder import MemoryEncoder

    out, exact = {}, None
    for backend in GPU_BACKENDS:
        encoder = MemoryEncoder.from_pretrained(backend=backend).to("cuda")
        vectors = encoder.encode(texts, batch_size=batch_size)  # warm-up
        exact = vectors if exact is None else exact
        torch.cuda.synchronize()
        start = time.perf_counter()
        encoder.encode(texts, batch_size=batch_size)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        times = []
        for text in texts[:single]:
            begin = time.perf_counter()
            encoder.encode([text], batch_size=1)
            times.append(time.perf_counter() - begin)
        cosines = (vectors * exact).sum(dim=1)
        out[backend] = {
            "texts_per_s": len(texts) / seconds,
            "single": latency_summary(times),
            "cosine_to_fp32": {"mean": float(cosines.mean()), "min": float(cosines.min())},
        }
    return out


def index_gpu(quick: bool) -> list[dict]:
    from memnets.retrieval.faiss_retriever import FaissRetriever

    base, questions = real_embeddings(CACHE_DIR)
    rows = []
    for n in INDEX_SIZES[:1] if quick else INDEX_SIZES:
        data = scaled(base, n)
        queries = questions[:1024]
        retriever = FaissRetriever(data.shape[1], "auto", use_gpu=True)
        start = time.perf_counter()
        retriever.add([str(i) for i in range(n)], data, "bench")
        retriever.search(queries[:1], 10, "bench")
        build = time.perf_counter() - start
        times = []
        for query in queries[:300]:
            begin = time.perf_counter()
            retriever.search(query[None, :], 10, "bench")
            times.append(time.perf_counter() - begin)
        begin = time.perf_counter()
        found, _ = retriever.search(queries, 10, "bench")
        qps = len(queries) / (time.perf_counter() - begin)
        truth = brute_numpy(data, queries)
        recall = np.mean([len(set(map(int, got)) & set(want.tolist())) / 10 for got, want in zip(found, truth)])
        rows.append({"n": n, "build_s": build, "single": latency_summary(times), "qps": qps, "recall@10": recall})
    return rows


def training_steps(steps: int) -> dict:
    """The results of ``python -m bench.training`` at configs/encoder/gpu.yaml for ``steps`` steps (its
    accelerator: the GPU), run as a child process."""
    from memnets.training.configs import resolve_config

    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, "-m", "bench.training", "--config", str(resolve_config("encoder/gpu"))]
        command += ["--steps", str(steps), "--out", out]
        subprocess.run(command, cwd=REPO_ROOT, env=script_env(), check=True)
        return json.loads((Path(out) / "training.json").read_text())["results"]


def main(argv: list[str] | None = None) -> int:
    args = parser("experiments.gpu", __doc__).parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("bench.experiments.gpu: no CUDA device on this machine; nothing measured", file=sys.stderr)
        return 1
    from memnets.retrieval.faiss_index import gpu_available

    texts = turn_texts(256 if args.quick else 2048)
    results = {
        "device": torch.cuda.get_device_name(0),
        "encode": encode_gpu(texts, single=20 if args.quick else 200),
        "index": index_gpu(args.quick) if gpu_available() else "faiss has no GPU support here (install faiss-gpu)",
        "training": training_steps(3 if args.quick else 10),
    }
    write_result(args.out, "gpu", {"texts": len(texts), "index_sizes": INDEX_SIZES}, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
