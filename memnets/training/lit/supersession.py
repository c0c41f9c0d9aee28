"""The LightningModule and DataModule that train the change-of-fact judge (`memnets fit supersession`).

The judge (:class:`~memnets.nn.change_judge.ChangeJudgeNet`) is a small cross-encoder fine-tuned from the
bundled backbone on labelled pairs of statements: JSON lines ``{"older", "newer", "label", ...}`` (the
format of ``data/supersession/README.md``), read from the files given for training and for validation.
Each epoch is scored on validation (average precision); the best epoch is kept, its threshold chosen on
validation (:func:`threshold_for_precision` on the validation pairs and on their newer statements beside other
subjects' facts, :func:`other_subjects`: endings right at :data:`TARGET_PRECISION`; its ``order_threshold``, from
which a newer statement likely replaces the older one, at :data:`ORDER_PRECISION`, and its ``query_threshold``, the
same among a search's hits, at :data:`QUERY_PRECISION` on the validation pairs alone) and the judge saved with its figures
(:meth:`ChangeJudge.save`).
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator, Sequence
from pathlib import Path

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
from sklearn.metrics import average_precision_score
from torch.utils.data import DataLoader

from memnets.nn.backbones import DEFAULT_BACKBONE
from memnets.nn.change_judge import ChangeJudge, ChangeJudgeNet, probabilities
from memnets.nn.heads import threshold_max_f1
from memnets.nn.judge_files import DEFAULT_JUDGE_DIR, checked_weights
from memnets.training.data.location import find_input

WRITTEN = "data/supersession/written"
DEFAULT_TRAIN = (f"{WRITTEN}/train_a.jsonl", f"{WRITTEN}/train_b.jsonl")
DEFAULT_VALIDATION = (f"{WRITTEN}/validation.jsonl",)
TARGET_PRECISION = 0.95  # of endings on validation (chosen there: no look-alike ended, 68% of changes; docs/memory.md)
ORDER_PRECISION = 0.85  # of likely replacements on validation (the order_threshold; chosen there, docs/memory.md)
QUERY_PRECISION = 0.90  # of a search's likely replacements on the validation pairs alone (the query_threshold; ditto)
OTHER_FACTS = 6  # other subjects' statements each validation pair's newer one is also judged against


def _pair_rows(paths: Sequence[str | Path]) -> Iterator[tuple[str, int, dict]]:
    """(file, line number, row) of each non-empty line of JSON-lines pair files (a relative path found under the
    working folder, else in the checkout memnets runs from: :func:`~memnets.training.data.location.find_input`);
    ValueError naming the file and line of a row without text fields ``older`` / ``newer``."""
    for path in paths:
        with open(find_input(path, "a file of pairs"), encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                row = json.loads(line)
                if not isinstance(row.get("older"), str) or not isinstance(row.get("newer"), str):
                    raise ValueError(f"{path}:{number}: a pair needs text fields 'older' and 'newer'")
                yield str(path), number, row


def read_pairs(paths: Sequence[str | Path], split: str | None = None) -> list[dict]:
    """The labelled pairs of JSON-lines files (those of ``split`` where a row names one); ValueError naming
    the file and line of a row without text fields ``older`` / ``newer`` or a ``label`` of 0 or 1."""
    found = []
    for path, number, row in _pair_rows(paths):
        if row.get("label") not in (0, 1):
            raise ValueError(f"{path}:{number}: 'label' must be 0 or 1, got {row.get('label')!r}")
        if split is None or row.get("split", split) == split:
            found.append(row)
    if not found:
        raise ValueError(f"no labelled pair in {[str(p) for p in paths]}" + (f" of split {split!r}" if split else ""))
    return found


def read_scored_pairs(paths: Sequence[str | Path]) -> list[dict]:
    """The teacher-scored pairs of JSON-lines files: ``{"older", "newer", "score", ...}`` where ``score`` is a
    judge's probability that the newer statement ends the older one (``data/supersession/teacher.py``); a
    ValueError naming the file and line of a row without the text fields or with a score outside [0, 1]."""
    found = []
    for path, number, row in _pair_rows(paths):
        score = row.get("score")
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0.0 <= score <= 1.0:
            raise ValueError(f"{path}:{number}: 'score' must be a number in [0, 1], got {score!r}")
        found.append(row)
    return found


def target(row: dict) -> float:
    """What a training row teaches: a teacher's ``score`` where it has one, else its ``label``."""
    return float(row["score"] if "score" in row else row["label"])


