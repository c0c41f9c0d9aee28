"""LightningModules and DataModules that train the importance head and the recall-gate head.

Thin wiring: the DataModules turn the cached label datasets (``prepare_datasets``) into tensors of
frozen-encoder embeddings (``embed_texts``, cached on disk, each unique text embedded once), and
the LightningModules fit the heads of :mod:`memnets.nn.heads` with positive-weighted BCE. The head
is built in the module's ``__init__`` for the embedding size ``dim`` (which ``memnets fit`` links
from the DataModule: its encoder's size, read without loading weights); the class balance comes
from the DataModule in ``setup``. At the end of fit the module restores the epoch with the best
validation score, moves the logits back to calibrated probabilities
(``logit_offset = -log(pos_weight)``), chooses the decision threshold on the validation split by
the head's rule and saves the head to ``output_dir``.

Both pairs plug into ``memnets fit importance|gate -c {importance,gate}/cpu`` (packaged configs).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from pathlib import Path

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
from sklearn.metrics import average_precision_score, roc_auc_score
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    RandomSampler,
    SequentialSampler,
    TensorDataset,
)

from memnets.nn.embedding_cache import EmbeddingTable, embed_texts
from memnets.nn.encoder import encoder_dim
from memnets.nn.heads import (
    Head,
    ImportanceHead,
    RecallGateHead,
    binary_metrics,
    text_features,
    threshold_at_recall,
    threshold_max_f1,
)
from memnets.training.data.builders import cache_key, prepare_datasets
from memnets.training.data.config import SPLIT_NAMES, load_data_config


# ---------------------------------------------------------------------------------------------- data
class HeadDataModule(L.LightningDataModule):
    """Shared plumbing: data config, encoder, embedding cache, loaders over per-split tensors.

    Args:
        encoder_path: the frozen encoder folder (``None`` = the untrained backbone).
        data_config: the data YAML (``None`` = the packaged ``data/locomo``).
        data_path: the conversations file, replacing the config's ``path:`` (`memnets fit --data FILE`).
        batch_size: training and evaluation batch size.
        embedding_cache: folder of cached embeddings (``None`` = ``{data cache_dir}/embeddings``).
        progress: show progress bars while building datasets and embedding.
    """

    task = ""

    def __init__(
        self,
        encoder_path: str | None = None,
        data_config: str | None = None,
        data_path: str | None = None,
        batch_size: int = 256,
        embedding_cache: str | None = None,
        progress: bool = True,
    ):
        super().__init__()
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.encoder_path = encoder_path
        self.data_config = data_config
        self.data_path = data_path
        self.batch_size = batch_size
        self.embedding_cache = embedding_cache
        self.progress = progress
        self.dim = encoder_dim(encoder_path)  # known before setup, so the head can be built with the module
        self.splits: dict[str, dict[str, torch.Tensor]] = {}
        self.encoder_checksum = ""
        self.data_key = ""

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        config = load_data_config(self.data_config, data=self.data_path)
        self.data_key = cache_key(config)
        datasets = prepare_datasets(config, progress=self.progress)
        cache = self.embedding_cache or str(Path(config.cache_dir) / "embeddings")
        self.splits = self.tensorize(datasets, cache)
        if self.splits["train"]["labels"].numel() == 0:
            raise ValueError(f"{config.source}: the train split has no {self.task} examples")

    def tensorize(self, datasets: dict, cache: str) -> dict[str, dict[str, torch.Tensor]]:
        """Per-split tensors of this task from ``{task: DatasetDict}``."""
        raise NotImplementedError

    def embed(self, texts, kind: str, cache: str) -> EmbeddingTable:
        table = embed_texts(texts, kind, self.encoder_path, cache_dir=cache, progress=self.progress)
        if table.dim != self.dim:
            raise ValueError(
                f"the encoder {self.encoder_path or 'default backbone'} gave {table.dim}-d vectors, its config says {self.dim}"
            )
        self.encoder_checksum = table.encoder_checksum
        return table

    def turn_table(self, datasets: dict, cache: str) -> EmbeddingTable:
        """Every turn of every split's conversations (kind "memory"): one cache entry shared by both heads."""
        return self.embed(
            [text for split in SPLIT_NAMES for text in datasets["importance"][split]["text"]], "memory", cache
        )

    @property
    def pos_weight(self) -> float:
        """negatives / positives of the train split: the BCE weight that balances the classes."""
        labels = self.splits["train"]["labels"]
        positives = float(labels.sum())
        if positives == 0 or positives == labels.numel():
            raise ValueError(f"the train split of {self.task} has only one class; both are needed")
        return (labels.numel() - positives) / positives

    def dataset(self, split: str) -> Dataset:
        raise NotImplementedError

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        """Whole batches are fetched with one indexing call (``dataset[list_of_indices]``), not row by row."""
        dataset = self.dataset(split)
        order = RandomSampler(dataset) if shuffle else SequentialSampler(dataset)
        return DataLoader(dataset, sampler=BatchSampler(order, self.batch_size, drop_last=False), batch_size=None)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("validation", False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", False)

    def predict_dataloader(self) -> DataLoader:
        return self._loader("test", False)


class ImportanceDataModule(HeadDataModule):
    """Per split: turn ``embeddings`` (kind "memory"), their ``text_features`` as ``features``, ``lengths``
    (characters) and ``labels``; the turn contents are kept in ``texts[split]``."""

    task = "importance"

    def tensorize(self, datasets: dict, cache: str) -> dict[str, dict[str, torch.Tensor]]:
        table = self.turn_table(datasets, cache)
        datasets = datasets[self.task]
        self.texts = {split: list(datasets[split]["text"]) for split in SPLIT_NAMES}
        out = {}
        for split in SPLIT_NAMES:
            texts = self.texts[split]
            out[split] = {
                "embeddings": table.lookup(texts),
                "labels": torch.tensor(datasets[split]["label"], dtype=torch.float32),
                "lengths": torch.tensor([len(text) for text in texts], dtype=torch.float32),
                "features": text_features(texts),
            }
        return out

    def dataset(self, split: str) -> Dataset:
        data = self.splits[split]
        return TensorDataset(data["embeddings"], data["features"], data["labels"])


class GateExamples(Dataset):
    """(query vectors, context vectors [B, W, d], masks, labels) of a list of indices, gathered on access."""

    def __init__(self, turns: torch.Tensor, data: dict[str, torch.Tensor]):
        self.turns, self.data = turns, data

    def __len__(self) -> int:
        return int(self.data["labels"].numel())

    def __getitem__(self, index):
        d = self.data
        return d["query"][index], self.turns[d["context_rows"][index]], d["mask"][index], d["labels"][index]


class GateDataModule(HeadDataModule):
    """Query embeddings (kind "query"), context turn rows into one turn table, masks and labels per split.

    ``turns`` is ``[T, d]``; a split holds ``query [N, d]``, ``context_rows [N, W]`` (long, 0 where
    padded), ``mask [N, W]`` and ``labels [N]``, with W the largest window of the data config.
    """

    task = "gate"

    def tensorize(self, datasets: dict, cache: str) -> dict[str, dict[str, torch.Tensor]]:
        turns = self.turn_table(datasets, cache)
        datasets = datasets[self.task]
        queries = self.embed([q for split in SPLIT_NAMES for q in datasets[split]["query"]], "query", cache)
        self.turns = turns.vectors
        contexts_of = {split: datasets[split]["context"] for split in SPLIT_NAMES}
        width = max([len(ctx) for split in SPLIT_NAMES for ctx in contexts_of[split]] + [1])
        out = {}
        for split in SPLIT_NAMES:
            contexts = contexts_of[split]
            rows = torch.zeros(len(contexts), width, dtype=torch.long)
            mask = torch.zeros(len(contexts), width, dtype=torch.bool)
            for i, ctx in enumerate(contexts):
                rows[i, : len(ctx)] = turns.rows(ctx)
                mask[i, : len(ctx)] = True
            out[split] = {
                "query": queries.lookup(datasets[split]["query"]),
                "context_rows": rows,
                "mask": mask,
                "labels": torch.tensor(datasets[split]["label"], dtype=torch.float32),
            }
        return out

    def context(self, split: str) -> torch.Tensor:
        """All context vectors of a split, ``[N, W, d]`` (for evaluation; training gathers per batch)."""
        return self.turns[self.splits[split]["context_rows"]]

    def dataset(self, split: str) -> Dataset:
        return GateExamples(self.turns, self.splits[split])


# -------------------------------------------------------------------------------------------- models
class HeadModule(L.LightningModule):
    """Shared training logic: weighted BCE, validation AUROC/AP, best-epoch restore, threshold, save.

    The subclasses build their head in ``__init__`` from their arguments (the embedding size ``dim``
    among them; ``memnets fit`` links it from the DataModule) and save those arguments as
    hyperparameters, so ``load_from_checkpoint`` rebuilds the module; the head's threshold, logit
    offset and metadata travel in the checkpoint too.

    Args:
        head: the network to fit.
        lr, weight_decay: AdamW settings.
        pos_weight: BCE weight of positives; ``None`` = negatives / positives of the train split.
        select_metric: "ap" or "auroc" on validation; the best epoch by it is kept.
        output_dir: where the fitted head is saved at the end of fit (``None`` = not saved).
    """

    def __init__(
        self,
        head: Head,
        lr: float,
        weight_decay: float,
        pos_weight: float | None,
        select_metric: str,
        output_dir: str | None,
    ):
        super().__init__()
        if select_metric not in ("ap", "auroc"):
            raise ValueError(f"select_metric must be 'ap' or 'auroc', got {select_metric!r}")
        self.lr, self.weight_decay = lr, weight_decay
        self.pos_weight = pos_weight
        self.select_metric = select_metric
        self.output_dir = output_dir
        self.head = head
        self.best_score = -math.inf
        self.best_state: dict | None = None
        self.best_epoch = -1
        self._outputs: list[tuple[torch.Tensor, torch.Tensor]] = []

    # hooks the subclasses fill in
    def logits(self, batch) -> torch.Tensor:
        raise NotImplementedError

    def choose_threshold(self, labels: np.ndarray, probabilities: np.ndarray) -> float:
        raise NotImplementedError

    def split_probabilities(self, datamodule: HeadDataModule, split: str) -> np.ndarray:
        raise NotImplementedError

    # lightning
    def setup(self, stage: str) -> None:
        datamodule = self.trainer.datamodule
        if datamodule is None:
            raise ValueError(
                f"{type(self).__name__} needs its DataModule (it sets the embedding size and class balance)"
            )
        if datamodule.dim != self.head.dim:
            raise ValueError(
                f"{type(self).__name__} has a head for {self.head.dim}-d embeddings, the DataModule's encoder gives {datamodule.dim}-d"
            )
        datamodule.setup(stage)
        if self.pos_weight is None:
            self.pos_weight = datamodule.pos_weight

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.lr, weight_decay=self.weight_decay)

    def _loss(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.logits(batch)
        labels = batch[-1]
        weight = torch.tensor(self.pos_weight, device=logits.device)
        return F.binary_cross_entropy_with_logits(logits, labels, pos_weight=weight), logits

    def training_step(self, batch, batch_idx):
        loss, _ = self._loss(batch)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch[-1]))
        return loss

    def validation_step(self, batch, batch_idx):
        loss, logits = self._loss(batch)
        self.log("val/loss", loss, prog_bar=True, batch_size=len(batch[-1]))
        self._outputs.append((logits.detach().cpu(), batch[-1].detach().cpu()))

    def on_validation_epoch_end(self) -> None:
        logits = torch.cat([o[0] for o in self._outputs]).float().numpy()  # float32 also from a bf16 autocast
        labels = torch.cat([o[1] for o in self._outputs]).numpy()
        self._outputs.clear()
        if len(np.unique(labels)) < 2:
            return
        scores = {"auroc": roc_auc_score(labels, logits), "ap": average_precision_score(labels, logits)}
        self.log("val/auroc", scores["auroc"], prog_bar=True)
        self.log("val/ap", scores["ap"], prog_bar=True)
        if (
            not self.trainer.sanity_checking and scores[self.select_metric] >= self.best_score
        ):  # ties: the later, better-fitted epoch
            self.best_score = float(scores[self.select_metric])
            self.best_epoch = self.current_epoch
            self.best_state = copy.deepcopy({k: v.detach().cpu() for k, v in self.head.state_dict().items()})

    def on_fit_end(self) -> None:
        """Keep the best validation epoch, calibrate, choose the threshold on validation, save."""
        head = self.head
        if self.best_state is not None:
            head.load_state_dict(self.best_state)
        head.cpu().eval()
        datamodule = self.trainer.datamodule
        head.logit_offset = -math.log(self.pos_weight)
        labels = datamodule.splits["validation"]["labels"].numpy()
        probabilities = self.split_probabilities(datamodule, "validation")
        head.threshold = self.choose_threshold(labels, probabilities)
        head.metadata = {
            "encoder": {
                "path": str(datamodule.encoder_path or "default backbone"),
                "checksum": datamodule.encoder_checksum,
            },
            "data": {"config": str(datamodule.data_config or "data/locomo"), "cache_key": datamodule.data_key},
            "train_examples": int(datamodule.splits["train"]["labels"].numel()),
            "pos_weight": float(self.pos_weight),
            "best_epoch": int(self.best_epoch),
            "validation": binary_metrics(labels, probabilities, head.threshold),
        }
        if self.output_dir:
            head.save(self.output_dir)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["head"] = {
            "threshold": self.head.threshold,
            "logit_offset": self.head.logit_offset,
            "metadata": self.head.metadata,
        }

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        saved = checkpoint.get("head", {})
        self.head.threshold = float(saved.get("threshold", self.head.threshold))
        self.head.logit_offset = float(saved.get("logit_offset", self.head.logit_offset))
        self.head.metadata = dict(saved.get("metadata", self.head.metadata))


