"""Importance and recall-gate heads: labels from the fixture reach the heads, real Lightning fits
separate the classes, save/load round trips, thresholds follow their rules, masking is exact.

Embeddings come from the tiny random encoder (``tiny_model_dir``), never the real backbone.
"""

from __future__ import annotations

import json

import lightning as L
import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from memnets.nn.embedding_cache import embed_texts
from memnets.nn.encoder import MemoryEncoder
from memnets.nn.heads import ImportanceHead, RecallGateHead, threshold_at_recall, threshold_max_f1
from memnets.training.lit.heads import (
    GateDataModule,
    GateModule,
    ImportanceDataModule,
    ImportanceModule,
    gate_probabilities,
)

# conv tiny-1, in turn order: cited by some QA item = D1:1, D1:3, D1:4, D2:1, D2:2, D2:3; not: D1:2, D2:4
TINY1_IDS = ["D1:1", "D1:2", "D1:3", "D1:4", "D2:1", "D2:2", "D2:3", "D2:4"]
TINY1_LABELS = [1, 0, 1, 1, 1, 1, 1, 0]


@pytest.fixture(scope="module")
def data_config(tiny_locomo_path, tmp_path_factory):
    folder = tmp_path_factory.mktemp("heads_data")
    path = folder / "data.yaml"
    path.write_text(
        f"path: {tiny_locomo_path}\ncache_dir: {folder / 'cache'}\n"
        "splits:\n  train: [tiny-1]\n  validation: [tiny-2]\n  test: []\n"
        "gate:\n  windows: [1, 2, 3]\n  seed: 0\n"
    )
    return str(path)


@pytest.fixture(scope="module")
def importance_data(tiny_model_dir, data_config):
    datamodule = ImportanceDataModule(
        encoder_path=str(tiny_model_dir), data_config=data_config, batch_size=8, progress=False
    )
    datamodule.setup("fit")
    return datamodule


@pytest.fixture(scope="module")
def gate_data(tiny_model_dir, data_config):
    datamodule = GateDataModule(
        encoder_path=str(tiny_model_dir), data_config=data_config, batch_size=32, progress=False
    )
    datamodule.setup("fit")
    return datamodule


def build(module_class, datamodule, **kwargs):
    """The module for ``datamodule``'s embedding size, its head initialised from seed 0."""
    L.seed_everything(0, verbose=False)
    return module_class(dim=datamodule.dim, **kwargs)


def fit(module, datamodule, epochs: int, checkpoint=None):
    trainer = L.Trainer(
        max_epochs=epochs,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    trainer.fit(module, datamodule)
    if checkpoint is not None:
        trainer.save_checkpoint(checkpoint)
    return module.head


# ------------------------------------------------------------------------------ labels flow through
def test_hand_checked_importance_labels_reach_the_tensors(importance_data, tiny_model_dir):
    train = importance_data.splits["train"]
    assert train["labels"].tolist() == TINY1_LABELS
    assert importance_data.splits["validation"]["labels"].tolist() == [1, 0, 0]  # tiny-2: only D1:1 cited
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir)
    contents = ["Ann: I adopted a puppy named Rex yesterday.", "Bob: Congrats! What breed is he?"]
    np.testing.assert_allclose(train["embeddings"][:2].numpy(), encoder.encode(contents).numpy(), atol=1e-5)
    assert importance_data.pos_weight == pytest.approx(2 / 6)


def test_gate_labels_and_contexts_reach_the_tensors(gate_data, tiny_model_dir):
    from memnets.training.data.builders import prepare_datasets
    from memnets.training.data.config import load_data_config

    rows = prepare_datasets(load_data_config(gate_data.data_config), progress=False)["gate"]["train"]
    train = gate_data.splits["train"]
    assert train["labels"].tolist() == [float(x) for x in rows["label"]]
    assert {0.0, 1.0} <= set(train["labels"].tolist())
    # "What breed is Ann's dog?" (evidence D1:3) asked right after D1:3 with W=1: context [D1:3], no recall
    first = rows[0]
    assert (first["query"], first["window"], first["context_ids"], first["label"]) == (
        "What breed is Ann's dog?",
        1,
        ["D1:3"],
        0,
    )
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir)
    np.testing.assert_allclose(
        gate_data.context("train")[0, 0].numpy(),
        encoder.encode(["Ann: He is a beagle. [shares a photo of a small dog on a couch]"])[0].numpy(),
        atol=1e-5,
    )
    np.testing.assert_allclose(
        train["query"][0].numpy(), encoder.encode([first["query"]], kind="query")[0].numpy(), atol=1e-5
    )
    assert train["mask"][0].tolist() == [True, False, False]
    for i, context in enumerate(rows["context_ids"]):
        assert int(train["mask"][i].sum()) == len(context)


