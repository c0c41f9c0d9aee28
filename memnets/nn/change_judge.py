"""The change-of-fact judge: a small cross-encoder that reads an older and a newer statement together.

"I live in Leeds", later "Lyon's been great so far, the flat is tiny though": nothing in the words says
"moved", yet the second ends the first. "My cousin just moved to Glasgow" shares the words and ends
nothing. A decision like this is learned from language, so the judge is a transformer that reads the
pair as one sequence, ``[CLS] older [SEP] newer [SEP]``, and answers the probability that the newer
statement means the older one no longer holds (the same speaker's; the write path picks candidates of
one speaker and scope, and passes the texts as said, never with a ``"speaker: "`` prefix).

Shape: the first ``layers`` transformer layers of the bundled all-MiniLM-L6-v2 (fine-tuned), mean
pooling, one linear unit. The word and position embeddings stay frozen and are read from the bundled
backbone, so a judge's own files are its layers and its classifier only: the six-layer judge that ships is
10.8 MB with its layers' matrices stored in int8 (21.3 MB in float16; :func:`memnets.nn.judge_files.stored`),
small enough for the wheel (:data:`DEFAULT_JUDGE_DIR`).

Cost is bounded by construction, never by a pattern that may backtrack: each statement is cut to
:data:`MAX_CHARS` characters before it is tokenised (WordPiece is linear), and the pair to
:data:`MAX_TOKENS` tokens, so a 200,000-character text costs what a 1,000-character one does.

Example::

    >>> judge = ChangeJudge.load()                                   # the judge shipped with memnets
    >>> judge.scores([("I live in Leeds.", "I moved to Lyon in June.")])   # doctest: +SKIP
    [0.97]
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import load_file, save_file
from torch import nn

from memnets.nn.backbones import DEFAULT_BACKBONE, SMALL_BACKBONE, resolve_backbone
from memnets.nn.judge_files import (
    CONFIG_NAME,
    DEFAULT_JUDGE_DIR,
    FORMAT,
    FORMAT_VERSIONS,
    MAX_CHARS,
    MAX_TOKENS,
    WEIGHTS_NAME,
    NotAJudge,
    cut,
    read_config,
    restored,
    stored,
    stored_as,
)
from memnets.progress import quiet_loading

log = logging.getLogger(__name__)

TRAINED = (
    "encoder.",
    "classifier.",
)  # the parameter names a judge saves: its layers (and MPNet's relative attention bias), the classifier


class ChangeJudgeNet(nn.Module):
    """The first ``layers`` layers of a BERT-style backbone over a pair, mean-pooled, to one logit.

    Args:
        layers: transformer layers kept from the backbone (1 to its depth): fewer is faster.
        backbone: a Hugging Face model folder or a backbone name (:mod:`memnets.nn.backbones`; default: the
            bundled all-MiniLM-L6-v2), whose embeddings are frozen and whose first ``layers`` layers start the
            fine-tuning.
    """

    def __init__(self, layers: int = 3, backbone: str = DEFAULT_BACKBONE):
        super().__init__()
        from transformers import AutoModel, AutoTokenizer

        folder = resolve_backbone(backbone)  # once: the large backbone's folder is checked on each resolve
        with quiet_loading():
            model = AutoModel.from_pretrained(folder)
        model.pooler = None  # the judge pools its own way (loaded with it: no report of unused weights)
        depth = len(model.encoder.layer)
        if not 1 <= layers <= depth:
            raise ValueError(f"layers must be in [1, {depth}] for the backbone {backbone}, got {layers!r}")
        model.encoder.layer = model.encoder.layer[:layers]
        model.config.num_hidden_layers = layers
        model.embeddings.requires_grad_(False)
        self.layers, self.backbone = int(layers), str(backbone)
        self.bert = model
        self.classifier = nn.Linear(model.config.hidden_size, 1)
        self.tokenizer = AutoTokenizer.from_pretrained(folder)

    def tokenize(self, pairs: Sequence[tuple[str, str]]) -> dict[str, torch.Tensor]:
        """The pairs as one padded batch (each text cut by :func:`cut`, the pair to :data:`MAX_TOKENS`)."""
        older, newer = [cut(a) for a, _ in pairs], [cut(b) for _, b in pairs]
        return self.tokenizer(
            older, newer, padding=True, truncation="longest_first", max_length=MAX_TOKENS, return_tensors="pt"
        )

    def forward(self, input_ids, attention_mask, token_type_ids=None) -> torch.Tensor:
        """Logits ``[N]`` of a tokenised batch (:meth:`tokenize`)."""
        states = self.bert(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(states.dtype)
        pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return self.classifier(pooled).squeeze(-1)

    def trained_state(self) -> dict[str, torch.Tensor]:
        """The parameters a judge saves: its layers and classifier (the embeddings are the backbone's)."""
        state = {f"bert.{k}": v for k, v in self.bert.state_dict().items() if k.startswith(TRAINED[0])}
        return state | {f"classifier.{k}": v for k, v in self.classifier.state_dict().items()}

    def stored_state(self, weights: str = "float16") -> dict[str, np.ndarray]:
        """:meth:`trained_state` as a judge's file holds it at ``weights`` (:func:`memnets.nn.judge_files.stored`)."""
        return stored({k: v.detach().float().cpu().numpy() for k, v in self.trained_state().items()}, weights)

    def take(self, state: dict[str, np.ndarray]) -> None:
        """Set the trained parameters from float arrays by name (:func:`memnets.nn.judge_files.restored`)."""
        self.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=False)

    def round_to(self, weights: str) -> None:
        """Set the trained parameters to what a file at ``weights`` keeps of them, so that scores computed next
        (a threshold chosen on validation) are those of the judge as it will be saved and loaded."""
        self.take(restored(self.stored_state(weights)))


