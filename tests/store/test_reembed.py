"""The encoder is part of the memory: identity recorded with the first vector, mismatch refused, re-embedding.

Real tiny encoders (two random BERTs with the MiniLM tokenizer, different seeds and one with a
projection to another dim), real SQLite archives, and a real child process killed mid-run.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from archive_helpers import drop_lexical

import memnets
from memnets.nn.encoder import MemoryEncoder
from memnets.store import open_store
from memnets.store.archive import DB_FILE
from memnets.store.identity import EncoderIdentity, EncoderMismatchError
from memnets.store.reembed import reembed
from memnets.store.sqlite_schema import FORMAT_VERSION

TEXTS = [f"memory number {n}: I met friend {n} at the cafe on day {n % 7}" for n in range(40)]


@pytest.fixture(scope="module")
def old(tiny_model_dir):
    return MemoryEncoder.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="module")
def new(tiny_model_dir):
    torch.manual_seed(1)
    return MemoryEncoder.from_pretrained(tiny_model_dir, projection_dim=16)  # another space and another dim


def fill(folder, encoder, texts=TEXTS, users=("ann", "bob")):
    with memnets.open(folder, encoder=encoder, duplicate_threshold=None) as memory:
        for n, text in enumerate(texts):
            memory.add(text, user=users[n % len(users)], id=f"m{n}")
        memory.update("m0", "memory number 0, updated: I met friend 0 at the park", user="ann")  # + a version


def test_fingerprint_names_weights_configuration_and_variant(tiny_model_dir, old, new):
    again = MemoryEncoder.from_pretrained(tiny_model_dir)
    assert old.fingerprint == again.fingerprint and old.fingerprint.startswith(f"torch:{old.dim}:")
    assert new.fingerprint != old.fingerprint and new.fingerprint.startswith("torch:16:")
    longer = MemoryEncoder.from_pretrained(tiny_model_dir, max_length=64)
    prefixed = MemoryEncoder.from_pretrained(tiny_model_dir, query_prefix="query: ")
    assert len({old.fingerprint, longer.fingerprint, prefixed.fingerprint}) == 3
    other_backend = MemoryEncoder.from_pretrained(tiny_model_dir)
    other_backend.backend = "int8"  # what set_backend("int8") records (without converting here)
    assert other_backend.fingerprint != old.fingerprint and other_backend.fingerprint.startswith("int8:")
    assert str(tiny_model_dir) in old.source
    assert isinstance(old, memnets.TextEncoder)


def test_identity_is_recorded_with_the_first_vector_and_another_encoder_is_refused(tmp_path, tiny_model_dir, old, new):
    folder = tmp_path / "m"
    with memnets.open(folder, encoder=old) as memory:
        assert memory.store.encoder_identity() is None  # nothing stored, nothing recorded
        memory.add("first memory", user="ann")
        assert memory.store.encoder_identity() == EncoderIdentity.of(old)
    for other in (new, MemoryEncoder.from_pretrained(tiny_model_dir, max_length=64)):
        with pytest.raises(EncoderMismatchError) as error:
            memnets.open(folder, encoder=other)
        message = str(error.value)
        assert old.fingerprint in message and other.fingerprint in message and old.source in message
        assert f"memnets archive reembed {folder} --pack DIR" in message and "memnets.reembed(" in message
    with memnets.open(folder, encoder=old) as memory:  # the encoder that filled it still opens it
        assert [h.memory.content for h in memory.search("first", user="ann", k=1)] == ["first memory"]


def test_a_second_writer_with_another_encoder_is_refused_at_its_first_write(tmp_path, tiny_model_dir, old):
    folder = tmp_path / "m"
    torch.manual_seed(3)
    same_dim = MemoryEncoder.from_pretrained(tiny_model_dir, backbone_config={"num_hidden_layers": 2})
    first, second = memnets.open(folder, encoder=old), memnets.open(folder, encoder=same_dim)  # both empty
    try:
        first.add("written by the first encoder", user="ann")
        with pytest.raises(EncoderMismatchError):
            second.add("written by the second", user="ann")
        assert first.store.count("ann") == 1
    finally:
        first.close()
        second.close()


def test_an_archive_of_the_previous_format_opens_and_records_its_encoder(tmp_path, old):
    folder = tmp_path / "m"
    fill(folder, old, TEXTS[:4])
    with sqlite3.connect(folder / DB_FILE) as db:  # back to format 4: no reembed table, identity, chunks, FTS
        drop_lexical(db)
        db.execute("DROP TABLE reembed")
        db.execute("DELETE FROM meta WHERE key = 'encoder'")
        db.execute("DROP INDEX memories_owner_chunked")
        db.execute("ALTER TABLE memories DROP COLUMN chunks")
        db.execute("PRAGMA user_version = 4")
    with memnets.open(folder, encoder=old) as memory:
        assert memory.store.encoder_identity() == EncoderIdentity.of(old)
        assert memory.store.count("ann") == 2
    with sqlite3.connect(folder / DB_FILE) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == FORMAT_VERSION
        assert db.execute("SELECT count(*) FROM reembed").fetchone()[0] == 0


def test_reembed_moves_every_row_to_the_new_encoder(tmp_path, old, new):
    folder = tmp_path / "m"
    fill(folder, old)
    report = memnets.reembed(folder, encoder=new, batch_size=7)
    assert report.swapped and report.embedded == report.total == len(TEXTS) + 1  # the older version too
    with pytest.raises(EncoderMismatchError):
        memnets.open(folder, encoder=old)
    with memnets.open(folder, encoder=new) as memory:
        store = memory.store
        assert store.dim == 16 and store.encoder_identity() == EncoderIdentity.of(new)
        for user in ("ann", "bob"):
            memories = store.list_memories(user)
            expected = new.encode([m.content for m in memories]).numpy()
            np.testing.assert_allclose(store.vectors([m.id for m in memories], user), expected, atol=1e-5)
        older = store.history("m0", "ann")[0]
        np.testing.assert_allclose(store.vectors([older.id], "ann")[0], new.encode([older.content])[0], atol=1e-5)
        hit = memory.search(TEXTS[5], user="bob", k=1)[0]
        assert hit.memory.id == "m5"
    assert memnets.reembed(folder, encoder=new).embedded == 0  # already there: nothing to do


def test_search_answers_from_the_old_space_until_the_swap(tmp_path, old, new):
    folder = tmp_path / "m"
    fill(folder, old)
    with memnets.open(folder, encoder=old) as memory, open_store(folder, None) as worker:
        before = [(h.memory.id, round(h.score, 5)) for h in memory.search(TEXTS[3], user="bob", k=5)]
        report = reembed(worker, new, batch_size=8, max_batches=3)  # interrupted: 24 of 41 rows re-embedded
        assert not report.swapped and worker.reembed_progress() == (24, 41)
        during = [(h.memory.id, round(h.score, 5)) for h in memory.search(TEXTS[3], user="bob", k=5)]
        assert during == before  # the old vectors, compared with the old encoder's query
        memory.add("written during the re-embedding", user="ann", id="late")  # embedded too before the swap
        assert reembed(worker, new, batch_size=8).swapped
        with pytest.raises(EncoderMismatchError):  # the old encoder's reader is told, not given mixed results
            memory.search(TEXTS[3], user="bob", k=5)
    with memnets.open(folder, encoder=new) as memory:
        vector = memory.store.vectors(["late"], "ann")[0]
        np.testing.assert_allclose(vector, new.encode(["written during the re-embedding"])[0], atol=1e-5)


def test_deleting_during_a_reembedding_leaves_no_new_vector_behind(tmp_path, old, new):
    folder = tmp_path / "m"
    fill(folder, old)
    with open_store(folder, None) as store:
        reembed(store, new, batch_size=50, max_batches=1)
        store.delete_owner("bob")
        store.delete(["m0"], "ann")  # and its older version
        rows = {r[0] for r in store._conn.execute("SELECT row FROM memories")}
        kept = {r[0] for r in store._conn.execute("SELECT row FROM reembed")}
        assert kept and kept <= rows


CHILD = textwrap.dedent(
    """
    import sys, time
    from memnets.nn.encoder import MemoryEncoder
    from memnets.store import open_store
    from memnets.store.reembed import reembed
    import torch

    class Slow:  # the new encoder, pausing per batch so the parent can kill it mid-run
        def __init__(self, encoder):
            self.encoder, self.dim, self.fingerprint, self.source = encoder, encoder.dim, encoder.fingerprint, "slow"
        def encode(self, texts, kind="memory"):
            print("batch", flush=True)
            time.sleep(0.3)
            return self.encoder.encode(texts, kind=kind)

    torch.manual_seed(1)
    encoder = MemoryEncoder.from_pretrained(sys.argv[2], projection_dim=16)
    with open_store(sys.argv[1], None) as store:
        reembed(store, Slow(encoder), batch_size=4)
    print("done", flush=True)
    """
)


def test_a_killed_reembedding_resumes_without_losing_or_duplicating(tmp_path, tiny_model_dir, old, new):
    folder = tmp_path / "m"
    fill(folder, old)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(folder), str(tiny_model_dir)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    for _ in range(4):  # three batches committed, the fourth being encoded
        assert child.stdout.readline().strip() == "batch"
    child.send_signal(signal.SIGKILL)
    child.wait()
    with open_store(folder, None) as store:
        done, total = store.reembed_progress()
        assert 12 <= done < total == 41 and store.encoder_identity() == EncoderIdentity.of(old)
        report = reembed(store, new, batch_size=4)
        assert report.swapped and report.embedded == total - done  # only what was left
        assert store._conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 41
    with memnets.open(folder, encoder=new) as memory:
        memories = memory.store.list_memories("ann")
        np.testing.assert_allclose(
            memory.store.vectors([m.id for m in memories], "ann"),
            new.encode([m.content for m in memories]).numpy(),
            atol=1e-5,
        )


def test_reembed_of_a_location_that_holds_no_store_is_refused_and_creates_nothing(tmp_path, tiny_model_dir, capsys):
    from memnets.cli import EXIT_USAGE, main

    typo = tmp_path / "typo-folder"
    assert main(["archive", "reembed", str(typo), "--encoder", str(tiny_model_dir)]) == EXIT_USAGE
    assert f"{typo} holds no memnets store; nothing was created" in capsys.readouterr().err
    assert not typo.exists()
