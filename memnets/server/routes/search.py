"""``/v1/search``: the k best memories of a user (or of several), each with its score and the score's parts."""

from __future__ import annotations

from fastapi import APIRouter

from memnets.memory.explain import Explanation
from memnets.memory.validity import as_of_filter
from memnets.server.caller import CallerDep
from memnets.server.routes.answers import SearchAnswer, SearchManyAnswer, documented
from memnets.server.routes.bodies import answer, arguments_body, typed_body
from memnets.server.wire import to_json
from memnets.store.filters import MemoryFilter

router = APIRouter(prefix="/v1/search", tags=["memories"])


SEARCH_BODIES = (
    typed_body("Search", "search", "The k best memories of a user (AgentMemory.search)."),
    typed_body("SearchMany", "search_many", "The k best memories of each of several users (AgentMemory.search_many)."),
)
SearchBody = arguments_body("SearchBody", SEARCH_BODIES, ["query"])


@router.post("", responses=documented(SearchAnswer, SearchManyAnswer))
async def search(body: SearchBody, caller: CallerDep):
    """AgentMemory.search: the k best memories, each with its score and its parts (relevance, recency,
    importance, the learned score). With ``users`` (a list) instead of ``user``: search_many, the
    query encoded once, ``{"by_user": {user: results}}``."""
    arguments = body.arguments()
    many = "users" in arguments
    users = arguments.pop("users") if many else [arguments.pop("user", None)]
    for user in users if isinstance(users, list) else [None]:
        caller.may_reach(user)
    memory = caller.state.require()
    arguments.pop("user", None)
    times = (arguments.pop("as_of", None), arguments.pop("known_at", None))
    arguments["filters"] = caller.narrowed(as_of_filter(arguments.get("filters"), *times))
    found = await caller.state.call(memory.explain, arguments.pop("query"), users=users, **arguments)
    if many:
        return answer({"by_user": {user: _results(hits) for user, hits in found.by_user.items()}})
    results = _results(found.by_user[users[0]])
    return answer({**_ranking(found), "search": _search_mode(memory, arguments["filters"]), "results": results})


def _search_mode(memory, filters) -> str:
    """ "hybrid" where the search fused the dense ranking with the query's words, else "dense": a memory without a
    lexical index, or a read at a time (as_of / known_at), which ranks densely (memnets.memory.hybrid)."""
    parsed = MemoryFilter.parse(filters)
    return "hybrid" if memory.hybrid and not (parsed is not None and parsed.time_travel) else "dense"


def _ranking(found: Explanation) -> dict:
    return {"ranker": found.ranker, "weights": to_json(found.weights) if found.weights is not None else None}


def _results(hits) -> list[dict]:
    return [{"memory": to_json(hit.memory), "score": hit.score, "parts": to_json(hit.parts)} for hit in hits]