class ChangeJudge:
    """A trained :class:`ChangeJudgeNet` as a supersession judge: ``score(older, newer)`` in [0, 1], and
    the newer statement ends the older one at ``threshold`` (chosen on validation when it was trained), and
    likely replaces it from ``order_threshold``, among a search's hits from ``query_threshold`` (``info``'s, None where
    it has none).

    It meets :class:`memnets.memory.supersession.SupersessionJudge`; :meth:`scores` judges many pairs in
    one batch (the write path's candidates of one new memory).
    """

    def __init__(self, net: ChangeJudgeNet, threshold: float, info: dict | None = None, weights: str = "float16"):
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
            raise ValueError(f"ChangeJudge: threshold must be a number in [0, 1], got {threshold!r}")
        self.net, self.threshold, self.info = net.eval(), float(threshold), dict(info or {})
        self.order_threshold = self.info.pop("order_threshold", None)  # None: it links no likely replacement
        self.query_threshold = self.info.pop("query_threshold", None)  # None: a search reads no likely replacement
        self.weights = weights  # how :meth:`save` stores its layers unless told: as the file it was loaded from

    def __repr__(self) -> str:
        return f"ChangeJudge(layers={self.net.layers}, threshold={self.threshold:.3f})"

    @torch.inference_mode()
    def scores(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """The probability, for each (older, newer) pair, that ``newer`` ends ``older``."""
        if not pairs:
            return []
        logits = self.net(**self.net.tokenize(pairs))
        return torch.sigmoid(logits.float()).tolist()

    def score(self, older: str, newer: str) -> float:
        return self.scores([(older, newer)])[0]

    def save(self, folder: str | Path, weights: str | None = None) -> Path:
        """Write the judge's layers and classifier (stored in ``weights``: float16, float32, or int8 for the
        layers' matrices, :func:`memnets.nn.judge_files.stored`; None: :attr:`weights`) and its config to ``folder``."""
        weights = weights or self.weights
        state = self.net.stored_state(weights)  # first: an unknown ``weights`` leaves no folder behind
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_file(state, str(folder / WEIGHTS_NAME))
        config = {
            "format": FORMAT,
            "format_version": FORMAT_VERSIONS[weights],
            "weights": weights,
            "layers": self.net.layers,
            "hidden_size": self.net.bert.config.hidden_size,
            "vocab_size": self.net.bert.config.vocab_size,
            "threshold": self.threshold,
            "max_chars": MAX_CHARS,
            "max_tokens": MAX_TOKENS,
            **({} if self.order_threshold is None else {"order_threshold": self.order_threshold}),
            **({} if self.query_threshold is None else {"query_threshold": self.query_threshold}),
            **({} if self.net.backbone in (DEFAULT_BACKBONE, SMALL_BACKBONE) else {"backbone": self.net.backbone}),
            **self.info,
        }
        (folder / CONFIG_NAME).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        return folder

    @classmethod
    def load(
        cls, folder: str | Path = DEFAULT_JUDGE_DIR, backbone: str | None = None, shown: str | Path | None = None
    ) -> ChangeJudge:
        """A judge saved by :meth:`save` (default: the one shipped with memnets), on ``backbone``'s embeddings
        (None: the one its config names, else the bundled all-MiniLM-L6-v2).
        :class:`NotAJudge` when the folder holds something else (a pack's supersession head of memnets before
        the judge); ValueError naming the folder (``shown``, if given) when it does not fit the backbone."""
        folder = Path(folder)
        config = read_config(folder, Path(shown or folder))
        backbone = backbone or config.get("backbone", DEFAULT_BACKBONE)
        net = ChangeJudgeNet(config["layers"], backbone)
        shape = (net.bert.config.hidden_size, net.bert.config.vocab_size)
        if shape != (config["hidden_size"], config["vocab_size"]):
            raise ValueError(
                f"{shown or folder}: the judge was trained on a backbone of hidden size {config['hidden_size']} and "
                f"vocabulary {config['vocab_size']}, {backbone} has {shape[0]} and {shape[1]}"
            )
        saved = load_file(str(folder / WEIGHTS_NAME))
        state = restored(saved)
        if set(state) != set(net.trained_state()):
            raise ValueError(
                f"{Path(shown or folder) / WEIGHTS_NAME}: not the weights of a {config['layers']}-layer judge"
            )
        net.take(state)
        own = ("format", "format_version", "weights", "layers", "threshold", "backbone")
        info = {k: v for k, v in config.items() if k not in own}
        return cls(net, config["threshold"], info, weights=config["weights"] or stored_as(saved))


def probabilities(judge: ChangeJudge, pairs: Sequence[tuple[str, str]], batch_size: int = 64) -> np.ndarray:
    """``judge``'s scores of many pairs, in batches: float64 [N]."""
    out = [judge.scores(pairs[i : i + batch_size]) for i in range(0, len(pairs), batch_size)]
    return np.asarray([p for batch in out for p in batch], dtype=np.float64)


__all__ = [
    "DEFAULT_JUDGE_DIR", "MAX_CHARS", "MAX_TOKENS", "ChangeJudge", "ChangeJudgeNet", "NotAJudge", "cut", "probabilities"
]  # fmt: skip
