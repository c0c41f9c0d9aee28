"""A pack served without torch against the same pack on torch: vectors, heads, gate, judge and fingerprints.

``load_pack(folder, backend="onnx")`` builds the pack's serving components (ServingEncoder, the numpy heads
of memnets.nn.serving_heads, ServingJudge); ``backend="torch"`` its torch ones, whose judge serves on ONNX
Runtime too. Both are compared here on a tiny pack (a 2-layer random BERT with a projection and prefixes,
random heads with the tails of their GELUs reached, a 1-layer judge over the bundled backbone);
tests/package/test_torchless.py opens such a pack where torch cannot be imported.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import memnets
from memnets.nn.change_judge import ChangeJudge, ChangeJudgeNet
from memnets.nn.encoder import MemoryEncoder
from memnets.nn.heads import ImportanceHead, RecallGateHead
from memnets.nn.serving_encoder import ServingEncoder
from memnets.nn.serving_heads import ServingGate, ServingImportance
from memnets.nn.serving_judge import ServingJudge
from memnets.nn.weights import WeightsMismatch, bert_shapes, meta_shapes
from memnets.pack import PackWeightsError, export_pack, load_pack
from memnets.store.identity import EncoderMismatchError

TEXTS = [
    "Ann: I moved to Lisbon in 2023. It is lovely!",
    "Bob: Why?",
    "Ann: [shares a photo of a cat]",
    "I adopted a beagle named Rex",
    "The quarterly report is due on Friday; Tom owns the revenue section.",
    "",
    "word " * 300,
]
PAIRS = [("I live in Leeds.", "I moved to Lyon in June."), ("I have a dog.", "My sister got a cat."), ("ok", "sure")]


@pytest.fixture(scope="module", autouse=True)
def cache(tmp_path_factory):
    """Graphs built into a cache of this module's own."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MEMNETS_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


def _spread(head) -> None:
    """Weights large enough that the GELUs see both tails (as test_heads does)."""
    for layer in head.modules():
        if isinstance(layer, torch.nn.Linear):
            torch.nn.init.normal_(layer.weight, std=1.0)


@pytest.fixture(scope="module")
def pack_dir(tiny_model_dir, tmp_path_factory):
    torch.manual_seed(0)
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=48, projection_dim=16, query_prefix="query: ")
    importance = ImportanceHead(16, hidden_dims=(12, 8), use_text_features=True, logit_offset=-0.7, threshold=0.4)
    gate = RecallGateHead(16, hidden_dims=(8,), attention_dim=4, top_k=3, threshold=0.6, logit_offset=0.3)
    _spread(importance), _spread(gate)
    judge = ChangeJudge(ChangeJudgeNet(layers=1), threshold=0.55)
    return export_pack(tmp_path_factory.mktemp("pack") / "pack", encoder, importance=importance, gate=gate,
                       supersession=judge, thresholds={"importance": 0.4, "gate": 0.6})  # fmt: skip


@pytest.fixture(scope="module")
def packs(pack_dir):
    return load_pack(pack_dir, backend="torch"), load_pack(pack_dir, backend="onnx")


def test_the_pack_serves_on_the_serving_classes_with_torchs_numbers(packs):
    exact, serving = packs
    assert isinstance(exact.encoder, MemoryEncoder) and isinstance(exact.importance, ImportanceHead)
    assert isinstance(serving.encoder, ServingEncoder) and isinstance(serving.importance, ServingImportance)
    assert isinstance(serving.gate, ServingGate) and isinstance(serving.supersession, ServingJudge)
    assert isinstance(exact.supersession, ServingJudge)  # the pack's judge serves on ONNX Runtime either way
    for kind in ("memory", "query"):
        vectors = serving.encoder.encode(TEXTS, kind)
        cosines = (vectors * exact.encoder.encode(TEXTS, kind).numpy()).sum(axis=1)
        assert cosines.min() >= 0.999
    vectors = exact.encoder.encode(TEXTS).numpy()
    probabilities = serving.importance.predict_proba(vectors, texts=TEXTS)
    np.testing.assert_allclose(probabilities, exact.importance.predict_proba(vectors, texts=TEXTS), atol=1e-5, rtol=0)
    assert (serving.importance.threshold, serving.gate.threshold) == (exact.importance.threshold, exact.gate.threshold)
    assert serving.encoder.source == exact.encoder.source == f"the encoder of pack {serving.path}"


