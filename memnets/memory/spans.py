"""What an ``AgentMemory`` call did, as the attributes of its span (:mod:`memnets.tracing`).

A span says how long a call took; these say what came of it, in counts and fixed words only (never a
text, a query, a user or an id): an ``add``'s ``memnets.outcome`` ("added", "updated", "unchanged"),
or for a transcript or ``add_many`` how many memories each outcome had (``memnets.added``,
``memnets.updated``, ``memnets.unchanged``, ``memnets.skipped``); a search's ``memnets.k``,
``memnets.users`` (how many users it searched) and ``memnets.hits`` (how many it answered).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

OUTCOMES = ("added", "updated", "unchanged", "skipped")


def written(result, arguments: Mapping) -> dict:
    """The attributes of an ``add``/``add_many``/``add_messages``: one memory's outcome, or the count of each outcome."""
    if not isinstance(result, list):
        return {"memnets.outcome": result.outcome}
    counts = Counter(item.outcome for item in result)
    return {f"memnets.{outcome}": counts[outcome] for outcome in OUTCOMES}


def searched(result, arguments: Mapping) -> dict:
    """The attributes of a search (``AgentMemory._search_users``: the query's vector and ``{user: hits}``)."""
    _, found = result
    return {
        "memnets.k": arguments["k"],
        "memnets.users": len(arguments["users"]),
        "memnets.hits": sum(len(hits) for hits in found.values()),
    }


RESULT_ATTRIBUTES = {"add": written, "add_many": written, "add_messages": written, "_search_users": searched}

__all__ = ["RESULT_ATTRIBUTES", "searched", "written"]
