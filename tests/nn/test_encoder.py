"""MemoryEncoder: same vectors as sentence-transformers, save/load round trips, input checks."""

from __future__ import annotations

import json

import pytest
import torch

from memnets.nn.encoder import DEFAULT_BACKBONE, MemoryEncoder

TEXTS = [
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "Melanie: That's great! What did you learn there?",
    "short",
    "When did Caroline go to the support group?",
]


def _sentence_transformer(model_dir, max_length):
    """A sentence-transformers model built from its own modules (the reference implementation)."""
    from sentence_transformers import SentenceTransformer, models

    transformer = models.Transformer(str(model_dir), max_seq_length=max_length)
    pooling = models.Pooling(transformer.get_embedding_dimension(), pooling_mode="mean")
    return SentenceTransformer(modules=[transformer, pooling, models.Normalize()], device="cpu")


def test_encode_matches_sentence_transformers_on_tiny_model(tiny_model_dir):
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=32)
    reference = _sentence_transformer(tiny_model_dir, 32).encode(TEXTS, convert_to_tensor=True)
    ours = encoder.encode(TEXTS, batch_size=3)
    assert ours.shape == (len(TEXTS), encoder.dim) == (4, 32)
    assert ours.dtype == torch.float32 and ours.device.type == "cpu"
    torch.testing.assert_close(ours, reference.cpu(), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(ours.norm(dim=1), torch.ones(4))


def test_encode_keeps_input_order_and_batch_size_does_not_matter(tiny_model_dir):
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir)
    one_by_one = torch.cat([encoder.encode([t]) for t in TEXTS])
    torch.testing.assert_close(encoder.encode(TEXTS, batch_size=2), one_by_one, atol=1e-5, rtol=1e-4)


def test_forward_has_gradients_and_encode_restores_mode(tiny_model_dir):
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir)
    encoder.train()
    out = encoder(**encoder.tokenize(TEXTS[:2]))
    out.sum().backward()
    assert out.requires_grad and any(p.grad is not None for p in encoder.parameters())
    encoder.encode(TEXTS[:1])
    assert encoder.training and all(module.training for module in encoder.modules())


def test_loaded_encoder_is_in_eval_mode_and_encode_switches_no_mode(tiny_model_dir, monkeypatch):
    """A loaded encoder is in eval mode everywhere, so encode (one query per agent turn) writes no
    mode flag: Module.train over MiniLM's tree cost 3 ms per call, twice per query."""
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir)
    assert not any(module.training for module in encoder.modules())
    switches = []
    real_train = torch.nn.Module.train
    monkeypatch.setattr(
        torch.nn.Module, "train", lambda self, mode=True: switches.append(mode) or real_train(self, mode)
    )
    encoder.encode(TEXTS[:2])
    assert switches == []
    exact = encoder.encode(TEXTS[:2])
    encoder.backbone.encoder.layer[0].train()  # one submodule in training mode (dropout on): encode switches
    assert torch.equal(encoder.encode(TEXTS[:2]), exact) and switches


def test_batches_stay_padded_while_other_threads_use_the_tokenizer(tiny_model_dir):
    """A fast tokenizer's padding setting is state every call sets: before tokenize() padded with a
    copy of its own, an unpadded call in another thread (the memory API's token check) left about
    one batch of texts of different lengths in five unpadded, "Unable to create tensor"."""
    import threading

    enc = MemoryEncoder.from_pretrained(tiny_model_dir)
    done, errors = threading.Event(), []

    def check_tokens():
        while not done.is_set():
            enc.tokenizer("a short text to check", add_special_tokens=False, verbose=False)

    checker = threading.Thread(target=check_tokens)
    checker.start()
    try:
        for _ in range(60):
            try:
                vectors = enc.encode(["short", "a much longer text with many more words in it than the first"])
                assert vectors.shape == (2, enc.dim)
            except ValueError as error:
                errors.append(str(error))
    finally:
        done.set()
        checker.join()
    assert errors == []


