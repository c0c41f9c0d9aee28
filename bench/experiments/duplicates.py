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

The consistency rule of the write path (memnets.memory.consistency.classify: unchanged / updated /
added) is measured on the same vectors, choosing on the training conversations only (conv-26, 30,
41, 42, 43, 47) and reporting validation (conv-49) and test (conv-50): each turn is classified
against its DUPLICATE_CANDIDATES nearest earlier turns, as ``AgentMemory.add`` would, at several
near-match thresholds. Every LoCoMo turn is its own statement, so a turn that becomes an *update*
of an earlier one hides that one from search (it stays in the history); a turn *unchanged* by an
earlier one with another text is a merge (it is stored nowhere). The near-match threshold is the
smallest multiple of 0.01 at which at most 0.1% of the training turns do either. The output lists
how many merge and update at each threshold, with the pairs, and how many of the fact changes of
bench/experiments/fact_changes.py (a time, a number, a name changed in one sentence) are near matches.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from bench.common import parser, write_result

TEST = "conv-50"
TRAIN = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-47")
VALIDATION = "conv-49"
MAX_FALSE_MERGE_RATE = 0.001
THRESHOLDS = (0.9, 0.95, 0.97, 0.98, 0.99)  # reported; the choice scans every multiple of 0.01


def measure(encoder=None, data=None) -> dict:
    """Distinct-turn maxima and paraphrase cosines per conversation, the chosen threshold, and its rates."""
    from memnets.nn.encoder import MemoryEncoder
    from memnets.training.data.locomo import load_locomo

    encoder = encoder or MemoryEncoder.from_pretrained()
    conversations = load_locomo(data)
    per = {}
    for conversation in conversations:
        turns = [turn.content for turn in conversation.turns]
        vectors = encoder.encode(turns, kind="memory").numpy()
        similarity = vectors @ vectors.T
        rule = _rule_inputs(conversation, similarity)  # before identical texts are masked: add sees them
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
            "rule": rule,
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
        "rule": consistency(per, encoder),
    }


def _rule_inputs(conversation, similarity: np.ndarray) -> list:
    """Per turn: its record and its DUPLICATE_CANDIDATES nearest earlier turns (record, cosine), as add sees them."""
    from memnets.memory.writes import DUPLICATE_CANDIDATES
    from memnets.records import Memory

    turns = conversation.turns
    records = [Memory(id=turn.dia_id, owner=conversation.sample_id, t=turn.t, content=turn.content) for turn in turns]
    out = []
    for i in range(1, len(turns)):
        earlier = similarity[i, :i]
        nearest = np.argsort(-earlier, kind="stable")[:DUPLICATE_CANDIDATES]
        out.append((records[i], [(records[j], float(earlier[j])) for j in nearest]))
    return out


def consistency(per: dict, encoder) -> dict:
    """The write path's outcomes on LoCoMo turns per threshold (train / validation / test), the chosen
    threshold, and how many one-detail fact changes are near matches at it."""
    from bench.common import CHANGES
    from memnets.memory.consistency import classify, normalise
    from memnets.records import Memory

    def outcomes(keys, threshold):
        counts = {"turns": 0, "identical": 0, "merged": 0, "updated": 0}
        merged, updated = [], []
        for key in keys:
            for memory, candidates in per[key]["rule"]:
                counts["turns"] += 1
                outcome, match = classify(memory, candidates, threshold)
                if outcome == "unchanged" and normalise(match.content) == normalise(memory.content):
                    counts["identical"] += 1  # the same words again: a true duplicate
                elif outcome == "unchanged":
                    counts["merged"] += 1
                    merged.append([match.content, memory.content])
                elif outcome == "updated":
                    counts["updated"] += 1
                    updated.append([match.content, memory.content])
        turns = max(counts["turns"], 1)
        return {
            **counts,
            "merged_rate": counts["merged"] / turns,
            "updated_rate": counts["updated"] / turns,
            "merged_pairs": merged,
            "updated_pairs": updated,
        }

    train = [k for k in TRAIN if k in per]
    chosen = next(
        c / 100
        for c in range(50, 101)
        if (lambda o: (o["merged"] + o["updated"]) / max(o["turns"], 1) <= MAX_FALSE_MERGE_RATE)(
            outcomes(train, c / 100)
        )
    )
    vectors = encoder.encode([text for pair in CHANGES for text in pair], kind="memory").numpy()
    change_cosines = [float(vectors[2 * i] @ vectors[2 * i + 1]) for i in range(len(CHANGES))]
    when = datetime(2024, 5, 6, tzinfo=UTC)
    change_outcomes = [
        classify(Memory("b", "u", when, b), [(Memory("a", "u", when, a), c)], chosen)[0]
        for c, (a, b) in zip(change_cosines, CHANGES)
    ]
    splits = {"train": train, "validation": [VALIDATION], "test": [TEST]}
    return {
        "threshold": chosen,
        "chosen_on": train,
        "by_threshold": {
            str(t): {name: outcomes([k for k in keys if k in per], t) for name, keys in splits.items()}
            for t in sorted({*THRESHOLDS, chosen})
        },
        "fact_changes": {
            "pairs": len(CHANGES),
            "near_at_threshold": int(sum(c >= chosen for c in change_cosines)),
            "updated_by_the_rule": change_outcomes.count("updated"),  # near matches and same-frame changes
            "cosines": [[round(c, 4), a, b] for c, (a, b) in zip(change_cosines, CHANGES)],
        },
    }


def main(argv=None) -> None:
    args = parser("experiments.duplicates", __doc__.splitlines()[0]).parse_args(argv)
    result = measure()
    path = write_result(args.out, "duplicates", {"encoder": "untrained all-MiniLM-L6-v2", "test": TEST}, result)
    print(f"threshold {result['threshold']:.2f}; choice {result['choice']}; test {result['test']}")
    rule = result["rule"]
    print(f"consistency rule: near-match threshold {rule['threshold']:.2f} chosen on {rule['chosen_on']}")
    for threshold, splits in rule["by_threshold"].items():
        for name, o in splits.items():
            print(
                f"  {threshold} {name:10s} turns {o['turns']:5d}  identical {o['identical']:3d}  "
                f"merged {o['merged']:3d} ({o['merged_rate']:.2%})  updated {o['updated']:3d} ({o['updated_rate']:.2%})"
            )
    changes = rule["fact_changes"]
    print(
        f"  fact changes that are near matches at {rule['threshold']:.2f}: {changes['near_at_threshold']}/{changes['pairs']}; "
        f"updates by the rule: {changes['updated_by_the_rule']}/{changes['pairs']}"
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
