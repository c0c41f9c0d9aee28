"""Who is calling and what they may reach, as a FastAPI dependency of every route (``CallerDep``).

:class:`Caller` pairs the request's :class:`~memnets.server.auth.Principal` (from its bearer token)
with the app's state, and holds the scope rules the routes share: a token reaches its own user only;
a token narrowed to an agent and/or a session reads, searches and writes in that scope only
(filters narrowed, writes filled in, memories named by id checked through the API's batch get).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request

from memnets.argerrors import ArgumentValueError
from memnets.records import Memory
from memnets.server.auth import AuthError, Principal, authorize, authorize_memory, authorize_scope
from memnets.server.state import ServerState
from memnets.store.filters import MemoryFilter


class Caller:
    """The principal of one request and the checks of its scope."""

    def __init__(self, principal: Principal, state: ServerState) -> None:
        self.principal = principal
        self.state = state

    def may_reach(self, user) -> None:
        """AuthError(403) unless this caller may reach ``user`` (a scoped token must name its user)."""
        if isinstance(user, str):  # anything else: the API names the wrong type
            authorize(self.principal, user)
        elif not self.principal.admin:
            raise AuthError(403, "forbidden: a scoped token must name its user")

    def whole_user(self, user: str, where: str) -> None:
        """:meth:`may_reach`, for routes that span every scope of the user (the manager's tiers hold all its agents')."""
        self.may_reach(user)
        if self.principal.scope:
            raise AuthError(
                403,
                f"forbidden: {where} spans every agent and session of user {user!r}; this token is narrowed to "
                f"{self.principal.describe()}",
            )

    def narrowed(self, filters) -> Any:
        """``filters`` and the token's scope, both to hold (``filters`` as given without a scope)."""
        return MemoryFilter.combine(filters, self.principal.scope) if self.principal.scope else filters

    async def check_ids(self, ids, user: str, where: str) -> None:
        """403 when a memory the request names by id exists outside the token's scope (a narrowed token
        may neither read nor overwrite, replace or delete another agent's or session's memory, nor take over
        the id of one that expired but is not swept yet)."""
        ids = [i for i in ids if isinstance(i, str)]
        if self.principal.scope and ids:
            memory = self.state.require()
            for found in await self.state.call(memory.get_many, ids, user=user, include_expired=True):
                authorize_memory(self.principal, found, where)

    def write_scope(self, arguments: dict, items, where: str) -> None:
        """A narrowed token writes in its scope only: agent/session filled in, records of another refused."""
        principal = self.principal
        if not principal.scope:
            return
        arguments.update(authorize_scope(principal, {name: arguments.get(name) for name in principal.scope}, where))
        for item in items:
            if isinstance(item, Memory) and not principal.holds(item):
                raise AuthError(
                    403, f"forbidden: record {item.id!r} is outside this token's scope ({principal.describe()})"
                )


# Both dependencies are coroutines, though they never wait: FastAPI runs a plain function dependency
# in its thread pool, a hand-off to a thread and back on every request.


async def server_state(request: Request) -> ServerState:
    """The app's :class:`ServerState` (a dependency)."""
    return request.app.state.memnets


async def caller(request: Request) -> Caller:
    """The request's caller: AuthError(401) without a valid token when tokens are configured; a query parameter
    the route does not read is refused next (:func:`refuse_unknown_query`)."""
    state = await server_state(request)
    principal = state.tokens.principal(request.headers.get("authorization"))
    refuse_unknown_query(request)
    return Caller(principal, state)


def refuse_unknown_query(request: Request) -> None:
    """422 naming the first query parameter that the request's route does not read: one it ignored had answered as
    if it were not there (``GET /v1/memories?user=ann&agent=a1`` listed every agent's memories; the scope is a
    filter, ``filters={"agent": "a1"}``)."""
    route = request.scope.get("route")
    if not request.query_params or route is None:
        return
    reads = query_parameters(route)
    unknown = sorted(set(request.query_params) - reads)
    if unknown:
        raise ArgumentValueError(
            f"unknown query parameter {unknown[0]!r}: {request.method} {route.path} reads "
            f"{', '.join(sorted(reads)) or 'none'}",
            field=unknown[0],
        )


def query_parameters(route) -> frozenset[str]:
    """The query parameters ``route`` reads, its own and its dependencies' (by the names on the wire; a walk of a
    few objects, for requests that have a query string only)."""
    found, dependants = set(), [route.dependant]
    while dependants:
        dependant = dependants.pop()
        found.update(field.alias for field in dependant.query_params)
        dependants.extend(dependant.dependencies)
    return frozenset(found)


CallerDep = Annotated[Caller, Depends(caller)]
StateDep = Annotated[ServerState, Depends(server_state)]
