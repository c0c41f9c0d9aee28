"""A change judge's folder, read without torch: its format, its config and the cut of a statement.

The torch judge (:mod:`memnets.nn.change_judge`, which trains and saves one) and the serving judge
(:mod:`memnets.nn.serving_judge`, ONNX Runtime) read the same folders by these rules.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from memnets.text import lone_surrogate

FORMAT = "memnets-change-judge"
# How a judge's file may store its layers (``ChangeJudge.save``'s ``weights``), and the format version each is
# written as: an int8 file is v2, so a memnets that reads v1 only refuses it by its version instead of misreading it.
FORMAT_VERSIONS = {"float16": 1, "float32": 1, "int8": 2}
WEIGHTS = tuple(FORMAT_VERSIONS)
SCALE = ".int8_scale"  # an int8 matrix's float32 scales, one per output row, under its name + this
CONFIG_NAME, WEIGHTS_NAME = "config.json", "model.safetensors"  # the names a pack allows a head
DEFAULT_JUDGE_DIR = Path(__file__).resolve().parent.parent / "judges" / "default"
MAX_CHARS = 1_000  # of each statement, before tokenising: a chat turn's fact fits; the cost is bounded
MAX_TOKENS = 128  # of the pair, [CLS] older [SEP] newer [SEP], the longer side cut first


def cut(text: str) -> str:
    """``text`` as the judge reads it: its first :data:`MAX_CHARS` characters (a str; TypeError otherwise; a
    ValueError naming the position of a lone surrogate in them, which the tokenizer refuses naming nothing)."""
    if not isinstance(text, str):
        raise TypeError(f"a statement to judge must be a str, got {type(text).__name__}")
    read = text[:MAX_CHARS]
    if (position := lone_surrogate(read)) is not None:
        raise ValueError(f"a statement to judge is not valid Unicode: a lone surrogate at position {position}")
    return read


def checked_weights(weights: str) -> str:
    """``weights`` if it names a storage of :data:`WEIGHTS`, else a ValueError naming the choices."""
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {', '.join(WEIGHTS)}, got {weights!r}")
    return weights


def stored(state: Mapping[str, np.ndarray], weights: str = "float16") -> dict[str, np.ndarray]:
    """``state`` (float arrays by name) as a judge's file holds it: every array in ``weights`` (float16 or
    float32), or with ``"int8"`` each matrix of the layers (2-D, ``bert.`` names) as int8 per output row,
    symmetric, its row scales beside it under the name + :data:`SCALE`, the rest (biases, LayerNorms, the
    classifier) in float16. int8 halves a float16 file: a six-layer judge is 10.8 MB instead of 21.3 MB."""
    if checked_weights(weights) != "int8":
        return {name: np.ascontiguousarray(value, dtype=weights) for name, value in state.items()}
    out = {}
    for name, value in state.items():
        value = np.asarray(value, dtype=np.float32)
        if value.ndim == 2 and name.startswith("bert."):
            scale = np.abs(value).max(axis=1) / 127.0
            scale[scale == 0] = 1.0
            out[name] = np.ascontiguousarray(np.clip(np.rint(value / scale[:, None]), -127, 127).astype(np.int8))
            out[name + SCALE] = scale.astype(np.float32)
        else:
            out[name] = np.ascontiguousarray(value, dtype=np.float16)
    return out


def restored(saved: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A judge file's arrays (:func:`stored`) as float32 by parameter name: int8 rows times their scales."""
    out = {}
    for name, value in saved.items():
        if name.endswith(SCALE):
            if name.removesuffix(SCALE) not in saved:
                raise ValueError(f"{name}: scales of no matrix")
            continue
        if value.dtype == np.int8:
            scale = saved.get(name + SCALE)
            if scale is None or value.ndim != 2 or scale.shape != (value.shape[0],):
                raise ValueError(f"{name}: an int8 matrix without its scales, one per row ({name + SCALE})")
            out[name] = value.astype(np.float32) * scale.astype(np.float32)[:, None]
        else:
            out[name] = value.astype(np.float32)
    return out


def stored_as(saved: Mapping[str, np.ndarray]) -> str:
    """How a judge file's arrays are stored (:data:`WEIGHTS`), read from their dtypes: for a file whose config
    predates its ``"weights"`` key."""
    kinds = {value.dtype for value in saved.values()}
    return "int8" if np.dtype(np.int8) in kinds else "float32" if kinds == {np.dtype(np.float32)} else "float16"


class NotAJudge(ValueError):
    """A folder whose config is not a change judge's (e.g. the supersession head of an older pack)."""


def read_config(folder: Path, shown: Path) -> dict[str, Any]:
    """A judge folder's config, checked: its format, version, layers, threshold, ``order_threshold`` (optional:
    the score from which a newer statement likely replaces the older one, :mod:`memnets.memory.supersession`) and
    ``query_threshold`` (optional: the same among a search's hits); errors name ``shown``."""
    path = folder / CONFIG_NAME
    if not path.is_file() or not (folder / WEIGHTS_NAME).is_file():
        raise FileNotFoundError(f"{shown}: no change judge here (expected {CONFIG_NAME} and {WEIGHTS_NAME})")
    config = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise NotAJudge(f"{shown / CONFIG_NAME}: not a change judge (format {FORMAT!r})")
    readable = sorted(set(FORMAT_VERSIONS.values()))
    if config.get("format_version") not in readable:
        raise ValueError(
            f"{shown / CONFIG_NAME}: change judge format v{config.get('format_version')!r}, "
            f"this memnets reads v{' and v'.join(map(str, readable))}"
        )
    weights = config.setdefault("weights", None)  # None: a file of before the key (float16 or float32 in its arrays)
    if weights is not None and FORMAT_VERSIONS.get(weights) != config["format_version"]:
        raise ValueError(
            f"{shown / CONFIG_NAME}: 'weights' must be one of {', '.join(WEIGHTS)} and written as its format version "
            f"({FORMAT_VERSIONS}), got {weights!r} in v{config['format_version']}"
        )
    if not isinstance(config.get("layers"), int) or not isinstance(config.get("threshold"), (int, float)):
        raise ValueError(f"{shown / CONFIG_NAME}: 'layers' must be an integer and 'threshold' a number")
    for name in ("order_threshold", "query_threshold"):
        value = config.get(name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= config["threshold"]
        ):
            raise ValueError(f"{shown / CONFIG_NAME}: {name!r} must be a number in [0, 'threshold'], got {value!r}")
    return config


__all__ = [
    "CONFIG_NAME", "DEFAULT_JUDGE_DIR", "FORMAT", "FORMAT_VERSIONS", "MAX_CHARS", "MAX_TOKENS",
    "WEIGHTS", "WEIGHTS_NAME", "NotAJudge", "checked_weights", "cut", "read_config", "restored", "stored", "stored_as",
]  # fmt: skip
