"""The contract suite's tests of the ``LexicalSearch`` capability: a base class of
:class:`memnets.store.testing.StoreContract`, skipped for a store that does not declare it."""

from __future__ import annotations

import pytest

from memnets.store.filters import MemoryFilter
from memnets.store.protocol import LexicalSearch, MemoryStore, supports
from memnets.store.testing_data import EPOCH, expiring, hit_ids, memory_for, vector_for, vectors_for


class LexicalContract:
    """``lexical_search`` under the contract of ``search``: the owner's only, filters before ranking, current rows."""

    def _lexical_store(self, store) -> MemoryStore:
        if not supports(store, LexicalSearch):
            pytest.skip(f"{type(store).__name__} does not declare LexicalSearch (supports_lexical_search)")
        return store

    def test_lexical_search_finds_a_rare_word_of_the_owner_only(self, store):
        store = self._lexical_store(store)
        rare = [memory_for("ann-1", "ann", content="Ann's locksmith is called Quezzlewick"), memory_for("ann-2", "ann")]
        other = [memory_for("bob-1", "bob", content="Bob also knows Quezzlewick, the locksmith")]
        store.upsert([*rare, *other], vectors_for([*rare, *other]))
        found = store.lexical_search("Who is Quezzlewick?", 5, "ann")
        assert hit_ids(found) == ["ann-1"] and found[0][1] > 0
        assert found[0][0] == rare[0]  # the whole record, as search returns it
        assert hit_ids(store.lexical_search("who is it?", 5, "ann")) == []  # nothing but stop words
        assert store.lexical_search("quezzlewick", 5, "nobody") == []

    def test_lexical_search_ranks_the_rarer_word_and_filters_before_ranking(self, store):
        store = self._lexical_store(store)
        kinds = ["observation", "plan"]
        memories = [
            memory_for(f"m{i}", "ann", content=f"note {i} about the garden", kind=kinds[i % 2], metadata={"n": i % 4})
            for i in range(40)
        ]
        memories.append(memory_for("rare", "ann", content="the garden gnome Bartholomew", kind="plan"))
        store.upsert(memories, vectors_for(memories))
        assert hit_ids(store.lexical_search("garden Bartholomew", 3, "ann"))[0] == "rare"
        for filters, matching in (
            ({"kind": "plan"}, 21),
            ({"metadata": {"n": 1}}, 10),
            ({"kind": "observation", "metadata": {"n": {"$in": [0, 2]}}}, 20),
            ({"metadata": {"n": 3}, "kind": "observation"}, 0),
        ):
            found = store.lexical_search("garden", 15, "ann", filters=filters)
            assert len(found) == min(15, matching), filters  # k results whenever k match
            parsed = MemoryFilter.parse(filters)
            assert all(parsed.matches(m) for m, _ in found), filters
            assert [s for _, s in found] == sorted((s for _, s in found), reverse=True)

    def test_lexical_search_sees_current_rows_only(self, store, clock):
        store = self._lexical_store(store)
        memories = [
            memory_for("moved", "ann", content="Ann lives in Tallinn"),
            memory_for("gone", "ann", content="Ann's old code is Wumpus"),
            expiring("brief", "ann", 60, content="a passing Kestrel note"),
        ]
        store.upsert(memories, vectors_for(memories))
        store.new_version(memories[0].replace(content="Ann lives in Ljubljana"), vector_for("moved2"))
        assert hit_ids(store.lexical_search("Tallinn", 5, "ann")) == []  # the older version's text is history
        assert hit_ids(store.lexical_search("Ljubljana", 5, "ann")) == ["moved"]
        assert sorted(hit_ids(store.lexical_search("Wumpus Kestrel", 5, "ann"))) == ["brief", "gone"]
        store.delete(["gone"], "ann")
        clock.advance(90)
        assert store.lexical_search("Wumpus Kestrel", 5, "ann") == []
        store.upsert([memory_for("gone", "ann", content="Ann's new code is Grue")], vector_for("gone")[None])
        assert hit_ids(store.lexical_search("Wumpus Grue", 5, "ann")) == ["gone"]  # a replace, its old text gone

    def test_lexical_search_refuses_bad_arguments(self, store):
        store = self._lexical_store(store)
        for call, name in (
            (lambda: store.lexical_search(42, 5, "ann"), "text"),
            (lambda: store.lexical_search("x", 0, "ann"), "k"),
            (lambda: store.lexical_search("x", 5, ""), "owner"),
            (lambda: store.lexical_search("x", 5, "ann", filters={"as_of": EPOCH}), "filters"),
        ):
            with pytest.raises((TypeError, ValueError)) as raised:
                call()
            assert getattr(raised.value, "field", None) == name
