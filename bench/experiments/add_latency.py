"""What one add of a chat turn costs: memnets' own writes against an LLM extraction on every add.

The peers' users' most frequent complaint is slow and costly writes, because every add calls an
LLM (mem0's ``infer=True``: one call for the facts, one for the decisions). memnets' own writes call
none. This measures one add of two messages (a LoCoMo exchange: one speaker, then the other) through
``memnets.open`` (SQLite + FAISS, a fresh folder per mode, the same exchanges in each):

- ``keep="all"``: ``memory.add(messages=...)``, every message stored (memnets.memory.messages);
- ``keep="important"``: the same, only the messages the importance decision keeps (a pack's
  importance head when ``--pack`` names one or ``checkpoints/pack`` exists, else the heuristic: the
  result says which);
- ``infer=True, decide="rules"``: the LLM extraction (memnets.memory.extraction) with one LLM call
  (the facts), memnets' consistency rule deciding;
- ``infer=True, decide="llm"``: mem0's scheme, two LLM calls (facts, then decisions).

The LLM is memnets.training.fake_llm's local server answering after a fixed ``--llm-delay`` (default 0.2 s,
a fast hosted model's time to a short JSON answer), one fact per message and ADD for each: the
figures are memnets' own cost plus that delay per call, never a model's quality. Per mode: p50 /
p99 / mean milliseconds per add, memories stored, LLM calls. The machine's load is in the result
(shared machines make the absolute figures noisy; the gap between modes is the point).

Usage: ``python -m bench.experiments.add_latency --out docs/results [--adds 40] [--pack DIR]``.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from pathlib import Path

from bench.common import REPO_ROOT, encoder_from, latency_summary, parser, write_result

LINE = re.compile(r"^\[(\d+)\] [^:]+: (.*)$")
MODES = ("keep=all", "keep=important", "infer, decide=rules", "infer, decide=llm")


def exchanges(n: int) -> list[list[dict]]:
    """``n`` adds of two messages: consecutive LoCoMo turns, the first speaker as the user."""
    from memnets.training.data.locomo import load_locomo

    turns = [turn for conversation in load_locomo() for turn in conversation.turns][: 2 * n]
    first = turns[0].speaker
    messages = [
        {"role": "user" if t.speaker == first else "assistant", "name": t.speaker, "content": t.text} for t in turns
    ]
    return [messages[i : i + 2] for i in range(0, len(messages) - 1, 2)]


def scripted_model(messages: list[dict]) -> str:
    """The fake LLM: one fact per message of a fact prompt, ADD for every fact of a decision prompt."""
    from memnets.memory import extraction_prompts as prompts

    prompt = messages[-1]["content"]
    if messages[0]["content"] == prompts.FACTS_SYSTEM:
        found = [LINE.match(line) for line in prompt.splitlines()]
        return json.dumps({"facts": [{"text": m.group(2), "messages": [int(m.group(1))]} for m in found if m]})
    new = prompt.split("New facts:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    return json.dumps({"decisions": [{"fact": n, "event": "ADD"} for n in range(len(new))]})


def find_pack(given: Path | None) -> Path | None:
    """``--pack``, else ``checkpoints/pack`` or a ``checkpoints/*/pack`` of this checkout, else None."""
    if given is not None:
        return given
    found = sorted((REPO_ROOT / "checkpoints").glob("*/pack")) + [REPO_ROOT / "checkpoints" / "pack"]
    return next((path for path in found if (path / "manifest.json").is_file()), None)


def run_mode(mode: str, adds: list[list[dict]], open_memory, llm_url: str) -> dict:
    """Every add of one mode into a fresh memory; per-add seconds, memories stored, LLM calls."""
    from memnets.llm import OpenAIChatLLM
    from memnets.memory.extraction import Extraction

    decide = "llm" if mode.endswith("llm") else "rules"
    extraction = Extraction(OpenAIChatLLM(llm_url, "fake", api_key_env=None), decide=decide)
    seconds = []
    with tempfile.TemporaryDirectory() as folder, open_memory(Path(folder) / "memory") as memory:
        for n, messages in enumerate(adds):
            user = f"user{n % 4}"
            started = time.perf_counter()
            if mode.startswith("keep"):
                memory.add(messages=messages, user=user, keep=mode.split("=")[1])
            else:
                extraction.add(memory, messages, user=user)
            seconds.append(time.perf_counter() - started)
        stored = sum(len(memory.list_memories(user=user, limit=None)) for user in memory.users())
    return {**latency_summary(seconds), "memories_stored": stored, "messages": sum(len(a) for a in adds)}


def main(argv: list[str] | None = None) -> None:
    p = parser("experiments.add_latency", __doc__.split("\n\n")[0])
    p.add_argument("--adds", type=int, default=40, help="adds per mode (two messages each; default 40)")
    p.add_argument("--llm-delay", type=float, default=0.2, help="seconds the fake LLM waits per call (default 0.2)")
    p.add_argument(
        "--pack", type=Path, default=None, help="a memory pack (default: checkpoints/pack if present and no --encoder)"
    )
    p.add_argument("--encoder", default=None, help="an encoder folder when no pack (default: all-MiniLM-L6-v2)")
    args = p.parse_args(argv)

    import memnets
    from memnets.training.fake_llm import FakeChatServer

    adds = exchanges(5 if args.quick else args.adds)
    pack = find_pack(args.pack) if args.encoder is None else args.pack
    encoder = None if pack is not None else encoder_from(args)

    def open_memory(folder: Path):
        return memnets.open(folder, pack=pack) if pack is not None else memnets.open(folder, encoder=encoder)

    results = {}
    with FakeChatServer(respond=scripted_model, delay=args.llm_delay) as llm, tempfile.TemporaryDirectory() as warm:
        open_memory(Path(warm) / "memory").close()  # load the encoder once, before timing
        for mode in MODES:
            calls = len(llm.requests)
            results[mode] = run_mode(mode, adds, open_memory, llm.url)
            results[mode]["llm_calls"] = len(llm.requests) - calls
    importance = f"the pack's importance head ({pack})" if pack else "the heuristic (no pack at checkpoints/)"
    settings = {"adds": len(adds), "messages_per_add": 2, "llm_delay_s": args.llm_delay, "importance": importance}
    notes = [
        "one run on a shared machine (see machine.load); the fake LLM answers after a fixed delay, so the infer "
        "rows are memnets' cost plus that delay per call, not a model's",
        f'keep="important" uses {importance}',
    ]
    path = write_result(args.out, "add_latency", settings, results, notes)
    print(f"add latency, {len(adds)} adds of 2 messages, fake LLM at {args.llm_delay:g} s per call; {notes[1]}")
    print("| mode | p50 ms | p99 ms | mean ms | LLM calls | messages | memories stored |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for mode, r in results.items():
        print(
            f"| {mode} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['mean_ms']:.1f} | {r['llm_calls']} | "
            f"{r['messages']} | {r['memories_stored']} |"
        )
    print(f"written: {path}")


if __name__ == "__main__":
    main()
