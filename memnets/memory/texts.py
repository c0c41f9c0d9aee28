"""What a memory's (or a query's) text may be: the write path's first step, and its check against the encoder.

:func:`check_text`: a str that shows something (:func:`visible`), at most :data:`MAX_TEXT_CHARS` characters, valid
Unicode with no NUL; :func:`check_tokens`: a text the encoder's tokenizer takes. Every door checks its texts here
(:mod:`memnets.memory.writes` for what it writes, the API and the framework adapters for queries and texts they
take), so a bad text is refused with the same error, naming the argument, before anything is written.
"""

from __future__ import annotations

import unicodedata

from memnets.argerrors import ArgumentTypeError, ArgumentValueError
from memnets.store.errors import InvalidMemoryError
from memnets.store.rows import refuse_nul
from memnets.text import strip_speaker

MAX_TEXT_CHARS = 200_000  # a memory's (and a query's) text; ~50k tokens, far above any encoder window
INVISIBLE = ("Z", "Cc", "Cf", "Mn", "Me")  # Unicode categories of characters that show nothing on their own


def visible(text: str) -> bool:
    """Whether ``text`` shows anything: a character outside whitespace, controls, format characters (a zero-width
    space, a byte-order mark) and combining marks with nothing to combine with (:data:`INVISIBLE`)."""
    return any(not unicodedata.category(c).startswith(INVISIBLE) for c in text)


def check_text(text, name: str = "text") -> str:
    """``text`` if it can be a memory's (or a query's) text: TypeError, ValueError or InvalidMemoryError naming ``name``.
    The length limit counts the text without a speaker prefix: a message's text as it was sent."""
    if not isinstance(text, str):
        raise ArgumentTypeError(f"{name} must be a str, got {type(text).__name__}", field=name)
    if not visible(text):
        raise ArgumentValueError(f"{name} must be non-empty text, got {text!r:.60}", field=name)
    if len(text) > MAX_TEXT_CHARS and len(said := strip_speaker(text)) > MAX_TEXT_CHARS:  # a message's "name: " free
        raise InvalidMemoryError(
            f"{name} has {len(said):,} characters, over the limit of {MAX_TEXT_CHARS:,} "
            "(memnets.memory.texts.MAX_TEXT_CHARS); split it into several memories",
            field=name,
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidMemoryError(
            f"{name} is not valid Unicode: {error.reason} at position {error.start} "
            f"({text[max(0, error.start - 10) : error.start + 10]!r})",
            field=name,
        ) from None
    refuse_nul(text, name, field=name)
    return text


def check_tokens(text: str, encoder, name: str = "text") -> None:
    """InvalidMemoryError, naming ``name`` and the first position it fails at, when the encoder's
    tokenizer cannot take ``text`` (checked before anything is written; encoders without a
    ``tokenizer`` are not checked)."""
    tokenizer = getattr(encoder, "tokenizer", None)
    if tokenizer is None or _tokenizes(tokenizer, text):
        return
    low, high = 0, len(text)  # the shortest failing prefix ends at the position the tokenizer refuses
    while low + 1 < high:
        middle = (low + high) // 2
        low, high = (middle, high) if _tokenizes(tokenizer, text[:middle]) else (low, middle)
    position = high - 1
    raise InvalidMemoryError(
        f"{name}: the encoder's tokenizer cannot take it at position {position} "
        f"({text[max(0, position - 10) : position + 10]!r})",
        field=name,
    )


def _tokenizes(tokenizer, text: str) -> bool:
    try:
        tokenizer(text, add_special_tokens=False, verbose=False)
    except Exception:  # a tokenizer's own error type, whichever library it comes from
        return False
    return True


__all__ = ["INVISIBLE", "MAX_TEXT_CHARS", "check_text", "check_tokens", "visible"]