def threshold_for_precision(labels, probabilities, precision: float = TARGET_PRECISION) -> float:
    """The lowest threshold whose endings (``p >= threshold``) are at least ``precision`` right on these
    labels (the most changes caught at that precision); the F1-best threshold when none reaches it."""
    y, p = np.asarray(labels, dtype=np.float64), np.asarray(probabilities, dtype=np.float64)
    order = np.argsort(-p, kind="stable")
    p_sorted, y_sorted = p[order], y[order]
    right = np.cumsum(y_sorted) / np.arange(1, len(p) + 1)
    last_of_tie = np.r_[p_sorted[1:] != p_sorted[:-1], True]  # a threshold takes all equal scores
    meets = np.flatnonzero(last_of_tie & (right >= precision))
    return float(p_sorted[meets[-1]]) if len(meets) else threshold_max_f1(y, p)


def subject(row: dict) -> str:
    """What a pair is about: its ``domain`` (written pairs), else its ``slot`` (template pairs), else its older text."""
    return row.get("domain") or row.get("slot") or row["older"]


def other_facts(rows: Sequence[dict], row: dict, rng: random.Random, count: int = OTHER_FACTS) -> list[dict]:
    """``count`` rows of ``rows`` about another subject than ``row`` (:func:`subject`), drawn by ``rng``: the
    speaker's other facts, which the write path reads beside ``row``'s newer statement."""
    others = [r for r in rows if subject(r) != subject(row) and r["older"] != row["older"]]
    return rng.sample(others, min(count, len(others)))


def other_subjects(rows: Sequence[dict], seed: int = 0) -> list[tuple[str, str]]:
    """(an older statement of another subject, a row's newer one): :data:`OTHER_FACTS` for each row
    (:func:`other_facts`, seeded). None of them is a change: a judge's thresholds are set on these beside the
    labelled pairs, so its precision holds on what the write path meets, not on the hard pairs alone."""
    rng = random.Random(seed)
    return [(other["older"], row["newer"]) for row in rows for other in other_facts(rows, row, rng)]


def mismatched_pairs(rows: Sequence[dict], count: int, seed: int = 0, from_changes: float = 0.0) -> list[dict]:
    """``count`` pairs (label 0, kind "mismatched") of one row's ``older`` and the ``newer`` of a row of another
    subject (:func:`subject`), drawn with ``seed``; a share ``from_changes`` of the newer statements drawn from
    the changes (label 1) alone: a change or correction said about one thing ("oops, it's 41 Harcourt Road, not
    14") beside a fact about another ("My laptop is a 2015 MacBook Air") is what the write path meets most, for
    a speaker's nearest memories are candidates however far their subject (:mod:`memnets.memory.supersession`)."""
    rng = random.Random(seed)
    changes = [row for row in rows if row["label"] == 1] or list(rows)
    out = []
    while rows and len(out) < count:
        a = rng.choice(rows)
        b = rng.choice(changes if from_changes and rng.random() < from_changes else rows)
        if subject(a) != subject(b):
            pair = {"older": a["older"], "newer": b["newer"], "label": 0, "kind": "mismatched"}
            if "question" in a:  # the older one's question, which the newer statement does not answer
                pair["question"] = a["question"]
            out.append(pair)
    return out


