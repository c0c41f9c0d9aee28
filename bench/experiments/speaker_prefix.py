"""How a message's speaker is embedded, measured three ways on LoCoMo through ``memnets.open``'s search.

``add(messages=...)`` stores a message as ``"{speaker}: {text}"``. A question that names the user ("What is
Erin's dog called?") then meets the name in every memory of hers: the prefix lifts them all alike, and
with a single user it tells nothing apart. Three ways to keep the speaker:

- ``both`` (memnets before issue 52): the text ``"Erin: I moved to Lyon"`` is stored and embedded;
- ``text only``: the same stored text, the encoder given its body (``"I moved to Lyon"``); the
  lexical index still holds the name;
- ``metadata only``: the stored and embedded text is the body, the speaker only in the metadata.

Each conversation's turns go into a fresh memory (the bundled all-MiniLM-L6-v2, hybrid search, the
default), one record per turn keyed by its dia_id (no consistency merge, no supersession: only the
embedding differs), and each question is ``memory.search(question, k=50)``; the LoCoMo rule scores the
ranking (recall@k, MRR@10, nDCG@10; categories 1-4). Turns beyond the 50 hits follow in the
conversation's order.

    python -m bench.experiments.speaker_prefix --split validation --out docs/results
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench.common import encoder_from, parser, write_result
from memnets.text import strip_speaker
from memnets.training.data.config import load_data_config
from memnets.training.data.formats import load_conversations
from memnets.training.data.locomo import Conversation
from memnets.training.retrieval.metrics import evaluate_retriever

MODES = ("both", "text only", "metadata only")
K = 50


class BodyEncoder:
    """An encoder that embeds a memory text's body (:func:`memnets.text.strip_speaker`) and a query as it is."""

    def __init__(self, encoder):
        self.inner = encoder

    def encode(self, texts, kind="memory", **options):
        texts = [strip_speaker(t) for t in texts] if kind == "memory" else texts
        return self.inner.encode(texts, kind=kind, **options)

    def __getattr__(self, name):
        return getattr(self.inner, name)


class PrefixRanker:
    """A LoCoMo ranker (``rank(conversation, queries)``) over a fresh memory written in ``mode``."""

    def __init__(self, encoder, mode: str):
        self.encoder = BodyEncoder(encoder) if mode == "text only" else encoder
        self.mode = mode

    def rank(self, conversation: Conversation, queries: Sequence[str]) -> list[list[str]]:
        import memnets
        from memnets.records import Memory

        ids = {turn.dia_id: f"turn-{n}" for n, turn in enumerate(conversation.turns)}
        back = {v: k for k, v in ids.items()}
        with tempfile.TemporaryDirectory() as folder, memnets.open(folder, encoder=self.encoder) as memory:
            records = [
                Memory(
                    id=ids[turn.dia_id],
                    owner="user",
                    t=turn.t,
                    content=turn.said if self.mode == "metadata only" else turn.content,
                    metadata={"speaker": turn.speaker},
                )
                for turn in conversation.turns
            ]
            memory.add_many(records, user="user")
            rankings = []
            for query in queries:
                found = [back[hit.memory.id] for hit in memory.search(query, user="user", k=K)]
                rankings.append(found + [t.dia_id for t in conversation.turns if t.dia_id not in set(found)])
        return rankings


def main(argv: list[str] | None = None) -> None:
    p = parser("experiments.speaker_prefix", __doc__)
    p.add_argument("--split", default="validation", help="the data config's split (default validation)")
    p.add_argument("--encoder", default=None, help="encoder folder (default: the bundled all-MiniLM-L6-v2)")
    args = p.parse_args(argv)
    config = load_data_config(None)
    conversations = load_conversations(config.path, config.splits[args.split])
    encoder = encoder_from(args)
    results = {}
    for mode in MODES:
        report = evaluate_retriever(PrefixRanker(encoder, mode), conversations, name=mode)
        results[mode] = {"overall": report.overall, "by_category": report.by_category, "counts": report.counts}
        o = report.overall
        print(
            f"{mode:<14} R@1 {100 * o['recall@1']:.1f}  R@5 {100 * o['recall@5']:.1f}  R@10 {100 * o['recall@10']:.1f}"
            f"  R@25 {100 * o['recall@25']:.1f}  MRR@10 {100 * o['mrr@10']:.1f}  nDCG@10 {100 * o['ndcg@10']:.1f}"
            f"  ({report.counts['questions']} questions)",
            flush=True,
        )
    write_result(
        Path(args.out), f"speaker_prefix_{args.split}", {"split": args.split, "encoder": args.encoder}, results
    )


if __name__ == "__main__":
    main()
