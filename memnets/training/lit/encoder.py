"""LightningModule of the memory encoder: MemoryEncoder + InfoNCE, validated by recall@k.

Thin by design: the network is :class:`memnets.nn.encoder.MemoryEncoder`, the loss
:class:`memnets.nn.losses.InfoNCELoss`, the data :class:`memnets.training.lit.data.RetrievalDataModule`, and
the validation metric the LoCoMo evaluation of :mod:`memnets.training.retrieval.metrics` with a
:class:`memnets.training.retrieval.dense.DenseRanker` around the encoder being trained. Validation logs
``val/recall@{1,5,10,25,50}``, ``val/mrr@10`` and ``val/ndcg@10`` every epoch; ``val/recall@10``
drives ModelCheckpoint and EarlyStopping in the configs. :class:`ExportEncoder` writes the best
checkpoint's encoder with ``save_pretrained`` when fitting ends.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import lightning as L
import torch

from memnets.nn.encoder import DEFAULT_BACKBONE, MemoryEncoder
from memnets.nn.losses import InfoNCELoss
from memnets.training.data.locomo import Conversation
from memnets.training.lit.distill import Teacher, distillation_loss
from memnets.training.retrieval.dense import DenseRanker
from memnets.training.retrieval.metrics import DEFAULT_CATEGORIES, evaluate_retriever, summarize

METRICS = ("recall@1", "recall@5", "recall@10", "recall@25", "recall@50", "mrr@10", "ndcg@10")


class EncoderModule(L.LightningModule):
    """Fine-tunes a MemoryEncoder with InfoNCE on (query, positive[, hard negatives]) batches.

    Args:
        backbone: Hugging Face folder to start from, or a backbone name (:mod:`memnets.nn.backbones`:
            ``all-mpnet-base-v2`` is the ``[large]`` extra's 768-d model); default: the bundled all-MiniLM-L6-v2.
        backbone_config: architecture changes for a randomly initialised backbone of ``backbone``'s
            kind with its tokenizer (``{hidden_size: 32, num_hidden_layers: 2, ...}``; smoke runs);
            ``None`` fine-tunes the pretrained weights.
        max_length: token limit per text (LoCoMo turns are short; 64-128 is plenty and fast).
        projection_dim: optional linear projection after pooling.
        query_prefix, memory_prefix: text prepended to queries / memories (saved with the model).
        temperature: InfoNCE temperature (initial value when learnable).
        learnable_temperature: train the temperature (clamped to [min_temperature, max_temperature]).
        symmetric: add the memory -> query term to the loss.
        lr: AdamW learning rate of the encoder; temperature_lr: that of the temperature.
        weight_decay: AdamW weight decay (not on biases and LayerNorm weights).
        warmup_ratio: share of the steps with linear warm-up; the rest decays linearly to 0.
        eval_batch_size: batch size of validation encoding.
        freeze_embeddings: keep the backbone's embedding block (chiefly the word-embedding matrix,
            half of MiniLM's weights) as it is: no gradient and no AdamW state for it, a cheaper
            CPU step (:meth:`MemoryEncoder.freeze_lower`).
        freeze_layers: keep the lowest N transformer layers as they are too; with
            ``freeze_embeddings`` backpropagation stops above them (cheaper still).
        teacher: an encoder folder to distil from (:mod:`memnets.training.lit.distill`: its softmax over each
            step's memories is the target of the student's, added to InfoNCE with ``distill_weight``); None: none.
        teacher_temperature: the temperature of the teacher's softmax.
        distill_weight: the weight of the distillation term in the loss.
    """

    def __init__(
        self,
        backbone: str = DEFAULT_BACKBONE,
        max_length: int = 128,
        projection_dim: int | None = None,
        query_prefix: str = "",
        memory_prefix: str = "",
        temperature: float = 0.05,
        learnable_temperature: bool = False,
        min_temperature: float = 0.01,
        max_temperature: float = 1.0,
        symmetric: bool = False,
        lr: float = 3e-5,
        temperature_lr: float = 1e-3,
        weight_decay: float = 0.01,
        warmup_ratio: float = 0.1,
        eval_batch_size: int = 64,
        backbone_config: dict[str, Any] | None = None,
        freeze_embeddings: bool = False,
        freeze_layers: int = 0,
        teacher: str | None = None,
        teacher_temperature: float = 0.05,
        distill_weight: float = 1.0,
    ):
        super().__init__()
        self.save_hyperparameters()
        self.encoder = MemoryEncoder.from_pretrained(
            backbone,
            max_length=max_length,
            projection_dim=projection_dim,
            query_prefix=query_prefix,
            memory_prefix=memory_prefix,
            backbone_config=backbone_config,
        )
        # the backbone's pooler is never run (mean pooling): frozen, or DDP stops on its missing gradients
        self.encoder.freeze_unused_parameters()
        self.encoder.freeze_lower(embeddings=freeze_embeddings, layers=freeze_layers)
        self.loss_fn = InfoNCELoss(
            temperature,
            learnable_temperature,
            symmetric,
            min_temperature=min_temperature,
            max_temperature=max_temperature,
        )
        self.teacher = Teacher(teacher, teacher_temperature) if teacher else None
        self._validation_rows: list[dict] = []

    def on_fit_start(self) -> None:
        # Hugging Face loads backbones in eval mode; fine-tune with dropout, as sentence-transformers does
        self.encoder.train()
        # every rank scores its queries against the positives and negatives of all ranks
        self.loss_fn.gather_across_devices = self.trainer.world_size > 1
        if self.teacher is not None:
            self.teacher.encoder.to(self.device)

    def transfer_batch_to_device(self, batch, device, dataloader_idx):
        if isinstance(batch, Conversation):  # validation: ranked on the encoder's device as it is
            return batch
        return super().transfer_batch_to_device(batch, device, dataloader_idx)

    def embed(self, texts: list[str], kind: str) -> torch.Tensor:
        return self.encoder.embed(texts, kind)

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        size = len(batch["queries"])
        queries = self.embed(batch["queries"], "query")
        # positives and hard negatives in one forward pass: both are memories
        memories = self.embed(batch["positives"] + batch.get("hard_negatives", []), "memory")
        positives, negatives = memories[:size], memories[size:]
        loss = self.loss_fn(
            queries,
            positives,
            negatives.view(size, -1, negatives.shape[-1]) if negatives.numel() else None,
            positive_keys=batch["positive_keys"],
            query_positive_keys=batch["query_positive_keys"],
            hard_negative_keys=batch.get("hard_negative_keys"),
        )
        if self.teacher is not None:
            student = queries @ memories.T / self.loss_fn.temperature()
            teacher = self.teacher.logits(batch["queries"], batch["positives"] + batch.get("hard_negatives", []))
            distilled = distillation_loss(student, teacher)
            self.log("train/distill", distilled, batch_size=size)
            loss = loss + self.hparams.distill_weight * distilled
        self.log("train/loss", loss, prog_bar=True, batch_size=size)
        self.log("train/temperature", self.loss_fn.temperature(), batch_size=size)
        return loss

    def validation_step(self, conversation, batch_idx: int) -> None:
        ranker = DenseRanker(self.encoder, batch_size=self.hparams.eval_batch_size)
        report = evaluate_retriever(ranker, [conversation], categories=DEFAULT_CATEGORIES)
        self._validation_rows.extend(report.per_question)

    def on_validation_epoch_end(self) -> None:
        report = summarize("validation", self._validation_rows)
        self._validation_rows = []
        if not report.overall:
            return
        for metric in METRICS:
            self.log(
                f"val/{metric}",
                report.overall[metric],
                prog_bar=metric in {"recall@5", "recall@10"},
                sync_dist=True,
                batch_size=report.counts["questions"],
            )

    def configure_optimizers(self):
        hp = self.hparams
        decay, no_decay = [], []
        for parameter in self.encoder.parameters():
            if not parameter.requires_grad:  # the unused pooler, and what freeze_embeddings / freeze_layers keep
                continue
            (no_decay if parameter.ndim < 2 else decay).append(parameter)
        groups = [
            {"params": decay, "weight_decay": hp.weight_decay, "lr": hp.lr},
            {"params": no_decay, "weight_decay": 0.0, "lr": hp.lr},
        ]
        temperature = [p for p in self.loss_fn.parameters()]
        if temperature:
            groups.append({"params": temperature, "weight_decay": 0.0, "lr": hp.temperature_lr})
        optimizer = torch.optim.AdamW(groups)
        total = max(1, int(self.trainer.estimated_stepping_batches))
        warmup = int(hp.warmup_ratio * total)

        def schedule(step: int) -> float:
            if step < warmup:
                return (step + 1) / (warmup + 1)
            return max(0.0, (total - step) / max(1, total - warmup))

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


class ExportEncoder(L.Callback):
    """When fitting ends, save the best checkpoint's encoder as a loadable folder.

    Writes ``<log_dir>/encoder/`` (next to that run's metrics and config) and a stable copy at
    ``export_dir`` (default ``checkpoints/encoder/best``), each with ``training.json``: the run's
    folder, the best checkpoint, its monitored score, the epochs trained, the wall time of the fit,
    the number of processes (``world_size``), the torch threads of each and the throughput of the
    training steps (pairs of all ranks per second of the slowest rank's step time). Without a
    ModelCheckpoint (or before any checkpoint) the last weights are exported. After this the module
    holds the exported (best) weights.
    """

    def __init__(self, export_dir: str | None = "checkpoints/encoder/best"):
        self.export_dir = export_dir
        self.fit_started = self.batch_started = 0.0
        self.train_seconds, self.pairs_seen = 0.0, 0

    def on_fit_start(self, trainer, pl_module) -> None:
        self.fit_started = time.perf_counter()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.batch_started = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.train_seconds += time.perf_counter() - self.batch_started
        self.pairs_seen += len(batch["queries"])

    def on_fit_end(self, trainer: L.Trainer, pl_module: EncoderModule) -> None:
        callback = trainer.checkpoint_callback
        best = getattr(callback, "best_model_path", "") or ""
        if best:
            state = torch.load(best, map_location="cpu", weights_only=True)["state_dict"]
            pl_module.load_state_dict(state)
        # collectives: every rank takes part (a rank that skipped them left rank 0 waiting on a closed peer)
        run_dir = Path(trainer.log_dir or trainer.default_root_dir)
        pairs_seen, train_seconds = self._totals(trainer)
        if trainer.is_global_zero:
            info = {
                "run_dir": str(run_dir),
                "best_checkpoint": best or None,
                "monitor": getattr(callback, "monitor", None),
                "best_score": float(callback.best_model_score)
                if best and callback.best_model_score is not None
                else None,
                "epochs_trained": trainer.current_epoch,
                "temperature": float(pl_module.loss_fn.temperature().detach()),
                "fit_seconds": round(time.perf_counter() - self.fit_started, 1),
                "world_size": trainer.world_size,
                "train_step_seconds": round(train_seconds, 1),
                "pairs_seen": pairs_seen,
                "pairs_per_second": round(pairs_seen / max(train_seconds, 1e-9), 1),
                "torch_threads": torch.get_num_threads(),  # the steps' intra-op threads, per process (rank 0's)
            }
            targets = [run_dir / "encoder"] + ([Path(self.export_dir)] if self.export_dir else [])
            for target in targets:
                if target.exists():
                    shutil.rmtree(target)
                pl_module.encoder.save_pretrained(target)
                (target / "training.json").write_text(json.dumps(info, indent=2) + "\n")
        trainer.strategy.barrier("memnets-export-encoder")  # no rank returns before the encoder is written

    def _totals(self, trainer: L.Trainer) -> tuple[int, float]:
        """(pairs of all ranks, the slowest rank's step seconds): the global throughput's terms."""
        device = trainer.strategy.root_device
        pairs = trainer.strategy.reduce(torch.tensor(self.pairs_seen, device=device), reduce_op="sum")
        seconds = trainer.strategy.reduce(
            torch.tensor(self.train_seconds, dtype=torch.float64, device=device), reduce_op="max"
        )
        return int(pairs), float(seconds)
