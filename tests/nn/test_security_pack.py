"""Pack loading under attack: links, names outside the format, special files, and files read once.

Each test plants something a verifying loader must refuse (or a way to slip bytes past the
check) in a copy of a real exported pack, and asserts the loader refuses it with a clear error.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from contextlib import contextmanager

import pytest
import torch

from memnets.pack import (
    ALLOWED_FILES,
    PackChecksumError,
    PackFormatError,
    PackUnexpectedFile,
    PackUnsafeFile,
    PackWeightsError,
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


@pytest.mark.parametrize("backend", ["torch", "onnx"])  # onnx: the serving encoder and the numpy heads
def test_load_never_reopens_pack_files_by_path_so_the_checked_bytes_are_the_loaded_ones(copy, backend):
    """Every pack file is opened once, relative to its folder and without following links, while it is
    hashed; the components are built from a private copy of those bytes. Nothing opens a pack file by
    its path (which a writer of the folder could swap between the check and the load)."""
    with _opens_under(copy) as opened:
        pack = load_pack(copy, backend=backend)
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


# ---------------------------------------------------------------------------------------------- lying configs
# Each pack below tells one lie in a config (or a weights file) and has its checksums recomputed, so
# only the check of configs against the safetensors headers can catch it.


def _rewrite_json(pack, name, change):
    data = json.loads((pack / name).read_text())
    change(data)
    (pack / name).write_text(json.dumps(data))
    _relist(pack, name)


def test_thresholds_that_disagree_with_the_manifest_are_refused_naming_both(copy):
    """Export writes the heads' thresholds twice (thresholds.json, the manifest); before, a pack whose two copies
    differed loaded with thresholds.json's and showed the manifest's."""
    _rewrite_json(copy, "thresholds.json", lambda t: t.update(gate=0.99))
    manifest = json.loads((copy / "manifest.json").read_text())["thresholds"]
    with pytest.raises(
        PackFormatError, match=r"thresholds.json: the heads' thresholds are .*'gate': 0.99.*manifest says"
    ):
        load_pack(copy)
    assert manifest["gate"] != 0.99


def _rewrite_tensors(pack, name, change):
    from safetensors.torch import load_file, save_file

    tensors = load_file(pack / name)
    change(tensors)
    save_file(tensors, pack / name)
    _relist(pack, name)


def test_more_layers_in_the_config_than_in_the_weights_is_refused(copy):
    """Before: the pack loaded with a log line, layers 2-3 random (each load embedding differently)."""
    _rewrite_json(copy, "encoder/config.json", lambda c: c.update(num_hidden_layers=4))
    with pytest.raises(PackWeightsError, match=r"encoder/config.json: field 'num_hidden_layers' is 4 but .*2 layers"):
        load_pack(copy)


def test_fewer_layers_in_the_config_than_in_the_weights_is_refused(copy):
    _rewrite_json(copy, "encoder/config.json", lambda c: c.update(num_hidden_layers=1))
    with pytest.raises(
        PackWeightsError, match=r"model.safetensors holds tensors that .*config.json does not.*layer\.1"
    ):
        load_pack(copy)


def test_a_config_of_other_shapes_is_refused(copy):
    _rewrite_json(copy, "encoder/config.json", lambda c: c.update(intermediate_size=128))
    with pytest.raises(PackWeightsError) as refused:
        load_pack(copy)
    assert re.search(
        r"encoder/config.json makes tensor \S+intermediate.dense.bias of shape \[128\] but ", str(refused.value)
    )
    assert "model.safetensors holds [64] (a size set by field 'intermediate_size' or" in str(refused.value)


@pytest.mark.parametrize("lie", ["missing", "unexpected"])
def test_missing_and_unexpected_backbone_tensors_are_refused(copy, lie):
    def change(tensors):
        if lie == "missing":
            del tensors["pooler.dense.bias"]
        else:
            tensors["extra.weight"] = torch.zeros(2)

    _rewrite_tensors(copy, "encoder/model.safetensors", change)
    message = "lacks: pooler.dense.bias" if lie == "missing" else "does not describe: extra.weight"
    with pytest.raises(PackWeightsError, match=message):
        load_pack(copy)


def test_a_projection_of_another_shape_is_refused(copy):
    """Before: a RuntimeError from load_state_dict escaped the loader."""
    _rewrite_tensors(
        copy,
        "encoder/2_Dense/model.safetensors",
        lambda t: t.update({"linear.weight": torch.zeros(16, 8), "linear.bias": torch.zeros(16)}),
    )
    with pytest.raises(PackWeightsError, match=r"field 'projection_dim'.*linear.weight of shape \[16, 32\].*\[16, 8\]"):
        load_pack(copy)


@pytest.mark.parametrize("head", ["importance", "gate"])
def test_a_head_config_of_other_shapes_is_refused(copy, head):
    _rewrite_json(copy, f"{head}/config.json", lambda c: c["architecture"].update(hidden_dims=[8]))
    with pytest.raises(PackWeightsError, match=rf"{head}/config.json \(field 'architecture'\) makes tensor net"):
        load_pack(copy)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("hidden_dims", [1] * 10_000, "field 'architecture.hidden_dims' must be a list of fewer layers"),
        ("hidden_dims", "256", "field 'architecture.hidden_dims' must be a list"),
        ("dim", "sixteen", "field 'architecture' does not build"),
        ("surprise", 1, "field 'architecture' does not build"),
    ],
)
def test_a_head_architecture_that_cannot_be_built_is_refused(copy, field, value, message):
    _rewrite_json(copy, "gate/config.json", lambda c: c["architecture"].update({field: value}))
    with pytest.raises(PackWeightsError, match=message):
        load_pack(copy)


@pytest.mark.parametrize(("field", "value"), [("threshold", "high"), ("threshold", 2), ("logit_offset", None)])
def test_head_decision_fields_are_checked(copy, field, value):
    _rewrite_json(copy, "importance/config.json", lambda c: c.update({field: value}))
    with pytest.raises(PackWeightsError, match=f"importance/config.json: field '{field}'"):
        load_pack(copy)


HUGE_HEAD = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))  # 6 GiB: [1e9] hidden units need 64 GB
from memnets.pack import PackError, load_pack
try:
    load_pack(sys.argv[1])
except PackError as error:
    print(json.dumps({"error": type(error).__name__, "message": str(error)}))
"""