def test_embedding_cache_is_reused_and_keyed_by_texts(tiny_model_dir, tmp_path):
    first = embed_texts(["b", "a", "b"], "memory", tiny_model_dir, cache_dir=tmp_path, progress=False)
    assert first.texts == ["a", "b"] and len(list(tmp_path.iterdir())) == 1
    again = embed_texts(["a", "b"], "memory", tiny_model_dir, cache_dir=tmp_path, progress=False)
    assert torch.equal(first.vectors, again.vectors) and len(list(tmp_path.iterdir())) == 1
    embed_texts(["a", "b"], "query", tiny_model_dir, cache_dir=tmp_path, progress=False)
    assert len(list(tmp_path.iterdir())) == 2
    with pytest.raises(KeyError, match="'c'"):
        first.rows(["c"])


# --------------------------------------------------------------------------------- real fits
def test_importance_fit_separates_classes_and_chooses_threshold_by_max_f1(importance_data, tmp_path):
    module = build(
        ImportanceModule,
        importance_data,
        hidden_dims=[32],
        dropout=0.0,
        lr=1e-2,
        weight_decay=0.0,
        output_dir=str(tmp_path / "imp"),
    )
    head = fit(module, importance_data, epochs=40, checkpoint=tmp_path / "imp.ckpt")
    train = importance_data.splits["train"]
    assert head.use_text_features
    p = head.predict_proba(train["embeddings"], texts=importance_data.texts["train"])
    assert roc_auc_score(train["labels"].numpy(), p) == 1.0
    validation = importance_data.splits["validation"]
    p_val = head.predict_proba(validation["embeddings"], texts=importance_data.texts["validation"])
    assert head.threshold == pytest.approx(threshold_max_f1(validation["labels"].numpy(), p_val))
    assert head.logit_offset == pytest.approx(-np.log(2 / 6))
    saved = json.loads((tmp_path / "imp" / "config.json").read_text())
    assert saved["metadata"]["encoder"]["checksum"] == importance_data.encoder_checksum
    assert saved["threshold"] == pytest.approx(head.threshold)
    loaded = ImportanceHead.load(tmp_path / "imp")
    np.testing.assert_array_equal(loaded.predict_proba(train["embeddings"], texts=importance_data.texts["train"]), p)
    # the Lightning checkpoint rebuilds the module from its hyperparameters, with the fitted head
    restored = ImportanceModule.load_from_checkpoint(tmp_path / "imp.ckpt")
    assert restored.hparams.dim == importance_data.dim and restored.hparams.hidden_dims == [32]
    assert restored.head.threshold == head.threshold and restored.head.logit_offset == head.logit_offset
    assert restored.head.metadata == head.metadata
    np.testing.assert_array_equal(
        restored.head.predict_proba(train["embeddings"], texts=importance_data.texts["train"]), p
    )


def test_gate_fit_separates_classes_and_keeps_95_percent_recall_on_validation(gate_data, tmp_path):
    module = build(
        GateModule,
        gate_data,
        hidden_dims=[32],
        dropout=0.0,
        attention_dim=8,
        lr=1e-2,
        weight_decay=0.0,
        output_dir=str(tmp_path / "gate"),
    )
    head = fit(module, gate_data, epochs=30, checkpoint=tmp_path / "gate.ckpt")
    labels = gate_data.splits["train"]["labels"].numpy()
    p = gate_probabilities(head, gate_data, "train")
    assert roc_auc_score(labels, p) > 0.95
    val_labels = gate_data.splits["validation"]["labels"].numpy()
    p_val = gate_probabilities(head, gate_data, "validation")
    assert head.threshold == pytest.approx(threshold_at_recall(val_labels, p_val, 0.95))
    assert (p_val[val_labels == 1] >= head.threshold).mean() >= 0.95
    loaded = RecallGateHead.load(tmp_path / "gate")
    np.testing.assert_array_equal(gate_probabilities(loaded, gate_data, "train"), p)
    restored = GateModule.load_from_checkpoint(tmp_path / "gate.ckpt")
    assert restored.hparams.attention_dim == 8 and restored.head.threshold == head.threshold
    np.testing.assert_array_equal(gate_probabilities(restored.head, gate_data, "train"), p)