class ChangeJudgeDataModule(L.LightningDataModule):
    """(older, newer, label) batches of the training and validation pair files.

    Args:
        train: JSON-lines files of training pairs.
        validation: JSON-lines files of validation pairs (rows of another ``split`` left out: a file of
            mined pairs holds every split).
        batch_size: pairs per step.
        mismatched: pairs of one training row's older and another's newer, of another domain, added to the
            training rows as no change (label 0): a speaker's statements about two things end nothing, a
            lesson the written pairs, whose negatives all share a subject, do not teach ("I moved to Lyon"
            then "I drink green tea"). Seeded; 0 adds none.
        mismatched_from_changes: the share of those pairs whose newer statement is a change's
            (:func:`mismatched_pairs`; 0: drawn from all rows alike, as the shipped judge's were).
        replayed: candidate pairs of real conversations added as no change (and their mined changes as
            changes): the conversations of ``conversations`` whose pairs in ``labels`` are of split "train",
            paired as the write path pairs them (:mod:`memnets.training.lit.supersession_replay`). 0 adds none.
        conversations: the LoCoMo file ``replayed`` reads.
        labels: the mined pairs that label them (and say which conversations are for training).
        scored: JSON-lines files of pairs a teacher judge scored (:func:`read_scored_pairs`), added to the
            training rows with the teacher's probability as their target: what the labelled pairs cannot say,
            such as whether one writer's newer statement ends another's older one on the same subject, is
            learned from a judge that reads the pair better (distillation; configs/supersession/distilled.yaml).
    """

    def __init__(
        self,
        train: Sequence[str] = DEFAULT_TRAIN,
        validation: Sequence[str] = DEFAULT_VALIDATION,
        batch_size: int = 16,
        mismatched: int = 1500,
        mismatched_from_changes: float = 0.0,
        replayed: int = 0,
        conversations: str = "data/locomo/locomo8.json",
        labels: str = "data/supersession/locomo_mined.jsonl",
        scored: Sequence[str] = (),
    ):
        super().__init__()
        self.train_files, self.validation_files, self.batch_size = list(train), list(validation), int(batch_size)
        self.mismatched, self.replayed = int(mismatched), int(replayed)
        self.mismatched_from_changes = float(mismatched_from_changes)
        self.conversations, self.labels, self.scored_files = conversations, labels, list(scored)
        self.splits: dict[str, list[dict]] = {}

    def setup(self, stage: str | None = None) -> None:
        if not self.splits:
            train = read_pairs(self.train_files, "train")
            self.splits = {
                "train": train
                + mismatched_pairs(train, self.mismatched, from_changes=self.mismatched_from_changes)
                + self._replayed()
                + read_scored_pairs(self.scored_files),
                "validation": read_pairs(self.validation_files, "validation"),
            }

    def _replayed(self) -> list[dict]:
        """The candidate pairs of the training conversations (``replayed`` of them no change), or none."""
        if not self.replayed:
            return []
        from memnets.nn.encoder import MemoryEncoder
        from memnets.training.data.locomo import load_locomo
        from memnets.training.lit.supersession_replay import replayed_pairs

        mined = read_pairs([self.labels], "train")
        chosen = sorted({row["conversation"] for row in mined})
        encoder = MemoryEncoder.from_pretrained(DEFAULT_BACKBONE).eval()  # the bundled one, as the write path's default

        def encode(texts):
            return encoder.encode(list(texts)).numpy()

        conversations = find_input(self.conversations, "the conversations of the replayed pairs")
        return replayed_pairs(load_locomo(conversations, chosen), mined, encode, self.replayed)

    @property
    def pos_weight(self) -> float:
        targets = [target(row) for row in self.splits["train"]]
        return (len(targets) - sum(targets)) / max(1.0, sum(targets))

    @staticmethod
    def _batch(rows: list[dict]) -> tuple[list[tuple[str, str]], torch.Tensor]:
        return [(row["older"], row["newer"]) for row in rows], torch.tensor([target(row) for row in rows])

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.splits["train"], self.batch_size, shuffle=True, collate_fn=self._batch)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.splits["validation"], 64, collate_fn=self._batch)


