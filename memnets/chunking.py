"""The chunk rule: where a memory longer than the encoder's window is cut into further windows.

An encoder embeds the first ``max_length`` tokens of a text (special tokens and the memory prefix
included); what lies beyond that window would be stored but never found. So a longer memory gets
one vector per window: its main vector is the encoder's embedding of the whole text (the first
window, exactly as for a short memory), and :func:`windows` gives the texts of the further ones:

- the text is tokenised once with the encoder's (fast) tokenizer, with character offsets;
- a window holds ``W`` tokens, ``W`` = ``max_length`` minus the special tokens and the memory
  prefix's tokens; window ``j`` starts ``j * (W - overlap)`` tokens in, ``overlap`` =
  :data:`OVERLAP_FRACTION` of ``W`` (32 of the bundled encoder's 254), so a fact cut by one window's
  end is whole in the next;
- a window start inside a word moves back to the word's first token, and each window's text is the
  characters from its first token's start to its last token's end: every chunk is real text of
  the memory, re-tokenised by the encoder as any text is;
- windows go on until one reaches the last token.

A memory that fits one window has no further windows (the rule costs one tokenisation). An
encoder without a fast tokenizer or a ``max_length`` is not chunked: its memories keep one vector.
Stores keep the further vectors with the memory's current row (``chunks`` of
:class:`memnets.store.protocol.Chunks`), and a search returns the memory once, at its best
window's score.
"""

from __future__ import annotations

OVERLAP_FRACTION = 0.125  # of a window's tokens repeated at the start of the next one


def window_tokens(encoder) -> int | None:
    """Tokens of one window of a memory's text (``max_length`` less the special tokens and the memory
    prefix), or None when the encoder cannot be chunked (no fast tokenizer or no ``max_length``)."""
    tokenizer = getattr(encoder, "tokenizer", None)
    max_length = getattr(encoder, "max_length", None)
    if tokenizer is None or not getattr(tokenizer, "is_fast", False) or not isinstance(max_length, int):
        return None
    prefix = encoder.prefix("memory") if hasattr(encoder, "prefix") else ""
    taken = tokenizer.num_special_tokens_to_add()
    if prefix:
        taken += len(tokenizer(prefix, add_special_tokens=False, verbose=False)["input_ids"])
    window = max_length - taken
    return window if window >= 8 else None


def windows(encoder, text: str) -> list[str]:
    """The texts of ``text``'s windows after the first (empty when it fits one); see the module docstring."""
    window = window_tokens(encoder)
    if window is None or len(text) <= window:  # a token holds at least one character
        return []
    encoded = encoder.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    offsets = encoded["offset_mapping"]
    if len(offsets) <= window:
        return []
    words = encoded.word_ids()
    stride = window - max(1, int(window * OVERLAP_FRACTION))
    out: list[str] = []
    start = 0
    while start + window < len(offsets):
        nominal = start + stride
        start = nominal
        while start > nominal - stride // 2 and words[start] is not None and words[start] == words[start - 1]:
            start -= 1  # back to the word's first token (at most half a stride: a huge "word" is cut)
        end = min(start + window, len(offsets))
        out.append(text[offsets[start][0] : offsets[end - 1][1]])
    return out


__all__ = ["OVERLAP_FRACTION", "window_tokens", "windows"]
