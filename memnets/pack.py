"""Memory packs: the trained components bundled into one verifiable folder.

Layout (format version 1)::

    pack/
      manifest.json         format, format_version, embedding_dim, components, sha256 of every
                            other file, training data and split, metrics, thresholds
      encoder/              the MemoryEncoder in Hugging Face format (model.safetensors) with the
                            sentence-transformers files, loadable by transformers and by
                            SentenceTransformer(pack/"encoder")
      importance/           ImportanceHead.save(dir): safetensors + JSON config   (optional)
      gate/                 RecallGateHead.save(dir): safetensors + JSON config          (optional)
      supersession/         ChangeJudge.save(dir): the change-of-fact judge's layers  (optional)
      scorer_weights.json   the LearnedScorer's fitted weights                      (optional)
      thresholds.json       decision thresholds of the heads ({"importance": p, "gate": p})

Loading verifies everything before it builds anything: the format and its version; that every
file is a regular file (a symbolic link, a FIFO or a device anywhere in the pack is refused) whose
name is one the format allows (:data:`ALLOWED_FILES`: safetensors weights, JSON configs and the
tokenizer's text files; nothing pickle-based, no code); that every listed file is present with its
checksum and no unlisted file is there; that the encoder and both heads agree on the embedding
dimension; that every JSON file parses (however deeply nested, a PackError, never a RecursionError);
that each config describes exactly its safetensors tensors (the backbone's ``config.json``, the
projection and each head's architecture: layer count, no missing or unexpected tensor, every
shape), compared on the files' headers with the networks built on the meta device, so a lying
config fails before anything is allocated. Each file is opened once, without following links,
and copied into a private temporary folder while its sha256 is computed; the components are then
built from that verified copy, so the bytes that are loaded are the bytes that were checked, even
if someone rewrites the pack folder meanwhile. Every failure raises a :class:`PackError` subclass whose message names the
file and what is wrong with it.

A pack serves without torch (the core install, issue 52) on the backends of the serving encoder
(:func:`memnets.nn.loading.serves`: ``"onnx"`` and the int8 ones; ``"auto"`` where torch is not installed),
when its encoder is a BERT backbone: the encoder is a :class:`~memnets.nn.serving_encoder.ServingEncoder`
(the pack's exported graph of ``encoder/onnx/`` when there, else one built from its safetensors), the
heads are :mod:`memnets.nn.serving_heads` (numpy), and the configs are checked against the weights without
torch (:func:`memnets.nn.weights.check_bert_backbone`). The change judge serves on ONNX Runtime
(:class:`~memnets.nn.serving_judge.ServingJudge`) on every backend, as the one shipped with memnets does.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from memnets.safefiles import UnsafeFileError, copy_verified, read_regular
from memnets.scoring import ScorerWeights

log = logging.getLogger(__name__)

PACK_FORMAT = "memnets-pack"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
ENCODER_DIR, IMPORTANCE_DIR, GATE_DIR, SUPERSESSION_DIR = "encoder", "importance", "gate", "supersession"
SCORER_WEIGHTS, THRESHOLDS = "scorer_weights.json", "thresholds.json"
# name -> (folder, the class that trains and saves it (torch), the class that serves it without torch)
HEADS = {
    "importance": (IMPORTANCE_DIR, "memnets.nn.heads:ImportanceHead", "memnets.nn.serving_heads:ServingImportance"),
    "gate": (GATE_DIR, "memnets.nn.heads:RecallGateHead", "memnets.nn.serving_heads:ServingGate"),
    "supersession": (SUPERSESSION_DIR, "memnets.nn.change_judge:ChangeJudge", "memnets.nn.serving_judge:ServingJudge"),
}
# The files a pack may hold besides manifest.json, relative to the pack folder. Anything else is
# refused on load, whatever its suffix: weights only as safetensors, configs as JSON, the tokenizer
# as its JSON/text files (sentencepiece models are protobuf, parsed without code execution).
ENCODER_FILES = (
    "config.json",
    "model.safetensors",  # the Hugging Face backbone
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tokenizer.model",
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",  # sentence-transformers
    "1_Pooling/config.json",
    "2_Dense/config.json",
    "2_Dense/model.safetensors",
    "memnets_encoder.json",
    "onnx/model.onnx",  # the fast encoder backends (memnets export --backend), ONNX protobufs
    "onnx/model_int8.onnx",
)
HEAD_FILES = ("config.json", "model.safetensors")
ALLOWED_FILES = frozenset(
    {
        THRESHOLDS,
        SCORER_WEIGHTS,
        *(f"{ENCODER_DIR}/{name}" for name in ENCODER_FILES),
        *(f"{folder}/{name}" for folder, *_ in HEADS.values() for name in HEAD_FILES),
    }
)
# suffixes of formats that unpickle (or may) on load; export refuses source folders holding them
PICKLE_SUFFIXES = {".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib", ".npy", ".npz"}


class PackError(ValueError):
    """A pack that cannot be used; the message names the pack file and the problem."""


class PackFileMissing(PackError):
    """A file the manifest lists (or the format requires) is not in the pack."""


class PackChecksumError(PackError):
    """A file's sha256 differs from the manifest's: it was altered or truncated."""


class PackUnexpectedFile(PackError):
    """A file is in the pack but not in its manifest."""


class PackUnsafeFile(PackError):
    """A file the format does not allow: a name outside :data:`ALLOWED_FILES` (pickle-based formats
    such as .bin, .pt, .pkl among them: packs never unpickle), a symbolic link, or not a regular file."""


class PackVersionError(PackError):
    """The manifest's format or format version is not one this code reads."""


