"""backend="auto": the fastest agreeing backend on this machine, recorded in the store's encoder
fingerprint, and the exact torch encoder with one log line when no faster backend can load."""

from __future__ import annotations

import logging
import sys

import pytest

import memnets
from memnets.nn.backend_choice import AUTO_ORDER, cpu_half_precision
from memnets.nn.encoder import MemoryEncoder
from memnets.store.identity import EncoderMismatchError

pytest.importorskip("onnxruntime", reason="the [onnx] extra is part of the dev install")


def test_auto_takes_the_fastest_agreeing_backend_and_the_store_records_that_choice(tiny_model_dir, tmp_path):
    memory = memnets.open(tmp_path / "store", encoder=tiny_model_dir, backend="auto")
    try:
        chosen = memory.encoder.backend
        # the first candidate loads and agrees (mean cosine >= 0.99) on the tiny model
        assert chosen == "int8"
        memory.add("Alice adopted a cat named Miso.", user="alice")
        recorded = memory.store.encoder_identity()
        assert recorded.fingerprint.startswith(f"{chosen}:") and recorded.fingerprint == memory.encoder.fingerprint
    finally:
        memory.close()
    # the vectors are int8's: opening the store with the exact encoder is refused, not mixed
    with pytest.raises(EncoderMismatchError, match=f"{chosen}:"):
        memnets.open(tmp_path / "store", encoder=tiny_model_dir, backend="torch").search("cat", user="alice")


def test_auto_falls_back_to_torch_with_one_log_line_when_onnxruntime_cannot_load(tiny_model_dir, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # what Python does when it is not installed
    with caplog.at_level(logging.INFO, logger="memnets.nn.backend_choice"):
        encoder = MemoryEncoder.from_pretrained(tiny_model_dir, backend="auto")
    assert encoder.backend == "torch" and encoder._runner is None
    assert encoder.fingerprint.startswith("torch:")
    (record,) = [r for r in caplog.records if r.name == "memnets.nn.backend_choice"]
    assert record.levelno == logging.WARNING and "fell back to the exact 'torch'" in record.getMessage()
    for backend in AUTO_ORDER:  # each passed-over candidate is named with its reason
        assert f"{backend!r} could not load (ModuleNotFoundError" in record.getMessage()
    assert "onnxruntime" in record.getMessage()  # a core dependency: no extra to name, the module is named
    assert encoder.encode(["a memory"]).shape == (1, encoder.dim)


def test_auto_leaves_the_vnni_backends_to_be_asked_for_by_name():
    """Faster on a VNNI CPU, but outside the R@10 floor on a trained pack: never chosen automatically."""
    assert "int8_vnni" not in AUTO_ORDER and "int8_vnni_ffn" not in AUTO_ORDER


def test_half_precision_is_decided_from_the_cpu_flags():
    avx2 = cpu_half_precision(["avx", "avx2", "fma", "f16c"])
    assert not avx2["fp16"] and not avx2["bf16"] and avx2["decision"].startswith("not used")
    amx = cpu_half_precision(["avx2", "avx512f", "avx512_bf16", "amx_bf16"])
    assert amx["bf16"] and not amx["fp16"] and "avx512_bf16, amx_bf16" in amx["decision"]
