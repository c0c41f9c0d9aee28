"""Access control: every read path is scoped to the caller's owner, whatever ids or owner names are thrown at it.

Owners include look-alikes of each other (case, spaces, Unicode normal forms, full-width letters,
SQL LIKE wildcards, SQL-injection strings, NUL). Every owner holds memories with ids that other
owners use too. Each owner then probes get/search/list/export/count/vectors/delete/touch with every
id of every owner plus adversarial strings; a single foreign memory in any answer is a leak.
"""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest
from archive_helpers import DIM, EPOCH, memory_for, single_threaded_faiss, vector_for

from memnets.store.archive import Archive
from memnets.store.crypto import generate_key
from memnets.store.errors import InvalidMemoryError


@pytest.fixture(autouse=True)
def _one_faiss_thread():
    with single_threaded_faiss():
        yield


OWNERS = [
    "alice",
    "Alice",
    "ALICE",
    "alice ",
    " alice",
    "alic",
    "alice2",
    "bob",
    "alice' OR '1'='1",
    "alice' --",
    "' UNION SELECT * FROM memories --",
    "x'); DROP TABLE memories; --",
    "alice%",
    "%",
    "_",
    "al_ce",
    "*",
    "alice\n",
    unicodedata.normalize("NFC", "josé"),
    unicodedata.normalize("NFD", "josé"),
    "ａｌｉｃｅ",
    "аlice",  # Cyrillic а
    "🙂",
    "用户",
    "../bob",
    "a" * 5_000,
]
SHARED_IDS = ["m0", "m1", "conv-26/D1:3"]
ADVERSARIAL_IDS = [
    "",
    " ",
    "%",
    "_",
    "*",
    "m%",
    "m_",
    "m0' OR '1'='1",
    "m0'--",
    "' OR 1=1 --",
    "M0",
    "m0 ",
    "ｍ0",
    "m０",
    "conv-26/D1:%",
    "\u202em0",
    "m0; DELETE FROM memories",
    "1",
    "0",
    "-1",
    "row",
    "NULL",
    "🙂" * 100,
]


def owned_ids(owner: str) -> list[str]:
    return SHARED_IDS + [f"{owner}#only{i}" for i in range(3)]


@pytest.mark.parametrize("key", [None, "k"], ids=["plain", "encrypted"])
def test_no_read_path_leaks_across_owners(tmp_path, key):
    archive = Archive(tmp_path, DIM, key=None if key is None else generate_key())
    everything = {}
    for number, owner in enumerate(OWNERS):
        memories = [memory_for(i, owner, minutes=number) for i in owned_ids(owner)]
        # the vector depends on owner and id, so search sees different vectors for shared ids
        archive.upsert(memories, np.stack([vector_for(owner + "/" + i) for i in owned_ids(owner)]))
        everything[owner] = sorted(memories, key=lambda m: m.id)  # listings order by (t, id)
    all_ids = sorted({i for owner in OWNERS for i in owned_ids(owner)}) + ADVERSARIAL_IDS
    # the encrypted run repeats the probes that decrypt, with fewer search vectors (to stay fast)
    all_vectors = [
        vector_for(owner + "/" + i) for owner in OWNERS for i in (owned_ids(owner) if key is None else SHARED_IDS[:1])
    ]
    probes = 0

    def assert_own(memories, owner):
        assert all(m.owner == owner and m == memory_for(m.id, owner, minutes=OWNERS.index(owner)) for m in memories), (
            f"leak to {owner!r}: {[(m.owner, m.id) for m in memories if m.owner != owner]}"
        )

    for owner in OWNERS:
        mine = everything[owner]
        got = archive.get(all_ids, owner)
        assert_own(got, owner)
        assert sorted(m.id for m in got) == sorted(owned_ids(owner))
        for memory_id in all_ids:  # one id at a time too
            assert_own(archive.get([memory_id], owner), owner)
        probes += 1 + len(all_ids)
        for vector in all_vectors:
            hits = archive.search(vector, 3, owner)
            assert len(hits) == 3  # filtered before ranking: a full page of the owner's own memories
            assert_own([m for m, _ in hits], owner)
        probes += len(all_vectors)
        assert_own(archive.list_memories(owner), owner)
        assert archive.list_memories(owner) == archive.export(owner) and sorted(
            m.id for m in archive.export(owner)
        ) == sorted(owned_ids(owner))
        assert archive.count(owner) == len(mine)
        np.testing.assert_array_equal(
            archive.vectors(SHARED_IDS, owner), np.stack([vector_for(owner + "/" + i) for i in SHARED_IDS])
        )
        foreign_only = [i for i in all_ids if i not in owned_ids(owner)]
        assert archive.delete(foreign_only, owner) == 0
        assert archive.touch(foreign_only, owner, EPOCH) == 0
        with pytest.raises(KeyError):
            archive.vectors(foreign_only[:1], owner)
        probes += 7
    for owner in ["nobody", "ALICE ", "alic%", "' OR ''='", "josé\u0301"]:  # owners with no memories
        assert archive.get(all_ids, owner) == [] and archive.list_memories(owner) == [] and archive.count(owner) == 0
        assert archive.search(all_vectors[0], 5, owner) == []
        assert archive.delete(all_ids, owner) == 0 and archive.delete_owner(owner) == 0
        assert archive.purge_older_than(EPOCH.replace(year=3000), owner=owner) == 0
        probes += 7
    # a NUL, which C strings end at ("alice\x00bob" read as "alice"), is refused in an owner or an id, read or written
    refused = [
        lambda: archive.upsert([memory_for("m0", "alice\x00bob", minutes=0)], np.stack([vector_for("x")])),
        lambda: archive.get(["m0"], "alice\x00"),
        lambda: archive.get(["m0\x00"], "alice"),
        lambda: archive.search(all_vectors[0], 5, "alice\x00"),
        lambda: archive.delete(["m0"], "alice\x00bob"),
    ]
    for call in refused:
        with pytest.raises(InvalidMemoryError, match="NUL"):
            call()
        probes += 1
    # nothing was deleted or changed by any of the probes
    assert (
        sum(archive.count(owner) for owner in OWNERS) == archive.index_size() == len(OWNERS) * len(SHARED_IDS + [0] * 3)
    )
    assert all(archive.list_memories(owner) == everything[owner] for owner in OWNERS)
    # deleting one owner leaves every look-alike untouched
    assert archive.delete_owner("alice") == len(owned_ids("alice"))
    assert archive.search(vector_for("alice/m0"), 5, "alice") == []
    assert all(archive.list_memories(owner) == everything[owner] for owner in OWNERS if owner != "alice")
    archive.close()
    print(f"\naccess probes: {len(OWNERS)} owners, {len(all_ids)} ids each, {probes} probe calls")
