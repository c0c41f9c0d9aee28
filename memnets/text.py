"""The text convention of a conversation turn stored as a memory, in one place.

A turn's memory text is ``"{speaker}: {text}"`` (:func:`turn_text`): the form the encoder is trained
on (:attr:`memnets.training.data.locomo.Turn.content`) and the form a chat message is stored in
(:mod:`memnets.memory.messages`). Features and heuristics that judge what was said (the importance
heuristic, the importance head's text features) look at the body only: :func:`strip_speaker`
removes the prefix, and only a prefix that ends within the first :data:`SPEAKER_PREFIX_MAX`
characters (speaker names are short), so a ": " further into a plain text is left alone.
"""

from __future__ import annotations

import re

SPEAKER_PREFIX_MAX = 40
SEPARATOR = ": "


def turn_text(speaker: str, text: str) -> str:
    """The memory text of ``text`` said by ``speaker``: ``"{speaker}: {text}"``."""
    return f"{speaker}{SEPARATOR}{text}"


def strip_speaker(text: str) -> str:
    """The body of a memory text: what follows a ``"{speaker}: "`` prefix, or the whole text."""
    return text.split(SEPARATOR, 1)[1] if SEPARATOR in text[:SPEAKER_PREFIX_MAX] else text


_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(value: str) -> int | None:
    """The position of the first lone surrogate in ``value`` (JSON's ``"\\ud800"``: not text, which
    tokenizers refuse with a TypeError), or None when it is valid Unicode."""
    if value.isascii():
        return None
    found = _SURROGATE.search(value)
    return None if found is None else found.start()
