"""What an encoder does to a text before its tokens: the kind's prefix and the cut to its window.

:class:`EncoderTexts` is shared by the torch encoder (:class:`~memnets.nn.encoder.MemoryEncoder`) and
the serving one (:class:`~memnets.nn.serving_encoder.ServingEncoder`), so both embed the same tokens of
a text: it needs ``tokenizer`` (a fast tokenizer: word ids and offsets), ``max_length``,
``query_prefix`` and ``memory_prefix`` on the object.
"""

from __future__ import annotations

import logging

from memnets.protocols import Kind

logger = logging.getLogger(__name__)

# A text is tokenised from a cut of max_length * CUT_CHARS_PER_TOKEN characters (English LoCoMo turns
# average about 4.5 characters per MiniLM token), widened 4x at a time while the cut holds too few
# tokens, up to max_length * CUT_MAX_CHARS_PER_TOKEN characters (runs of spaces or control characters
# that make no tokens: there the window is what that many characters hold).
CUT_CHARS_PER_TOKEN = 8
CUT_MAX_CHARS_PER_TOKEN = 128


class EncoderTexts:
    """The prefix, cut and window of a text (see the module)."""

    @property
    def plain_kind(self) -> Kind | None:
        """The kind whose texts are embedded as given (no prefix), or None when both kinds have one.

        A text of the other kind embeds as its prefix plus the text does under this kind (the prefix
        is the only difference between kinds), so one forward pass can serve texts of both kinds: the
        server's batching encoder merges searches and adds that way.
        """
        if self.memory_prefix == "":
            return "memory"
        return "query" if self.query_prefix == "" else None

    def prefix(self, kind: Kind) -> str:
        if kind == "query":
            return self.query_prefix
        if kind == "memory":
            return self.memory_prefix
        raise ValueError(f"kind must be 'memory' or 'query', got {kind!r}")

    def cut(self, text: str) -> str:
        """The character prefix of ``text`` that the encoder tokenises; the truncation rule.

        The encoder embeds the first ``max_length`` tokens of a text (special tokens included). To
        keep the work per text bounded, a longer text is cut first: to ``max_length * 8``
        characters, and that cut is kept when its tokens fill the window with at least one more
        word after the window (so no word inside the window is one the cut split); otherwise the
        cut widens 4x at a time, up to ``max_length * 128`` characters. So the tokens of
        ``cut(text)`` truncated to the window equal those of the whole text truncated to the window
        (tested on real texts), except for a text whose first ``max_length * 128`` characters make
        fewer than ``max_length`` tokens (mostly spaces or control characters), whose window is
        what those characters hold. A chunker that splits a long memory into windows can call
        :meth:`window_end` to find where each window stops.
        """
        budget = self.max_length * CUT_CHARS_PER_TOKEN
        limit = self.max_length * CUT_MAX_CHARS_PER_TOKEN
        if len(text) <= budget:
            return text
        if not getattr(self.tokenizer, "is_fast", False):  # no word ids to check the cut with
            return text[:limit]
        window = self.max_length - self.tokenizer.num_special_tokens_to_add()
        while len(text) > budget:
            head = text[:budget]
            words = self.tokenizer(head, add_special_tokens=False, verbose=False).word_ids()
            if len(words) > window and words[window - 1] != words[-1]:
                return head
            if budget >= limit:
                logger.debug("a text's first %d characters make only %d tokens; embedding those", limit, len(words))
                return head
            budget = min(4 * budget, limit)
        return text

    def window_end(self, text: str, kind: Kind = "memory") -> int:
        """How many characters of ``text`` the encoder embeds: the end of the last token in its
        window, ``len(text)`` when the whole text fits. A chunker starts the next window there.
        Needs a fast (Rust) tokenizer, for the token offsets."""
        prefix = self.prefix(kind)
        head = self.cut(prefix + text)
        offsets = self.tokenizer(head, add_special_tokens=False, return_offsets_mapping=True, verbose=False)[
            "offset_mapping"
        ]
        window = self.max_length - self.tokenizer.num_special_tokens_to_add()
        if len(offsets) <= window:
            return len(head) - len(prefix)
        return max(0, offsets[window - 1][1] - len(prefix))


__all__ = ["CUT_CHARS_PER_TOKEN", "CUT_MAX_CHARS_PER_TOKEN", "EncoderTexts"]
