"""The torch-free serving path against the torch one: the same vectors, fingerprints, tokens and judge scores.

:class:`~memnets.nn.serving_encoder.ServingEncoder` (an ONNX graph built from the safetensors, the
tokenizer from ``tokenizers``) and :class:`~memnets.nn.serving_judge.ServingJudge` are compared here with
:class:`~memnets.nn.encoder.MemoryEncoder` and :class:`~memnets.nn.change_judge.ChangeJudge` on real texts;
tests/package/test_torchless.py runs the doors in processes where torch cannot be imported.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from memnets.nn.change_judge import ChangeJudge
from memnets.nn.encoder import DEFAULT_BACKBONE, MemoryEncoder
from memnets.nn.fast_tokenizer import FastTokenizer
from memnets.nn.graph_cache import graphs_dir
from memnets.nn.serving_encoder import ServingEncoder
from memnets.nn.serving_judge import ServingJudge
from memnets.training.data.locomo import load_locomo

pytest.importorskip("onnxruntime")

PAIRS = [
    ("I live in Leeds.", "Lyon's been great so far, the flat is tiny though"),
    ("I live in Leeds.", "My cousin just moved to Glasgow"),
    ("My favourite tea is oolong", "These days I only drink coffee, tea makes me ill"),
    ("I work at the bakery on Main Street " * 40, "I quit the bakery last week " * 40),  # both cut to the window
    ("ok", "sure"),
]


@pytest.fixture(scope="module", autouse=True)
def cache(tmp_path_factory):
    """Graphs built into a cache of this module's own (the first build of each is part of what is tested)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MEMNETS_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="module")
def turns() -> list[str]:
    texts = [turn.content for conv in load_locomo()[:2] for turn in conv.turns][:120]
    return [*texts, "", "x " * 700, "Ünïcödé – ☕ 東京"]


@pytest.fixture(scope="module")
def minilm(turns) -> tuple[list[str], MemoryEncoder, np.ndarray]:
    """The bundled MiniLM on torch and its vectors of some turns (its two kinds embed alike: no prefixes)."""
    texts = turns[:40] + turns[-3:]
    exact = MemoryEncoder.from_pretrained()
    return texts, exact, exact.encode(texts).numpy()


def _cosines(a, b) -> np.ndarray:
    return (np.asarray(a) * np.asarray(b)).sum(axis=1)


def test_the_tokenizer_gives_transformers_ids_offsets_and_words(turns):
    from transformers import AutoTokenizer

    ours, theirs = FastTokenizer.from_folder(DEFAULT_BACKBONE), AutoTokenizer.from_pretrained(DEFAULT_BACKBONE)
    batch = ours.batch(turns, 64)
    want = theirs(turns, padding=True, truncation=True, max_length=64, return_tensors="np")
    for name in ("input_ids", "attention_mask", "token_type_ids"):
        assert np.array_equal(batch[name], want[name]), name
    older, newer = [a for a, _ in PAIRS], [b for _, b in PAIRS]
    pairs = ours.batch(older, 128, pairs=newer)
    want = theirs(older, newer, padding=True, truncation="longest_first", max_length=128, return_tensors="np")
    for name in ("input_ids", "attention_mask", "token_type_ids"):
        assert np.array_equal(pairs[name], want[name]), name
    text = turns[3]
    mine = ours(text, add_special_tokens=False, return_offsets_mapping=True)
    hf = theirs(text, add_special_tokens=False, return_offsets_mapping=True)
    assert mine["input_ids"] == hf["input_ids"] and mine["offset_mapping"] == [tuple(o) for o in hf["offset_mapping"]]
    assert mine.word_ids() == hf.word_ids()
    assert ours.num_special_tokens_to_add() == theirs.num_special_tokens_to_add() == 2
    assert ours.get_vocab() == theirs.get_vocab()


