"""The data config (configs/data/locomo.yaml): file, cache, split by conversation, label settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATA_CONFIG = PROJECT_ROOT / "configs" / "data" / "locomo.yaml"
SPLIT_NAMES = ("train", "validation", "test")


@dataclass(frozen=True)
class Splits:
    """Sample ids per split; a conversation belongs to exactly one split."""

    train: tuple[str, ...]
    validation: tuple[str, ...]
    test: tuple[str, ...]

    def __post_init__(self) -> None:
        seen: dict[str, str] = {}
        for name in SPLIT_NAMES:
            for sample_id in getattr(self, name):
                if sample_id in seen:
                    raise ValueError(f"conversation {sample_id!r} is in both the {seen[sample_id]} and the {name} split")
                seen[sample_id] = name

    def __getitem__(self, name: str) -> tuple[str, ...]:
        if name not in SPLIT_NAMES:
            raise KeyError(f"unknown split {name!r}; expected one of {SPLIT_NAMES}")
        return getattr(self, name)


@dataclass(frozen=True)
class DataConfig:
    path: Path
    cache_dir: Path
    splits: Splits
    include_observations: bool = True
    gate_windows: tuple[int, ...] = (10, 20, 40)
    seed: int = 0
    source: Path | None = field(default=None, compare=False)


def resolve_path(value: str | Path) -> Path:
    """A relative path is taken from the working directory if it exists there, else from the project root."""
    path = Path(value)
    if path.is_absolute() or path.exists():
        return path
    return PROJECT_ROOT / path


def load_data_config(path: str | Path | None = None) -> DataConfig:
    """Read a data config YAML; errors name the file and the field."""
    path = Path(path) if path is not None else DEFAULT_DATA_CONFIG
    raw = yaml.safe_load(path.read_text()) or {}
    try:
        splits = Splits(**{name: tuple(raw["splits"][name]) for name in SPLIT_NAMES})
        gate = raw.get("gate", {})
        windows = tuple(int(w) for w in gate.get("windows", (10, 20, 40)))
        if not windows or min(windows) < 1:
            raise ValueError(f"gate.windows must be positive integers, got {windows}")
        return DataConfig(
            path=resolve_path(raw["path"]),
            cache_dir=resolve_path(raw.get("cache_dir", "data/cache")),
            splits=splits,
            include_observations=bool(raw.get("retrieval", {}).get("include_observations", True)),
            gate_windows=windows,
            seed=int(gate.get("seed", 0)),
            source=path,
        )
    except KeyError as error:
        raise ValueError(f"{path}: missing field {error.args[0]!r}") from error
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path}: {error}") from error


def load_splits(path: str | Path | None = None) -> Splits:
    return load_data_config(path).splits