def test_prefixes_change_queries_only(tiny_model_dir):
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir, query_prefix="query: ")
    plain = MemoryEncoder.from_pretrained(tiny_model_dir)
    torch.testing.assert_close(encoder.encode(TEXTS, kind="memory"), plain.encode(TEXTS, kind="memory"))
    assert not torch.allclose(encoder.encode(TEXTS, kind="query"), plain.encode(TEXTS, kind="query"))
    torch.testing.assert_close(encoder.encode(TEXTS, kind="query"), plain.encode(["query: " + t for t in TEXTS]))


def test_max_length_truncates(tiny_model_dir):
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=8)
    assert encoder.tokenize([TEXTS[0]])["input_ids"].shape == (1, 8)


def test_save_load_round_trip_with_projection_and_prefixes(tiny_model_dir, tmp_path):
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(1)
    encoder = MemoryEncoder.from_pretrained(
        tiny_model_dir, max_length=24, projection_dim=16, query_prefix="query: ", memory_prefix="memory: "
    )
    encoder.save_pretrained(tmp_path / "enc")
    again = MemoryEncoder.from_pretrained(tmp_path / "enc")
    assert (again.dim, again.max_length, again.query_prefix, again.memory_prefix) == (16, 24, "query: ", "memory: ")
    for kind in ("memory", "query"):
        torch.testing.assert_close(again.encode(TEXTS, kind=kind), encoder.encode(TEXTS, kind=kind))

    st = SentenceTransformer(str(tmp_path / "enc"), device="cpu")
    torch.testing.assert_close(
        st.encode_query(TEXTS, convert_to_tensor=True).cpu(), encoder.encode(TEXTS, kind="query"), atol=1e-5, rtol=1e-4
    )
    torch.testing.assert_close(
        st.encode_document(TEXTS, convert_to_tensor=True).cpu(),
        encoder.encode(TEXTS, kind="memory"),
        atol=1e-5,
        rtol=1e-4,
    )
    manifest = json.loads((tmp_path / "enc" / "memnets_encoder.json").read_text())
    assert manifest["projection_dim"] == 16 and manifest["dim"] == 16


def test_save_without_projection_loads_in_transformers(tiny_model_dir, tmp_path):
    from transformers import AutoModel

    MemoryEncoder.from_pretrained(tiny_model_dir).save_pretrained(tmp_path / "enc")
    assert AutoModel.from_pretrained(tmp_path / "enc").config.hidden_size == 32


def test_bad_inputs_are_named(tiny_model_dir, tmp_path):
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir)
    with pytest.raises(ValueError, match="kind"):
        encoder.tokenize(["a"], kind="document")
    with pytest.raises(TypeError, match="sequence of strings"):
        encoder.encode("one string")
    with pytest.raises(FileNotFoundError, match="encoder path"):
        MemoryEncoder.from_pretrained(tmp_path / "missing")
    assert encoder.encode([]).shape == (0, 32)


@pytest.mark.slow
def test_real_backbone_matches_sentence_transformers():
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(DEFAULT_BACKBONE, device="cpu").encode(TEXTS, convert_to_tensor=True).cpu()
    ours = MemoryEncoder.from_pretrained().encode(TEXTS)
    assert ours.shape == (4, 384)
    cosine = (ours * reference).sum(dim=1)
    assert cosine.min() > 0.99999
    torch.testing.assert_close(ours, reference, atol=1e-5, rtol=1e-4)


def test_encoders_satisfy_the_text_encoder_protocol_and_the_cache_returns_the_same_vectors(tiny_model_dir):
    from memnets.nn.embedding_cache import CachedEncoder
    from memnets.nn.encoder import encoder_dim
    from memnets.protocols import TextEncoder

    encoder = MemoryEncoder.from_pretrained(tiny_model_dir)
    cached = CachedEncoder(encoder)
    assert isinstance(encoder, TextEncoder) and isinstance(cached, TextEncoder)
    assert not isinstance(object(), TextEncoder)
    assert encoder_dim(tiny_model_dir) == encoder.dim == cached.dim
    texts = ["Ann: a dog", "Bob: a cat", "Ann: a dog"]
    torch.testing.assert_close(cached.encode(texts, kind="query"), encoder.encode(texts, kind="query"))
    assert set(cached.cache) == {("query", "Ann: a dog"), ("query", "Bob: a cat")}
    assert cached.encode([], kind="memory").shape == (0, encoder.dim)
