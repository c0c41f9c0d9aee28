"""Build knowledge-update benchmarks in LongMemEval's format from held-out change-of-fact pairs.

`memnets eval retrieval --data FILE` reads LongMemEval files and reports recall_any / recall_all /
NDCG at turn and session level per question type, so a file built here puts a figure for changed
facts beside LongMemEval's own categories. Every question is of type ``knowledge-update``
(memnets' reader accepts LongMemEval's six types only, so no type of our own is added).

From the written pairs (``written/{test,validation}.jsonl``: the project's own text, Apache-2.0),
one question per label-1 pair (the newer statement changes the older fact): the pair's question,
its ``answer_after`` as the answer, and a haystack of

- ``older_{id}``: the older statement as a user turn and an assistant's acknowledgement;
- ``answer_{id}``: later, the newer statement the same way; its user turn has ``has_answer``, so
  this session, and only it, is the evidence: a ranker that puts the older one first has found
  the stale fact;
- ``filler_{id}_{n}``: N filler sessions (default 8), each one statement of another pair of
  another domain plus one or two exchanges of small talk, dated before, between and after the two.

The question is asked 1-7 days after the last session. The haystack is in date order. Each item
draws from its own generator seeded with ``{seed}/{pair id}``, so an item does not change when
other pairs are added.

From the mined LoCoMo pairs (``locomo_mined.jsonl``, with ``data/locomo/locomo8.json``; CC BY-NC
4.0), one question per label-1 pair of the test split: the haystack is the two real sessions
holding the older and the newer turn, with their real dates; the pair's speaker is the user and
the other speaker the assistant, so the user-turn corpus is the speaker's own turns. The question
is asked a day after the newer session.

    python data/supersession/knowledge_update.py [--source data/supersession] [--out data/supersession]

writes ``knowledge_update_test.json``, ``knowledge_update_validation.json`` (when
``written/validation.jsonl`` is there) and ``knowledge_update_locomo_test.json`` (when
``locomo_mined.jsonl`` is there), each checked by memnets' LongMemEval reader before it is written.
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import datetime, timedelta
from pathlib import Path

from memnets.training.data.locomo import Conversation, Turn, load_locomo
from memnets.training.data.longmemeval import DATE_FORMAT, load_longmemeval

QUESTION_TYPE = "knowledge-update"
OLDER, ANSWER, FILLER = "older_", "answer_", "filler_"  # session id prefixes; the stale session is OLDER's
FIRST_DAY = datetime(2023, 1, 2)

ACKNOWLEDGEMENTS = (
    "Thanks for letting me know, I'll keep that in mind.",
    "Got it, noted.",
    "Good to know! Is there anything you'd like help with around that?",
    "Thanks for the update.",
    "Understood. I'll remember that for later.",
    "That's useful to know, thanks for sharing.",
    "Okay, noted. Let me know if anything changes.",
    "Sounds like a lot going on! Thanks for telling me.",
)
SMALL_TALK = (
    ("Any ideas for a lunch I can make in ten minutes?",
     "A wrap with hummus, salad leaves and whatever protein is in the fridge, or eggs on toast with spinach."),
    ("What's a good way to remember to drink more water?",
     "Keep a bottle where you can see it and pair a glass with things you already do, like each meeting."),
    ("Can you suggest a board game for four people who don't like long rules?",
     "Codenames or Ticket to Ride: both are explained in five minutes and work well with four."),
    ("How long should I boil an egg for a runny yolk?",
     "About six minutes from boiling water, then straight into cold water."),
    ("Give me a fun fact to share at dinner.",
     "Octopuses have three hearts, and two of them stop beating while they swim."),
    ("What's the difference between a latte and a flat white?",
     "A flat white has less milk and a thinner layer of microfoam, so the coffee tastes stronger."),
    ("Any tips for falling asleep faster?",
     "Keep the same bedtime, dim the lights an hour before, and put the phone out of reach."),
    ("Recommend a podcast for a long drive?",
     "If you like stories, try a narrative history show; if you like chat, a comedy panel podcast works well."),
    ("How do I get a wine stain out of a white shirt?",
     "Blot it, cover it with salt or baking soda, then rinse with cold water and wash as usual."),
    ("What should I name a houseplant?",
     "Something leafy and dignified: Fernando, Basil Fawlty, or Leaf Erikson."),
    ("Is it worth learning touch typing as an adult?",
     "Yes; a few weeks of fifteen minutes a day is usually enough to beat hunt-and-peck."),
    ("Quick stretch I can do at my desk?",
     "Roll your shoulders back ten times, then hold each side of a neck tilt for twenty seconds."),
    ("What's a good word game to play on a train?",
     "Try 'alphabet categories': pick a topic and take turns naming something for each letter."),
    ("Why is the sky blue?",
     "Air scatters short blue wavelengths of sunlight much more than red ones, so blue reaches us from everywhere."),
    ("How do I keep basil alive on a windowsill?",
     "Plenty of light, water when the top of the soil is dry, and pinch off the flower buds."),
    ("Tell me a short joke.",
     "Why did the scarecrow win an award? Because he was outstanding in his field."),
    ("What's a polite way to decline a meeting?",
     "Thank them, say you can't make it, and offer an alternative such as an email summary or another time."),
    ("How many cups are in a litre, roughly?",
     "About four US cups."),
    ("Can you recommend a classic film for a rainy afternoon?",
     "Singin' in the Rain, fittingly, or Roman Holiday if you want something lighter."),
    ("What's an easy way to start journaling?",
     "Write three lines a night: one thing that happened, one you noticed, one you're looking forward to."),
)  # fmt: skip


def read_pairs(path: Path) -> list[dict]:
    """The pairs of a JSON-lines file, in the file's order."""
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _date(moment: datetime) -> str:
    return moment.strftime(DATE_FORMAT)


