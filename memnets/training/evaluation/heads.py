"""Evaluation of the importance head and the recall-gate head against baselines on one split.

Every baseline is fitted on the train split, and every choice (regularisation, thresholds) is made
on the validation split, exactly as for the heads; the split being reported (test by default) is
only scored. Embeddings come from the same frozen encoder and the same on-disk cache as training.

- importance: base rate, a length heuristic (logistic regression on log length) and a scikit-learn
  logistic regression on the embeddings; AUROC, average precision, F1 at the validation-chosen
  threshold (max F1) and expected calibration error.
- gate: always-recall, a max-cosine(query, context turns) threshold and a logistic regression on
  mean-pooled ``[q, c, q*c, |q-c|]``; AUROC, AP, F1, recall of needed recalls and the share of
  archive searches saved at the validation threshold that keeps >= 95% of needed recalls.

Run by ``memnets eval heads --encoder DIR --importance DIR --gate DIR [--split test]``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import average_precision_score, roc_auc_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from memnets.nn.heads import (
    ImportanceHead,
    RecallGateHead,
    binary_metrics,
    expected_calibration_error,
    threshold_at_recall,
    threshold_max_f1,
)
from memnets.training.lit.heads import (
    GateDataModule,
    ImportanceDataModule,
    gate_probabilities,
    importance_probabilities,
)

logger = logging.getLogger(__name__)

LOGREG_C_GRID = (0.01, 0.1, 1.0, 10.0)


def _logreg(features: dict[str, np.ndarray], labels: dict[str, np.ndarray], select: Callable) -> dict[str, np.ndarray]:
    """Standardised logistic regression fitted on train, C chosen on validation; probabilities per split."""
    best, best_score = None, -np.inf
    for c in LOGREG_C_GRID:
        model = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=5000))
        model.fit(features["train"], labels["train"])
        score = select(labels["validation"], model.predict_proba(features["validation"])[:, 1])
        if score > best_score:
            best, best_score = model, score
    return {split: best.predict_proba(x)[:, 1] for split, x in features.items()}


def _split_arrays(datamodule, splits, key: str) -> dict[str, np.ndarray]:
    return {split: datamodule.splits[split][key].numpy() for split in splits}


def importance_report(datamodule: ImportanceDataModule, head: ImportanceHead, split: str = "test") -> dict[str, dict]:
    """Metrics of the head and its baselines on ``split`` (baselines: train fit, validation choices)."""
    splits = ("train", "validation", split)
    labels = _split_arrays(datamodule, splits, "labels")
    base = float(labels["train"].mean())
    candidates = {
        "base rate": {s: np.full(len(labels[s]), base) for s in splits},
        "length (logreg on log chars)": _logreg(
            {s: np.log1p(v)[:, None] for s, v in _split_arrays(datamodule, splits, "lengths").items()},
            labels,
            average_precision_score,
        ),
        "logreg on embeddings": _logreg(
            _split_arrays(datamodule, splits, "embeddings"), labels, average_precision_score
        ),
    }
    rows = {}
    for name, probabilities in candidates.items():
        threshold = threshold_max_f1(labels["validation"], probabilities["validation"])
        rows[name] = _importance_row(labels[split], probabilities[split], threshold)
    probabilities = importance_probabilities(head, datamodule, split)
    rows["ImportanceHead (MLP)"] = _importance_row(labels[split], probabilities, head.threshold)
    return rows


def _importance_row(labels, probabilities, threshold) -> dict[str, float]:
    row = binary_metrics(labels, probabilities, threshold)
    row["ece"] = expected_calibration_error(labels, probabilities)
    row["threshold"] = float(threshold)
    return row


def max_cosine(datamodule: GateDataModule, split: str) -> np.ndarray:
    """Highest cosine between each query and its context turns (-1 for an empty context)."""
    data = datamodule.splits[split]
    sims = torch.einsum("nd,nwd->nw", data["query"], datamodule.context(split))
    return sims.masked_fill(~data["mask"], -1.0).max(dim=1).values.numpy()


def mean_pooled_features(datamodule: GateDataModule, split: str) -> np.ndarray:
    """``[q, c, q*c, |q-c|]`` with c the plain mean of the context turns."""
    data = datamodule.splits[split]
    mask = data["mask"].unsqueeze(-1).float()
    c = (datamodule.context(split) * mask).sum(1) / mask.sum(1).clamp(min=1)
    q = data["query"]
    return torch.cat([q, c, q * c, (q - c).abs()], dim=1).numpy()


def gate_report(
    datamodule: GateDataModule, gate: RecallGateHead, split: str = "test", min_recall: float = 0.95
) -> dict[str, dict]:
    """Metrics of the gate and its baselines on ``split``; thresholds keep ``min_recall`` on validation."""
    splits = ("train", "validation", split)
    labels = _split_arrays(datamodule, splits, "labels")
    candidates = {
        "always recall": {s: np.ones(len(labels[s])) for s in splits},
        "max-cosine threshold": {s: -max_cosine(datamodule, s) for s in splits},  # low similarity => recall
        "logreg on mean-pooled [q,c,q*c,|q-c|]": _logreg(
            {s: mean_pooled_features(datamodule, s) for s in splits}, labels, roc_auc_score
        ),
    }
    rows = {}
    for name, scores in candidates.items():
        threshold = threshold_at_recall(labels["validation"], scores["validation"], min_recall)
        rows[name] = _gate_row(labels[split], scores[split], threshold)
    rows["RecallGateHead"] = _gate_row(labels[split], gate_probabilities(gate, datamodule, split), gate.threshold)
    return rows


def _gate_row(labels, scores, threshold) -> dict[str, float]:
    row = binary_metrics(labels, scores, threshold)
    row["searches_saved"] = row.pop("negative_share")
    row["threshold"] = float(threshold)
    return row


def format_table(title: str, rows: dict[str, dict], columns: list[str]) -> str:
    """A Markdown table of ``rows`` (name -> metrics) with the given metric columns."""
    lines = [f"### {title}", "", "| model | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for name, row in rows.items():
        lines.append(f"| {name} | " + " | ".join(f"{row[c]:.3f}" for c in columns) + " |")
    return "\n".join(lines)


def evaluate_heads(
    encoder_dir: str | None,
    importance_dir: str | None,
    gate_dir: str | None,
    split: str = "test",
    data_config: str | None = None,
    progress: bool = False,
    data: str | None = None,
) -> dict:
    """Evaluate saved heads (either may be ``None`` to skip it) on ``split``.

    Returns ``{"split", "encoder", "importance": rows, "gate": rows}`` (a task only when its head was
    given) and, per task, ``"<task>_positives"``: the share of positives on ``split``. The heads must
    have been trained on ``encoder_dir`` (checked against the checksum they store).
    """
    result: dict = {"split": split, "encoder": encoder_dir or "default backbone"}
    jobs = [
        ("importance", importance_dir, ImportanceHead, ImportanceDataModule, importance_report),
        ("gate", gate_dir, RecallGateHead, GateDataModule, gate_report),
    ]
    for task, directory, head_class, datamodule_class, report in jobs:
        if directory is None:
            continue
        head = head_class.load(directory)
        datamodule = datamodule_class(
            encoder_path=encoder_dir, data_config=data_config, data_path=data, progress=progress
        )
        datamodule.setup("test")
        trained_on = head.metadata.get("encoder", {}).get("checksum")
        if trained_on and trained_on != datamodule.encoder_checksum:
            raise ValueError(
                f"the {task} head in {directory} was trained on another encoder than {encoder_dir or 'the default backbone'}"
            )
        rows = report(datamodule, head, split)
        result[task] = rows
        result[f"{task}_positives"] = float(datamodule.splits[split]["labels"].mean())
        logger.info("%s head on %s: %s", task, split, {name: round(row["auroc"], 3) for name, row in rows.items()})
    return result
