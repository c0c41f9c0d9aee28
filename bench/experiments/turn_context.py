"""Does a turn's score gain from the turns around it? Measured on LoCoMo for an untrained and a trained encoder.

A turn is scored for a question by the cosine of its own vector (as every ranker does today), or mixed with
what is around it, within its session:

- ``window a``: ``(1 - a) cos(q, turn) + a cos(q, previous + turn + next)``, the three turns embedded as one text;
- ``next a``: the same with the turn and the one after it (an answer often follows what it answers);
- ``neighbours b``: ``cos(q, turn) + b (cos(q, previous) + cos(q, next)) / 2``, no extra embedding.

Recall@5 / @10 over categories 1-4 of each split of the data config (default: validation and test), with the
bundled all-MiniLM-L6-v2 or ``--encoder`` (a trained one: checkpoints/encoder/best), at its own ``max_length``
or ``--max-length``. A mix would be chosen on validation; test is printed beside it.

    python -m bench.experiments.turn_context --encoder checkpoints/encoder/best --out docs/results
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from bench.common import parser, write_result
from memnets.training.data.config import load_data_config
from memnets.training.data.formats import load_conversations
from memnets.training.data.locomo import Conversation
from memnets.training.retrieval.metrics import evaluate_retriever

MIXES = (0.3, 0.5, 0.7)
NEIGHBOUR_WEIGHTS = (0.2, 0.35, 0.5)


def neighbours(conversation: Conversation) -> tuple[np.ndarray, np.ndarray]:
    """Each turn's previous and next turn in its session (the turn itself at a session's edge)."""
    turns = conversation.turns
    same = [i > 0 and turns[i - 1].session == turns[i].session for i in range(len(turns))]
    previous = np.array([i - 1 if same[i] else i for i in range(len(turns))])
    following = np.array([i + 1 if i + 1 < len(turns) and same[i + 1] else i for i in range(len(turns))])
    return previous, following


class Cosines:
    """The question-to-text cosines of a conversation's turns, of each turn's window and of each turn with the next
    (module docstring), computed once per conversation and shared by every variant's ranker."""

    def __init__(self, encoder) -> None:
        self.encoder, self.found = encoder, {}

    def __call__(self, conversation: Conversation, queries) -> tuple[np.ndarray, ...]:
        key = (conversation.sample_id, tuple(queries))
        if key not in self.found:
            previous, following = neighbours(conversation)
            texts = [turn.content for turn in conversation.turns]
            window = ["\n".join(texts[j] for j in sorted({previous[i], i, following[i]})) for i in range(len(texts))]
            with_next = ["\n".join(texts[j] for j in sorted({i, following[i]})) for i in range(len(texts))]
            q = self.encoder.encode(list(queries), kind="query").numpy()
            own, win, nxt = (q @ self.encoder.encode(t, kind="memory").numpy().T for t in (texts, window, with_next))
            self.found[key] = (own, win, nxt, previous, following)
        return self.found[key]


class ContextRanker:
    """Ranks a conversation's turns by ``score(own, window, with_next, previous, following)`` -> [q, n] of the
    shared :class:`Cosines`."""

    def __init__(self, cosines: Cosines, score: Callable[..., np.ndarray]) -> None:
        self.cosines, self.score = cosines, score

    def rank(self, conversation: Conversation, queries) -> list[list[str]]:
        ids = np.array([turn.dia_id for turn in conversation.turns])
        scores = self.score(*self.cosines(conversation, queries))
        return [list(ids[np.argsort(-row, kind="stable")]) for row in scores]


def variants() -> dict[str, Callable[..., np.ndarray]]:
    """Every score the module docstring names, by name."""
    found = {"turn": lambda own, win, nxt, p, f: own}
    for a in MIXES:
        found[f"window {a}"] = lambda own, win, nxt, p, f, a=a: (1 - a) * own + a * win
        found[f"next {a}"] = lambda own, win, nxt, p, f, a=a: (1 - a) * own + a * nxt
    for b in NEIGHBOUR_WEIGHTS:
        found[f"neighbours {b}"] = lambda own, win, nxt, p, f, b=b: own + b * (own[:, p] + own[:, f]) / 2
    return found


def main(argv: list[str] | None = None) -> None:
    from memnets.nn.encoder import DEFAULT_BACKBONE, MemoryEncoder

    p = parser("experiments.turn_context", __doc__.splitlines()[0])
    p.add_argument("--splits", nargs="+", default=["validation", "test"], help="the data config's splits")
    p.add_argument("--encoder", default=None, help="encoder folder (default: the bundled all-MiniLM-L6-v2)")
    p.add_argument("--max-length", type=int, default=None, help="tokens per text (default: the encoder's own)")
    args = p.parse_args(argv)
    encoder = MemoryEncoder.from_pretrained(args.encoder or DEFAULT_BACKBONE, max_length=args.max_length)
    config = load_data_config(None)
    results, cosines = {}, Cosines(encoder)
    for split in args.splits:
        conversations = load_conversations(config.path, config.splits[split])
        if args.quick:
            conversations = [replace(c, qa=c.qa[:20]) for c in conversations[:1]]
        for name, score in variants().items():
            report = evaluate_retriever(ContextRanker(cosines, score), conversations, name=name)
            figures = {k: round(100 * report.overall[k], 1) for k in ("recall@5", "recall@10")}
            results.setdefault(name, {})[split] = figures
            print(
                f"{split:<10} {name:<16} R@5 {figures['recall@5']:5.1f}  R@10 {figures['recall@10']:5.1f}", flush=True
            )
    settings = {"encoder": args.encoder or DEFAULT_BACKBONE, "max_length": encoder.max_length, "splits": args.splits}
    write_result(Path(args.out), "turn_context", settings, results)


if __name__ == "__main__":
    main()
