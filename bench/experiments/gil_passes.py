"""The encoder's passes beside a thread that holds the GIL: eager torch, traced torch, ONNX Runtime.

A server's encoder thread shares the GIL with its event loop and request threads. This measures what
that costs each way of running the bundled encoder. One thread calls ``encode`` on batches of
``--batch`` LoCoMo questions for ``--seconds``. Meanwhile another thread runs pure Python in 1 ms
slices, holding the GIL for a share ``--duties`` of the time and sleeping for the rest. Duty 0 means
alone. The machine has a core for each thread, so what a way loses beyond the busy thread's share
of the cores is time spent waiting for the GIL.

The ways:
- ``eager``: the module called from Python, which takes the GIL back before each operator;
- ``traced``: the same module traced (``MemoryEncoder.trace_for_serving``, memnets/nn/traced.py), as
  ``memnets serve http`` runs it;
- ``onnx``: the ONNX Runtime fp32 backend, which also releases the GIL for a whole run. It is left
  out without the ``[onnx]`` extra.

Printed and saved per (duty, way): texts/s and the encoder thread's CPU ms per text.

Usage: ``python -m bench.experiments.gil_passes --out docs/results`` (about a minute on 2 cores);
``--quick``: 2 s per row.
"""

from __future__ import annotations

import importlib.util
import random
import threading
import time

from bench.common import locomo_texts, parser, write_result
from bench.figures import table

SLICE_S = 0.001  # how long the busy thread holds the GIL at a stretch


def hold_gil(stop: threading.Event, duty: float) -> None:
    """Pure Python in SLICE_S slices until ``stop``, sleeping between them so that they fill ``duty`` of the time."""
    while not stop.is_set():
        started = time.perf_counter()
        while time.perf_counter() - started < SLICE_S:
            sum(range(200))
        time.sleep(SLICE_S * (1 - duty) / duty)


def passes(encode, queries: list[str], batch: int, seconds: float, duty: float) -> tuple[float, float]:
    """(texts/s, CPU ms per text of the calling thread) of ``encode`` on ``batch`` questions at a time for
    ``seconds``, beside a thread holding the GIL ``duty`` of the time (none at 0)."""
    stop = threading.Event()
    busy = threading.Thread(target=hold_gil, args=(stop, duty)) if duty else None
    if busy is not None:
        busy.start()
    rng = random.Random(0)
    texts, started, cpu = 0, time.perf_counter(), time.thread_time()
    try:
        while time.perf_counter() - started < seconds:
            encode([rng.choice(queries) for _ in range(batch)])
            texts += batch
    finally:
        stop.set()
        if busy is not None:
            busy.join()
    return texts / (time.perf_counter() - started), (time.thread_time() - cpu) * 1000 / texts


def ways(threads: int) -> dict:
    """Each way's encode (queries), loaded with ``threads`` torch threads and warmed up."""
    import torch

    from memnets.nn.encoder import MemoryEncoder

    torch.set_num_threads(threads)
    encoders = {"eager": MemoryEncoder.from_pretrained(), "traced": MemoryEncoder.from_pretrained().trace_for_serving()}
    if importlib.util.find_spec("onnxruntime") is not None:
        encoders["onnx"] = MemoryEncoder.from_pretrained(backend="onnx")
    return {name: (lambda texts, e=encoder: e.encode(texts, kind="query")) for name, encoder in encoders.items()}


def main(argv: list[str] | None = None) -> int:
    p = parser("experiments.gil_passes", __doc__)
    p.add_argument("--batch", type=int, default=10, help="questions per pass (a 2-worker server at 50 clients: ~10)")
    p.add_argument("--threads", type=int, default=1, help="torch threads of the passes (a worker on one core: 1)")
    p.add_argument(
        "--duties", default="0,0.5,0.9", help="comma-separated shares of the time the busy thread holds the GIL"
    )
    p.add_argument("--seconds", type=float, default=5.0, help="per row")
    args = p.parse_args(argv)
    seconds = 2.0 if args.quick else args.seconds
    duties = [float(duty) for duty in args.duties.split(",")]
    if any(not 0 <= duty < 1 for duty in duties):
        p.error(f"--duties: each share must be in [0, 1), got {args.duties}")
    _, queries = locomo_texts()
    encodes = ways(args.threads)
    for encode in encodes.values():
        for _ in range(5):  # first calls are slow (a traced graph is optimised over its first runs)
            encode(queries[: args.batch])
    rows = []
    for duty in duties:
        for name, encode in encodes.items():
            texts_s, cpu_ms = passes(encode, queries, args.batch, seconds, duty)
            rows.append({"duty": duty, "way": name, "texts_s": round(texts_s, 1), "cpu_ms_per_text": round(cpu_ms, 2)})
            print(rows[-1], flush=True)
    text = table(list(rows[0]), [list(row.values()) for row in rows])
    print(text)
    settings = {"batch": args.batch, "threads": args.threads, "duties": duties, "seconds": seconds}
    path = write_result(args.out, "gil_passes", settings, {"rows": rows})
    path.with_suffix(".md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
