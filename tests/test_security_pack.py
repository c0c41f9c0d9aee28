"""Pack loading under attack: links, names outside the format, special files, and files read once.

Each test plants something a verifying loader must refuse (or a way to slip bytes past the
check) in a copy of a real exported pack, and asserts the loader refuses it with a clear error.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from contextlib import contextmanager

import pytest
import torch

from memnets.pack import (
    ALLOWED_FILES,
    PackChecksumError,
    PackUnexpectedFile,
    PackUnsafeFile,
    export_pack,
    load_pack,
    sha256,
    verify_pack,
)
from memnets.scoring import ScorerWeights


@pytest.fixture(scope="module")
def pack_dir(tiny_model_dir, tmp_path_factory):
    """A full pack: encoder with a projection (2_Dense), both heads, scorer weights."""
    from memnets.nn.encoder import MemoryEncoder
    from memnets.nn.heads import ImportanceHead, RecallGateHead

    torch.manual_seed(0)
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir, projection_dim=16)
    weights = ScorerWeights(recency=0.5, relevance=2.0, importance=1.0, bias=-1.0)
    return export_pack(
        tmp_path_factory.mktemp("packs") / "pack",
        encoder,
        importance=ImportanceHead(dim=16),
        gate=RecallGateHead(dim=16),
        scorer_weights=weights,
    )


@pytest.fixture
def copy(pack_dir, tmp_path):
    target = tmp_path / "pack"
    shutil.copytree(pack_dir, target)
    return target


def _relist(pack, name):
    """List ``name`` in the manifest with its current checksum (what an attacker who can write the folder does)."""
    manifest = json.loads((pack / "manifest.json").read_text())
    manifest["files"][name] = sha256(pack / name)
    (pack / "manifest.json").write_text(json.dumps(manifest))


def test_every_file_of_a_full_export_is_one_the_format_allows(pack_dir):
    files = set(verify_pack(pack_dir)["files"])
    assert "encoder/2_Dense/model.safetensors" in files and "gate/model.safetensors" in files
    assert files <= ALLOWED_FILES
    assert not any(name.endswith((".bin", ".pt", ".pkl", ".py")) for name in ALLOWED_FILES)


def test_a_symlinked_file_with_the_right_checksum_is_refused(copy, tmp_path):
    """The link points at a byte-identical copy outside the pack, so checksums alone would pass."""
    outside = tmp_path / "elsewhere.json"
    shutil.copy(copy / "encoder" / "tokenizer.json", outside)
    (copy / "encoder" / "tokenizer.json").unlink()
    (copy / "encoder" / "tokenizer.json").symlink_to(outside)
    with pytest.raises(PackUnsafeFile, match=r"encoder/tokenizer.json: a symbolic link"):
        load_pack(copy)
    with pytest.raises(PackUnsafeFile, match="symbolic link"):
        verify_pack(copy)


def test_a_symlinked_folder_is_refused(copy, tmp_path):
    shutil.move(copy / "gate", tmp_path / "gate-elsewhere")
    (copy / "gate").symlink_to(tmp_path / "gate-elsewhere", target_is_directory=True)
    with pytest.raises(PackUnsafeFile, match="symbolic link"):
        load_pack(copy)


def test_a_symlinked_manifest_is_refused(copy, tmp_path):
    shutil.move(copy / "manifest.json", tmp_path / "manifest.json")
    (copy / "manifest.json").symlink_to(tmp_path / "manifest.json")
    with pytest.raises(PackUnsafeFile, match=r"manifest.json: a symbolic link"):
        load_pack(copy)


def test_a_fifo_is_refused_without_blocking(copy):
    os.mkfifo(copy / "encoder" / "vocab.txt")
    with pytest.raises(PackUnsafeFile, match=r"vocab.txt: not a regular file"):
        load_pack(copy)


@pytest.mark.parametrize(
    "name", ["encoder/modeling_evil.py", "encoder/training_args.bin", "importance/head.npy", "encoder/README.md"]
)
def test_a_listed_file_outside_the_format_is_refused_whatever_its_suffix(copy, name):
    (copy / name).write_bytes(b"import os\n")
    _relist(copy, name)
    with pytest.raises(PackUnsafeFile, match="not a file the pack format allows"):
        load_pack(copy)


@pytest.mark.parametrize("name", ["../outside.json", "/etc/hostname", "encoder/../thresholds.json"])
def test_manifest_names_must_be_plain_names_inside_the_pack(copy, name):
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["files"][name] = "0" * 64
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(PackUnsafeFile, match="not a file the pack format allows"):
        load_pack(copy)


def test_an_unlisted_file_is_still_refused(copy):
    (copy / "importance" / "notes.txt").write_text("x")
    with pytest.raises(PackUnexpectedFile, match="notes.txt: not listed"):
        load_pack(copy)


@contextmanager
def _opens_under(folder):
    """Record every file opened by path under ``folder`` (Python's audit events, the real ``open`` calls)."""
    seen, prefix = [], str(folder) + os.sep
    state = {"on": True}

    def hook(event, args):
        if state["on"] and event == "open" and isinstance(args[0], str) and args[0].startswith(prefix):
            seen.append(args[0])

    sys.addaudithook(hook)  # hooks cannot be removed; this one goes quiet when the block ends
    try:
        yield seen
    finally:
        state["on"] = False


def test_load_never_reopens_pack_files_by_path_so_the_checked_bytes_are_the_loaded_ones(copy):
    """Every pack file is opened once, relative to its folder and without following links, while it is
    hashed; the components are built from a private copy of those bytes. Nothing opens a pack file by
    its path (which a writer of the folder could swap between the check and the load)."""
    with _opens_under(copy) as opened:
        pack = load_pack(copy)
    assert opened == []
    assert pack.path == copy and pack.importance is not None and pack.gate is not None
    assert pack.encoder.encode(["hello"]).shape == (1, 16)


def test_a_file_changed_after_load_does_not_change_what_was_loaded(copy):
    first = load_pack(copy)
    weights = copy / "encoder" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-5] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(PackChecksumError, match="model.safetensors: sha256 differs"):
        load_pack(copy)
    assert first.encoder.encode(["still works"]).shape == (1, 16)
