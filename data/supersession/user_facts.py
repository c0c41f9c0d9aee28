"""Build a retrieval benchmark of everyday chats in LongMemEval's format from the held-out written pairs.

LoCoMo's conversations are what the encoder learns from and is chosen on; a user's agent hears something
else: short statements of one's own life in many voices, between requests and small talk. This file
measures retrieval there, on text that no encoder of memnets trained on: the written validation pairs
(writers C and J) and the written test pairs (writer D), the project's own text (Apache-2.0).

One question of type ``single-session-user`` per distinct (question, statement that answers it) of the
pairs: for a change (label 1) the newer statement and ``answer_after``, for any other pair the older
statement and ``answer_before``. Only that statement of the pair is in the haystack (no stale fact
competes: that is knowledge_update.py's benchmark), in session ``answer_{id}`` (a user turn with
``has_answer`` and an acknowledgement), among N filler sessions (default 30), each a statement of a pair
of another domain and one or two exchanges of small talk, as in knowledge_update.py. About 80 user turns
a question, so recall@1, @5 and @10 tell rankers apart. Each item is drawn from its own generator seeded
with ``{seed}/{pair id}``.

    python data/supersession/user_facts.py [--source data/supersession/written] [--out data/supersession]

writes ``user_facts_validation.json`` (validation.jsonl and validation_j.jsonl) and ``user_facts_test.json``
(test.jsonl), each checked by memnets' LongMemEval reader before it is written.

It also writes ``user_facts_train.jsonl``, training conversations in memnets' JSONL format from the written
training pairs (``train_*.jsonl``), for an encoder to learn everyday voices beside LoCoMo's
(``data.extra_train`` of ``memnets fit encoder``): each of a pair's statements is a turn, each question
one per (question, older statement), its evidence the statements that answer it (the older one, and the
newer one where it changes, restates or adds to it); other people's news, plans, exceptions and unrelated
statements of the same subject stay turns that answer nothing, the hardest negatives the encoder meets.
A conversation holds at most :data:`QUESTIONS_PER_CONVERSATION` questions, no two with the same words, so
that "Where does the user live?" has one answer in it. A pair with a statement equal to one of the validation
or test parts (short common sentences that writers A to I wrote independently) is left out.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from knowledge_update import ANSWER, FIRST_DAY, haystack, other_domains, read_pairs, write, written_question

from memnets.training.data.formats import load_conversations

QUESTION_TYPE = "single-session-user"
SPLITS = {"validation": ("validation.jsonl", "validation_j.jsonl"), "test": ("test.jsonl",)}
QUESTIONS_PER_CONVERSATION = 40
ANSWERS_TOO = ("change", "correction", "restatement", "addition")  # kinds whose newer statement answers too


def answering(pair: dict) -> tuple[str, str]:
    """(the statement of ``pair`` that answers its question, the answer): the newer one for a change."""
    return (pair["newer"], pair["answer_after"]) if pair["label"] == 1 else (pair["older"], pair["answer_before"])


def user_fact_item(pair: dict, pool: list[str], fillers: int, seed: int) -> dict:
    """The LongMemEval question of one pair; ``pool``: the statements of other domains' pairs."""
    rng = random.Random(f"{seed}/{pair['id']}")
    statement, answer = answering(pair)
    statements = rng.sample(pool, min(fillers, len(pool)))
    placed = {rng.randrange(len(statements) + 1): (f"{ANSWER}{pair['id']}", statement, True)}
    ids, dates, sessions = haystack(pair["id"], placed, statements, rng, max_gap_days=10)
    return written_question(f"uf_{pair['id']}", QUESTION_TYPE, pair, answer, ids, dates, sessions, rng)


def user_facts_benchmark(pairs: list[dict], fillers: int = 30, seed: int = 0) -> list[dict]:
    """One question per distinct (question, answering statement) of ``pairs``, in the file's order; fillers
    come from the statements of the pairs of other domains."""
    pools = other_domains(pairs)
    items, seen = [], set()
    for pair in pairs:
        key = (pair["question"], answering(pair)[0])
        if key not in seen:
            seen.add(key)
            items.append(user_fact_item(pair, pools[pair["domain"]], fillers, seed))
    return items


def normalised(text: str) -> str:
    """``text`` as the held-out check compares it: lower case, runs of white space as one space."""
    return " ".join(text.lower().split())


def held_out_texts(source: Path) -> frozenset[str]:
    """The :func:`normalised` statements of the validation and test pairs in ``source`` (:data:`SPLITS`)."""
    return frozenset(
        normalised(pair[side])
        for files in SPLITS.values()
        for name in files
        for pair in read_pairs(source / name)
        for side in ("older", "newer")
    )


def training_conversations(pairs: list[dict], source: str, held_out: frozenset[str] = frozenset()) -> list[dict]:
    """memnets JSONL conversations of ``pairs`` (one writer's file, named ``source``), leaving out every pair with
    a statement in ``held_out`` (:func:`normalised` texts): see the module docstring."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for pair in pairs:
        if {normalised(pair["older"]), normalised(pair["newer"])} & held_out:
            continue
        groups.setdefault((pair["question"], pair["older"]), []).append(pair)
    conversations: list[dict] = []
    for (question, older), group in groups.items():
        words = question.casefold().strip()
        conversation = next(
            (c for c in conversations if words not in c["asked"] and len(c["asked"]) < QUESTIONS_PER_CONVERSATION),
            None,
        )
        if conversation is None:
            conversation = {"id": f"{source}-{len(conversations) + 1}", "asked": set(), "texts": {}, "questions": []}
            conversations.append(conversation)
        conversation["asked"].add(words)
        texts = conversation["texts"]
        evidence = [older] + [pair["newer"] for pair in group if pair["kind"] in ANSWERS_TOO]
        for text in [older] + [pair["newer"] for pair in group]:
            texts.setdefault(text, f"t{len(texts) + 1}")
        conversation["questions"].append({"question": question, "evidence": sorted({texts[t] for t in evidence})})
    return [
        {
            "id": conversation["id"],
            "sessions": [
                {
                    "time": FIRST_DAY.isoformat(),
                    "turns": [{"id": i, "speaker": "user", "text": t} for t, i in conversation["texts"].items()],
                }
            ],
            "questions": conversation["questions"],
        }
        for conversation in conversations
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = Path(__file__).parent
    parser.add_argument("--source", type=Path, default=here / "written", help="folder of the written pairs")
    parser.add_argument("--out", type=Path, default=here)
    parser.add_argument("--fillers", type=int, default=30, help="filler sessions per question (default 30)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for split, files in SPLITS.items():
        pairs = [pair for name in files for pair in read_pairs(args.source / name)]
        write(user_facts_benchmark(pairs, args.fillers, args.seed), args.out / f"user_facts_{split}.json")
    held_out = held_out_texts(args.source)
    train = [
        conversation
        for path in sorted(args.source.glob("train_*.jsonl"))
        for conversation in training_conversations(read_pairs(path), path.stem, held_out)
    ]
    out = args.out / "user_facts_train.jsonl"
    out.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in train), encoding="utf-8")
    load_conversations(out)
    print(f"wrote {out}: {len(train)} conversations, {sum(len(c['questions']) for c in train)} questions")


if __name__ == "__main__":
    main()
