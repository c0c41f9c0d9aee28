"""Batches padded only to their own longest text, for :meth:`MemoryEncoder.encode`.

Sorting texts by characters (what ``encode`` did, and what sentence-transformers does) leaves the
token counts inside a batch spread out: the 2,048 LoCoMo turns of bench.encoding, at batch 64, make
batches of 95,104 token positions for 77,947 tokens; sorted by token count they make 81,280, 14.5%
fewer positions for the encoder to compute (and attention grows with the square of the width).
A text's token count is known only once it is tokenised, so texts are tokenised a chunk of
:data:`BUCKET_BATCHES` batches at a time (taken in character order, so a chunk holds texts of
similar length; one padded tokeniser call each), regrouped by token count inside the chunk, and each
batch is cut to its own longest text. Padding is on one side, so that cut is a slice of columns: a
batch's tokens are exactly those of tokenising it alone. Texts that fit in one batch (an agent's
query, a turn's memories) are tokenised in one call and not regrouped: no sort, no slicing. The
batches are torch tensors or numpy arrays, whichever ``tokenize`` returns (the serving encoder's are
numpy: no torch here).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

BUCKET_BATCHES = 16  # batches tokenised in one call and regrouped by token count (bounds the memory)


def token_batches(
    tokenize: Callable[[list[str]], dict[str, Any]],
    texts: Sequence[str],
    batch_size: int,
    padding_side: str = "right",
) -> Iterator[tuple[list[int], dict[str, Any]]]:
    """``(indices into texts, {"input_ids", "attention_mask"})`` per batch of at most ``batch_size``
    texts, longest first, every text in exactly one batch, each batch as wide as its longest text.
    ``tokenize`` pads a list of texts to its longest (on ``padding_side``), as
    :meth:`MemoryEncoder.tokenize` does."""
    if padding_side not in ("right", "left"):
        raise ValueError(f"padding_side must be 'right' or 'left', got {padding_side!r}")
    if len(texts) <= batch_size:  # one batch: tokenising pads it to its own longest already
        yield list(range(len(texts))), tokenize(list(texts))
        return
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    chunk = batch_size * BUCKET_BATCHES
    for start in range(0, len(order), chunk):
        part = order[start : start + chunk]
        tokens = tokenize([texts[i] for i in part])
        lengths = np.asarray(tokens["attention_mask"]).sum(axis=1)
        ranked = np.argsort(-lengths, kind="stable")  # longest first, ties in order
        for first in range(0, len(part), batch_size):
            rows = ranked[first : first + batch_size]
            width = int(lengths[rows[0]])
            columns = slice(0, width) if padding_side == "right" else slice(tokens["input_ids"].shape[1] - width, None)
            index = rows.tolist()
            yield [part[r] for r in index], {name: value[index, columns] for name, value in tokens.items()}
