"""``/v1/users/{user}/...``: this process's manager of a user (its tiers span every agent and session
of the user, so a narrowed token is refused): observe, context (the recall gate), its tiers."""

from __future__ import annotations

from fastapi import APIRouter

from memnets.server.caller import CallerDep
from memnets.server.routes.answers import ContextView, ManagerSnapshot, MemoryAnswer, documented
from memnets.server.routes.bodies import answer, arguments_body, typed_body
from memnets.server.wire import to_json

router = APIRouter(prefix="/v1/users/{user}", tags=["manager"])
WHERE = "the manager"


ObserveBody = arguments_body(
    "ObserveBody",
    [typed_body("Observe", "observe", "A message entering the user's context (MemoryManager.observe).")],
    ["text"],
)
ContextBody = arguments_body(
    "ContextBody",
    [typed_body("Context", "context", "What the LLM should see for a query (MemoryManager.context_for).")],
    ["query"],
)


@router.post("/observe", responses=documented(MemoryAnswer))
async def observe(user: str, body: ObserveBody, caller: CallerDep):
    """MemoryManager.observe: the message enters the user's context; kept ones are written through."""
    caller.whole_user(user, WHERE)
    arguments = body.arguments()
    text = arguments.pop("text")
    manager = await caller.state.call(caller.state.manager, user)
    return answer({"memory": to_json(await caller.state.call(manager.observe, text, **arguments))})


@router.post("/context", responses=documented(ContextView))
async def context(user: str, body: ContextBody, caller: CallerDep):
    """MemoryManager.context_for: the recall gate's verdict, maybe a RECALL, and the memories for the prompt."""
    caller.whole_user(user, WHERE)
    arguments = body.arguments()
    manager = await caller.state.call(caller.state.manager, user)
    view = await caller.state.call(manager.context_for, arguments.pop("query"), **arguments)
    caller.state.metrics.gate.labels("true" if view.recalled else "false").inc()
    return answer(
        {
            "recalled": view.recalled,
            "gate_score": to_json(view.gate_score),
            "memories": to_json(list(view.memories)),
            "messages": to_json(list(view.messages)),
        }
    )


@router.get("/manager", responses=documented(ManagerSnapshot))
async def manager_state(user: str, caller: CallerDep):
    """What this process's manager of ``user`` holds in each tier, and the recall gate's last decisions."""
    caller.whole_user(user, WHERE)
    state = caller.state
    manager = await state.call(state.manager, user)
    found = await state.call(state.require().manager_snapshot, manager)
    return {
        "context": to_json(found.context),
        "working": to_json(found.working),
        "pending": to_json(found.pending),
        "gate": [event.to_json() for event in found.gate],
        "moves": found.moves,
    }