class PackDimError(PackError):
    """A component's embedding dimension disagrees with the manifest's."""


class PackFormatError(PackError):
    """A JSON file that does not parse or lacks a required field."""


class PackWeightsError(PackFormatError):
    """A config that does not describe its safetensors weights: another layer count, a missing or
    unexpected tensor, another shape. Checked on the header, before anything is allocated."""


@dataclass
class Pack:
    """A loaded, verified pack."""

    path: Path
    manifest: dict
    encoder: object  # MemoryEncoder, or ServingEncoder where the backend serves without torch
    importance: object | None = None  # ImportanceHead, or ServingImportance
    gate: object | None = None  # RecallGateHead, or ServingGate
    scorer_weights: ScorerWeights | None = None
    thresholds: dict = field(default_factory=dict)
    supersession: object | None = None  # ServingJudge

    @property
    def dim(self) -> int:
        return int(self.manifest["embedding_dim"])


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _files(root: Path, *, refuse_links: bool = False) -> list[str]:
    """Every file under root except the manifest, as sorted POSIX paths relative to root.

    Links to folders are never entered. With ``refuse_links`` (a pack being loaded), a symbolic
    link or anything that is neither a folder nor a regular file raises :class:`PackUnsafeFile`;
    without (a source folder for export, e.g. a Hugging Face cache snapshot whose files are links),
    links to files are listed.
    """
    found = []

    def walk(folder: str, prefix: str) -> None:
        with os.scandir(folder) as entries:
            for entry in entries:
                name = prefix + entry.name
                if entry.is_dir(follow_symlinks=False):
                    walk(entry.path, name + "/")
                elif refuse_links and (entry.is_symlink() or not entry.is_file(follow_symlinks=False)):
                    kind = "a symbolic link" if entry.is_symlink() else "not a regular file"
                    raise PackUnsafeFile(f"{root / name}: {kind}; a pack holds only regular files")
                elif entry.is_file():
                    found.append(name)

    walk(str(root), "")
    return sorted(name for name in found if name != MANIFEST)


def _refuse_pickles(root: Path, where: str) -> None:
    for name in _files(root):
        if Path(name).suffix.lower() in PICKLE_SUFFIXES:
            raise PackUnsafeFile(
                f"{where}: {root / name} is in a pickle-based format ({Path(name).suffix}); "
                "packs hold weights only as safetensors and configs only as JSON"
            )


@contextmanager
def _pack_file(path: Path) -> Iterator[None]:
    """Turn the OSErrors of reading the pack file ``path`` (see :mod:`memnets.safefiles`) into PackErrors naming it."""
    try:
        yield
    except FileNotFoundError:
        raise PackFileMissing(f"{path}: missing") from None
    except UnsafeFileError as error:
        raise PackUnsafeFile(f"{path}: {error.strerror}; a pack holds only regular files") from None
    except OSError as error:
        raise PackError(f"{path}: cannot be read ({error.strerror})") from None


