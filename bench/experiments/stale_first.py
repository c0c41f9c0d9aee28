"""How often a ranker puts the stale statement first on a knowledge-update file.

`memnets eval retrieval` scores the newer statement's session (the answer session) of a file built by
data/supersession/knowledge_update.py, so it says how often the current fact is in the top k but
not what came above it. This ranks every question's user turns exactly as that command does
(:func:`memnets.training.evaluation.longmemeval.rank_question`: the haystack as of the question date) and
counts, per ranker:

- ``answer_first`` / ``stale_first`` / ``other_first``: the share of questions whose first-ranked
  turn is in the answer session / in the older session (its id starts with ``older_``) / in a
  filler session;
- ``stale_above_answer``: the share where the older session's best turn ranks above the answer
  session's best turn;
- ``answer_rank`` / ``stale_rank``: the mean rank (1 = first) of each session's best turn.

    python -m bench.experiments.stale_first data/supersession/knowledge_update_test.json [--retrievers bm25 dense] [--out docs/results]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.common import DEFAULT_OUT, write_result
from memnets.training.data.longmemeval import LongMemEvalQuestion, load_longmemeval
from memnets.training.evaluation.longmemeval import cache_encodings, corpus_texts, rank_question, scored_questions
from memnets.training.retrieval.rankers import build_ranker, parse_spec

STALE_PREFIX = "older_"  # data/supersession/knowledge_update.py's id of the session with the older statement


def best_ranks(question: LongMemEvalQuestion, ranked: list[str]) -> dict[str, int]:
    """Session id -> the rank (1 = first) of its best turn in ``ranked``."""
    ranks: dict[str, int] = {}
    for place, turn in enumerate(ranked, start=1):
        ranks.setdefault(question.turn_session[turn], place)
    return ranks


def stale_counts(ranker, questions: list[LongMemEvalQuestion]) -> dict[str, float]:
    """The measures of the module docstring for one ranker over ``questions`` (each with a stale session)."""
    firsts, answer_ranks, stale_ranks = [], [], []
    for question in questions:
        stale = next(s for s in question.session_ids if s.startswith(STALE_PREFIX))
        (answer,) = question.answer_session_ids
        ranked = rank_question(ranker, question)
        ranks = best_ranks(question, ranked)
        first = question.turn_session[ranked[0]]
        firsts.append("answer" if first == answer else "stale" if first == stale else "other")
        answer_ranks.append(ranks[answer])
        stale_ranks.append(ranks[stale])
    n = len(questions)
    return {
        "questions": n,
        "answer_first": firsts.count("answer") / n,
        "stale_first": firsts.count("stale") / n,
        "other_first": firsts.count("other") / n,
        "stale_above_answer": sum(s < a for s, a in zip(stale_ranks, answer_ranks)) / n,
        "answer_rank": sum(answer_ranks) / n,
        "stale_rank": sum(stale_ranks) / n,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.experiments.stale_first", description=__doc__)
    parser.add_argument("data", type=Path, help="a knowledge-update file of data/supersession/knowledge_update.py")
    parser.add_argument("--retrievers", nargs="+", default=["bm25", "dense"], help="ranker specs (default bm25 dense)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    questions = [
        q
        for q in scored_questions(load_longmemeval(args.data))
        if any(s.startswith(STALE_PREFIX) for s in q.session_ids)
    ]
    results = {}
    for spec in args.retrievers:
        name, kind, path = parse_spec(spec)
        ranker = cache_encodings(build_ranker(kind, path), corpus_texts(questions))
        results[name] = stale_counts(ranker, questions)
        print(name, {key: round(value, 3) for key, value in results[name].items()})
    written = write_result(args.out, f"stale_first_{args.data.stem}", {"data": str(args.data)}, results)
    print(f"wrote {written}")


if __name__ == "__main__":
    main()
