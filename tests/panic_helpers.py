"""A real Rust panic for the tests of contained failures: a tiny random BERT whose fast tokenizer splits
with a catastrophically backtracking regex, so that encoding :data:`PANIC_TEXT` raises pyo3's
``PanicException`` ("retry-limit-in-match over"), a ``BaseException`` that ``except Exception`` misses.
The ``panicking_encoder_dir`` fixture of conftest.py writes one."""

from __future__ import annotations

from pathlib import Path

PANIC_TEXT = "a" * 100  # (a|aa)+b backtracks exponentially on a run of a's with no b


def write_panicking_encoder(path: Path) -> Path:
    """The panicking encoder, in Hugging Face format, in ``path``; AssertionError if its tokenizer does not
    panic on :data:`PANIC_TEXT` (the premise of every test that uses it)."""
    import torch
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "a": 4, "b": 5, "hello": 6, "world": 7}
    core = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Whitespace(), pre_tokenizers.Split(Regex(r"(a|aa)+b"), behavior="isolated")]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]"
    )
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    try:
        tokenizer([PANIC_TEXT])
    except BaseException as raised:  # the panic is what is checked
        assert "retry-limit-in-match" in str(raised) and not isinstance(raised, Exception), raised
        return path
    raise AssertionError("the tokenizer did not panic")