def _read_verified(root: Path, name: str, digest: str, copy_to: Path | None) -> None:
    """Read ``root/name`` once, check its sha256 against ``digest``, and copy those bytes under ``copy_to``."""
    with _pack_file(root / name):
        actual = copy_verified(root, name, copy_to)
    if actual != digest:
        raise PackChecksumError(
            f"{root / name}: sha256 differs from {root / MANIFEST}; the file was altered or truncated"
        )


def _parse_json(data: bytes, path: Path, what: str) -> object:
    try:
        return json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise PackFormatError(f"{path}: not valid JSON ({what}): {error}") from None
    except RecursionError:
        raise PackFormatError(f"{path}: nested too deeply to be {what}") from None


def _read_json(copy: Path, root: Path, name: str, what: str) -> object:
    """Parse ``name`` from the verified copy of the pack; messages name the pack's own file."""
    if not (copy / name).is_file():
        raise PackFileMissing(f"{root / name}: missing ({what})")
    return _parse_json((copy / name).read_bytes(), root / name, what)


def load_head(name: str, folder: str | Path, shown: str | Path | None = None, *, serving: bool = False):
    """Load the trained head `name` ("importance", "gate" or "supersession", the change judge) from a folder
    written by its ``save`` (``shown``: the folder its messages name), as the torch class that trains it, or
    with ``serving`` as the class that serves it without torch (:data:`HEADS`)."""
    module_name, _, class_name = HEADS[name][2 if serving else 1].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise PackError(
            f"{folder}: loading the {name} head needs {module_name}, which cannot be imported: {error}"
        ) from None
    return getattr(module, class_name).load(folder, shown=shown)


def _head_dim(head) -> int | None:
    """The embedding dimension a head expects, from its attributes or config."""
    for holder in (head, getattr(head, "config", None)):
        if holder is None:
            continue
        for name in ("dim", "embedding_dim", "input_dim"):
            value = holder.get(name) if isinstance(holder, dict) else getattr(holder, name, None)
            if isinstance(value, int):
                return value
    return None


# ---------------------------------------------------------------------------------------------- export
def export_pack(
    out: str | Path,
    encoder,
    *,
    importance=None,
    gate=None,
    supersession=None,
    scorer_weights: ScorerWeights | str | Path | None = None,
    thresholds: dict | None = None,
    training: dict | None = None,
    metrics: dict | None = None,
    backends: tuple[str, ...] = (),
    overwrite: bool = False,
) -> Path:
    """Write a pack folder and verify it by loading it back.

    Args:
        out: the pack folder to create (refused if it exists, unless ``overwrite``).
        encoder: a MemoryEncoder, or a folder written by ``MemoryEncoder.save_pretrained``.
        importance, gate, supersession: an ImportanceHead / RecallGateHead / ChangeJudge, or a
            folder written by its ``save``; any may be None (a pack may hold only an encoder).
        scorer_weights: ScorerWeights or a JSON file of them; None = no fitted weights.
        thresholds: decision thresholds; defaults to the heads' ``threshold`` attributes.
        training: what the components were trained on (data, split, configs), stored in the manifest.
        metrics: evaluation results, stored in the manifest.
        backends: fast encoder backends (``memnets.nn.onnx_encoder.ONNX_FILES``) to write beside the exact encoder, under
            ``encoder/onnx/`` and checksummed like every file; ``load_pack(..., backend=)`` uses them.
    """
    from memnets.nn.encoder import MemoryEncoder
    from memnets.nn.onnx_encoder import ONNX_FILES, export_onnx

    unknown = [name for name in backends if name not in ONNX_FILES]
    if unknown:
        raise ValueError(f"export_pack: backends must be among {sorted(ONNX_FILES)}, got {unknown}")

    out = Path(out)
    if out.exists() and not overwrite:
        raise FileExistsError(f"export_pack: {out} already exists (pass overwrite=True to replace it)")
    if isinstance(encoder, (str, Path)):
        _refuse_pickles(Path(encoder), "export_pack encoder")
        encoder = MemoryEncoder.from_pretrained(encoder)
    heads = {}
    for name, head in (("importance", importance), ("gate", gate), ("supersession", supersession)):
        if isinstance(head, (str, Path)):
            _refuse_pickles(Path(head), f"export_pack {name}")
            head = load_head(name, head)
        if head is not None:
            heads[name] = head
    if isinstance(scorer_weights, (str, Path)):
        scorer_weights = ScorerWeights.load(scorer_weights)
    if thresholds is None:
        thresholds = {
            name: float(head.threshold) for name, head in heads.items() if getattr(head, "threshold", None) is not None
        }

    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        encoder.save_pretrained(staging / ENCODER_DIR)
        for backend in backends:
            export_onnx(encoder, staging / ENCODER_DIR, backend)
        for name, head in heads.items():
            head.save(staging / HEADS[name][0])
        if scorer_weights is not None:
            scorer_weights.save(staging / SCORER_WEIGHTS)
        (staging / THRESHOLDS).write_text(json.dumps(thresholds, indent=2))
        manifest = {
            "format": PACK_FORMAT,
            "format_version": FORMAT_VERSION,
            "embedding_dim": int(encoder.dim),
            "components": {
                "encoder": ENCODER_DIR,
                **{name: HEADS[name][0] for name in heads},
                **({"scorer_weights": SCORER_WEIGHTS} if scorer_weights is not None else {}),
            },
            "thresholds": thresholds,
            "training": training or {},
            "metrics": metrics or {},
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "files": {name: sha256(staging / name) for name in _files(staging)},
        }
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2))
        load_pack(staging)  # never hand out a pack that does not load
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return out