def test_a_huge_head_fails_on_its_config_before_anything_is_allocated(copy):
    """``hidden_dims: [1e9]`` would allocate 64 GB for the first layer; in a child limited to 6 GiB of
    address space the load must end in a PackError (before: an allocation failure, RuntimeError)."""
    import subprocess

    _rewrite_json(copy, "importance/config.json", lambda c: c["architecture"].update(hidden_dims=[1e9]))
    child = subprocess.run([sys.executable, "-c", HUGE_HEAD, str(copy)], capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr[-2000:]
    outcome = json.loads(child.stdout.strip().splitlines()[-1])
    assert outcome["error"] == "PackWeightsError"
    assert (
        "importance/config.json (field 'architecture') makes tensor net.0.bias of shape [1000000000] but"
        in (outcome["message"])
    )


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    "name", ["manifest.json", "encoder/config.json", "encoder/tokenizer_config.json", "gate/config.json"]
)
def test_a_deeply_nested_json_file_is_a_pack_error(copy, name):
    """Before: RecursionError from json (the manifest, a head config) or from transformers' config reader."""
    data = json.loads((copy / name).read_text())
    data["nested"] = "PLACEHOLDER"
    (copy / name).write_text(json.dumps(data).replace('"PLACEHOLDER"', DEEP))
    if name != "manifest.json":
        _relist(copy, name)
    with pytest.raises(PackFormatError, match=f"{name}: nested too deeply"):
        load_pack(copy)


@pytest.mark.parametrize("name", ["encoder/model.safetensors", "gate/model.safetensors"])
def test_a_corrupt_safetensors_header_is_a_pack_error(copy, name):
    """Before: safetensors' SafetensorError escaped the loader."""
    data = bytearray((copy / name).read_bytes())
    data[8:16] = b"{not js\x00"
    (copy / name).write_bytes(bytes(data))
    _relist(copy, name)
    with pytest.raises(PackFormatError, match=f"{name}: not a readable safetensors file"):
        load_pack(copy)


def test_an_honest_pack_still_loads_and_embeds_the_same_twice(copy):
    first, second = load_pack(copy), load_pack(copy)
    texts = ["the same text", "another one"]
    assert torch.equal(first.encoder.encode(texts), second.encoder.encode(texts))
