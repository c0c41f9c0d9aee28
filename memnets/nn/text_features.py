"""The importance head's surface features of a memory's text, in numpy (no torch): training and serving share them."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from memnets.text import strip_speaker

TEXT_FEATURES = ("log_chars", "log_words", "photo", "digit", "capitalised_share", "question", "sentences")


def text_feature_rows(texts: Sequence[str]) -> np.ndarray:
    """Cheap surface features of memory texts, ``[N, len(TEXT_FEATURES)]`` (float32 numpy).

    Of the text after the "{speaker}: " prefix (:func:`memnets.text.strip_speaker`): log(1 + characters), log(1 + words), whether a photo
    is shared, whether a digit occurs, the share of capitalised words after the first (names,
    places), whether it asks a question, and log(1 + sentence marks). Long, specific, factual turns
    are the ones later questions cite; the embedding alone does not carry their length.
    """
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, not one string")
    rows = []
    for text in texts:
        body = strip_speaker(text)
        words = body.split()
        initials = "".join([word[0] for word in words[1:]])  # words of split() are never empty
        questions = body.count("?")
        rows.append(
            (
                math.log1p(len(body)) / 5.0,
                math.log1p(len(words)) / 4.0,
                "[shares a photo of" in body,
                _has_digit(body),
                sum(map(str.isupper, initials)) / max(len(words) - 1, 1),
                questions > 0,
                math.log1p(body.count(".") + body.count("!") + questions),
            )
        )
    return np.array(rows, dtype=np.float32).reshape(len(rows), len(TEXT_FEATURES))


_DIGITS = b"0123456789"  # the ASCII characters of which str.isdigit is true


def _has_digit(body: str) -> bool:
    """Whether a character of ``body`` is a digit (``str.isdigit``): ASCII text is checked as bytes, in C
    (a Python-level test of each character was a third of the features' time)."""
    if body.isascii():
        raw = body.encode("ascii")
        return len(raw.translate(None, _DIGITS)) != len(raw)
    return any(map(str.isdigit, body))


__all__ = ["TEXT_FEATURES", "text_feature_rows"]