def test_the_numpy_gate_gives_the_torch_gates_probabilities(packs):
    """Windows of every width around top_k, padded and empty rows: the probabilities within 1e-5."""
    exact, serving = packs
    generator = np.random.default_rng(0)
    for width in (0, 1, 2, 3, 7):
        query = generator.standard_normal((5, 16)).astype(np.float32)
        context = generator.standard_normal((5, width, 16)).astype(np.float32)
        query /= np.linalg.norm(query, axis=1, keepdims=True)
        context /= np.maximum(np.linalg.norm(context, axis=2, keepdims=True), 1e-9)
        mask = np.arange(width)[None, :] < np.array([width, width - 1, 1, 0, width])[:, None]
        expected = exact.gate.predict_proba(query, context, mask)
        np.testing.assert_allclose(serving.gate.predict_proba(query, context, mask), expected, atol=1e-5, rtol=0)
    assert ((expected > 0.01) & (expected < 0.99)).sum() >= 3  # not only the flat ends of the sigmoid compared
    with pytest.raises(ValueError, match="expects 16"):
        serving.gate.predict_proba(np.zeros((1, 8)), np.zeros((1, 2, 8)))


def test_the_packs_judge_scores_as_its_torch_judge(pack_dir, packs):
    """On its float32 graph within 1e-5; the pack's own (``"auto"``: int8 where the CPU has VNNI) within int8's error."""
    from memnets.nn.serving_judge import ServingJudge

    exact = ChangeJudge.load(pack_dir / "supersession")
    served = ServingJudge.load(pack_dir / "supersession", backend="onnx")
    np.testing.assert_allclose(served.scores(PAIRS), exact.scores(PAIRS), atol=1e-5, rtol=0)
    loaded = packs[1].supersession
    atol = 1e-5 if loaded.backend == "onnx" else 0.05
    np.testing.assert_allclose(loaded.scores(PAIRS), exact.scores(PAIRS), atol=atol, rtol=0)
    assert loaded.threshold == exact.threshold == 0.55


def test_the_fingerprint_is_torchs_onnx_one_so_stores_move_only_where_the_vectors_agree(pack_dir, packs, tmp_path):
    """The serving pack's encoder has the fingerprint of the torch encoder's "onnx" backend: a store it filled
    opens with that one, and a store filled on torch's exact backend refuses it, naming the way out."""
    exact, serving = packs
    onnx_on_torch = MemoryEncoder.from_pretrained(pack_dir / "encoder", backend="onnx")
    assert serving.encoder.fingerprint == onnx_on_torch.fingerprint
    assert serving.encoder.fingerprint.split(":")[2] == exact.encoder.fingerprint.split(":")[2]  # same weights
    with memnets.open(tmp_path / "filled_on_torch", pack=pack_dir, backend="torch") as memory:
        memory.add("I adopted a beagle named Rex", user="ann")
    with pytest.raises(EncoderMismatchError, match="reembed"):
        memnets.open(tmp_path / "filled_on_torch", pack=pack_dir, backend="onnx")


def test_memnets_open_with_the_pack_on_onnx_adds_and_searches_with_its_heads(pack_dir, packs, tmp_path):
    exact = packs[0]
    with memnets.open(tmp_path / "m", pack=pack_dir, backend="onnx", supersession="auto") as memory:
        assert isinstance(memory.importance.head, ServingImportance)
        assert isinstance(memory.supersession.judge, ServingJudge)
        added = memory.add(TEXTS[0], user="ann")
        memory.add(TEXTS[3], user="ann")
        vector = exact.encoder.encode([TEXTS[0]]).numpy()
        assert added.importance == pytest.approx(float(exact.importance.predict_proba(vector, texts=TEXTS[:1])[0]),
                                                  abs=1e-4)  # fmt: skip
        assert memory.search("beagle", user="ann", k=1)[0].memory.content == TEXTS[3]