# ---------------------------------------------------------------------------------------------- load
def verify_pack(path: str | Path) -> dict:
    """Check format, version, file names and checksums without loading any weights; returns the manifest."""
    return _verify(Path(path), copy_to=None)


def _verify(root: Path, copy_to: Path | None) -> dict:
    """Verify the pack at ``root``; with ``copy_to``, leave there a copy of exactly the bytes verified."""
    if not root.is_dir():
        raise PackFileMissing(f"{root}: not a pack folder")
    where = root / MANIFEST
    with _pack_file(where):
        manifest = _parse_json(read_regular(root, MANIFEST), where, "the pack manifest")
    if not isinstance(manifest, dict):
        raise PackFormatError(f"{where}: expected a JSON object")
    if manifest.get("format") != PACK_FORMAT:
        raise PackVersionError(f"{where}: format is {manifest.get('format')!r}, expected {PACK_FORMAT!r}")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise PackVersionError(
            f"{where}: unknown format_version {manifest.get('format_version')!r}; "
            f"this memnets reads version {FORMAT_VERSION}"
        )
    for key, kind in (("embedding_dim", int), ("files", dict), ("components", dict)):
        if not isinstance(manifest.get(key), kind) or isinstance(manifest.get(key), bool):
            raise PackFormatError(f"{where}: field {key!r} must be a {kind.__name__}, got {manifest.get(key)!r}")
    listed, present = manifest["files"], set(_files(root, refuse_links=True))
    for name, digest in sorted(listed.items()):
        if name not in ALLOWED_FILES:
            raise PackUnsafeFile(
                f"{root / name}: not a file the pack format allows (listed in {where}); packs hold "
                "weights only as safetensors and configs only as JSON, never a pickle-based format "
                "or code"
            )
        if not isinstance(digest, str):
            raise PackFormatError(f"{where}: the sha256 of {name!r} must be a hex string, got {digest!r}")
    unexpected = sorted(present - set(listed))
    if unexpected:
        raise PackUnexpectedFile(
            f"{root / unexpected[0]}: not listed in {where}"
            + (f" (and {len(unexpected) - 1} more)" if len(unexpected) > 1 else "")
        )
    if manifest["components"].get("encoder") != ENCODER_DIR or f"{ENCODER_DIR}/model.safetensors" not in listed:
        raise PackFileMissing(
            f"{root / ENCODER_DIR / 'model.safetensors'}: a pack needs the encoder's safetensors weights"
        )
    for name, digest in sorted(listed.items()):
        _read_verified(root, name, digest, copy_to)
    return manifest


