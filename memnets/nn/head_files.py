"""A trained head's folder (importance, recall gate), read without torch: its names and its checked config.

The torch heads (:mod:`memnets.nn.heads`, which train and save them) and the numpy heads that serve them
(:mod:`memnets.nn.serving_heads`) read the same folders by these rules, and both then compare the
architecture with the weights file's header (:func:`memnets.nn.weights.check_shapes`) before anything
is allocated.
"""

from __future__ import annotations

import math
import reprlib
from pathlib import Path
from typing import NamedTuple

from memnets.nn.weights import Shapes, WeightsMismatch, read_json, tensor_shapes

WEIGHTS_NAME = "model.safetensors"
CONFIG_NAME = "config.json"
FORMAT_VERSION = 1


class HeadConfig(NamedTuple):
    """A head folder's config, checked, and the shapes of its weights file."""

    architecture: dict
    threshold: float
    logit_offset: float
    metadata: dict | None
    found: Shapes


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def read_head_config(directory: Path, shown: Path, kind: str, reader: str) -> HeadConfig:
    """The config of the ``kind`` head saved in ``directory``: its kind, format version, threshold, logit offset
    and an architecture object whose hidden layers are fewer than the weights file's tensors. Errors name
    ``shown`` (a pack's own path rather than its verified copy) and ``reader`` (the class loading it)."""
    config_file, weights_file = directory / CONFIG_NAME, directory / WEIGHTS_NAME
    for file in (config_file, weights_file):
        if not file.is_file():
            raise FileNotFoundError(f"{reader}.load: {shown / file.name} is missing")
    where = shown / CONFIG_NAME
    config = read_json(config_file, f"a {kind} head config")
    if not isinstance(config, dict):
        raise WeightsMismatch(f"{where}: expected a JSON object")
    if config.get("kind") != kind:
        raise ValueError(f"{shown} holds a {config.get('kind')!r} head, not a {kind!r} head")
    if config.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{shown}: unsupported head format_version {config.get('format_version')!r}")
    architecture, threshold, offset = (config.get(key) for key in ("architecture", "threshold", "logit_offset"))
    if not isinstance(architecture, dict):
        raise WeightsMismatch(f"{where}: field 'architecture' must be an object, got {architecture!r}")
    if not _is_number(threshold) or not 0 <= threshold <= 1:
        raise WeightsMismatch(f"{where}: field 'threshold' must be a number in [0, 1], got {threshold!r}")
    if not _is_number(offset) or not math.isfinite(offset):
        raise WeightsMismatch(f"{where}: field 'logit_offset' must be a finite number, got {offset!r}")
    found = tensor_shapes(weights_file)
    hidden = architecture.get("hidden_dims", ())
    if not isinstance(hidden, list) or len(hidden) >= len(found):  # each layer has its weight and bias
        raise WeightsMismatch(
            f"{where}: field 'architecture.hidden_dims' must be a list of fewer layers than the "
            f"{len(found)} tensors of {shown / WEIGHTS_NAME}, got {reprlib.repr(hidden)}"
        )
    return HeadConfig(architecture, float(threshold), float(offset), config.get("metadata"), found)


def gate_input_width(dim: int, attention_dim: int, top_k: int, temperatures, use_vectors: bool) -> int:
    """The width of the recall gate's MLP input (its similarity profile, and the vectors with ``use_vectors``:
    :class:`memnets.nn.heads.RecallGateHead`); ValueError for a size that is not positive."""
    if dim < 1 or attention_dim < 1 or top_k < 1:
        raise ValueError(f"dim, attention_dim and top_k must be positive, got {dim}, {attention_dim}, {top_k}")
    if any(t <= 0 for t in temperatures):
        raise ValueError(f"temperatures must be positive, got {list(temperatures)}")
    return int(top_k) + 2 + 2 * len(temperatures) + 1 + (4 * int(dim) + 1 if use_vectors else 0)


__all__ = ["CONFIG_NAME", "FORMAT_VERSION", "WEIGHTS_NAME", "HeadConfig", "gate_input_width", "read_head_config"]
