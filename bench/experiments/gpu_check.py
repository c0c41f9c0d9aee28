"""The parts of scripts/gpu_check.sh: one GPU check, every measurement in one JSON.

The script runs each part as ``python -m bench.experiments.gpu_check PART --work DIR`` under its own time limit,
so that a part that fails or runs out of time costs only itself; each writes ``DIR/PART.json``, and
``assemble`` gathers them, with the script's record of each part's exit status and seconds, into
the output JSON. Parts:

- ``probe``: the machine (CUDA device, bf16, FAISS's GPU support, the large backbone's parts) and
  which GPU parts will be skipped and why;
- ``tests``: the tests marked ``gpu`` (``pytest -m gpu`` on the files of tests/ that carry the marker):
  passed, failed and skipped, with the skip reasons;
- ``encoders``: texts/s at batch 64 of every encoder backend on LoCoMo turns, and the mean and least
  cosine of its vectors to the exact CPU torch ones: torch, onnx, int8, int8_vnni, int8_vnni_ffn on
  the CPU (the VNNI ones only where the CPU has VNNI), torch, fp16 and bf16 on the GPU, the GPU ones
  for the large backbone too when its parts are installed;
- ``faiss``: FaissRetriever's default index ("auto") on the CPU and on the GPU (faiss-gpu) over the same
  vectors: build seconds, queries/s, recall@10 against exact search, and the GPU's agreement with the
  CPU index (faiss.contrib.evaluation.knn_intersection_measure);
- ``pipeline``: ``memnets run -c pipeline/large`` (the large backbone; pipeline/gpu when its parts are
  not installed) in a scratch folder, the encoder trained ``--epochs`` epochs in bf16-mixed (16-mixed
  on a GPU without bf16); its steps' seconds and the test-split figures it wrote.

Without a CUDA GPU every GPU part says ``skipped`` with the reason, and the CPU parts still run.
``--tiny`` shrinks every size to seconds (the slow test runs the script so).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import numpy as np

from bench.common import REPO_ROOT, brute_numpy, machine, script_env, turn_texts, versions
from bench.vector_sets import vector_set

PARTS = ("probe", "tests", "encoders", "faiss", "pipeline")
GPU_MARK = re.compile(r"pytest\.mark\.gpu\b")
CPU_BACKENDS = ("torch", "onnx", "int8", "int8_vnni", "int8_vnni_ffn")
GPU_BACKENDS = ("torch", "fp16", "bf16")
BATCH = 64
K = 10
# (LoCoMo turns a backend encodes, of which those compared with the exact vectors, seconds a backend's
# texts/s is timed for, FAISS vectors, FAISS queries): the time per backend is bounded, not the texts, so
# that the part fits its limit on a 2-core CPU and a 16-core GPU machine alike
SIZES = {
    False: (1024, 64, 4.0, 100_000, 1000),
    True: (256, 32, 1.0, 5_000, 100),
}


def skipped(reason: str) -> dict:
    return {"skipped": reason}


# --- probe ----------------------------------------------------------------------------------------


def probe(tiny: bool) -> dict:
    """What this machine has, and the reason each GPU part will be skipped (None: it runs)."""
    import torch

    cuda = torch.cuda.is_available()
    no_cuda = "no CUDA device visible to torch" + ("" if torch.version.cuda else " (a CPU build of torch)")
    return {
        "tiny": tiny,
        "cuda": cuda,
        "device": torch.cuda.get_device_name(0) if cuda else None,
        "bf16": bool(cuda and torch.cuda.is_bf16_supported()),
        "gpu_skipped": None if cuda else no_cuda,
        "faiss_gpu_skipped": faiss_gpu_reason(),
        "large_backbone_skipped": large_backbone_reason(join=cuda),
        "machine": machine(),
        "versions": versions(),
    }


def faiss_gpu_reason() -> str | None:
    """Why FAISS cannot search on a GPU here, or None when it can."""
    import faiss

    if not hasattr(faiss, "StandardGpuResources"):
        return (
            f"this FAISS build ({faiss.__version__}) has no GPU support: "
            "pip uninstall -y faiss-cpu && pip install faiss-gpu-cu12 (the [gpu] extra)"
        )
    if faiss.get_num_gpus() < 1:
        return "FAISS has GPU support but sees no GPU"
    return None


def large_backbone_reason(join: bool) -> str | None:
    """Why the large backbone cannot be used here, or None. ``join``: join its parts into the cache now
    (a GPU part will use it), else only check that they are installed."""
    from memnets.nn.large_backbone import LARGE, part_files, split_model_folder

    try:
        split_model_folder() if join else part_files(LARGE)
    except (OSError, ValueError) as error:  # MissingPartError, a damaged or tampered archive
        return f"{type(error).__name__}: {error}"
    return None


# --- tests ----------------------------------------------------------------------------------------


def gpu_tests(work: Path) -> dict:
    """``pytest -m gpu`` on the files of tests/ that mark a test ``gpu``; the counts from its JUnit XML."""
    files = sorted(
        path.relative_to(REPO_ROOT).as_posix()
        for path in (REPO_ROOT / "tests").rglob("test_*.py")
        if GPU_MARK.search(path.read_text())
    )
    report = work / "gpu-tests.xml"
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-rs", "-p", "no:cacheprovider"]
    command += [f"--junitxml={report}", *files]
    done = subprocess.run(command, cwd=REPO_ROOT, env=script_env(), capture_output=True, text=True)
    print(done.stdout[-4000:], done.stderr[-2000:], sep="\n", flush=True)
    return {"files": files, "exit_code": done.returncode, **junit_counts(report)}


def junit_counts(report: Path) -> dict:
    """``counts`` of passed, failed (errors included) and skipped tests in a JUnit XML; the failures' names
    and each skipped test's reason."""
    if not report.is_file():
        return {"counts": {"passed": 0, "failed": 0, "skipped": 0}, "note": "pytest wrote no report"}
    failed, skips, passed = [], {}, 0
    for case in ElementTree.parse(report).iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        outcome = next((child for child in case if child.tag in ("failure", "error", "skipped")), None)
        if outcome is None:
            passed += 1
        elif outcome.tag == "skipped":
            skips[name] = outcome.get("message", "")
        else:
            failed.append(name)
    counts = {"passed": passed, "failed": len(failed), "skipped": len(skips)}
    return {"counts": counts, "failures": failed, "skip_reasons": skips}