def test_fit_builds_the_head_for_the_datamodule_encoder(tiny_model_dir, data_config, importance_data):
    from memnets.training.lit.cli import build_cli

    cli = build_cli(
        "importance",
        [
            "--data.encoder_path",
            str(tiny_model_dir),
            "--data.data_config",
            data_config,
            "--data.progress",
            "false",
            "--trainer.logger",
            "false",
        ],
        run=False,
    )
    assert cli.model.head.dim == cli.datamodule.dim == importance_data.dim  # linked, not configured twice
    other = importance_data.dim + 1
    with pytest.raises(ValueError, match=f"a head for {other}-d embeddings"):
        fit(ImportanceModule(dim=other), importance_data, epochs=1)


# --------------------------------------------------------------------------------- the nn parts
def test_save_load_round_trip_is_exact_and_never_pickles(tmp_path):
    torch.manual_seed(0)
    gate = RecallGateHead(
        16, hidden_dims=(8,), attention_dim=4, threshold=0.3, logit_offset=-0.5, metadata={"encoder": {"checksum": "x"}}
    )
    q, c = (
        torch.nn.functional.normalize(torch.randn(5, 16), dim=-1),
        torch.nn.functional.normalize(torch.randn(5, 7, 16), dim=-1),
    )
    mask = torch.rand(5, 7) > 0.3
    gate.save(tmp_path / "g")
    loaded = RecallGateHead.load(tmp_path / "g")
    np.testing.assert_array_equal(loaded.predict_proba(q, c, mask), gate.predict_proba(q, c, mask))
    assert (loaded.threshold, loaded.logit_offset, loaded.metadata) == (0.3, -0.5, {"encoder": {"checksum": "x"}})
    assert sorted(p.name for p in (tmp_path / "g").iterdir()) == ["config.json", "model.safetensors"]
    with pytest.raises(ValueError, match="'gate' head, not a 'importance' head"):
        ImportanceHead.load(tmp_path / "g")
    with pytest.raises(ValueError, match="dim 3"):
        ImportanceHead(16).predict_proba(np.zeros((2, 3)))


def test_gate_ignores_padded_slots_and_matches_a_plain_similarity_summary():
    torch.manual_seed(1)
    gate = RecallGateHead(16, hidden_dims=(8,), attention_dim=4, top_k=3, temperatures=(0.1,)).eval()
    q = torch.nn.functional.normalize(torch.randn(1, 16), dim=-1)
    turns = torch.nn.functional.normalize(torch.randn(1, 4, 16), dim=-1)
    padded = torch.cat([turns, torch.randn(1, 6, 16)], dim=1)
    mask = torch.tensor([[True] * 4 + [False] * 6])
    np.testing.assert_allclose(gate.predict_proba(q, padded, mask), gate.predict_proba(q, turns), rtol=1e-6)
    sims = (turns[0] @ q[0]).tolist()
    top = sorted(sims, reverse=True)[:3]
    soft = 0.1 * np.log(np.mean(np.exp(np.array(sims) / 0.1)))
    weights = np.exp(np.array(sims) / 0.1) / np.exp(np.array(sims) / 0.1).sum()
    ages = np.array([3, 2, 1, 0]) / 4  # turn 0 is the oldest of 4
    expected = top + [np.mean(sims), soft, np.log1p(4), ages[int(np.argmax(sims))], float(weights @ ages)]
    features = gate.similarity_features(torch.tensor([sims + [9.0] * 6]), mask)[0]
    np.testing.assert_allclose(features.numpy(), expected, rtol=1e-5)
    empty = gate.predict_proba(q, padded, torch.zeros_like(mask))  # no context at all: still a probability
    assert np.isfinite(empty).all()


