"""`memnets eval retrieval --data` on a generated file of LongMemEval's S size: time and peak memory.

LongMemEval's data is not redistributed here, so this writes a file of the S split's shape: 500
questions, each over a haystack of ~50 sessions (about 5 user and 5 assistant turns each, the
assistant's turns longer), most sessions drawn from one shared pool of filler sessions as the S
split's haystacks share theirs, plus 1-3 evidence sessions of the question's own with a
``has_answer`` user turn; about one question in 20 is an abstention question (``_abs``). Question
types follow the S split's mix. Then it runs ``python -m memnets eval retrieval RETRIEVER --data
FILE`` once per retriever in a child process and records its wall time and peak resident memory
(``os.wait4``'s rusage of that child).

    python -m bench.experiments.longmemeval_s [--retrievers bm25 dense] [--out docs/results/longmemeval_s_timing.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

QUESTION_TYPES = {  # the S split's counts (500 questions)
    "single-session-user": 70,
    "single-session-assistant": 56,
    "single-session-preference": 30,
    "multi-session": 133,
    "temporal-reasoning": 133,
    "knowledge-update": 78,
}
WORDS = [f"w{n}" for n in range(5000)] + "trip garden cat bakery marathon piano recipe loan camera flight".split()


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choices(WORDS, k=words)) + "."


def _session(rng: random.Random, turns: int) -> list[dict]:
    session = []
    for _ in range(turns):
        session.append({"role": "user", "content": _sentence(rng, rng.randint(12, 40)), "has_answer": False})
        session.append({"role": "assistant", "content": _sentence(rng, rng.randint(80, 160)), "has_answer": False})
    return session


def _answer_session(rng: random.Random, topic: str, answer: str) -> list[dict]:
    """A session of the question's own whose one user turn names the topic and the answer (``has_answer``)."""
    session = _session(rng, rng.randint(4, 6))
    turn = session[2 * rng.randrange(len(session) // 2)]
    turn.update(content=f"{_sentence(rng, 10)} {topic} is {answer}. {_sentence(rng, 10)}", has_answer=True)
    return session


def _date(moment: datetime) -> str:
    return moment.strftime("%Y/%m/%d (%a) %H:%M")


def generate(path: Path, questions: int = 500, sessions: int = 50, pool: int = 8000, seed: int = 0) -> dict:
    """Write an S-sized LongMemEval file at ``path``; returns its shape (questions, sessions, turns, bytes)."""
    rng = random.Random(seed)
    start = datetime(2023, 1, 1, 9, 0)
    filler = [(f"sharegpt_{n}", _session(rng, rng.randint(4, 6))) for n in range(pool)]
    types = [t for t, count in QUESTION_TYPES.items() for _ in range(count)]
    rng.shuffle(types)
    records, slots = [], 0
    for q in range(questions):
        question_type = types[q % len(types)]
        abstention = q % 20 == 19
        evidence = 1 if question_type.startswith("single") else rng.randint(2, 3)
        topic, answer = rng.sample(WORDS, 2)  # the question names a topic word that filler turns use too
        own = [(f"answer_{q}_{e}", _answer_session(rng, topic, answer)) for e in range(evidence)]
        haystack = rng.sample(filler, sessions - evidence) + own
        rng.shuffle(haystack)
        days = sorted(rng.sample(range(400), len(haystack)))
        slots += len(haystack)
        records.append(
            {
                "question_id": f"q{q}" + ("_abs" if abstention else ""),
                "question_type": question_type,
                "question": f"What did I tell you {topic} is, with {rng.choice(WORDS)}?",
                "answer": answer,
                "question_date": _date(start + timedelta(days=401)),
                "haystack_session_ids": [session_id for session_id, _ in haystack],
                "haystack_dates": [_date(start + timedelta(days=d)) for d in days],
                "haystack_sessions": [session for _, session in haystack],
                "answer_session_ids": [session_id for session_id, _ in own],
            }
        )
    path.write_text(json.dumps(records))
    unique = {session_id for record in records for session_id in record["haystack_session_ids"]}
    return {
        "questions": questions,
        "sessions_per_question": sessions,
        "session_slots": slots,
        "distinct_sessions": len(unique),
        "bytes": path.stat().st_size,
    }


def measure(retriever: str, data: Path) -> dict:
    """Run ``memnets eval retrieval RETRIEVER --data DATA`` in a child; its wall seconds and peak RSS (MiB)."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.json"
        command = [sys.executable, "-m", "memnets", "eval", "retrieval", retriever, "--data", str(data), "-q"]
        started = time.perf_counter()
        child = subprocess.Popen([*command, "--json", str(report)], stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise SystemExit(f"{' '.join(command)} exited {code}")
        overall = json.loads(report.read_text())["reports"][0]["overall"]
    return {
        "retriever": retriever,
        "command": " ".join(["memnets", *command[3:]]),
        "seconds": round(seconds, 1),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
        "session_recall_any@5": round(overall["session_recall_any@5"], 4),
        "turn_recall_any@5": round(overall["turn_recall_any@5"], 4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--retrievers", nargs="+", default=["bm25"], help="ranker specs to time (default: bm25)")
    parser.add_argument("--out", type=Path, default=Path("docs/results/longmemeval_s_timing.json"))
    parser.add_argument("--keep", type=Path, default=None, help="write the generated file here and keep it")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        data = args.keep or Path(folder) / "longmemeval_s_generated.json"
        started = time.perf_counter()
        shape = generate(data)
        shape["generate_seconds"] = round(time.perf_counter() - started, 1)
        runs = [measure(retriever, data) for retriever in args.retrievers]
    result = {
        "what": "memnets eval retrieval --data on a generated LongMemEval-S-sized file (bench.experiments.longmemeval_s)",
        "date": datetime.now().strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, Python {platform.python_version()}",
        "load_average_at_start": [round(load, 1) for load in os.getloadavg()],
        "file": shape,
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
