"""The near-duplicate threshold of ``memnets.open``'s add: measured on LoCoMo with the default encoder.

An add whose text has cosine >= threshold with one of the user's memories (same kind) refreshes that
memory instead of storing a second copy. A false merge loses a distinct memory; a missed duplicate
only stores it twice. So the threshold is chosen for (about) no false merges:

- distinct pairs: within each conversation, every turn against every earlier turn with a different
  text (identical texts are true duplicates); the statistic is each turn's highest cosine with an
  earlier distinct turn (a merge happens when that maximum reaches the threshold);
- paraphrase pairs: each observation fact (LoCoMo's third-person summary of a turn) against its
  source turn, the nearest thing to "the same fact said again" that the data labels.

The threshold is chosen on every conversation except the test one (conv-50): the smallest multiple
of 0.01 at which at most 0.1% of the turns there would merge into an earlier distinct turn (no
multiple below 1 gives exactly none: one speaker says nearly the same "Thanks, Nate! ..." twice);
conv-50 then reports its false-merge rate. The merged pairs at the threshold are listed.
"""

from __future__ import annotations

import numpy as np

from bench.common import parser, write_result

TEST = "conv-50"
MAX_FALSE_MERGE_RATE = 0.001


def measure(encoder=None, data=None) -> dict:
    """Distinct-turn maxima and paraphrase cosines per conversation, the chosen threshold, and its rates."""
    from memnets.data.locomo import load_locomo
    from memnets.nn.encoder import MemoryEncoder

    encoder = encoder or MemoryEncoder.from_pretrained()
    conversations = load_locomo(data)
    per = {}
    for conversation in conversations:
        turns = [turn.content for turn in conversation.turns]
        vectors = encoder.encode(turns, kind="memory").numpy()
        similarity = vectors @ vectors.T
        same_text = np.array([[a == b for b in turns] for a in turns])
        similarity[same_text] = -1.0
        earlier = np.tril(np.ones_like(similarity, dtype=bool), k=-1)
        masked = np.where(earlier, similarity, -1.0)
        maxima = masked.max(axis=1)[1:]
        nearest = masked.argmax(axis=1)[1:]
        index = conversation.turn_index
        facts = [f for f in conversation.observations if f.dia_id in index]
        fact_vectors = (
            encoder.encode([f.text for f in facts], kind="memory").numpy() if facts else np.zeros((0, vectors.shape[1]))
        )
        paraphrase = np.array([float(fact_vectors[i] @ vectors[index[f.dia_id]]) for i, f in enumerate(facts)])
        pairs = [(float(m), turns[int(j)], turns[i + 1]) for i, (m, j) in enumerate(zip(maxima, nearest))]
        per[conversation.sample_id] = {
            "distinct_max": maxima,
            "paraphrase": paraphrase,
            "pairs": pairs,
            "identical_repeats": int(np.triu(same_text, k=1).any(axis=0).sum()),
        }
    choose = np.concatenate([v["distinct_max"] for k, v in per.items() if k != TEST])
    threshold = next(c / 100 for c in range(50, 101) if (choose >= c / 100).mean() <= MAX_FALSE_MERGE_RATE)

    def rates(keys):
        distinct = np.concatenate([per[k]["distinct_max"] for k in keys])
        paraphrase = np.concatenate([per[k]["paraphrase"] for k in keys])
        return {
            "turns": int(distinct.size),
            "false_merges": int((distinct >= threshold).sum()),
            "false_merge_rate": float((distinct >= threshold).mean()),
            "distinct_max_quantiles": {q: float(np.quantile(distinct, q)) for q in (0.5, 0.9, 0.99, 0.999, 1.0)},
            "paraphrase_pairs": int(paraphrase.size),
            "paraphrase_merged": float((paraphrase >= threshold).mean()) if paraphrase.size else None,
            "paraphrase_quantiles": {q: float(np.quantile(paraphrase, q)) for q in (0.0, 0.1, 0.5, 0.9, 1.0)},
            "identical_repeats": int(sum(per[k]["identical_repeats"] for k in keys)),
            "merged_pairs": sorted(
                ([round(m, 3), a, b] for k in keys for m, a, b in per[k]["pairs"] if m >= threshold), reverse=True
            ),
        }

    choice_keys = [k for k in per if k != TEST]
    return {
        "threshold": threshold,
        "chosen_on": choice_keys,
        "choice": rates(choice_keys),
        "test": rates([TEST]) if TEST in per else None,
    }


def main(argv=None) -> None:
    args = parser("duplicates", __doc__.splitlines()[0]).parse_args(argv)
    result = measure()
    path = write_result(args.out, "duplicates", {"encoder": "untrained all-MiniLM-L6-v2", "test": TEST}, result)
    print(f"threshold {result['threshold']:.2f}; choice {result['choice']}; test {result['test']}; wrote {path}")


if __name__ == "__main__":
    main()
