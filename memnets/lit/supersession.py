"""The LightningModule and DataModule that train the supersession head (`memnets fit supersession`).

The same wiring as the importance and gate heads (:mod:`memnets.lit.heads`): the DataModule embeds
each unique text of the pairs once with the frozen encoder (``embed_texts``, cached on disk) and
hands out (older, newer, lexical features, label) tensors per split; the module fits a
:class:`~memnets.nn.heads.SupersessionHead` with positive-weighted BCE, keeps the best validation
epoch, calibrates, picks the threshold of maximum F1 on validation and saves the head. The pairs
are JSON lines ``{"older", "newer", "label", "split": "train"|"val"}``, by default the generated
``data/supersession/pairs.jsonl`` (``python data/supersession/generate.py``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset, TensorDataset

from memnets.lit.heads import HeadDataModule, HeadModule
from memnets.nn.heads import SupersessionHead, threshold_max_f1
from memnets.temporal.supersession import PAIR_FEATURES_VERSION, pair_features

DEFAULT_PAIRS = "data/supersession/pairs.jsonl"
SPLITS = {"train": "train", "val": "validation"}


def read_pairs(path: str | Path) -> dict[str, list[dict]]:
    """The pairs of a JSON-lines file by split ("train", "validation"); ValueError naming the line otherwise."""
    found: dict[str, list[dict]] = {split: [] for split in SPLITS.values()}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            if not isinstance(row.get("older"), str) or not isinstance(row.get("newer"), str):
                raise ValueError(f"{path}:{number}: a pair needs text fields 'older' and 'newer'")
            if row.get("label") not in (0, 1) or row.get("split") not in SPLITS:
                raise ValueError(
                    f"{path}:{number}: 'label' must be 0 or 1 and 'split' one of {sorted(SPLITS)}, "
                    f"got {row.get('label')!r} and {row.get('split')!r}"
                )
            found[SPLITS[row["split"]]].append(row)
    return found


class SupersessionDataModule(HeadDataModule):
    """(older, newer, features, label) tensors of the pairs file, embedded by the frozen encoder.

    Args:
        encoder_path: the frozen encoder folder (``None`` = the untrained backbone).
        pairs_path: the JSON-lines pairs (default ``data/supersession/pairs.jsonl``).
        batch_size, embedding_cache, progress: as for the other heads.
    """

    task = "supersession"

    def __init__(
        self,
        encoder_path: str | None = None,
        pairs_path: str = DEFAULT_PAIRS,
        batch_size: int = 128,
        embedding_cache: str | None = "data/cache/embeddings",
        progress: bool = True,
    ):
        super().__init__(encoder_path, data_config=pairs_path, batch_size=batch_size, embedding_cache=embedding_cache)
        self.progress = progress
        self.pairs_path = pairs_path

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        pairs = read_pairs(self.pairs_path)
        self.data_key = f"{Path(self.pairs_path).name}:{sum(map(len, pairs.values()))}"
        texts = [text for rows in pairs.values() for row in rows for text in (row["older"], row["newer"])]
        table = self.embed(texts, "memory", self.embedding_cache or "data/cache/embeddings")
        self.splits = {split: self.pair_tensors(rows, table) for split, rows in pairs.items()}
        if self.splits["train"]["labels"].numel() == 0:
            raise ValueError(f"{self.pairs_path}: no pair of split 'train'")

    @staticmethod
    def pair_tensors(rows: Sequence[dict], table) -> dict[str, torch.Tensor]:
        return {
            "older": table.lookup([row["older"] for row in rows]),
            "newer": table.lookup([row["newer"] for row in rows]),
            "features": torch.tensor([pair_features(row["older"], row["newer"]) for row in rows], dtype=torch.float32),
            "labels": torch.tensor([float(row["label"]) for row in rows], dtype=torch.float32),
        }

    def dataset(self, split: str) -> Dataset:
        data = self.splits[split]
        return TensorDataset(data["older"], data["newer"], data["features"], data["labels"])


class SupersessionModule(HeadModule):
    """Fits a :class:`SupersessionHead`; threshold = max F1 on validation; best epoch by validation AP."""

    def __init__(
        self,
        dim: int,
        hidden_dims: Sequence[int] = (128,),
        dropout: float = 0.2,
        lr: float = 1e-3,
        weight_decay: float = 0.01,
        pos_weight: float | None = None,
        select_metric: str = "ap",
        output_dir: str | None = "checkpoints/supersession/best",
    ):
        super().__init__(
            SupersessionHead(dim, list(hidden_dims), dropout, pair_features=PAIR_FEATURES_VERSION),
            lr,
            weight_decay,
            pos_weight,
            select_metric,
            output_dir,
        )
        self.save_hyperparameters()

    def logits(self, batch) -> torch.Tensor:
        return self.head(batch[0], batch[1], batch[2])

    def choose_threshold(self, labels, probabilities) -> float:
        return threshold_max_f1(labels, probabilities)

    def split_probabilities(self, datamodule, split: str) -> np.ndarray:
        data = datamodule.splits[split]
        return self.head.predict_proba(data["older"], data["newer"], data["features"])
