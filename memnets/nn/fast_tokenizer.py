"""A model folder's ``tokenizer.json`` run by the ``tokenizers`` library, without transformers.

The serving encoder and judge (:mod:`memnets.nn.serving_encoder`, :mod:`memnets.nn.serving_judge`)
tokenise with it; the rest of memnets reaches an encoder's tokenizer through the part of Hugging
Face's call API it uses (chunking, the token budget, the write path's check): ``tokenizer(text,
add_special_tokens=..., return_offsets_mapping=...)`` with ``["input_ids"]``, ``["offset_mapping"]``
and ``.word_ids()``, ``num_special_tokens_to_add()``, ``get_vocab()``, ``is_fast`` and
``padding_side``. A Hugging Face fast tokenizer runs the same file with the same library, so the
ids are the same (tested against ``AutoTokenizer`` on real texts).

Each ``tokenizers.Tokenizer`` keeps its truncation and padding settings as state: every setting is
made once, when an instance is built, and never changed after, so calls from many threads never see
another call's setting (the trap that :class:`~memnets.nn.encoder.MemoryEncoder` meets with a copy).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

TOKENIZER_FILE = "tokenizer.json"


class Encoded(dict):
    """One text's tokens as Hugging Face returns them (``["input_ids"]``, ...), with ``word_ids()``."""

    def __init__(self, encoding, offsets: bool) -> None:
        super().__init__(
            input_ids=encoding.ids, token_type_ids=encoding.type_ids, attention_mask=encoding.attention_mask
        )
        if offsets:
            self["offset_mapping"] = encoding.offsets
        self._words = encoding.word_ids

    def word_ids(self) -> list[int | None]:
        return list(self._words)


class FastTokenizer:
    """``folder/tokenizer.json`` with the call API above, and :meth:`batch` for padded model inputs.

    Example::

        tokenizer = FastTokenizer.from_folder(DEFAULT_BACKBONE)
        tokenizer("I adopted a beagle", add_special_tokens=False)["input_ids"]
        tokenizer.batch(["a", "longer text"], max_length=256)["input_ids"].shape  # (2, 4)
    """

    is_fast = True
    padding_side = "right"

    def __init__(self, path: str | Path) -> None:
        from tokenizers import Tokenizer

        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"tokenizer file {str(self.path)!r} not found (a model folder's {TOKENIZER_FILE})")
        plain = Tokenizer.from_file(str(self.path))
        padding = plain.padding or {}
        self.pad_id = int(padding.get("pad_id", plain.token_to_id("[PAD]") or 0))
        plain.no_padding()
        plain.no_truncation()
        self._plain = plain
        self._truncating: dict[int, object] = {}  # max_length -> a Tokenizer that truncates pairs to it (on first use)
        self._lock = threading.Lock()

    @classmethod
    def from_folder(cls, folder: str | Path) -> FastTokenizer:
        return cls(Path(folder) / TOKENIZER_FILE)

    def __call__(self, text, add_special_tokens: bool = True, return_offsets_mapping: bool = False, **_ignored):
        """Tokens of one text (an :class:`Encoded`) or of a list of texts (a dict of lists), untruncated."""
        if isinstance(text, str):
            return Encoded(self._plain.encode(text, add_special_tokens=add_special_tokens), return_offsets_mapping)
        found = [Encoded(e, return_offsets_mapping) for e in self._plain.encode_batch(list(text), add_special_tokens)]
        return {name: [one[name] for one in found] for name in (found[0] if found else {"input_ids": []})}

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        return self._plain.num_special_tokens_to_add(pair)

    def get_vocab(self) -> dict[str, int]:
        return self._plain.get_vocab(with_added_tokens=True)

    def batch(self, texts: Sequence[str], max_length: int, pairs: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """Model inputs of ``texts`` (or of the pairs ``(texts[i], pairs[i])``), special tokens added, each
        truncated to ``max_length`` tokens (pairs: the longer side first), padded on the right to the
        longest: int64 ``input_ids``, ``attention_mask`` and ``token_type_ids`` ``[N, T]``."""
        if pairs is None:  # one text each: its first max_length - 2 tokens, then [CLS] ... [SEP]
            encodings = self._plain.encode_batch(list(texts), add_special_tokens=False)
            room = max_length - self.num_special_tokens_to_add()
            for encoding in encodings:
                encoding.truncate(room)
            encodings = [self._plain.post_process(encoding) for encoding in encodings]
        else:  # pairs: the longer side cut first, by the library's own rule
            encodings = self._truncating_to(max_length).encode_batch(list(zip(texts, pairs)), add_special_tokens=True)
        width = max((len(e.ids) for e in encodings), default=0)
        out = {
            "input_ids": np.full((len(encodings), width), self.pad_id, dtype=np.int64),
            "attention_mask": np.zeros((len(encodings), width), dtype=np.int64),
            "token_type_ids": np.zeros((len(encodings), width), dtype=np.int64),
        }
        for row, encoding in enumerate(encodings):
            n = len(encoding.ids)
            out["input_ids"][row, :n] = encoding.ids
            out["attention_mask"][row, :n] = 1
            out["token_type_ids"][row, :n] = encoding.type_ids
        return out

    def _truncating_to(self, max_length: int):
        with self._lock:
            if max_length not in self._truncating:
                from tokenizers import Tokenizer

                tokenizer = Tokenizer.from_file(str(self.path))
                tokenizer.no_padding()
                tokenizer.enable_truncation(max_length, strategy="longest_first")
                self._truncating[max_length] = tokenizer
            return self._truncating[max_length]


__all__ = ["TOKENIZER_FILE", "Encoded", "FastTokenizer"]