def test_the_bundled_encoder_embeds_as_torch_does_with_the_onnx_fingerprint(minilm):
    texts, exact, want = minilm
    serving = ServingEncoder.from_pretrained()
    got = serving.encode(texts, "query", batch_size=16)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert _cosines(got, want).min() >= 0.999
    # the torch encoder's digest, under the variant "onnx" (MemoryEncoder(backend="onnx")'s fingerprint: same
    # digest, the backend first; the projection test below compares with that one in full)
    assert serving.fingerprint == f"onnx:{exact.dim}:{exact.fingerprint.split(':')[2]}"
    assert serving.fingerprint != exact.fingerprint  # "onnx" against "torch": a store of one refuses the other
    assert serving.dim == exact.dim and serving.max_length == exact.max_length and serving.source == exact.source


def test_int8_serving_is_within_the_int8_bound_and_fingerprinted_int8(minilm):
    texts, _, exact = minilm
    fast = ServingEncoder.from_pretrained(backend="int8")
    assert fast.backend == "int8" and fast.fingerprint.startswith("int8:384:")
    assert _cosines(fast.encode(texts), exact).min() >= 0.98  # MINILM_BOUNDS["int8"] of the torch int8 path


def test_a_saved_encoder_with_projection_and_prefixes_embeds_alike(tmp_path, tiny_model_dir, turns):
    torch.manual_seed(0)
    trained = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=48, projection_dim=16, query_prefix="query: ")
    folder = trained.save_pretrained(tmp_path / "encoder")
    saved = MemoryEncoder.from_pretrained(folder, backend="onnx")
    serving = ServingEncoder.from_pretrained(folder)
    assert serving.dim == 16 and serving.query_prefix == "query: " and serving.max_length == 48
    for kind in ("memory", "query"):
        assert _cosines(serving.encode(turns, kind), trained.encode(turns, kind).numpy()).min() >= 0.9999
    assert serving.fingerprint == saved.fingerprint
    assert serving.window_end("word " * 500) == trained.window_end("word " * 500)


def test_the_graph_is_built_once_and_keyed_by_the_weights(tmp_path, tiny_model_dir):
    import shutil

    folder = shutil.copytree(tiny_model_dir, tmp_path / "model")
    first = ServingEncoder.from_pretrained(folder).graph()
    built = first.stat().st_mtime_ns
    assert ServingEncoder.from_pretrained(folder).graph() == first and first.stat().st_mtime_ns == built
    assert first.is_relative_to(graphs_dir()) and (first.parent / "model.onnx.data").is_file()  # weights mapped
    from safetensors.numpy import load_file, save_file

    weights = load_file(str(folder / "model.safetensors"))
    weights["embeddings.LayerNorm.bias"] = weights["embeddings.LayerNorm.bias"] + 1
    save_file(weights, str(folder / "model.safetensors"))
    changed = ServingEncoder.from_pretrained(folder)
    assert changed.graph() != first
    assert changed.fingerprint != ServingEncoder.from_pretrained(tiny_model_dir).fingerprint


def test_a_backbone_other_than_bert_is_refused_by_name(tmp_path, tiny_model_dir):
    import json
    import shutil

    folder = shutil.copytree(tiny_model_dir, tmp_path / "model")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"model_type": "mpnet"}))
    with pytest.raises(ValueError, match="BERT backbones only, this one is 'mpnet'"):
        ServingEncoder.from_pretrained(folder)
    with pytest.raises(ValueError, match="backend must be one of"):
        ServingEncoder.from_pretrained(tiny_model_dir, backend="torch")