# --- encoders -------------------------------------------------------------------------------------


def encoders(tiny: bool, found: dict) -> dict:
    """texts/s and agreement of every backend (see the module docstring), keyed ``device/backend[/large]``."""
    import torch

    from memnets.nn.backend_choice import has_vnni
    from memnets.nn.encoder import DEFAULT_BACKBONE, LARGE_BACKBONE, MemoryEncoder
    from memnets.nn.onnx_encoder import VNNI_BACKENDS

    count, compared, seconds = SIZES[tiny][:3]
    texts = turn_texts(count)
    rows: dict[str, dict] = {}
    exact = MemoryEncoder.from_pretrained(DEFAULT_BACKBONE).encode(texts[:compared], batch_size=BATCH)
    timed = partial(timed_encoder, texts=texts, compared=compared, seconds=seconds)
    for backend in CPU_BACKENDS:
        if backend in VNNI_BACKENDS and not has_vnni():
            rows[f"cpu/{backend}"] = skipped("this CPU has no VNNI (avx512_vnni, avx_vnni or amx_int8)")
            continue
        rows[f"cpu/{backend}"] = timed(partial(MemoryEncoder.from_pretrained, backend=backend), reference=exact)
    models = [("", DEFAULT_BACKBONE, exact)]
    if found["large_backbone_skipped"] is None and found["cuda"]:
        large = MemoryEncoder.from_pretrained(LARGE_BACKBONE).to("cuda").encode(texts[:compared], batch_size=BATCH)
        models.append(("/large", LARGE_BACKBONE, large))
    else:
        rows["cuda/*/large"] = skipped(found["gpu_skipped"] or found["large_backbone_skipped"])
    for suffix, model, reference in models:
        for backend in GPU_BACKENDS:
            key = f"cuda/{backend}{suffix}"
            if not found["cuda"]:
                rows[key] = skipped(found["gpu_skipped"])
                continue
            rows[key] = timed(partial(on_cuda, model, backend), reference=reference, sync=torch.cuda.synchronize)
    return {
        "texts": len(texts),
        "compared_with_exact": compared,
        "timed_s_per_backend": seconds,
        "batch_size": BATCH,
        "model": "all-MiniLM-L6-v2, all-mpnet-base-v2 for /large",
        "exact": "torch float32 on the CPU (/large: on the GPU)",
        "backends": rows,
    }