class ChangeJudgeModule(L.LightningModule):
    """Fine-tunes a :class:`ChangeJudgeNet` with positive-weighted BCE; keeps the best validation epoch by
    average precision, sets its threshold (:func:`threshold_for_precision`) and saves it to ``output_dir``.

    Args:
        layers: backbone layers the judge keeps (3 measured best for its cost, docs/supersession.md).
        lr, weight_decay: AdamW settings.
        precision: the validation precision of endings the threshold is set for.
        output_dir: where the judge is saved at the end of fit (None: not saved).
        backbone: the model folder the judge starts from (None: the bundled all-MiniLM-L6-v2).
        start: a saved judge folder whose layers and classifier the fine-tuning starts from instead of the
            backbone's ("shipped": the judge memnets ships, :data:`~memnets.nn.judge_files.DEFAULT_JUDGE_DIR`);
            its depth replaces ``layers``. The pack's recipe starts there: the written pairs are learned
            already, and one epoch over the conversations' pairs adapts it (configs/supersession/cpu.yaml).
        frozen_layers: the judge's lowest layers left as they start (0: every layer learns). Frozen layers need
            no backward pass, so a deep judge adapted by its top layers costs little more than a shallow one.
        weights: how the judge's file stores its layers (:data:`~memnets.nn.judge_files.WEIGHTS`; None: as the
            judge it starts at, float16 from the backbone). Its thresholds are set on the weights as stored.
    """

    def __init__(
        self,
        layers: int = 3,
        lr: float = 5e-5,
        weight_decay: float = 0.01,
        precision: float = TARGET_PRECISION,
        output_dir: str | None = "checkpoints/supersession/best",
        backbone: str | None = None,
        start: str | None = None,
        frozen_layers: int = 0,
        weights: str | None = None,
    ):
        super().__init__()
        self.save_hyperparameters()
        self.started_from: dict | None = None  # the judge it starts at, and what that one learned
        if start is not None:
            folder = DEFAULT_JUDGE_DIR if start == "shipped" else start
            started = ChangeJudge.load(folder, *([backbone] if backbone else []))
            self.net = started.net
            learned = {key: started.info[key] for key in ("trained_on", "started_from") if key in started.info}
            self.started_from = {"judge": str(start), **learned}
            weights = weights or started.weights
        else:
            self.net = ChangeJudgeNet(layers, *([backbone] if backbone else []))
        self.weights = checked_weights(weights or "float16")  # refused now, not after the fit
        if isinstance(frozen_layers, bool) or not isinstance(frozen_layers, int):
            raise ValueError(f"frozen_layers must be an integer, got {frozen_layers!r}")
        if not 0 <= frozen_layers < self.net.layers:
            raise ValueError(f"frozen_layers must be in [0, {self.net.layers - 1}] for a {self.net.layers}-layer judge")
        self.net.bert.encoder.layer[:frozen_layers].requires_grad_(False)
        self.net.train()  # dropout on: from_pretrained returns it in eval mode
        self.lr, self.weight_decay, self.precision, self.output_dir = lr, weight_decay, precision, output_dir
        self.best_ap, self.best_epoch, self.best_state = -1.0, -1, None
        self._outputs: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.judge: ChangeJudge | None = None

    def configure_optimizers(self):
        trained = [p for p in self.net.parameters() if p.requires_grad]
        return torch.optim.AdamW(trained, lr=self.lr, weight_decay=self.weight_decay)

    def _logits(self, pairs) -> torch.Tensor:
        return self.net(**{k: v.to(self.device) for k, v in self.net.tokenize(pairs).items()})

    def training_step(self, batch, batch_idx):
        pairs, labels = batch
        weight = torch.tensor(self.trainer.datamodule.pos_weight, device=self.device)
        loss = F.binary_cross_entropy_with_logits(self._logits(pairs), labels, pos_weight=weight)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(labels))
        return loss

    def validation_step(self, batch, batch_idx):
        pairs, labels = batch
        self._outputs.append((self._logits(pairs).detach().cpu(), labels.cpu()))

    def on_validation_epoch_end(self) -> None:
        logits = torch.cat([o[0] for o in self._outputs]).float().numpy()  # float32 also from a bf16 autocast
        labels = torch.cat([o[1] for o in self._outputs]).numpy()
        self._outputs.clear()
        ap = float(average_precision_score(labels, logits))
        self.log("val/ap", ap, prog_bar=True)
        if not self.trainer.sanity_checking and ap >= self.best_ap:  # ties: the later, better-fitted epoch
            self.best_ap, self.best_epoch = ap, self.current_epoch
            self.best_state = copy.deepcopy({k: v.detach().cpu() for k, v in self.net.state_dict().items()})

    def on_fit_end(self) -> None:
        """The best epoch, its threshold on validation, saved with its figures."""
        if self.best_state is not None:
            self.net.load_state_dict(self.best_state)
        self.net.cpu().eval()
        self.net.round_to(self.weights)  # the thresholds below are those of the judge as saved
        datamodule = self.trainer.datamodule
        rows = datamodule.splits["validation"]
        judge = ChangeJudge(self.net, 0.5, weights=self.weights)
        found = probabilities(judge, [(r["older"], r["newer"]) for r in rows])
        labels = np.asarray([r["label"] for r in rows])
        others = probabilities(judge, other_subjects(rows))
        scored, truth = np.r_[found, others], np.r_[labels, np.zeros(len(others), dtype=labels.dtype)]
        judge.threshold = threshold_for_precision(truth, scored, self.precision)
        judge.order_threshold = min(judge.threshold, threshold_for_precision(truth, scored, ORDER_PRECISION))
        # a search's likely replacements, on the pairs alone (the question tells the subjects apart)
        judge.query_threshold = min(judge.order_threshold, threshold_for_precision(labels, found, QUERY_PRECISION))
        ended = found >= judge.threshold
        judge.info = {
            "trained_on": [str(f) for f in datamodule.train_files + datamodule.scored_files],
            "validated_on": [str(f) for f in datamodule.validation_files],
            **({"started_from": self.started_from} if self.started_from else {}),
            "best_epoch": self.best_epoch,
            "validation": {
                "pairs": len(rows),
                "ap": round(self.best_ap, 4),
                "recall": round(float(ended[labels == 1].mean()), 4),
                "precision": round(float(labels[ended].mean()) if ended.any() else 1.0, 4),
                "precision_target": self.precision,
                "other_subjects": len(others),
                "other_subjects_ended": int((others >= judge.threshold).sum()),
            },
        }
        self.judge = judge
        if self.output_dir:
            judge.save(self.output_dir)


__all__ = ["ChangeJudgeDataModule", "ChangeJudgeModule", "read_pairs", "threshold_for_precision"]
