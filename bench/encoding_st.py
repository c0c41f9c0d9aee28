"""sentence-transformers' side of bench/encoding.py, run in its own virtual environment.

sentence-transformers' ONNX backend needs optimum-onnx, which pins an older transformers than
memnets, so this script runs under another interpreter (``--st-python``, e.g. a venv with
sentence-transformers, optimum-onnx and onnxruntime) and imports nothing from memnets. It loads
the model three ways (torch; ONNX; ONNX with dynamic int8 quantisation, the CPU's instruction set's
config), then answers requests on stdin, one JSON line each, with one JSON line on stdout:

- ``{"side": S, "what": "batch", "batch": B}``: seconds to encode every text at batch size B;
- ``{"side": S, "what": "single", "count": N}``: seconds per call encoding the first N texts one at a time;
- ``{"what": "agreement", "count": N}``: cosine of each side's vectors to the torch side's (mean,
  min) and the torch side's vectors of the first N texts.

Usage: ``PYTHON bench/encoding_st.py MODEL_DIR TEXTS.json`` (a JSON list of strings).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path


def quantisation_config() -> str:
    """The optimum quantisation preset for this CPU: avx512_vnni, avx512 or avx2."""
    flags = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    if "avx512_vnni" in flags:
        return "avx512_vnni"
    return "avx512" if "avx512f" in flags else "avx2"


def load(model_dir: str, scratch: Path) -> tuple[dict, str]:
    from sentence_transformers import SentenceTransformer, export_dynamic_quantized_onnx_model

    folder = scratch / "model"
    shutil.copytree(model_dir, folder)  # the ONNX exports are written into the model folder
    config = quantisation_config()
    onnx = SentenceTransformer(str(folder), backend="onnx", device="cpu")
    export_dynamic_quantized_onnx_model(onnx, config, str(folder))
    (quantised,) = (folder / "onnx").glob(f"model_q*int8_{config}.onnx")  # qint8 or, for avx2, quint8
    models = {
        "st-torch": SentenceTransformer(str(folder), device="cpu"),
        "st-onnx": onnx,
        "st-onnx-int8": SentenceTransformer(
            str(folder),
            backend="onnx",
            device="cpu",
            model_kwargs={"file_name": f"onnx/{quantised.name}"},
        ),
    }
    return models, config


def main(argv: list[str]) -> int:
    import numpy as np

    model_dir, texts_path = argv
    texts = json.loads(Path(texts_path).read_text())
    with tempfile.TemporaryDirectory(prefix="memnets-bench-st-") as scratch:
        models, config = load(model_dir, Path(scratch))

        def encode(side: str, batch: list[str], batch_size: int):
            return models[side].encode(
                batch, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
            )

        for side in models:  # warm-up
            encode(side, texts[:64], 64)
        print(json.dumps({"ready": list(models), "quantisation": config}), flush=True)
        for line in sys.stdin:
            request = json.loads(line)
            if request["what"] == "batch":
                start = time.perf_counter()
                encode(request["side"], texts, request["batch"])
                reply = {"seconds": time.perf_counter() - start}
            elif request["what"] == "single":
                times = []
                for text in texts[: request["count"]]:
                    start = time.perf_counter()
                    encode(request["side"], [text], 1)
                    times.append(time.perf_counter() - start)
                reply = {"times": times}
            else:
                exact = encode("st-torch", texts, 64)
                reply = {"cosines": {}, "vectors": exact[: request["count"]].tolist()}
                for side in models:
                    cosines = (encode(side, texts, 64) * exact).sum(axis=1)
                    reply["cosines"][side] = {"mean": float(cosines.mean()), "min": float(np.min(cosines))}
            print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
