"""Pairs of two writers' statements on one subject, scored by a teacher judge, for the judge that ships to learn.

The written training pairs say whether a row's newer statement ends its own older one. They say nothing of
one row's older statement beside another row's newer statement of the same subject: "I live in Leeds" beside
another writer's "Finally unpacked the last box in the York flat" is a change, beside "my sister just moved
to York" it is not. The write path meets exactly such pairs (a speaker's nearest memories, however they were
said), and the mismatched pairs of training are all of two subjects, which no label gets wrong. A judge
that reads pairs better (the large judge, ``configs/supersession/large.yaml``: all-mpnet-base-v2, trained on
the same written pairs) scores them; a small judge learns its probabilities (``data.scored`` of ``memnets fit
supersession``, configs/supersession/distilled.yaml; measured and not shipped, docs/memory.md, "A judge taught by the
large one").

For every row of the training files (``train_*.jsonl``: the validation and test parts are never read),
``--per-row`` other rows of its domain are drawn (seeded by the row's id), each giving the pair (this row's
older statement, that row's newer one); a pair equal to a written pair, or with two equal texts, is left out.

    python data/supersession/teacher.py --judge checkpoints/supersession/large [--per-row 3]

writes ``data/supersession/teacher_scored.jsonl``: ``{"older", "newer", "score", "domain", "older_from",
"newer_from"}`` per pair, the ids of the rows the statements come from, and the teacher's score. The texts
are the project's (Apache-2.0), and so are the scores: the teacher learned only the project's own pairs.
"""

from __future__ import annotations

import argparse
import json
import random
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).parent
OUT = HERE / "teacher_scored.jsonl"


def training_rows(folder: Path) -> list[dict]:
    """The written training pairs (``train_*.jsonl`` of ``folder``), in file and line order, read as a fit reads
    them (:func:`memnets.training.lit.supersession.read_pairs`)."""
    from memnets.training.lit.supersession import read_pairs

    return read_pairs(sorted(folder.glob("train_*.jsonl")))


def cross_pairs(rows: list[dict], per_row: int, seed: int = 0, across: bool = False) -> list[dict]:
    """Each row's older statement beside the newer statements of ``per_row`` other rows of its domain (of the
    other domains where ``across``), drawn from a generator seeded with ``{seed}/{row id}``, leaving out pairs
    that are written pairs and pairs of two equal texts; the pairs in order, without repeats."""
    by_domain: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_domain[row["domain"]].append(row)
    elsewhere = {domain: [o for d, kept in by_domain.items() if d != domain for o in kept] for domain in by_domain}
    written = {(row["older"], row["newer"]) for row in rows}
    seen, out = set(), []
    for row in rows:
        if across:
            others = elsewhere[row["domain"]]
        else:
            others = [other for other in by_domain[row["domain"]] if other["id"] != row["id"]]
        for other in random.Random(f"{seed}/{row['id']}").sample(others, min(per_row, len(others))):
            pair = (row["older"], other["newer"])
            if pair in written or pair in seen or pair[0] == pair[1]:
                continue
            seen.add(pair)
            out.append(
                {"older": pair[0], "newer": pair[1], "domain": row["domain"], "older_from": row["id"],
                 "newer_from": other["id"]}
            )  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--judge", required=True, help="the teacher: a judge folder (the large judge)")
    parser.add_argument("--source", type=Path, default=HERE / "written", help="folder of the written pairs")
    parser.add_argument("--per-row", type=int, default=3, help="other rows of the domain per row (default 3)")
    parser.add_argument(
        "--across", action="store_true", help="rows of the other domains instead (measured, not kept: docs/memory.md)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)

    import torch

    from memnets.nn.backend_choice import cpu_half_precision
    from memnets.nn.change_judge import ChangeJudge, probabilities
    from memnets.progress import track

    pairs = cross_pairs(training_rows(args.source), args.per_row, args.seed, args.across)
    teacher = ChangeJudge.load(args.judge)
    # shortest first, so that each batch pads little; in bf16 where this CPU computes it natively (2.5x faster)
    order = sorted(range(len(pairs)), key=lambda i: len(pairs[i]["older"]) + len(pairs[i]["newer"]))
    scores = [0.0] * len(pairs)
    batch = 64
    bf16 = cpu_half_precision()["bf16"]
    with track(total=len(pairs), desc="teacher", unit="pair") as progress, torch.autocast("cpu", enabled=bf16):
        for start in range(0, len(order), batch):
            chunk = order[start : start + batch]
            found = probabilities(teacher, [(pairs[i]["older"], pairs[i]["newer"]) for i in chunk])
            for i, score in zip(chunk, found.tolist()):
                scores[i] = score
            progress.update(len(chunk))
    lines = [
        json.dumps({**pair, "score": round(score, 4)}, ensure_ascii=False) + "\n" for pair, score in zip(pairs, scores)
    ]
    args.out.write_text("".join(lines), encoding="utf-8")
    changes = sum(score >= 0.5 for score in scores)
    print(f"wrote {args.out}: {len(pairs)} pairs, {changes} scored 0.5 or more by {args.judge}")


if __name__ == "__main__":
    main()