def load_pack(path: str | Path, *, backend: str | None = None, on_torch: bool = False) -> Pack:
    """Verify a pack (see :func:`verify_pack`), then build its components from the verified bytes and check their dims.

    ``backend``: how the encoder computes (None: :func:`memnets.nn.loading.default_backend`, torch where
    it is installed); an ONNX backend exported into the pack is read from its verified copy, else
    built from the weights. Where the backend serves without torch (the module docstring), so do the heads,
    unless ``on_torch``: the encoder and heads are then the torch classes on every backend (the evaluation
    rankers, which read their tensors, and compare a pack with a folder's ``MemoryEncoder`` on one backend).

    The bytes are copied into a private temporary folder as they are hashed (see the module
    docstring); the components load from that copy, which is removed before this returns.
    """
    from memnets.nn.graph_cache import known_sha256
    from memnets.nn.loading import default_backend

    root = Path(path)
    with tempfile.TemporaryDirectory(prefix="memnets-pack-") as private:
        copy = Path(private)
        manifest = _verify(root, copy_to=copy)
        with known_sha256({copy / name: digest for name, digest in manifest["files"].items()}):
            return _build(root, copy, manifest, backend or default_backend(), on_torch)


def _check_encoder_weights(root: Path, copy: Path, encoder_config, serving: bool) -> None:
    """The encoder's configs describe exactly its safetensors tensors (:mod:`memnets.nn.weights`):
    the backbone's ``config.json`` against ``model.safetensors`` (``serving``: as a BERT backbone, without
    torch), the projection of ``memnets_encoder.json`` against ``2_Dense/model.safetensors``. Nothing is allocated."""
    from memnets.nn.backbones import CONFIG_NAME, PROJECTION_DIR
    from memnets.nn.weights import WeightsMismatch, check_backbone, check_bert_backbone, check_linear

    folder, shown = copy / ENCODER_DIR, root / ENCODER_DIR
    try:
        (check_bert_backbone if serving else check_backbone)(folder, shown)
        projection = encoder_config.get("projection_dim") if isinstance(encoder_config, dict) else None
        dense = f"{PROJECTION_DIR}/model.safetensors"
        if projection is None:
            if (folder / dense).is_file():
                raise WeightsMismatch(f"{shown / dense}: a projection that {shown / CONFIG_NAME} does not describe")
            return
        if not isinstance(projection, int) or isinstance(projection, bool) or projection < 1:
            raise WeightsMismatch(f"{shown / CONFIG_NAME}: field 'projection_dim' must be a positive int or null")
        if not (folder / dense).is_file():
            raise PackFileMissing(f"{shown / dense}: missing (the projection of {shown / CONFIG_NAME})")
        hidden = _parse_json((folder / "config.json").read_bytes(), shown / "config.json", "a model config")
        check_linear(
            folder / dense,
            shown / dense,
            in_features=hidden.get("hidden_size"),
            out_features=projection,
            config=f"{shown / CONFIG_NAME} (field 'projection_dim') with {shown / 'config.json'} (field 'hidden_size')",
        )
    except WeightsMismatch as error:
        raise PackWeightsError(str(error)) from None


def _load_encoder(root: Path, copy: Path, backend: str, serving: bool):
    """The pack's encoder from its verified copy: a ServingEncoder where it serves without torch, else a
    MemoryEncoder; ``source`` names the pack."""
    if serving:
        from memnets.nn.serving_encoder import ServingEncoder as Encoder
    else:
        from memnets.nn.encoder import MemoryEncoder as Encoder
    try:
        encoder = Encoder.from_pretrained(copy / ENCODER_DIR, backend=backend)
    except Exception as error:  # whatever transformers, the tokenizer or ONNX Runtime raise on a bad file
        raise PackFormatError(
            f"{root / ENCODER_DIR}: the encoder does not load: {type(error).__name__}: {error}"
        ) from None
    encoder.source = f"the encoder of pack {root}"
    return encoder


