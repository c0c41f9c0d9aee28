"""``/v1/users`` (the users a token reaches) and ``/v1/whoami`` (what the token is)."""

from __future__ import annotations

from fastapi import APIRouter

from memnets.server.caller import CallerDep
from memnets.server.routes.answers import Users, WhoAmI, documented

router = APIRouter(prefix="/v1", tags=["users"])


@router.get("/users", responses=documented(Users))
async def users(caller: CallerDep):
    """AgentMemory.users for the admin; a scoped token sees its own user only (if it has memories in its scope)."""
    memory = caller.state.require()
    principal = caller.principal
    if principal.admin:
        return {"users": await caller.state.call(memory.users)}
    mine = await caller.state.call(memory.list_memories, user=principal.user, limit=1, filters=caller.narrowed(None))
    return {"users": [principal.user] if mine else []}


@router.get("/whoami", responses=documented(WhoAmI))
async def whoami(caller: CallerDep):
    """What the request's token reaches: ``{"admin", "user", "agent", "session"}`` (the inspector narrows itself to it)."""
    principal = caller.principal
    return {"admin": principal.admin, "user": principal.user, "agent": principal.agent, "session": principal.session}
