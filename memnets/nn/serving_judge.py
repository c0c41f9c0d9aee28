"""The change-of-fact judge for serving, without torch: its graph on ONNX Runtime, ``tokenizers`` for the pair.

:class:`ServingJudge` reads the folders :class:`~memnets.nn.change_judge.ChangeJudge` saves (the one
shipped in ``memnets/judges/default/``, a pack's ``supersession/``) and computes what its network
computes: ``[CLS] older [SEP] newer [SEP]`` (each cut to :data:`~memnets.nn.judge_files.MAX_CHARS`,
the pair to :data:`~memnets.nn.judge_files.MAX_TOKENS`), the judge's layers over the backbone's frozen
embeddings, mean pooling, one logit, a sigmoid. The graph is built once from the judge's weights and
the backbone's embeddings by :func:`memnets.nn.bert_graph.bert_graph` and cached under both files'
SHA-256. It meets :class:`memnets.memory.supersession.SupersessionJudge` as ``ChangeJudge`` does.

``backend``: ``"onnx"`` computes the float32 graph (the torch judge's scores within 1e-5); ``"int8_vnni"`` the same
graph with ONNX Runtime's dynamic int8 (s8 weights per output channel, the encoder's ``int8_vnni`` settings;
``"int8"``, u8 weights, on a CPU without VNNI); ``"auto"`` (the default) is ``"int8_vnni"`` where the CPU has VNNI and
the int8 graph agrees with the float32 one on :data:`PROBE_PAIRS` here, at load (a mean logit apart of at most
:data:`AGREEMENT_FLOOR`), else ``"onnx"``, with one log line saying which and why (as the encoder's ``"auto"``,
:mod:`memnets.nn.backend_choice`). For the six-layer judge that ships, five pairs cost 19.2 ms on int8_vnni (each
pair alone) against 25.8 ms in float32 (the 2-core AMD EPYC, docs/results/judge_cost-2026-12-07-per-pair.json), and 4
of 3,640 validation decisions to end differed when it scored a batch in one call (docs/memory.md, "Six layers").

Example::

    judge = ServingJudge.load()
    judge.scores([("I live in Leeds.", "I moved to Lyon in June.")])   # [0.97...]
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from memnets.nn.backbones import DEFAULT_BACKBONE
from memnets.nn.backend_choice import has_vnni, vnni_or_int8
from memnets.nn.bert_graph import GRAPH_VERSION, BertShape, bert_graph
from memnets.nn.fast_tokenizer import FastTokenizer
from memnets.nn.graph_cache import cached_graph, cached_int8, file_sha256
from memnets.nn.judge_files import DEFAULT_JUDGE_DIR, MAX_TOKENS, WEIGHTS_NAME, cut, read_config, restored
from memnets.nn.onnx_runtime import GraphSession

BACKBONE_WEIGHTS = "model.safetensors"
BACKENDS = ("auto", "onnx", "int8_vnni", "int8")
# the largest mean |logit difference| to the float32 graph on PROBE_PAIRS at which "auto" keeps the int8 graph: the
# judge that ships is 0.04 apart on this machine (the 2-core AMD EPYC), and a logit 0.5 away moves a score of 0.99
# to 0.984 or 0.994, either side of its threshold (0.993)
AGREEMENT_FLOOR = 0.5
# a change said with a clause, one with no cue word, another person's news, small talk, a new e-mail, a restatement:
# the pairs the write path hands a judge, scored by both graphs when "auto" chooses
PROBE_PAIRS = (
    ("I live in Leeds.", "I moved to Lyon in June, still getting used to the trams."),
    ("I work at the bank.", "I left my job at the bank, I work for a startup now."),
    ("I live in a small house in Leeds.", "My brother moved to Glasgow in May."),
    ("I run every morning before work.", "The office was packed today."),
    ("My email is sam@old.example.com.", "New email: sam.k@fastmail.com, the old one is gone."),
    ("I'm vegetarian.", "Had a lovely steak last night, gave up on the veggie thing months ago."),
    ("We have two cats.", "My cousin just got a puppy."),
    ("I drive a 2012 Corolla.", "Finally sold the Corolla, I cycle everywhere now."),
    ("I'm learning Spanish.", "Spanish class was fun today, I'm still learning it."),
    ("My dentist is Dr. Patel.", "ok"),
)

logger = logging.getLogger(__name__)


class ServingJudge:
    """A saved change judge on ONNX Runtime: ``score(older, newer)`` in [0, 1]; the newer ends the older at ``threshold``."""

    def __init__(
        self,
        session: GraphSession,
        tokenizer: FastTokenizer,
        threshold: float,
        layers: int,
        info: dict,
        backend: str = "onnx",
    ):
        self.session, self.tokenizer, self.threshold, self.layers = session, tokenizer, float(threshold), int(layers)
        self.info, self.backend = dict(info), backend
        self.order_threshold = self.info.pop("order_threshold", None)  # None: it links no likely replacement
        self.query_threshold = self.info.pop("query_threshold", None)  # None: a search reads no likely replacement

    def __repr__(self) -> str:
        return f"ServingJudge(layers={self.layers}, threshold={self.threshold:.3f}, backend={self.backend!r})"

    @classmethod
    def load(
        cls,
        folder: str | Path = DEFAULT_JUDGE_DIR,
        backbone: str = DEFAULT_BACKBONE,
        shown: str | Path | None = None,
        backend: str = "auto",
    ) -> ServingJudge:
        """The judge saved in ``folder`` (default: the one shipped with memnets) on ``backbone``'s embeddings, its
        graph on ``backend`` (:data:`BACKENDS`, the module's docstring); the errors of :meth:`ChangeJudge.load
        <memnets.nn.change_judge.ChangeJudge.load>` for a folder that is not a judge or does not fit the backbone."""
        if backend not in BACKENDS:
            raise ValueError(f"ServingJudge: backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        if backend == "auto":
            exact = cls.load(folder, backbone, shown, backend="onnx")
            return _agreeing_int8(exact, lambda: cls.load(folder, backbone, shown, backend="int8_vnni"))
        if backend == "int8_vnni":
            backend = vnni_or_int8(backend)
        folder, backbone_dir = Path(folder), Path(backbone)
        config = read_config(folder, Path(shown or folder))
        backbone_config = json.loads((backbone_dir / "config.json").read_text())
        shape = BertShape.of(backbone_config, layers=config["layers"])
        found = (shape.hidden, int(backbone_config["vocab_size"]))
        if found != (config["hidden_size"], config["vocab_size"]):
            raise ValueError(
                f"{shown or folder}: the judge was trained on a backbone of hidden size {config['hidden_size']} and "
                f"vocabulary {config['vocab_size']}, {backbone} has {found[0]} and {found[1]}"
            )
        hashes = [file_sha256(folder / WEIGHTS_NAME), file_sha256(backbone_dir / BACKBONE_WEIGHTS), config["layers"]]
        key = hashlib.sha256(json.dumps(hashes).encode()).hexdigest()[:24]
        graph = cached_graph(f"judge-{key}-g{GRAPH_VERSION}", lambda: _build(folder, backbone_dir, shape, shown))
        if backend != "onnx":
            graph = cached_int8(graph, backend)
        own = ("format", "format_version", "weights", "layers", "threshold")
        info = {k: v for k, v in config.items() if k not in own}
        tokenizer = FastTokenizer.from_folder(backbone_dir)
        return cls(GraphSession(graph), tokenizer, config["threshold"], shape.layers, info, backend)

    def logits(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """The judge's logit for each (older, newer) pair (float64; :meth:`scores` is their sigmoid), each pair's its
        own: on an int8 backend each pair runs alone. ONNX Runtime's dynamic int8 quantises a call's activations by
        their range over the whole batch, padding included, so in a batch a pair's score moved with the pairs beside
        it (by up to 0.054 on :data:`PROBE_PAIRS`, all ten against each alone), and a decision at a threshold with
        them; alone, five pairs cost 19.2 ms against 15.9 ms in one call (the 2-core AMD EPYC, idle;
        docs/results/judge_cost-2026-12-07-per-pair.json). The float32 graph batches (its scores agree within 1e-7
        either way)."""
        if not pairs:
            return np.zeros(0)
        if self.backend == "onnx":
            return self._run(pairs)
        return np.concatenate([self._run([pair]) for pair in pairs])

    def _run(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """One call of the graph on ``pairs``, cut and tokenised as the judge was trained: their logits."""
        batch = self.tokenizer.batch([cut(a) for a, _ in pairs], MAX_TOKENS, pairs=[cut(b) for _, b in pairs])
        found = self.session.run(batch["input_ids"], batch["attention_mask"], token_type_ids=batch["token_type_ids"])
        return found.reshape(-1).astype(np.float64)

    def scores(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """The probability, for each (older, newer) pair, that ``newer`` ends ``older``."""
        return (1.0 / (1.0 + np.exp(-self.logits(pairs)))).tolist()

    def score(self, older: str, newer: str) -> float:
        return self.scores([(older, newer)])[0]


def _agreeing_int8(exact: ServingJudge, int8: Callable[[], ServingJudge]) -> ServingJudge:
    """``"auto"``'s choice: the judge ``int8()`` loads where this CPU has VNNI, it loads, and its logits of
    :data:`PROBE_PAIRS` are within :data:`AGREEMENT_FLOOR` of ``exact``'s (the float32 graph) on average; else
    ``exact``. One log line: the choice, and why int8 was passed over."""
    if not has_vnni():
        logger.info("backend 'auto' chose 'onnx' for the judge: the CPU has no VNNI, where int8 weights saturate")
        return exact
    try:
        fast = int8()
    except Exception as error:  # noqa: BLE001 - any failure to load means: not this backend
        logger.warning(
            "backend 'auto' chose 'onnx' for the judge: int8 could not load (%s: %s)", type(error).__name__, error
        )
        return exact
    gap = float(np.abs(fast.logits(PROBE_PAIRS) - exact.logits(PROBE_PAIRS)).mean())
    if gap > AGREEMENT_FLOOR:
        logger.warning(
            "backend 'auto' chose 'onnx' for the judge: int8's logits are %.3f apart from float32's (floor %s)",
            gap,
            AGREEMENT_FLOOR,
        )
        return exact
    logger.info("backend 'auto' chose %r for the judge (logits %.3f apart from float32's)", fast.backend, gap)
    return fast


def _build(folder: Path, backbone: Path, shape: BertShape, shown):
    """The judge's graph: the backbone's embeddings, the judge's layers and classifier (float16 or int8 saved,
    float32 here)."""
    from safetensors.numpy import load_file

    trained = restored(load_file(str(folder / WEIGHTS_NAME)))
    layers = {k.removeprefix("bert."): v for k, v in trained.items() if k.startswith("bert.")}
    expected = {f"encoder.layer.{i}." for i in range(shape.layers)}
    prefixes = {k[: k.index(".", len("encoder.layer.")) + 1] for k in layers}
    if prefixes != expected or "classifier.weight" not in trained or "classifier.bias" not in trained:
        raise ValueError(f"{Path(shown or folder) / WEIGHTS_NAME}: not the weights of a {shape.layers}-layer judge")
    embeddings = {k: v for k, v in load_file(str(backbone / BACKBONE_WEIGHTS)).items() if k.startswith("embeddings.")}
    head = (trained["classifier.weight"], trained["classifier.bias"])
    return bert_graph(
        embeddings | layers, shape, head=head, normalize=False, pooling_floor=1.0, token_types=True, output="logit"
    )


__all__ = ["AGREEMENT_FLOOR", "BACKENDS", "PROBE_PAIRS", "ServingJudge"]