def _build(root: Path, copy: Path, manifest: dict, backend: str, on_torch: bool = False) -> Pack:
    """The components of a verified pack, loaded from its verified ``copy``; messages name ``root``."""
    from memnets.extras import needs_extra
    from memnets.nn.judge_files import NotAJudge
    from memnets.nn.loading import serves
    from memnets.nn.weights import WeightsMismatch

    dim = manifest["embedding_dim"]
    for name in manifest["files"]:  # every JSON file parses (no depth bomb reaches a third-party parser)
        if name.endswith(".json"):
            _read_json(copy, root, name, "a pack config")
    encoder_config = _read_json(copy, root, f"{ENCODER_DIR}/memnets_encoder.json", "the encoder's memnets config")
    if isinstance(encoder_config, dict) and encoder_config.get("dim") not in (None, dim):
        raise PackDimError(
            f"{root / ENCODER_DIR / 'memnets_encoder.json'}: dim {encoder_config.get('dim')} but the "
            f"manifest's embedding_dim is {dim}"
        )
    backbone = _read_json(copy, root, f"{ENCODER_DIR}/config.json", "the encoder's model config")
    # a backbone other than BERT is torch's to serve (the serving encoder builds BERT graphs only)
    serving = not on_torch and serves(backend) and isinstance(backbone, dict) and backbone.get("model_type") == "bert"
    with nullcontext() if serving else needs_extra(f"a pack's encoder on the backend {backend!r} (torch)", "train"):
        _check_encoder_weights(root, copy, encoder_config, serving)
        encoder = _load_encoder(root, copy, backend, serving)
    if encoder.dim != dim:
        raise PackDimError(
            f"{root / ENCODER_DIR}: the encoder gives {encoder.dim}-d vectors but the manifest's embedding_dim is {dim}"
        )
    heads = {}
    for name, (folder, *_) in HEADS.items():
        if name not in manifest["components"]:
            continue
        try:  # the judge serves on ONNX Runtime on every backend, as memnets' own does
            head = load_head(name, copy / folder, shown=root / folder, serving=serving or name == "supersession")
        except PackError:
            raise
        except NotAJudge as error:  # a supersession head of a memnets before the change judge
            log.warning(
                "%s; judging changes of fact with memnets' own judge (retrain: `memnets fit supersession`)", error
            )
            continue
        except WeightsMismatch as error:
            raise PackWeightsError(str(error)) from None
        except Exception as error:  # a bad file in torch or safetensors: SafetensorError, RuntimeError, ...
            raise PackFormatError(
                f"{root / folder}: the {name} head does not load: {type(error).__name__}: {error}"
            ) from None
        head_dim = _head_dim(head)
        if head_dim is not None and head_dim != dim:
            raise PackDimError(
                f"{root / folder}: the {name} head takes {head_dim}-d embeddings but the manifest's "
                f"embedding_dim is {dim}"
            )
        heads[name] = head
    weights = None
    if "scorer_weights" in manifest["components"]:
        data = _read_json(copy, root, SCORER_WEIGHTS, "the scorer weights")
        try:
            weights = ScorerWeights.from_dict(data, where=str(root / SCORER_WEIGHTS))
        except ValueError as error:
            raise PackFormatError(str(error)) from None
    thresholds = _read_json(copy, root, THRESHOLDS, "the heads' thresholds")
    if not isinstance(thresholds, dict) or not all(
        isinstance(v, (int, float)) and 0 <= v <= 1 for v in thresholds.values()
    ):
        raise PackFormatError(f"{root / THRESHOLDS}: expected an object of probabilities in [0, 1], got {thresholds!r}")
    if manifest.get("thresholds", thresholds) != thresholds:  # export writes both: one of them was changed since
        raise PackFormatError(
            f"{root / THRESHOLDS}: the heads' thresholds are {thresholds!r}, but the manifest says "
            f"{manifest['thresholds']!r}; the pack was changed after export (export it again)"
        )
    return Pack(
        path=root,
        manifest=manifest,
        encoder=encoder,
        importance=heads.get("importance"),
        gate=heads.get("gate"),
        scorer_weights=weights,
        thresholds=thresholds,
        supersession=heads.get("supersession"),
    )