def test_the_shipped_judge_scores_as_the_torch_judge_does():
    """On the float32 graph within 1e-5; ``"auto"`` (the default) takes the int8 graph where the CPU has VNNI, whose
    scores stay within int8's error (how many decisions it moves: docs/memory.md, "Six layers")."""
    from memnets.nn.backend_choice import has_vnni

    serving, exact = ServingJudge.load(backend="onnx"), ChangeJudge.load()
    assert serving.threshold == exact.threshold and serving.layers == exact.net.layers
    np.testing.assert_allclose(serving.scores(PAIRS), exact.scores(PAIRS), atol=1e-5)
    assert serving.scores([]) == [] and serving.score(*PAIRS[0]) == pytest.approx(exact.score(*PAIRS[0]), abs=1e-5)
    with pytest.raises(TypeError, match="must be a str"):
        serving.scores([("a", 3)])
    auto = ServingJudge.load()
    assert auto.backend == ("int8_vnni" if has_vnni() else "onnx") and auto.backend in repr(auto)
    np.testing.assert_allclose(auto.scores(PAIRS), exact.scores(PAIRS), atol=0.05)
    with pytest.raises(ValueError, match="backend must be one of auto, onnx, int8_vnni, int8, got 'torch'"):
        ServingJudge.load(backend="torch")


def test_auto_serves_the_judge_on_int8_only_where_it_agrees_with_float32(monkeypatch, caplog):
    """Where int8 is chosen its probe logits are within the floor; a floor no int8 graph can meet (0: every
    logit exact) leaves the judge on the float32 graph, with a warning that says by how much it missed."""
    import logging

    from memnets.nn import serving_judge
    from memnets.nn.backend_choice import has_vnni

    with caplog.at_level(logging.INFO, logger="memnets.nn.serving_judge"):
        chosen = ServingJudge.load()
    (record,) = caplog.records
    assert (
        chosen.backend == ("int8_vnni" if has_vnni() else "onnx") and f"chose {chosen.backend!r}" in record.getMessage()
    )
    exact = ServingJudge.load(backend="onnx")
    gap = np.abs(chosen.logits(serving_judge.PROBE_PAIRS) - exact.logits(serving_judge.PROBE_PAIRS)).mean()
    assert gap <= serving_judge.AGREEMENT_FLOOR
    if not has_vnni():
        assert "has no VNNI" in record.getMessage()
        return
    assert gap > 0  # int8 moves every logit a little: the floor below is one it cannot meet
    caplog.clear()
    monkeypatch.setattr(serving_judge, "AGREEMENT_FLOOR", 0.0)
    with caplog.at_level(logging.INFO, logger="memnets.nn.serving_judge"):
        fallen = ServingJudge.load()
    (record,) = caplog.records
    assert fallen.backend == "onnx" and record.levelname == "WARNING"
    assert f"logits are {gap:.3f} apart from float32's (floor 0.0)" in record.getMessage()
    np.testing.assert_allclose(fallen.scores(PAIRS), exact.scores(PAIRS), atol=1e-6)


def test_a_folder_that_is_not_a_judge_is_refused(tmp_path):
    from memnets.nn.judge_files import NotAJudge

    with pytest.raises(FileNotFoundError, match="no change judge here"):
        ServingJudge.load(tmp_path)
    (tmp_path / "config.json").write_text('{"format": "something else"}')
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(NotAJudge):
        ServingJudge.load(tmp_path)


def test_auto_takes_int8_when_it_agrees_with_the_float32_graph(tiny_model_dir, caplog):
    import logging

    with caplog.at_level(logging.INFO, logger="memnets.nn.backend_choice"):
        encoder = ServingEncoder.from_pretrained(tiny_model_dir, backend="auto")
    (record,) = [r for r in caplog.records if r.name == "memnets.nn.backend_choice"]
    assert encoder.backend in ("int8", "onnx") and encoder.fingerprint.startswith(f"{encoder.backend}:")
    assert f"chose {encoder.backend!r}" in record.getMessage()


def test_memnets_open_serves_on_onnx_by_name_without_loading_torch_modules(tmp_path, tiny_model_dir):
    """backend="onnx" for a folder's encoder is the serving encoder even where torch is installed."""
    import memnets

    with memnets.open(tmp_path / "memory", encoder=tiny_model_dir, backend="onnx") as memory:
        memory.add("I adopted a beagle named Rex", user="ann")
        assert type(memory.encoder).__name__ == "ServingEncoder"
        assert memory.search("dog", user="ann", k=1)[0].memory.content == "I adopted a beagle named Rex"
        assert memory.store.encoder_identity().fingerprint == memory.encoder.fingerprint
