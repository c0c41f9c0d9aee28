"""The default configs: the YAML files of the repository's top-level `configs/` folder.

A user reads and edits them in `configs/` of a checkout; the wheel carries the same files inside the
package (`memnets/_configs/`, copied in at build time by setup.py's build step), so an installed memnets
finds them without a checkout. `config_root()` is the one place that knows both homes.

A config argument (`memnets run -c ...`, `memnets fit encoder -c ...`, a data config) is either a
file path or the name of a packaged config: its path under this folder, with or without `.yaml`
and with or without a leading `configs/` (`pipeline/cpu`, `encoder/cpu.yaml`,
`configs/data/locomo.yaml`). An existing file always wins, so a copied and edited config is used
as it is. Packaged configs only name inputs by packaged names; every output path in them is
relative to the working directory (`checkpoints/`, `data/cache/`), never inside the installation.

A config may start from another one with a top-level `base:` key (a path relative to the config's
folder, or a packaged name): its mappings are merged into the base's key by key, any other value
(a number, a string, a list such as the trainer's callbacks) replaces the base's. The encoder's
cpu, gpu and ddp configs are each a few lines on top of `encoder/base`.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml

_PREFIX = "configs/"
_PACKAGED = "_configs"  # the folder the wheel maps `configs/` to, inside the package


@cache
def config_root() -> Path:
    """The folder of the default configs: the wheel's packaged copy, else the checkout's `configs/`.

    An installed wheel has `memnets/_configs/`; a checkout (editable install, or `PYTHONPATH` on the
    source tree) has `configs/` beside the `memnets/` package. Raises ConfigNotFoundError when
    neither exists, which only happens in a broken installation.
    """
    package = Path(str(files("memnets")))
    for root in (package / _PACKAGED, package.parent / "configs"):
        if root.is_dir():
            return root
    raise ConfigNotFoundError(
        f"no default configs: neither {package / _PACKAGED} (an installed wheel) nor "
        f"{package.parent / 'configs'} (a checkout) exists; reinstall memnets or pass a config file"
    )


class ConfigNotFoundError(FileNotFoundError):
    """A config argument that is neither a file nor a packaged config."""


def packaged_configs() -> list[str]:
    """Names of every packaged config, e.g. `['data/locomo', 'encoder/cpu', ...]`."""
    root = config_root()
    return sorted(str(path.relative_to(root).with_suffix("")) for path in root.rglob("*.yaml"))


def resolve_config(value: str | Path) -> Path:
    """The file of a config argument: an existing file path, else a packaged config name.

    Raises ConfigNotFoundError (a FileNotFoundError) naming the argument and the packaged configs
    when it is neither.
    """
    path = Path(value)
    if path.is_file():
        return path
    name = str(value).replace("\\", "/")
    name = name[len(_PREFIX) :] if name.startswith(_PREFIX) else name
    if not name.endswith((".yaml", ".yml")):
        name += ".yaml"
    resource = config_root().joinpath(*name.split("/"))
    if not path.is_absolute() and resource.is_file():
        return resource
    raise ConfigNotFoundError(
        f"config {str(value)!r} is neither a file nor a packaged config; "
        f"packaged configs are {', '.join(packaged_configs())}"
    )


def load_config(value: str | Path) -> dict[str, Any]:
    """A config (file or packaged name) as a dict, with its `base:` chain merged in."""
    return _load(resolve_config(value), ())


def config_argument(value: str | Path) -> str:
    """What to hand to jsonargparse's `--config` for ``value``: the file's path when it has no base,
    else the merged config as a YAML string (jsonargparse takes either)."""
    path = resolve_config(value)
    raw = yaml.safe_load(path.read_text())
    if not (isinstance(raw, dict) and "base" in raw):
        return str(path)
    return yaml.safe_dump(_load(path, ()), sort_keys=False)


def _load(path: Path, chain: tuple[Path, ...]) -> dict[str, Any]:
    if path.resolve() in chain:
        raise ValueError(f"config {path}: its base chain loops ({' -> '.join(map(str, chain + (path,)))})")
    raw = yaml.safe_load(path.read_text()) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"config {path}: expected a mapping at the top level, got {type(raw).__name__}")
    base = raw.pop("base", None)
    if base is None:
        return raw
    if not isinstance(base, str):
        raise ValueError(f"config {path}: base must be a config name or path, got {base!r}")
    sibling = path.parent / base
    base_path = sibling if sibling.is_file() else resolve_config(base)
    return _merge(_load(base_path, chain + (path.resolve(),)), raw)


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        merged[key] = _merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return merged