def on_cuda(model: str, backend: str):
    """The encoder ``model`` with ``backend``, on the first CUDA device."""
    from memnets.nn.encoder import MemoryEncoder

    return MemoryEncoder.from_pretrained(model, backend=backend).to("cuda")


def timed_encoder(load, *, texts: list[str], compared: int, seconds: float, reference, sync=None) -> dict:
    """Load an encoder (timed: a CPU ONNX backend converts here), embed the first ``compared`` texts (its
    warm-up too) for the cosine to ``reference``, then encode batches of 64 of ``texts`` in turn for about
    ``seconds``: its texts/s."""
    started = time.perf_counter()
    encoder = load()
    loaded = time.perf_counter() - started
    cosines = (encoder.encode(texts[:compared], batch_size=BATCH) * reference).sum(dim=1)
    done, start = 0, 0
    if sync:
        sync()
    started = time.perf_counter()
    while done == 0 or time.perf_counter() - started < seconds:
        encoder.encode(texts[start : start + BATCH], batch_size=BATCH)
        if sync:
            sync()
        done += len(texts[start : start + BATCH])
        start = (start + BATCH) % len(texts)
    return {
        "backend": encoder.backend,  # what loaded: a VNNI backend falls back to int8 elsewhere
        "load_s": round(loaded, 2),
        "texts_per_s": round(done / (time.perf_counter() - started), 1),
        "texts_timed": done,
        "cosine_to_exact": {"mean": round(float(cosines.mean()), 5), "min": round(float(cosines.min()), 5)},
    }


# --- faiss ----------------------------------------------------------------------------------------


def faiss_check(tiny: bool, found: dict) -> dict:
    """The default index on the CPU and the GPU over the same clustered vectors, against exact search."""
    from faiss.contrib.evaluation import knn_intersection_measure

    n, count = SIZES[tiny][3:]
    vectors, queries_for = vector_set("loose", n, count)
    queries = queries_for(n)
    exact = brute_numpy(vectors, queries, K)
    out = {"vectors": n, "dim": int(vectors.shape[1]), "queries": count, "k": K, "index": "auto"}
    out["cpu"], cpu_found = index_run(vectors, queries, exact, use_gpu=False)
    reason = found["gpu_skipped"] or found["faiss_gpu_skipped"]
    if reason:
        out["gpu"] = skipped(reason)
        return out
    out["gpu"], gpu_found = index_run(vectors, queries, exact, use_gpu=True)
    out["gpu"]["agreement_with_cpu@10"] = round(float(knn_intersection_measure(gpu_found, cpu_found)), 4)
    return out


def index_run(vectors: np.ndarray, queries: np.ndarray, exact: np.ndarray, use_gpu: bool):
    """Build FaissRetriever("auto") over ``vectors`` (the first search included: it makes the GPU copy),
    then search every query in one batch; the figures, and the ids found as an int array."""
    from faiss.contrib.evaluation import knn_intersection_measure

    from memnets.retrieval.faiss_retriever import FaissRetriever

    retriever = FaissRetriever(vectors.shape[1], "auto", use_gpu=use_gpu, background=False)
    started = time.perf_counter()
    retriever.add([str(i) for i in range(len(vectors))], vectors, "check")
    retriever.search(queries[:1], K, "check")
    built = time.perf_counter() - started
    started = time.perf_counter()
    ids, _ = retriever.search(queries, K, "check")
    searched = time.perf_counter() - started
    found = np.array([[int(i) for i in row] for row in ids])
    figures = {
        "kind": retriever.kind("check"),
        "build_s": round(built, 3),
        "queries_per_s": round(len(queries) / searched, 1),
        "recall@10": round(float(knn_intersection_measure(found, exact)), 4),
    }
    return figures, found