def test_a_pack_of_another_backbone_stays_on_torch(mpnet_pack):
    """The serving encoder builds BERT graphs only: a pack of another backbone loads on torch on every backend."""
    pack = load_pack(mpnet_pack, backend="onnx")
    assert isinstance(pack.encoder, MemoryEncoder) and pack.encoder.backend == "onnx"
    assert isinstance(pack.importance, ImportanceHead)


@pytest.mark.parametrize(
    "config",
    [
        {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64},
        {"vocab_size": 100, "max_position_embeddings": 40, "type_vocab_size": 1, "num_hidden_layers": 1},
    ],
)
def test_bert_shapes_are_the_meta_built_models(config):
    from transformers import AutoModel, BertConfig

    assert bert_shapes(config) == meta_shapes(lambda: AutoModel.from_config(BertConfig(**config)))


@pytest.mark.parametrize(
    ("torch_head", "serving_head", "architecture"),
    [
        (ImportanceHead, ServingImportance, {"dim": 16, "hidden_dims": [12, 8], "use_text_features": True}),
        (ImportanceHead, ServingImportance, {"dim": 5, "hidden_dims": []}),
        (RecallGateHead, ServingGate, {"dim": 16, "hidden_dims": [8], "attention_dim": 4, "temperatures": [0.1]}),
        (RecallGateHead, ServingGate, {"dim": 6, "hidden_dims": [3, 2], "top_k": 1, "use_vectors": False}),
    ],
)
def test_the_serving_heads_expect_the_torch_heads_tensors(torch_head, serving_head, architecture):
    assert serving_head(**architecture).shapes() == meta_shapes(lambda: torch_head(**architecture))


def test_a_lying_config_is_refused_before_the_weights_are_read(pack_dir, tmp_path):
    """The serving path checks configs against the weights' headers as torch's meta build does."""
    import shutil

    from memnets.pack import sha256

    copy = shutil.copytree(pack_dir, tmp_path / "pack")

    def rewrite(name: str, change) -> None:
        config = json.loads((copy / name).read_text())
        change(config)
        (copy / name).write_text(json.dumps(config))
        manifest = json.loads((copy / "manifest.json").read_text())
        manifest["files"][name] = sha256(copy / name)
        (copy / "manifest.json").write_text(json.dumps(manifest))

    rewrite("gate/config.json", lambda c: c["architecture"].update(attention_dim=5))
    with pytest.raises(PackWeightsError, match="key_proj.weight of shape \\[5, 16\\]"):
        load_pack(copy, backend="onnx")
    rewrite("gate/config.json", lambda c: c["architecture"].update(attention_dim=4))
    rewrite("encoder/config.json", lambda c: c.update(intermediate_size=65))
    with pytest.raises(PackWeightsError, match="intermediate_size"):
        load_pack(copy, backend="onnx")
    rewrite("encoder/config.json", lambda c: c.update(intermediate_size=64, num_hidden_layers=10**9))
    with pytest.raises(PackWeightsError, match="holds 2 layers"):
        load_pack(copy, backend="onnx")
    with pytest.raises(WeightsMismatch, match="does not build a importance head"):
        ServingImportance.load(_head_with(tmp_path, pack_dir, "importance", dim=-1))


def _head_with(tmp_path, pack_dir, name: str, **architecture):
    import shutil

    folder = shutil.copytree(pack_dir / name, tmp_path / name)
    config = json.loads((folder / "config.json").read_text())
    config["architecture"].update(architecture)
    (folder / "config.json").write_text(json.dumps(config))
    return folder