class ImportanceModule(HeadModule):
    """Fits an :class:`ImportanceHead`; threshold = max F1 on validation; best epoch by validation AP."""

    def __init__(
        self,
        dim: int,
        hidden_dims: Sequence[int] = (64,),
        dropout: float = 0.3,
        use_text_features: bool = True,
        lr: float = 1e-3,
        weight_decay: float = 0.01,
        pos_weight: float | None = None,
        select_metric: str = "ap",
        output_dir: str | None = "checkpoints/importance",
    ):
        super().__init__(
            ImportanceHead(dim, list(hidden_dims), dropout, use_text_features),
            lr,
            weight_decay,
            pos_weight,
            select_metric,
            output_dir,
        )
        self.save_hyperparameters()

    def logits(self, batch) -> torch.Tensor:
        return self.head(batch[0], batch[1])

    def choose_threshold(self, labels, probabilities) -> float:
        return threshold_max_f1(labels, probabilities)

    def split_probabilities(self, datamodule, split: str) -> np.ndarray:
        return importance_probabilities(self.head, datamodule, split)


class GateModule(HeadModule):
    """Fits a :class:`RecallGateHead`; threshold = highest keeping 95% recall of needed recalls on validation."""

    def __init__(
        self,
        dim: int,
        hidden_dims: Sequence[int] = (256,),
        dropout: float = 0.1,
        attention_dim: int = 64,
        top_k: int = 3,
        temperatures: Sequence[float] = (0.05, 0.1),
        use_vectors: bool = True,
        min_recall: float = 0.95,
        lr: float = 1e-3,
        weight_decay: float = 0.01,
        pos_weight: float | None = None,
        select_metric: str = "auroc",
        output_dir: str | None = "checkpoints/gate",
    ):
        head = RecallGateHead(
            dim,
            hidden_dims=list(hidden_dims),
            dropout=dropout,
            attention_dim=attention_dim,
            top_k=top_k,
            temperatures=list(temperatures),
            use_vectors=use_vectors,
        )
        super().__init__(head, lr, weight_decay, pos_weight, select_metric, output_dir)
        self.min_recall = min_recall
        self.save_hyperparameters()

    def logits(self, batch) -> torch.Tensor:
        query, context, mask, _ = batch
        return self.head(query, context, mask)

    def choose_threshold(self, labels, probabilities) -> float:
        return threshold_at_recall(labels, probabilities, self.min_recall)

    def split_probabilities(self, datamodule, split: str) -> np.ndarray:
        return gate_probabilities(self.head, datamodule, split)


def importance_probabilities(head: ImportanceHead, datamodule: ImportanceDataModule, split: str) -> np.ndarray:
    """``head.predict_proba`` over a whole split (with its text features when the head uses them)."""
    return head.predict_proba(datamodule.splits[split]["embeddings"], texts=datamodule.texts[split])


def gate_probabilities(
    gate: RecallGateHead, datamodule: GateDataModule, split: str, batch_size: int = 1024
) -> np.ndarray:
    """``gate.predict_proba`` over a whole split, in batches (the context tensor is gathered per batch)."""
    data = datamodule.splits[split]
    out = []
    for start in range(0, int(data["labels"].numel()), batch_size):
        window = slice(start, start + batch_size)
        context = datamodule.turns[data["context_rows"][window]]
        out.append(gate.predict_proba(data["query"][window], context, data["mask"][window]))
    return np.concatenate(out) if out else np.empty(0)
