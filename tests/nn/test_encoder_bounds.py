"""MemoryEncoder's bounded work per text: the cut before tokenising keeps the tokens of the whole
text (on real texts), tells a chunker where its window ends, and keeps a 4 MB text's peak memory
small (measured in a child process)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from memnets.nn.encoder import CUT_CHARS_PER_TOKEN, CUT_MAX_CHARS_PER_TOKEN, MemoryEncoder
from memnets.training.data.locomo import load_locomo


@pytest.fixture(scope="module")
def conversations() -> list[str]:
    """Each bundled LoCoMo conversation as one long text (tens of thousands of characters)."""
    return ["\n".join(f"{turn.speaker}: {turn.content}" for turn in conv.turns) for conv in load_locomo()]


def _whole_then_truncated(encoder: MemoryEncoder, text: str, kind: str) -> list[int]:
    batch = encoder.tokenizer([encoder.prefix(kind) + text], truncation=True, max_length=encoder.max_length)
    return batch["input_ids"][0]


def _long_texts(conversations: list[str]) -> list[str]:
    """Real long texts and the awkward ones: accents, CJK, punctuation runs, a long word, spaces."""
    return [
        *conversations[:4],
        *(conv[offset:] for conv in conversations[:2] for offset in (1, 7, 13)),  # cuts fall mid-word elsewhere
        "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 " * 400,
        "\u8bb0\u5fc6\u7f51\u7edc\u8bad\u7ec3 " * 600 + conversations[0],
        "!?.,;:-" * 2000,
        "start " + "x" * 3_000 + " " + conversations[2],  # one word longer than the first cut
        "word " * 10 + " " * 2_000 + conversations[1],  # spaces make no tokens: the cut must widen
    ]


@pytest.mark.parametrize("max_length", [32, 128])
def test_cut_then_tokenise_equals_tokenise_whole_then_truncate(tiny_model_dir, conversations, max_length):
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=max_length, query_prefix="query: ")
    texts = _long_texts(conversations)
    assert all(len(text) > max_length * CUT_CHARS_PER_TOKEN for text in texts)
    for kind in ("memory", "query"):
        ours = encoder.tokenize(texts, kind)
        for row, text in enumerate(texts):
            want = _whole_then_truncated(encoder, text, kind)
            got = ours["input_ids"][row][ours["attention_mask"][row].bool()].tolist()
            assert got == want, f"text {row} ({kind}) tokenised differently after the cut"
    assert len(encoder.cut(texts[0])) <= max_length * CUT_CHARS_PER_TOKEN  # ordinary text: the first cut holds


def test_short_texts_are_not_cut_and_the_cut_is_bounded(tiny_model_dir):
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=32)
    assert encoder.cut("hello there") == "hello there"
    # the documented exception: when the first max_length * CUT_MAX_CHARS_PER_TOKEN characters make
    # too few tokens (spaces, one giant word), the window is what those characters hold
    for text in ("a" + " " * 100_000 + "b", "start " + "x" * 100_000 + " end"):
        assert len(encoder.cut(text)) == 32 * CUT_MAX_CHARS_PER_TOKEN


def test_window_end_tells_a_chunker_where_the_window_stops(tiny_model_dir, conversations):
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=32, query_prefix="query: ")
    assert encoder.window_end("a short memory") == len("a short memory")
    for kind in ("memory", "query"):
        text = conversations[0]
        end = encoder.window_end(text, kind)
        assert 0 < end < 32 * CUT_CHARS_PER_TOKEN
        # the window's characters alone give the same tokens, and one character less does not
        assert _whole_then_truncated(encoder, text[:end], kind) == _whole_then_truncated(encoder, text, kind)
        assert _whole_then_truncated(encoder, text[: end - 1], kind) != _whole_then_truncated(encoder, text, kind)


CHILD = textwrap.dedent(
    """
    import json, resource, sys
    from memnets.nn.encoder import MemoryEncoder

    encoder = MemoryEncoder.from_pretrained(sys.argv[1])
    big = ("Caroline went to the support group yesterday and it was powerful. " * 62_000)[:4_000_000]
    encoder.encode(["warm up the tokenizer and the model"], kind="memory")
    encoder.encode(["warm up the tokenizer and the model"], kind="query")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    vectors = encoder.encode([big], kind="memory")
    query = encoder.encode([big], kind="query")
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"extra_peak_mb": (after - before) / 1024, "rows": [len(vectors), len(query)]}))
    """
)


def test_a_4_mb_text_costs_little_peak_memory(tiny_model_dir, tmp_path):
    """Tokenising the whole 4 MB text before truncating cost about 600 MB of extra peak memory."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tiny_model_dir)], capture_output=True, text=True, timeout=600, check=True
    )
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    assert measured["rows"] == [1, 1]
    assert measured["extra_peak_mb"] < 40, measured