def _exchange(user: str, assistant: str, has_answer: bool = False) -> list[dict]:
    return [
        {"role": "user", "content": user, "has_answer": has_answer},
        {"role": "assistant", "content": assistant, "has_answer": False},
    ]


def _filler_session(statement: str, rng: random.Random) -> list[dict]:
    """One statement of another pair, acknowledged, and one or two exchanges of small talk, in a random order."""
    exchanges = [_exchange(statement, rng.choice(ACKNOWLEDGEMENTS))]
    exchanges += [_exchange(*talk) for talk in rng.sample(SMALL_TALK, rng.randint(1, 2))]
    rng.shuffle(exchanges)
    return [turn for exchange in exchanges for turn in exchange]


def written_item(pair: dict, pool: list[str], fillers: int, seed: int) -> dict:
    """The LongMemEval question of one label-1 written pair; ``pool``: the statements of other domains' pairs."""
    rng = random.Random(f"{seed}/{pair['id']}")
    statements = rng.sample(pool, fillers)
    # places of the older and newer session among all sessions: at least one filler between them
    slots = fillers + 2
    older = rng.randrange(0, slots - 2) if fillers else 0
    newer = rng.randrange(older + (2 if fillers else 1), slots)
    placed = {
        older: (f"{OLDER}{pair['id']}", pair["older"], False),
        newer: (f"{ANSWER}{pair['id']}", pair["newer"], True),
    }
    ids, dates, sessions = haystack(pair["id"], placed, statements, rng, max_gap_days=20)
    return written_question(f"ku_{pair['id']}", QUESTION_TYPE, pair, pair["answer_after"], ids, dates, sessions, rng)


def haystack(
    pair_id: str, placed: dict[int, tuple[str, str, bool]], statements: list[str], rng: random.Random, max_gap_days: int
) -> tuple[list[str], list[datetime], list[list[dict]]]:
    """(session ids, dates, sessions) of a written haystack, in date order from a day of :data:`FIRST_DAY`'s year,
    1 to ``max_gap_days`` apart: at each slot of ``placed`` (session id, the user's statement, whether it is the
    evidence) that statement acknowledged, at every other slot a filler session of the next of ``statements``
    (:func:`_filler_session`, its id ``filler_{pair_id}_{n}``)."""
    ids, dates, sessions = [], [], []
    moment, fillers = FIRST_DAY + timedelta(days=rng.randrange(365)), 0
    for slot in range(len(placed) + len(statements)):
        moment += timedelta(days=rng.randint(1, max_gap_days))
        dates.append(moment.replace(hour=rng.randint(8, 22), minute=rng.randrange(60)))
        if slot in placed:
            session_id, statement, has_answer = placed[slot]
            ids.append(session_id)
            sessions.append(_exchange(statement, rng.choice(ACKNOWLEDGEMENTS), has_answer=has_answer))
        else:
            fillers += 1
            ids.append(f"{FILLER}{pair_id}_{fillers}")
            sessions.append(_filler_session(statements.pop(), rng))
    return ids, dates, sessions


def written_question(
    question_id: str, question_type: str, pair: dict, answer: str, ids: list[str], dates: list, sessions: list, rng
) -> dict:
    """The LongMemEval item of ``pair``'s question over a written haystack (session ``ids``, ``dates`` and
    ``sessions``; the evidence is session ``answer_{id}``), asked 1-7 days after the last session."""
    asked = dates[-1] + timedelta(days=rng.randint(1, 7), hours=rng.randint(0, 5))
    return {
        "question_id": question_id,
        "question_type": question_type,
        "question": pair["question"],
        "answer": answer,
        "question_date": _date(asked),
        "haystack_session_ids": ids,
        "haystack_dates": [_date(d) for d in dates],
        "haystack_sessions": sessions,
        "answer_session_ids": [f"{ANSWER}{pair['id']}"],
    }


