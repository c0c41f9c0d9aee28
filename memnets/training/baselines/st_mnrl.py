"""Baseline: a plain sentence-transformers MultipleNegativesRankingLoss fine-tune on the same pairs.

This is the recipe a user would otherwise pick, the bar the trained memory encoder has to clear:
``SentenceTransformer(backbone)``, (query, positive) pairs of the train split from
``build_retrieval_pairs``, sentence-transformers' ``NoDuplicatesBatchSampler`` over the shuffled
pairs, ``MultipleNegativesRankingLoss`` (scale 20 = temperature 0.05, in-batch negatives only),
AdamW with linear warm-up and decay, as sentence-transformers' trainer does (its trainer needs the
``accelerate`` package, which this project does not depend on, so the loop is written out).

The result is a sentence-transformers folder, which ``memnets eval retrieval name=dense:DIR``
loads (MemoryEncoder reads the same files). Run::

    memnets baseline st-mnrl --output checkpoints/baselines/st_mnrl --epochs 3
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import torch

from memnets.nn.backbones import resolve_backbone
from memnets.nn.encoder import DEFAULT_BACKBONE
from memnets.progress import quiet_loading, track
from memnets.training.data.builders import build_retrieval_pairs
from memnets.training.data.config import load_data_config
from memnets.training.data.formats import load_conversations

logger = logging.getLogger(__name__)


def train_st_mnrl(
    output: str | Path,
    *,
    backbone: str = DEFAULT_BACKBONE,
    data_config: str | None = None,
    data: str | Path | None = None,
    include_observations: bool = True,
    epochs: int = 3,
    batch_size: int = 32,
    lr: float = 5e-5,
    warmup_ratio: float = 0.1,
    max_seq_length: int | None = None,
    max_steps: int | None = None,
    seed: int = 0,
) -> dict:
    """Fine-tune, save to ``output`` and return the training record (time, pairs/s, settings)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.sampler import NoDuplicatesBatchSampler
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    torch.manual_seed(seed)
    config = load_data_config(data_config, data=data)
    pairs = build_retrieval_pairs(
        load_conversations(config.path, config.splits["train"]), include_observations=include_observations
    )
    dataset = pairs.select_columns(["query", "positive"])
    with quiet_loading():
        # a backbone name resolved here: sentence-transformers would look a bare name up on the Hub
        folder = str(resolve_backbone(backbone))
        model = SentenceTransformer(folder, device="cpu" if not torch.cuda.is_available() else "cuda")
    if max_seq_length:
        model.max_seq_length = max_seq_length
    loss_fn = MultipleNegativesRankingLoss(model)
    sampler = NoDuplicatesBatchSampler(dataset, batch_size=batch_size, drop_last=False, seed=seed)
    steps = epochs * len(sampler) if max_steps is None else min(max_steps, epochs * len(sampler))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warmup = int(warmup_ratio * steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) / (warmup + 1) if s < warmup else max(0.0, (steps - s) / max(1, steps - warmup))
    )
    model.train()
    start, seen = time.perf_counter(), 0
    with track(total=steps, desc="st-mnrl fine-tune", unit="step") as bar:
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            for indices in sampler:
                if bar.n >= steps:
                    break
                rows = dataset[indices]
                features = [
                    {
                        k: v.to(model.device) if isinstance(v, torch.Tensor) else v
                        for k, v in model.preprocess(rows[column]).items()
                    }
                    for column in ("query", "positive")
                ]
                loss = loss_fn(features, labels=None)
                loss.backward()
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
                seen += len(indices)
                bar.update(1)
                bar.set_postfix(epoch=epoch, loss=f"{loss.item():.3f}")
    seconds = time.perf_counter() - start
    model.save(str(output))
    record = {
        "recipe": "sentence-transformers MultipleNegativesRankingLoss (scale 20), NoDuplicatesBatchSampler",
        "backbone": str(backbone),
        "pairs": len(dataset),
        "epochs": epochs,
        "batch_size": batch_size,
        "lr": lr,
        "warmup_ratio": warmup_ratio,
        "max_seq_length": model.max_seq_length,
        "steps": steps,
        "seed": seed,
        "include_observations": include_observations,
        "train_seconds": round(seconds, 1),
        "pairs_per_second": round(seen / seconds, 1),
    }
    (Path(output) / "training.json").write_text(json.dumps(record, indent=2) + "\n")
    logger.info(
        "st-mnrl baseline: %s steps, %s pairs/s, saved in %s",
        record.get("steps"),
        record.get("pairs_per_second"),
        output,
    )
    return record
