"""Bad arguments raise errors that name the argument in ``field`` (memnets.argerrors), so a door that
reports fields (the REST server) reads them instead of guessing from the message."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime, timedelta

import pytest

import memnets
from memnets.argerrors import ArgumentTypeError, ArgumentValueError, UnknownIdError, field_of
from memnets.records import Memory
from memnets.store.errors import InvalidMemoryError

T = datetime(2024, 3, 1, tzinfo=UTC)


def linked(memory, agent: str, target: str) -> Memory:
    """A record of ``agent`` that names ``target``, a memory of another agent, as the one that ended it."""
    memory.add("the other agent's fact", user="ann", agent="a1", id=target)
    return Memory(id="bait", owner="ann", t=T, content="a record", agent=agent, invalidated_by=target, valid_to=T)


@pytest.fixture
def memory(tmp_path, encoder):
    with memnets.open(tmp_path / "memory", encoder=encoder) as opened:
        yield opened


@pytest.mark.parametrize(
    ("call", "error", "field"),
    [
        (lambda m: m.add("x", user=""), ValueError, "user"),
        (lambda m: m.add("x", user=7), TypeError, "user"),
        (lambda m: m.add("   ", user="ann"), ValueError, "text"),
        (lambda m: m.add("x", user="ann", importance=2), ValueError, "importance"),
        (lambda m: m.add("x", user="ann", kind="dream"), ValueError, "kind"),
        (lambda m: m.add("x", user="ann", t="yesterday"), ValueError, "t"),
        (lambda m: m.add("x", user="ann", ttl=timedelta(seconds=-1)), ValueError, "ttl"),
        (lambda m: m.add("x", user="ann", metadata={"$a": 1}), InvalidMemoryError, "metadata"),
        (lambda m: m.add("x", user="ann", replaces="nothing"), KeyError, "replaces"),
        (
            lambda m: m.add("y", user="ann", agent="a2", replaces=m.add("x", user="ann", agent="a1").id),
            ValueError,
            "replaces",
        ),
        (
            lambda m: m.add("y", user="ann", agent="a2", id=m.add("x", user="ann", agent="a1", id="k").id),
            ValueError,
            "id",
        ),
        (lambda m: m.add(linked(m, "a2", "k2"), user="ann"), ValueError, "invalidated_by"),
        (lambda m: m.add_many("one text", user="ann"), TypeError, "items"),
        (lambda m: m.add_many(["a", "b"], user="ann", ids=["same", "same"]), ValueError, "ids"),
        (lambda m: m.add(messages="hello", user="ann"), TypeError, "messages"),
        (lambda m: m.search("q", user="ann", k=0), ValueError, "k"),
        (lambda m: m.search("q", user="ann", filters={"colour": 1}), ValueError, "filters"),
        (lambda m: m.search_vector([1.0, float("nan")], user="ann"), ValueError, "vector"),
        (lambda m: m.add("a text", user="ann", metadata={"score": float("nan")}), ValueError, "metadata"),
        (lambda m: m.add("a text", user="ann", metadata={1: "one", "1": "uno"}), TypeError, "metadata"),
        (lambda m: m.list_memories(user="ann", limit=-1), ValueError, "limit"),
        (lambda m: m.update("missing", user="ann", text="t"), KeyError, "id"),
        (lambda m: m.delete_all(user="ann", agent=""), ValueError, "agent"),
    ],
)
def test_a_bad_argument_names_itself_in_its_error(memory, call, error, field):
    with pytest.raises(error) as raised:
        call(memory)
    assert field_of(raised.value) == field
    assert field in str(raised.value)


def test_named_errors_are_the_builtin_errors_and_keep_their_field_through_pickling():
    for error in (
        ArgumentValueError("k must be >= 1", field="k"),
        ArgumentTypeError("user must be a str", field="user"),
        UnknownIdError("id='x': no memory", field="id"),
        InvalidMemoryError("metadata must be JSON", field="metadata"),
    ):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error) and str(copy) == str(error) and field_of(copy) == error.field
    assert isinstance(UnknownIdError("m", field="id"), KeyError) and str(UnknownIdError("m", field="id")) == "m"
    assert field_of(ValueError("k must be >= 1")) is None  # a plain error names no field


def test_a_record_checked_below_the_api_names_the_field_not_its_description():
    with pytest.raises(ValueError) as raised:  # a string is read as ISO 8601, as every time is (timeutil.as_utc)
        Memory(id="m1", owner="ann", t="yesterday", content="x")
    assert field_of(raised.value) == "t" and "Memory 'm1': t" in str(raised.value)
