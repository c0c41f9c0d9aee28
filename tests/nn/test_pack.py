"""Packs: round trip, and a clear PackError for each way a pack can be damaged."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from memnets import pack as packs
from memnets.pack import (
    PackChecksumError,
    PackDimError,
    PackFileMissing,
    PackUnexpectedFile,
    PackUnsafeFile,
    PackVersionError,
    export_pack,
    load_pack,
)
from memnets.scoring import LearnedScorer, ScorerWeights

WEIGHTS = ScorerWeights(recency=0.2, relevance=4.0, importance=0.7, bias=-3.0, info={"split": "validation"})


@pytest.fixture(scope="module")
def encoder(tiny_model_dir):
    from memnets.nn.encoder import MemoryEncoder

    return MemoryEncoder.from_pretrained(tiny_model_dir, query_prefix="query: ")


@pytest.fixture(scope="module")
def pack_dir(encoder, tmp_path_factory):
    """An encoder-only pack with scorer weights, exported once; tests copy it before damaging it."""
    out = tmp_path_factory.mktemp("packs") / "pack"
    return export_pack(
        out,
        encoder,
        scorer_weights=WEIGHTS,
        training={"data": "tiny", "split": {"train": ["tiny-1"]}},
        metrics={"recall@10": 0.5},
    )


@pytest.fixture
def copy(pack_dir, tmp_path):
    target = tmp_path / "pack"
    shutil.copytree(pack_dir, target)
    return target


def test_round_trip(pack_dir, encoder):
    pack = load_pack(pack_dir)
    texts = ["Caroline: I went to a support group.", "Melanie: I painted a lake."]
    torch.testing.assert_close(pack.encoder.encode(texts, kind="query"), encoder.encode(texts, kind="query"))
    assert pack.dim == encoder.dim == 32 and pack.importance is None and pack.gate is None
    assert pack.scorer_weights == WEIGHTS and pack.thresholds == {}
    assert pack.manifest["metrics"] == {"recall@10": 0.5} and pack.manifest["training"]["data"] == "tiny"
    files = pack.manifest["files"]
    assert "encoder/model.safetensors" in files and "scorer_weights.json" in files and "encoder/modules.json" in files
    assert all(len(digest) == 64 for digest in files.values())
    scorer = LearnedScorer.from_pack(pack)
    assert scorer.weights == WEIGHTS and scorer.encoder is pack.encoder


def test_encoder_folder_loads_in_sentence_transformers(pack_dir, encoder):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(pack_dir / "encoder"), device="cpu")
    vectors = model.encode(["Melanie: I painted a lake."], convert_to_numpy=True)
    np.testing.assert_allclose(vectors, encoder.encode(["Melanie: I painted a lake."]).numpy(), atol=1e-5)


def test_export_refuses_to_overwrite(pack_dir, encoder):
    with pytest.raises(FileExistsError, match="already exists"):
        export_pack(pack_dir, encoder)


def test_missing_file(copy):
    (copy / "encoder" / "tokenizer.json").unlink()
    with pytest.raises(PackFileMissing, match=r"encoder/tokenizer.json: missing"):
        load_pack(copy)


def test_missing_manifest(copy):
    (copy / "manifest.json").unlink()
    with pytest.raises(PackFileMissing, match="manifest.json: missing"):
        load_pack(copy)


def test_altered_bytes_fail_the_checksum(copy):
    weights = copy / "encoder" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(PackChecksumError, match=r"model.safetensors: sha256 differs"):
        load_pack(copy)


def test_altered_scorer_weights_fail_the_checksum(copy):
    (copy / "scorer_weights.json").write_text(json.dumps(WEIGHTS.to_dict() | {"relevance": 100.0}))
    with pytest.raises(PackChecksumError, match="scorer_weights.json"):
        load_pack(copy)


def test_wrong_dim(copy):
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["embedding_dim"] = 384
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(PackDimError, match="embedding_dim is 384"):
        load_pack(copy)


@pytest.mark.parametrize("version", [2, None, "1"])
def test_unknown_format_version(copy, version):
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["format_version"] = version
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(PackVersionError, match="unknown format_version"):
        load_pack(copy)


@pytest.mark.parametrize("name", ["encoder/pytorch_model.bin", "importance/head.pt", "scorer.pkl"])
def test_pickle_files_are_refused_even_when_listed(copy, name):
    path = copy / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(b"\x80\x04K\x01.")  # a real pickle of the int 1
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["files"][name] = packs.sha256(path)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(PackUnsafeFile, match="pickle-based format"):
        load_pack(copy)


def test_unlisted_file(copy):
    (copy / "encoder" / "notes.txt").write_text("added later")
    with pytest.raises(PackUnexpectedFile, match="notes.txt: not listed"):
        load_pack(copy)


def test_export_refuses_a_source_encoder_with_pickles(tiny_model_dir, tmp_path):
    source = tmp_path / "encoder"
    shutil.copytree(tiny_model_dir, source)
    (source / "training_args.bin").write_bytes(b"\x80\x04K\x01.")
    with pytest.raises(PackUnsafeFile, match="training_args.bin"):
        export_pack(tmp_path / "pack", source)
    assert not (tmp_path / "pack").exists()


def test_pack_with_heads_round_trip(encoder, tmp_path):
    heads = pytest.importorskip("memnets.nn.heads", reason="the heads module has not landed yet")
    importance = heads.ImportanceHead(dim=encoder.dim)
    gate = heads.RecallGateHead(dim=encoder.dim)
    out = export_pack(tmp_path / "pack", encoder, importance=importance, gate=gate, scorer_weights=WEIGHTS)
    pack = load_pack(out)
    embeddings = encoder.encode(["a", "b", "c"]).numpy()
    np.testing.assert_allclose(
        pack.importance.predict_proba(embeddings), importance.predict_proba(embeddings), atol=1e-6
    )
    assert set(pack.thresholds) == {"importance", "gate"} and pack.thresholds["gate"] == gate.threshold
    assert pack.gate.dim == encoder.dim and LearnedScorer.from_pack(pack).importance_head is pack.importance
    # heads given as folders written by their save() export the same way
    from_folders = export_pack(
        tmp_path / "pack2", encoder, importance=importance.save(tmp_path / "imp"), gate=gate.save(tmp_path / "gate")
    )
    assert (
        load_pack(from_folders).manifest["files"]["importance/model.safetensors"]
        == pack.manifest["files"]["importance/model.safetensors"]
    )
    wrong = heads.ImportanceHead(dim=encoder.dim + 1)
    with pytest.raises(packs.PackError):
        export_pack(tmp_path / "bad", encoder, importance=wrong)


def test_export_command_fits_weights_and_writes_a_loadable_pack(tiny_model_dir, tiny_locomo_path, tmp_path):
    from memnets.cli import main

    config = tmp_path / "data.yaml"
    config.write_text(
        f"path: {tiny_locomo_path}\ncache_dir: {tmp_path / 'cache'}\n"
        "splits:\n  train: []\n  validation: [tiny-1]\n  test: [tiny-2]\n"
    )
    (tmp_path / "metrics.json").write_text(json.dumps({"test": {"recall@10": 0.9}}))
    out = tmp_path / "pack"
    argv = [
        "export",
        "--encoder",
        str(tiny_model_dir),
        "--out",
        str(out),
        "--metrics",
        str(tmp_path / "metrics.json"),
        "-c",
        str(config),
    ]
    assert main(argv) == 0
    pack = load_pack(out)
    assert pack.scorer_weights.info["split"] == "validation" and pack.scorer_weights.info["queries"] == 4
    assert "time" in json.loads((out / "scorer_weights.json").read_text())  # fitted with the other weights
    assert pack.manifest["metrics"] == {"test": {"recall@10": 0.9}}
    assert pack.manifest["training"]["splits"]["validation"] == ["tiny-1"]
    report = tmp_path / "eval.json"
    assert (
        main(
            [
                "eval",
                "retrieval",
                "heuristic:" + str(tiny_model_dir),
                "--pack",
                str(out),
                "--split",
                "validation",
                "-c",
                str(config),
                "--json",
                str(report),
            ]
        )
        == 0
    )
    names = [r["name"] for r in json.loads(report.read_text())["reports"]]
    assert names == [f"heuristic:{tiny_model_dir}", "pack-encoder", "pack-learned"]
    assert main(argv) == 2  # the pack exists now: refused without --overwrite
    assert main([*argv, "--overwrite", "--fit-split", "none"]) == 0
    assert load_pack(out).scorer_weights is None


def test_export_command_with_head_folders(tiny_model_dir, tiny_locomo_path, tmp_path):
    heads = pytest.importorskip("memnets.nn.heads", reason="the heads module has not landed yet")
    from memnets.cli import main

    torch.manual_seed(0)
    heads.ImportanceHead(dim=32, threshold=0.3).save(tmp_path / "importance")
    (tmp_path / "importance" / "training.json").write_text(json.dumps({"best_epoch": 2}))
    heads.RecallGateHead(dim=32, threshold=0.6).save(tmp_path / "gate")
    config = tmp_path / "data.yaml"
    config.write_text(f"path: {tiny_locomo_path}\nsplits:\n  train: []\n  validation: [tiny-1]\n  test: [tiny-2]\n")
    out = tmp_path / "pack"
    assert (
        main(
            [
                "export",
                "--encoder",
                str(tiny_model_dir),
                "--importance",
                str(tmp_path / "importance"),
                "--gate",
                str(tmp_path / "gate"),
                "--out",
                str(out),
                "-c",
                str(config),
            ]
        )
        == 0
    )
    pack = load_pack(out)
    assert pack.thresholds == {"importance": 0.3, "gate": 0.6}
    assert pack.manifest["training"]["runs"] == {"importance": {"best_epoch": 2}}
    # the head's probabilities vary over turns, so the importance feature got a fitted weight
    assert pack.scorer_weights.info["constant_features"] == [] and pack.scorer_weights.importance != 0.0
