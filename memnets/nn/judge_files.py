"""A change judge's folder, read without torch: its format, its config and the cut of a statement.

The torch judge (:mod:`memnets.nn.change_judge`, which trains and saves one) and the serving judge
(:mod:`memnets.nn.serving_judge`, ONNX Runtime) read the same folders by these rules.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memnets.text import lone_surrogate

FORMAT = "memnets-change-judge"
FORMAT_VERSION = 1
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


class NotAJudge(ValueError):
    """A folder whose config is not a change judge's (e.g. the supersession head of an older pack)."""


def read_config(folder: Path, shown: Path) -> dict[str, Any]:
    """A judge folder's config, checked: its format, version, layers, threshold and ``order_threshold`` (optional:
    the score from which a newer statement likely replaces the older one, :mod:`memnets.memory.supersession`);
    errors name ``shown``."""
    path = folder / CONFIG_NAME
    if not path.is_file() or not (folder / WEIGHTS_NAME).is_file():
        raise FileNotFoundError(f"{shown}: no change judge here (expected {CONFIG_NAME} and {WEIGHTS_NAME})")
    config = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise NotAJudge(f"{shown / CONFIG_NAME}: not a change judge (format {FORMAT!r})")
    if config.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{shown / CONFIG_NAME}: change judge format v{config.get('format_version')!r}, "
            f"this memnets reads v{FORMAT_VERSION}"
        )
    if not isinstance(config.get("layers"), int) or not isinstance(config.get("threshold"), (int, float)):
        raise ValueError(f"{shown / CONFIG_NAME}: 'layers' must be an integer and 'threshold' a number")
    order = config.get("order_threshold")
    if order is not None and (
        isinstance(order, bool) or not isinstance(order, (int, float)) or not 0 <= order <= config["threshold"]
    ):
        raise ValueError(
            f"{shown / CONFIG_NAME}: 'order_threshold' must be a number in [0, 'threshold'], got {order!r}"
        )
    return config


__all__ = [
    "CONFIG_NAME", "DEFAULT_JUDGE_DIR", "FORMAT", "FORMAT_VERSION", "MAX_CHARS", "MAX_TOKENS", "WEIGHTS_NAME",
    "NotAJudge", "cut", "read_config",
]  # fmt: skip
