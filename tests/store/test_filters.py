"""Filters ($and, $or, $in, $nin, scopes) on both stores, against a plain Python reference evaluation.

The reference (``reference``) is written here from the documented rules, apart from
:meth:`MemoryFilter.matches`, so that a store and the filter module cannot agree on a mistake.
Hypothesis draws filter trees; every one runs on the embedded Archive and on PostgreSQL (the
``pg_url`` fixture), listing and searching, and must return exactly the reference's ids
(a search: the reference's k best by inner product, so k results whenever k match).
"""

from __future__ import annotations

import uuid
from datetime import UTC, timedelta

import numpy as np
import pytest
from archive_helpers import DIM, EPOCH, memory_for, vector_for, vectors_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memnets.store import MemoryFilter, open_store
from memnets.store.filters import MAX_FILTER_CLAUSES

TAGS = ["red", "green", "blue"]
AGENTS = ["planner", "critic", None]
SESSIONS = ["s1", "s2", "s3", None]
KINDS = ["observation", "reflection", "plan", "message"]


def scoped_memories(n: int = 80, owner: str = "a"):
    rng = np.random.default_rng(11)
    memories = []
    for i in range(n):
        metadata = {"n": int(rng.integers(0, 10)), "tag": TAGS[i % 3]}
        if i % 4 == 0:
            metadata["flag"] = bool(i % 8)
        if i % 5 == 0:
            del metadata["n"]
        memories.append(
            memory_for(
                f"m{i:03d}",
                owner,
                minutes=int(rng.integers(0, 600)),
                kind=KINDS[i % 4],
                metadata=metadata,
                agent=AGENTS[i % 3],
                session=SESSIONS[(i // 3) % 4],
            )
        )
    return memories


# ---------------------------------------------------------------------- the reference
def _equal(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def _op(op, present, value, operand) -> bool:
    if op == "$ne":
        return not present or not _equal(value, operand)
    if op == "$nin":
        return not present or all(not _equal(value, o) for o in operand)
    if not present:
        return False
    if op == "$eq":
        return _equal(value, operand)
    if op == "$in":
        return any(_equal(value, o) for o in operand)
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (value, operand))
    strings = isinstance(value, str) and isinstance(operand, str)
    if not (numbers or strings):
        return False
    return {"$gt": value > operand, "$gte": value >= operand, "$lt": value < operand, "$lte": value <= operand}[op]


def _condition(condition, present, value) -> bool:
    if not isinstance(condition, dict):
        condition = {"$eq": condition}
    return all(_op(op, present, value, operand) for op, operand in condition.items())


def _metadata(conditions, fields) -> bool:
    for name, condition in conditions.items():
        if name == "$and":
            ok = all(_metadata(c, fields) for c in condition)
        elif name == "$or":
            ok = any(_metadata(c, fields) for c in condition)
        else:
            ok = _condition(condition, name in fields, fields.get(name))
        if not ok:
            return False
    return True


def reference(spec, memory) -> bool:
    """Whether ``memory`` passes the filter mapping ``spec``, by the rules of docs/memory.md."""
    for key, value in spec.items():
        if key == "kind":
            ok = memory.kind in ([value] if isinstance(value, str) else value)
        elif key == "since":
            ok = memory.t >= value
        elif key == "until":
            ok = memory.t < value
        elif key in ("agent", "session"):  # a plain None is no condition, as for every key of a filter
            ok = value is None or _condition(value, True, getattr(memory, key))
        elif key == "metadata":
            ok = _metadata(value, memory.metadata)
        elif key == "$and":
            ok = all(reference(part, memory) for part in value)
        elif key == "$or":
            ok = any(reference(part, memory) for part in value)
        else:
            raise AssertionError(key)
        if not ok:
            return False
    return True


# ---------------------------------------------------------------------- drawn filters
def _field_condition(values):
    value = st.sampled_from(values)
    some = st.lists(value, min_size=1, max_size=3)
    return st.one_of(
        value,
        st.fixed_dictionaries({"$eq": value}),
        st.fixed_dictionaries({"$ne": value}),
        st.fixed_dictionaries({"$in": some}),
        st.fixed_dictionaries({"$nin": some}),
    )


_n = st.one_of(
    _field_condition([0, 3, 5, 9, 2.5]),
    st.builds(lambda lo, hi: {"$gte": lo, "$lt": hi}, st.integers(0, 9), st.integers(0, 10)),
    st.fixed_dictionaries({"$gt": st.integers(0, 9)}),
    st.fixed_dictionaries({"$lte": st.sampled_from([4, "x"])}),  # "x": a string never orders against numbers
)
_leaf_metadata = st.one_of(
    st.fixed_dictionaries({"n": _n}),
    st.fixed_dictionaries({"tag": _field_condition(TAGS + ["pink"])}),
    st.fixed_dictionaries({"flag": _field_condition([True, False, 1])}),
    st.fixed_dictionaries({"tag": _field_condition(TAGS), "n": _n}),
)
metadata_conditions = st.recursive(
    _leaf_metadata,
    lambda inner: st.one_of(
        st.fixed_dictionaries({"$or": st.lists(inner, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"$and": st.lists(inner, min_size=1, max_size=3)}),
        st.builds(lambda a, b: {**a, "$or": [b]}, _leaf_metadata, inner),
    ),
    max_leaves=4,
)
_leaf_filter = st.one_of(
    st.fixed_dictionaries({"kind": st.sampled_from([KINDS[0], KINDS[1:3]])}),
    st.fixed_dictionaries({"agent": _field_condition(AGENTS)}),
    st.fixed_dictionaries({"session": _field_condition(SESSIONS)}),
    st.fixed_dictionaries({"metadata": metadata_conditions}),
    st.fixed_dictionaries(
        {"since": st.integers(0, 600).map(lambda m: EPOCH.replace(tzinfo=UTC) + timedelta(minutes=m))}
    ),
    st.fixed_dictionaries(
        {"agent": _field_condition(AGENTS), "metadata": metadata_conditions, "kind": st.just(KINDS[:2])}
    ),
)
filters = st.recursive(
    _leaf_filter,
    lambda inner: st.one_of(
        st.fixed_dictionaries({"$or": st.lists(inner, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"$and": st.lists(inner, min_size=1, max_size=3)}),
        st.builds(lambda a, b: {**a, "$or": b}, _leaf_filter, st.lists(inner, min_size=1, max_size=2)),
    ),
    max_leaves=5,
)

MEMORIES = scoped_memories()
VECTORS = vectors_for(MEMORIES)
QUERY = vector_for("the query")
SCORES = {m.id: float(v @ QUERY) for m, v in zip(MEMORIES, VECTORS)}


@pytest.fixture(scope="module", params=["archive", "postgres"])
def filled(request, tmp_path_factory):
    """A store of each kind holding MEMORIES for owner "a" (and one decoy of owner "b"), opened once."""
    if request.param == "archive":
        store = open_store(tmp_path_factory.mktemp("filters") / "store", DIM)
    else:
        store = open_store(request.getfixturevalue("pg_url"), DIM, table="f" + uuid.uuid4().hex[:16])
    store.upsert(MEMORIES, VECTORS)
    decoy = memory_for("decoy", "b", agent="planner", session="s1", metadata={"tag": "red", "n": 3})
    store.upsert([decoy], vector_for("decoy")[None])
    yield store
    store.close()


def check_against_reference(store, spec) -> list[str]:
    expected = sorted((m for m in MEMORIES if reference(spec, m)), key=lambda m: (m.t, m.id))
    assert [m.id for m in store.list_memories("a", filters=spec)] == [m.id for m in expected]
    assert [m.id for m in store.list_memories("a", filters=spec, offset=3, limit=4)] == [m.id for m in expected[3:7]]
    best = sorted((m.id for m in expected), key=lambda i: -SCORES[i])[:7]
    assert [m.id for m, _ in store.search(QUERY, 7, "a", filters=spec)] == best
    return [m.id for m in expected]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=filters)
def test_drawn_filters_return_the_reference_ids_on_both_stores(filled, spec):
    check_against_reference(filled, spec)


WRITTEN = [
    {"metadata": {"$or": [{"tag": "red"}, {"n": {"$gte": 8}}]}},
    {"metadata": {"tag": {"$nin": ["red", "blue"]}, "$or": [{"flag": True}, {"n": {"$in": [1, 2]}}]}},
    {"agent": "planner", "session": {"$in": ["s1", "s2"]}},
    {"agent": {"$eq": None}},  # unscoped memories
    {"$or": [{"kind": "plan", "agent": "critic"}, {"session": "s3", "metadata": {"tag": "green"}}]},
    {"$and": [{"agent": {"$ne": "critic"}}, {"$or": [{"kind": "message"}, {"metadata": {"flag": False}}]}]},
]


@pytest.mark.parametrize("spec", WRITTEN, ids=[str(s)[:50] for s in WRITTEN])
def test_written_filters_match_something_and_agree_with_the_reference(filled, spec):
    found = check_against_reference(filled, spec)
    assert 0 < len(found) < len(MEMORIES)  # each filter selects: a bug returning all or none would show


def test_search_fills_k_under_an_or_that_few_memories_pass(filled):
    spec = {"$or": [{"session": "s3", "agent": "critic"}, {"metadata": {"tag": "blue", "n": 9}}]}
    matching = [m.id for m in MEMORIES if reference(spec, m)]
    assert 3 <= len(matching) <= 15
    hits = filled.search(QUERY, len(matching) + 5, "a", filters=spec)
    assert sorted(m.id for m, _ in hits) == sorted(matching)


@pytest.mark.parametrize(
    "spec, named",
    [
        ({"metadata": {"$xor": [{"tag": "red"}]}}, r"\$xor"),
        ({"metadata": {"tag": "red", "$regex": "r.*"}}, r"\$regex"),
        ({"metadata": {"tag": {"$regex": "r.*"}}}, r"\$regex"),
        ({"$nor": [{"kind": "plan"}]}, r"\$nor"),
        ({"$or": [{"metadata": {"$not": {"tag": "red"}}}]}, r"\$not"),
        ({"$and": [{"agent": {"$like": "p%"}}]}, r"\$like"),
        ({"session": {"$in": "s1"}}, r"\$in on session needs a list"),
        ({"metadata": {"$or": {"tag": "red"}}}, r"\$or needs a non-empty list"),
        ({"$or": []}, r"\$or needs a non-empty list"),
        ({"agents": "planner"}, r"unknown keys \['agents'\]"),
    ],
)
def test_an_unknown_operator_anywhere_is_an_error_naming_it(filled, spec, named):
    with pytest.raises(ValueError, match=named):
        filled.list_memories("a", filters=spec)
    with pytest.raises(ValueError, match=named):
        filled.search(QUERY, 3, "a", filters=spec)


def test_fields_is_a_subset_match_of_a_dict_field_nested_within_the_depth_bound(filled):
    memory = memory_for("nested", "a", metadata={"place": {"city": "lyon", "geo": {"lat": 45.7}}})
    match = MemoryFilter.parse
    assert match({"metadata": {"place": {"$fields": {"city": "lyon"}}}}).matches(memory)
    assert match({"metadata": {"place": {"$fields": {"geo": {"$fields": {"lat": {"$gt": 45}}}}}}}).matches(memory)
    assert match({"metadata": {"place": {"$fields": {}}}}).matches(memory)  # any dict
    assert not match({"metadata": {"place": {"$fields": {"city": "paris"}}}}).matches(memory)
    assert not match({"metadata": {"tag": {"$fields": {}}}}).matches(memory_for("m", "a", metadata={"tag": "x"}))
    with pytest.raises(TypeError, match=r"field 'place' \$fields must be a mapping"):
        match({"metadata": {"place": {"$fields": ["city"]}}})
    with pytest.raises(ValueError, match=r"\$regex"):
        filled.list_memories("a", filters={"metadata": {"place": {"$fields": {"city": {"$regex": "l"}}}}})
    deep: dict = {"x": 1}
    for _ in range(8):
        deep = {"x": {"$fields": deep}}
    with pytest.raises(ValueError, match="nest over 8 deep"):
        match({"metadata": deep})
    many = {f"f{i}": i for i in range(MAX_FILTER_CLAUSES)}
    with pytest.raises(ValueError, match="clauses, over the limit"):
        match({"metadata": {"place": {"$fields": many}}})  # the nested conditions count


def test_combine_keeps_every_condition():
    first, second = {"kind": "plan", "metadata": {"tag": "red"}}, {"agent": "critic"}
    both = MemoryFilter.combine(first, None, second)
    assert both.kinds == ("plan",)  # the first filter's kind stays where a store runs it in SQL
    assert [m.id for m in MEMORIES if both.matches(m)] == [
        m.id for m in MEMORIES if reference(first, m) and reference(second, m)
    ]
    assert MemoryFilter.combine(None, {}) is None