def test_threshold_rules_on_hand_examples():
    # max F1: threshold 0.7 predicts {0.9, 0.8, 0.7} -> tp 2 of 3 predicted, 2 positives: F1 = 0.8 (best)
    assert threshold_max_f1([1, 0, 1, 0], [0.9, 0.8, 0.7, 0.1]) == 0.7
    # 20 positives at 0.05 .. 1.0: keeping 95% (19) allows the 19th highest, 0.10, as the threshold
    positives = [round(0.05 * i, 2) for i in range(1, 21)]
    assert threshold_at_recall([1] * 20 + [0, 0], positives + [0.5, 0.01], 0.95) == 0.10
    assert threshold_at_recall([1, 1, 0], [0.2, 0.9, 0.5], 1.0) == 0.2
    with pytest.raises(ValueError, match="no positive"):
        threshold_at_recall([0, 0], [0.1, 0.2])


def test_text_features_are_part_of_the_importance_api():
    from memnets.nn.heads import TEXT_FEATURES, text_features

    features = text_features(["Ann: I moved to Lisbon in 2023. It is lovely!", "Bob: Why?"])
    assert features.shape == (2, len(TEXT_FEATURES))
    assert features[0, TEXT_FEATURES.index("digit")] == 1 and features[1, TEXT_FEATURES.index("question")] == 1
    assert features[0, 0] > features[1, 0]  # longer text
    head = ImportanceHead(8, hidden_dims=(4,), use_text_features=True)
    with pytest.raises(ValueError, match="texts="):
        head.predict_proba(np.zeros((2, 8)))
    assert head.predict_proba(np.zeros((2, 8)), texts=["Ann: a", "Bob: b"]).shape == (2,)


