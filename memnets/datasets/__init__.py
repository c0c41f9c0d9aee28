"""Data shipped inside the package, read with importlib.resources.

`locomo/`: the LoCoMo subset (8 of the 10 conversations, Maharana et al., ACL 2024), CC BY-NC 4.0;
its licence is `locomo/LICENSE.txt` and its provenance and attribution `locomo/README.md`. The data
config (`memnets/configs/data/locomo.yaml`) uses it unless `path:` names another file.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def locomo_path() -> Path:
    """The bundled LoCoMo JSON file (`memnets/datasets/locomo/locomo8.json`)."""
    return Path(str(files(__name__).joinpath("locomo", "locomo8.json")))