def other_domains(pairs: list[dict]) -> dict[str, list[str]]:
    """For each domain of ``pairs``, the distinct statements of the pairs of every other domain (file order):
    the filler pool of that domain's questions."""
    statements: dict[str, dict[str, None]] = {}
    for pair in pairs:
        statements.setdefault(pair["domain"], {}).update(dict.fromkeys((pair["older"], pair["newer"])))
    return {
        own: [text for domain, texts in statements.items() if domain != own for text in texts] for own in statements
    }


def written_benchmark(pairs: list[dict], fillers: int = 8, seed: int = 0) -> list[dict]:
    """One question per label-1 pair, in the file's order; fillers come from the pairs of other domains."""
    pools = other_domains(pairs)
    return [written_item(pair, pools[pair["domain"]], fillers, seed) for pair in pairs if pair["label"] == 1]


def _locomo_turn(turn: Turn, speaker: str, has_answer: bool) -> dict:
    photo = f" [shares a photo of {turn.image_caption}]" if turn.image_caption else ""
    role = "user" if turn.speaker == speaker else "assistant"
    return {"role": role, "content": f"{turn.text}{photo}", "has_answer": has_answer}


def locomo_item(pair: dict, conversation: Conversation) -> dict:
    """The LongMemEval question of one label-1 LoCoMo pair: its two real sessions, the speaker as the user."""
    sessions = {session.number: session for session in conversation.sessions}
    chosen = []
    for prefix, side in ((OLDER, "older"), (ANSWER, "newer")):
        dia_id = pair[f"{side}_dia_id"]
        session = sessions[int(dia_id[1:].split(":")[0])]
        said = next(turn for turn in session.turns if turn.dia_id == dia_id)
        if said.speaker != pair["speaker"] or said.text != pair[side]:
            raise ValueError(f"{conversation.sample_id} {dia_id}: the turn is not the pair's statement")
        turns = [_locomo_turn(turn, pair["speaker"], prefix == ANSWER and turn is said) for turn in session.turns]
        chosen.append((f"{prefix}D{session.number}", session.t, turns))
    (older_id, older_t, _), (answer_id, newer_t, _) = chosen
    if older_t >= newer_t:
        raise ValueError(f"{conversation.sample_id}: {older_id} is not dated before {answer_id}")
    return {
        "question_id": f"ku_{conversation.sample_id}_{pair['older_dia_id']}_{pair['newer_dia_id']}",
        "question_type": QUESTION_TYPE,
        "question": pair["question"],
        "answer": pair["answer_after"],
        "question_date": _date(newer_t + timedelta(days=1)),
        "haystack_session_ids": [session_id for session_id, _, _ in chosen],
        "haystack_dates": [_date(t) for _, t, _ in chosen],
        "haystack_sessions": [turns for _, _, turns in chosen],
        "answer_session_ids": [answer_id],
    }


def locomo_benchmark(pairs: list[dict], conversations: list[Conversation], split: str = "test") -> list[dict]:
    """One question per label-1 LoCoMo pair of ``split``, in the file's order."""
    by_id = {conversation.sample_id: conversation for conversation in conversations}
    return [
        locomo_item(pair, by_id[pair["conversation"]])
        for pair in pairs
        if pair["label"] == 1 and pair["split"] == split
    ]


def write(items: list[dict], path: Path) -> None:
    """Write ``items`` as a LongMemEval JSON list, then read it back with memnets' reader (a bad item raises)."""
    lines = ",\n".join(json.dumps(item, ensure_ascii=False) for item in items)  # a question a line
    path.write_text(f"[\n{lines}\n]\n", encoding="utf-8")
    load_longmemeval(path)
    print(f"wrote {path}: {len(items)} questions")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = Path(__file__).parent
    parser.add_argument("--source", type=Path, default=here, help="folder with written/ and locomo_mined.jsonl")
    parser.add_argument("--locomo", type=Path, default=here.parent / "locomo" / "locomo8.json")
    parser.add_argument("--out", type=Path, default=here)
    parser.add_argument("--fillers", type=int, default=8, help="filler sessions per question (default 8)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for split in ("test", "validation"):
        source = args.source / "written" / f"{split}.jsonl"
        if source.exists():
            write(
                written_benchmark(read_pairs(source), args.fillers, args.seed),
                args.out / f"knowledge_update_{split}.json",
            )
    mined = args.source / "locomo_mined.jsonl"
    if mined.exists():
        items = locomo_benchmark(read_pairs(mined), load_locomo(args.locomo))
        write(items, args.out / "knowledge_update_locomo_test.json")


if __name__ == "__main__":
    main()