# --- pipeline -------------------------------------------------------------------------------------


def pipeline(work: Path, epochs: int, found: dict) -> dict:
    """``memnets run`` of pipeline/large (else pipeline/gpu) in ``work/pipeline``, the encoder trained
    ``epochs`` epochs at bf16-mixed when the GPU has bf16 (else 16-mixed); its record and figures."""
    if not found["cuda"]:
        return skipped(f"{found['gpu_skipped']}: pipeline/gpu and pipeline/large train on a GPU")
    large = found["large_backbone_skipped"] is None
    base, encoder_config = ("pipeline/large", "encoder/large") if large else ("pipeline/gpu", "encoder/gpu")
    precision = "bf16-mixed" if found["bf16"] else "16-mixed"
    folder = work / "pipeline"
    folder.mkdir(exist_ok=True)
    config = folder / "pipeline.yaml"
    fit = ["fit", "encoder", "-c", encoder_config, "--trainer.max_epochs", str(epochs)]
    config.write_text(json.dumps({"base": base, "steps": {"encoder": [*fit, "--trainer.precision", precision]}}))
    command = [sys.executable, "-m", "memnets", "run", "-c", str(config), "--record", str(folder / "run.json")]
    code = subprocess.call(command, cwd=folder, env=script_env())
    return {
        "config": base,
        "backbone": "all-mpnet-base-v2" if large else "all-MiniLM-L6-v2",
        "why_not_large": found["large_backbone_skipped"],
        "precision": precision,
        "encoder_epochs": epochs,
        "exit_code": code,
        **pipeline_record(folder),
    }


def pipeline_record(folder: Path) -> dict:
    """What a pipeline run in ``folder`` left: its steps' seconds and status (``run.json``) and the
    test-split figures of its evaluations (recall@10 per ranker, the heads' main metrics)."""
    out: dict = {}
    record = folder / "run.json"
    if record.is_file():
        run = json.loads(record.read_text())
        out["steps"] = {step["step"]: {"seconds": step["seconds"], "status": step["status"]} for step in run["steps"]}
        out["total_s"] = run["total_s"]
    for report in sorted(folder.glob("checkpoints/*/eval/*-test.json")) + sorted(
        folder.glob("checkpoints/eval/*-test.json")
    ):
        out.setdefault("figures", {})[report.name] = summary_of(json.loads(report.read_text()))
    return out


def summary_of(report: dict) -> dict:
    """The headline numbers of an evaluation JSON: per ranker of ``memnets eval retrieval`` its overall
    recall@5, recall@10, MRR@10 and nDCG@10; elsewhere (``eval heads``) every number at most three
    levels down whose key names AP or AUROC."""
    if isinstance(report.get("reports"), list):
        headline = ("recall@5", "recall@10", "mrr@10", "ndcg@10")
        return {
            ranker["name"]: {m: round(ranker["overall"][m], 4) for m in headline if m in ranker["overall"]}
            for ranker in report["reports"]
        }
    wanted = re.compile(r"(^|[_ ])ap$|auroc", re.I)
    out = {}

    def walk(value, path: list[str]) -> None:
        if isinstance(value, dict) and len(path) < 3:
            for key, inner in value.items():
                walk(inner, [*path, str(key)])
        elif isinstance(value, int | float) and path and wanted.search(path[-1]):
            out["/".join(path)] = round(float(value), 4)

    walk(report, [])
    return out


# --- assemble -------------------------------------------------------------------------------------