# --------------------------------------------------------------------------------- evaluation
def test_eval_heads_command_reports_heads_and_baselines(tiny_model_dir, tiny_locomo_path, tmp_path, capsys):
    from memnets.cli import main as cli_main
    from memnets.nn.encoder import encoder_dim

    config = tmp_path / "data.yaml"
    config.write_text(
        f"path: {tiny_locomo_path}\ncache_dir: {tmp_path / 'cache'}\n"
        "splits:\n  train: [tiny-1]\n  validation: [tiny-2]\n  test: []\n"
        "gate:\n  windows: [1, 2, 3]\n  seed: 0\n"
    )
    torch.manual_seed(0)
    dim = encoder_dim(tiny_model_dir)
    ImportanceHead(dim, hidden_dims=(8,), threshold=0.4).save(tmp_path / "imp")
    RecallGateHead(dim, hidden_dims=(8,), attention_dim=4, threshold=0.6).save(tmp_path / "gate")
    out = tmp_path / "eval" / "heads.json"  # the folder does not exist yet: the command creates it
    assert (
        cli_main(
            [
                "eval",
                "heads",
                "--encoder",
                str(tiny_model_dir),
                "--importance",
                str(tmp_path / "imp"),
                "--gate",
                str(tmp_path / "gate"),
                "--data-config",
                str(config),
                "--split",
                "validation",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    result = json.loads(out.read_text())
    assert result["split"] == "validation"
    assert list(result["importance"]) == [
        "base rate",
        "length (logreg on log chars)",
        "logreg on embeddings",
        "ImportanceHead (MLP)",
    ]
    assert list(result["gate"])[-1] == "RecallGateHead" and result["gate"]["always recall"]["recall"] == 1.0
    assert result["importance"]["ImportanceHead (MLP)"]["threshold"] == pytest.approx(0.4)  # the head's own
    assert result["gate"]["RecallGateHead"]["threshold"] == pytest.approx(0.6)
    assert 0 < result["importance_positives"] < 1 and 0 < result["gate_positives"] < 1
    printed = capsys.readouterr().out
    assert "### importance on validation" in printed and "| RecallGateHead |" in printed


def test_the_gate_predicts_on_one_thread_in_eval_mode_and_restores_the_callers_settings():
    """The gate's predict_proba runs its torch forward in eval mode (dropout off: repeated calls agree) on
    one intra-op thread, and leaves the caller's thread count and the head's training mode as they were."""
    torch.manual_seed(0)
    head = RecallGateHead(dim=8, hidden_dims=(16,), dropout=0.5)
    head.train()
    query, context = torch.randn(5, 8), torch.randn(5, 3, 8)
    seen = []
    head.net.register_forward_hook(lambda *_: seen.append(torch.get_num_threads()))
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        first, second = head.predict_proba(query, context), head.predict_proba(query, context)
        assert np.array_equal(first, second) and seen == [1, 1]
        assert torch.get_num_threads() == 2 and head.training
        head.eval()
        with torch.no_grad():
            expected = torch.sigmoid(head(query, context, torch.ones(5, 3, dtype=torch.bool)) + head.logit_offset)
        np.testing.assert_allclose(first, expected.numpy(), rtol=1e-6)
    finally:
        torch.set_num_threads(threads)


def _torch_probabilities(head: ImportanceHead, x: torch.Tensor, texts: list[str]) -> np.ndarray:
    """The importance head's probabilities from its torch forward in eval mode (what predict_proba computed before numpy)."""
    from memnets.nn.heads import text_features

    was = head.training
    head.eval()
    with torch.no_grad():
        logits = head(x, text_features(texts) if head.use_text_features else None)
    head.train(was)
    return torch.sigmoid(logits + head.logit_offset).numpy().astype(np.float64)


TEXTS = ["Ann: I moved to Lisbon in 2023. It is lovely!", "Bob: Why?", "Ann: [shares a photo of a cat]", "hi"] * 4


def test_importance_probabilities_in_numpy_equal_the_torch_forward():
    """predict_proba computes in numpy (memnets.nn.numpy_mlp): the eval-mode torch forward's
    probabilities within 1e-6, dropout off in training mode too, from numpy arrays or tensors."""
    torch.manual_seed(0)
    head = ImportanceHead(dim=32, hidden_dims=(24, 8), dropout=0.5, use_text_features=True, logit_offset=-1.2)
    for layer in head.net:  # weights large enough that the GELUs see both tails
        if isinstance(layer, torch.nn.Linear):
            torch.nn.init.normal_(layer.weight, std=1.0)
    head.train()
    x = torch.randn(len(TEXTS), 32)
    probabilities = head.predict_proba(x.numpy(), texts=TEXTS)
    assert probabilities.dtype == np.float64 and head.training
    np.testing.assert_allclose(probabilities, _torch_probabilities(head, x, TEXTS), atol=1e-6, rtol=0)
    assert np.array_equal(head.predict_proba(x, texts=TEXTS), probabilities)
    plain = ImportanceHead(dim=32, hidden_dims=(16,))
    np.testing.assert_allclose(plain.predict_proba(x), _torch_probabilities(plain, x, TEXTS), atol=1e-6, rtol=0)


def test_the_numpy_copy_of_the_importance_head_follows_its_weights():
    """Weights changed in place (an optimiser step) or loaded over (load_state_dict) are the ones predict_proba uses."""
    torch.manual_seed(1)
    head, other = ImportanceHead(dim=16, hidden_dims=(8,)), ImportanceHead(dim=16, hidden_dims=(8,))
    x = torch.randn(6, 16)
    before = head.predict_proba(x)
    loss = head(x).sum()
    loss.backward()
    torch.optim.SGD(head.parameters(), lr=1.0).step()
    stepped = head.predict_proba(x)
    assert not np.allclose(stepped, before)
    np.testing.assert_allclose(stepped, _torch_probabilities(head, x, []), atol=1e-6, rtol=0)
    head.load_state_dict(other.state_dict())
    np.testing.assert_allclose(head.predict_proba(x), other.predict_proba(x), atol=1e-12, rtol=0)


def test_the_numpy_normal_cdf_is_within_1e_9_of_math_erf_and_mlps_of_other_layers_are_refused():
    import math

    from memnets.nn.numpy_mlp import NumpyMLP, normal_cdf

    x = np.linspace(-10.0, 10.0, 40_001)
    exact = np.array([0.5 * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x])
    assert np.abs(normal_cdf(x) - exact).max() < 1e-9
    with pytest.raises(TypeError, match="ReLU"):
        NumpyMLP.of_module(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1)))
