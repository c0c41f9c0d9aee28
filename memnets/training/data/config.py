"""The data config (packaged `data/locomo`): file, cache, split by conversation, label settings.

`path` is the conversations file (LoCoMo JSON or memnets JSONL); when it is absent or null, the file
that `memnets.training.data.location.find_data` finds ($MEMNETS_DATA, else a checkout's data/locomo). A
command's `--data FILE` overrides it. Relative paths (`path`, `cache_dir`) are taken from the working directory, so caches land in the
folder a command runs from, never inside the installation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from memnets.training.configs import load_config, resolve_config
from memnets.training.data.location import find_data

DEFAULT_DATA_CONFIG = "data/locomo"
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
                    raise ValueError(
                        f"conversation {sample_id!r} is in both the {seen[sample_id]} and the {name} split"
                    )
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


def load_data_config(path: str | Path | None = None, data: str | Path | None = None) -> DataConfig:
    """Read a data config (a YAML file or a packaged config name); errors name the file and the field.

    ``data`` (a command's `--data FILE`) replaces the config's `path:`; with neither, the data file
    is found by `find_data` (DataNotFoundError when there is none).
    """
    path = resolve_config(path if path is not None else DEFAULT_DATA_CONFIG)
    raw = load_config(path)
    try:
        splits = Splits(**{name: tuple(raw["splits"][name]) for name in SPLIT_NAMES})
        gate = raw.get("gate", {})
        windows = tuple(int(w) for w in gate.get("windows", (10, 20, 40)))
        if not windows or min(windows) < 1:
            raise ValueError(f"gate.windows must be positive integers, got {windows}")
        return DataConfig(
            path=find_data(data if data is not None else raw.get("path")),
            cache_dir=Path(raw.get("cache_dir") or "data/cache"),
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