def assemble(work: Path, out: Path, started: float) -> dict:
    """One JSON of every part: its result (or why there is none), exit status, seconds and time limit."""
    found = json.loads((work / "probe.json").read_text()) if (work / "probe.json").is_file() else {}
    parts = {}
    for part in PARTS[1:]:
        status = _read(work / f"{part}.status.json") or {}
        result = _read(work / f"{part}.json")
        if result is None and part == "pipeline":
            result = pipeline_record(work / "pipeline") or None  # a pipeline stopped by its limit: what it did
        code = status.get("exit_code")
        state = (
            "timed out"
            if code in (124, 137)
            else "skipped"
            if isinstance(result, dict) and "skipped" in result
            else "ok"
            if code == 0 and result is not None
            else "failed"
        )
        parts[part] = {"status": state, **status, "result": result}
    gpu_skipped = found.get("gpu_skipped")
    report = {
        "script": "scripts/gpu_check.sh",
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": round(time.time() - started, 1),
        "mode": "cpu" if gpu_skipped else "gpu",
        "gpu_parts_skipped": gpu_skipped,
        "probe": found,
        "parts": parts,
    }
    out.write_text(json.dumps(report, indent=2) + "\n")
    return report


def _read(path: Path):
    return json.loads(path.read_text()) if path.is_file() else None


def summary_lines(report: dict) -> list[str]:
    """The run in a few lines, for the script's output."""
    lines = [f"gpu_check: {report['mode']} mode, {report['seconds']} s"]
    if report["gpu_parts_skipped"]:
        lines.append(f"  GPU parts skipped: {report['gpu_parts_skipped']}")
    for name, part in report["parts"].items():
        result = part.get("result") or {}
        detail = result.get("skipped") or DETAILS.get(name, lambda r: "")(result)
        lines.append(f"  {name}: {part['status']} ({part.get('seconds', '?')} s){': ' + detail if detail else ''}")
    return lines


def _tests_detail(result: dict) -> str:
    return ", ".join(f"{count} {outcome}" for outcome, count in result.get("counts", {}).items())


def _encoders_detail(result: dict) -> str:
    rows = result.get("backends", {})
    return ", ".join(
        f"{key} {row['texts_per_s']:g}/s" if "texts_per_s" in row else f"{key} skipped" for key, row in rows.items()
    )


def _faiss_detail(result: dict) -> str:
    sides = [(side, result.get(side) or {}) for side in ("cpu", "gpu")]
    return "; ".join(
        f"{side} skipped" if "skipped" in row else f"{side} {row.get('kind')} R@10 {row.get('recall@10')}"
        for side, row in sides
        if row
    )


def _pipeline_detail(result: dict) -> str:
    steps = result.get("steps", {})
    return ", ".join(f"{step} {row['status']}" for step, row in steps.items())


DETAILS = {"tests": _tests_detail, "encoders": _encoders_detail, "faiss": _faiss_detail, "pipeline": _pipeline_detail}


# --- the command ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.experiments.gpu_check", description=__doc__)
    parser.add_argument("part", choices=[*PARTS, "assemble"])
    parser.add_argument("--work", type=Path, required=True, help="the folder the parts share")
    parser.add_argument("--tiny", action="store_true", help="sizes of seconds (the slow test's)")
    parser.add_argument("--epochs", type=int, default=3, help="the pipeline's encoder epochs (default 3)")
    parser.add_argument("--out", type=Path, help="assemble: the JSON to write")
    parser.add_argument("--started", type=float, help="assemble: the script's start (seconds since the epoch)")
    args = parser.parse_args(argv)
    if args.part == "assemble":
        if args.out is None or args.started is None:
            parser.error("assemble needs --out and --started")
        report = assemble(args.work, args.out, args.started)
        print("\n".join(summary_lines(report)), f"  written to {args.out}", sep="\n")
        return 0
    if args.part == "probe":
        result = probe(args.tiny)
    else:
        found = json.loads((args.work / "probe.json").read_text())
        if args.part == "tests":
            result = gpu_tests(args.work)
        elif args.part == "encoders":
            result = encoders(args.tiny, found)
        elif args.part == "faiss":
            result = faiss_check(args.tiny, found)
        else:
            result = pipeline(args.work, args.epochs, found)
    (args.work / f"{args.part}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2)[:3000], flush=True)
    return int(result.get("exit_code", 0) not in (0, None)) if isinstance(result, dict) else 0


if __name__ == "__main__":
    sys.exit(main())
