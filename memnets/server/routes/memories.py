"""``/v1/memories``: add (one, a batch or a chat transcript), list, get, update, history, derived, delete, delete_all."""

from __future__ import annotations

from fastapi import APIRouter

from memnets.httpguard import request_json
from memnets.memory.validity import as_of_filter
from memnets.records import DERIVED_KINDS, Memory
from memnets.server.auth import authorize_memory, authorize_scope
from memnets.server.caller import CallerDep
from memnets.server.routes.answers import (
    Deleted,
    DeletedCount,
    MemoriesAnswer,
    MemoryAnswer,
    MemoryPage,
    OutcomesAnswer,
    documented,
)
from memnets.server.routes.bodies import answer, arguments_body, typed_body
from memnets.server.state import ServerError
from memnets.server.wire import filters_from_json, memory_from_json, parse_time, to_json

MAX_BATCH_ITEMS = 10_000  # items of one batch add

router = APIRouter(prefix="/v1/memories", tags=["memories"])


ADD_BODIES = (
    typed_body("AddText", "add", "One memory: its text and its fields (AgentMemory.add)."),
    typed_body("AddRecord", "add_record", "One memory given whole, stored as it is (AgentMemory.add of a record)."),
    typed_body("AddItems", "add_many", "A batch of texts and/or records, one encoder batch (AgentMemory.add_many)."),
    typed_body(
        "AddMessages", "add_messages", "A chat transcript, one memory per kept message (AgentMemory.add_messages)."
    ),
)
AddBody = arguments_body("AddBody", ADD_BODIES, ["user"])
UpdateBody = arguments_body(
    "UpdateBody", [typed_body("Update", "update", "A new version of a memory (AgentMemory.update).")], ["user"]
)


@router.post("", responses=documented(MemoryAnswer, MemoriesAnswer, OutcomesAnswer))
async def add(body: AddBody, caller: CallerDep):
    """Add one memory (``text`` or ``record``), a batch (``items``) or a chat transcript (``messages``:
    ``{"outcomes": [...]}``, one per message): AgentMemory.add / add_many."""
    caller.may_reach(body.user)
    memory = caller.state.require()
    arguments = body.arguments()
    user = arguments.pop("user")
    text, record, items = arguments.pop("text", None), arguments.pop("record", None), arguments.pop("items", None)
    messages = arguments.pop("messages", None)
    bodies = (("text", text), ("record", record), ("items", items), ("messages", messages))
    given = [name for name, value in bodies if value is not None]
    if len(given) != 1:
        raise ServerError(
            "malformed_request", f"give exactly one of text, record, items, messages; got {given or 'none'}", "text"
        )
    if messages is not None:
        return answer({"outcomes": to_json(await add_messages(caller, memory, messages, user, arguments))})
    if items is not None:
        if not isinstance(items, list):
            raise ServerError("malformed_request", "items must be a list of texts and/or memory records", "items")
        if len(items) > MAX_BATCH_ITEMS:
            raise ServerError("too_large", f"items: {len(items)} items, at most {MAX_BATCH_ITEMS} per call", "items")
        items = [memory_from_json(i, f"items[{n}]") if isinstance(i, dict) else i for n, i in enumerate(items)]
        caller.write_scope(arguments, items, "items")
        ids = arguments.get("ids")
        named = [i.id for i in items if isinstance(i, Memory)] + (ids if isinstance(ids, list) else [])
        await caller.check_ids(named, user, "add")
        added = await caller.state.call(memory.add_many, items, user=user, **arguments)
        return answer({"memories": to_json(added)})
    item = memory_from_json(record, "record") if record is not None else text
    caller.write_scope(arguments, [item], "add")
    named = [item.id if isinstance(item, Memory) else arguments.get("id"), arguments.get("replaces")]
    await caller.check_ids(named, user, "add")
    return answer({"memory": to_json(await caller.state.call(memory.add, item, user=user, **arguments))})


async def add_messages(caller, memory, messages, user, arguments: dict) -> list:
    """AgentMemory.add_messages for a caller: at most MAX_BATCH_ITEMS messages, written in the token's scope,
    the ids they name checked against it. Called as ``add(messages=...)``, the same call, which refuses a
    text's arguments sent with messages (``id``, ``action``, ...) by name rather than as unknown ones."""
    if isinstance(messages, list) and len(messages) > MAX_BATCH_ITEMS:  # the API names any other shape
        raise ServerError("too_large", f"messages: {len(messages)}, at most {MAX_BATCH_ITEMS} per call", "messages")
    caller.write_scope(arguments, [], "add")
    named = [m.get("id") for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []
    await caller.check_ids(named, user, "add")
    return await caller.state.call(memory.add, user=user, messages=messages, **arguments)


@router.get("", responses=documented(MemoryPage))
async def list_memories(
    caller: CallerDep,
    user: str,
    limit: int = 100,
    offset: int = 0,
    filters: str | None = None,
    as_of: str | None = None,
    known_at: str | None = None,
):
    """AgentMemory.list_memories: one page, by (t, id); ``filters`` is a JSON object; ``as_of``/``known_at``
    ISO times (the versions valid / written by then); ``next_offset`` pages on."""
    caller.may_reach(user)
    memory = caller.state.require()
    parsed = None
    if filters is not None:
        try:
            parsed = request_json(filters)
        except ValueError as error:  # not JSON, or nested past the parser's stack
            raise ServerError("malformed_request", f"filters must be a JSON object: {error}", "filters") from None
        parsed = filters_from_json(parsed)
    times = [parse_time(value, name) for name, value in (("as_of", as_of), ("known_at", known_at))]
    found = await caller.state.call(
        memory.list_memories,
        user=user,
        limit=limit,
        offset=offset,
        filters=caller.narrowed(as_of_filter(parsed, *times)),
    )
    full = limit is not None and len(found) == limit and limit > 0
    return answer({"memories": to_json(found), "next_offset": offset + len(found) if full else None})


@router.delete("", responses=documented(DeletedCount))
async def delete_all(caller: CallerDep, user: str, agent: str | None = None, session: str | None = None):
    """AgentMemory.delete_all: every memory of ``user``, or of its ``agent`` and/or ``session`` (a
    narrowed token: of its own scope); returns how many current ones went."""
    caller.may_reach(user)
    state = caller.state
    memory = state.require()
    scope = authorize_scope(caller.principal, {"agent": agent, "session": session}, "delete_all")
    deleted = await state.call(memory.delete_all, user=user, **scope)
    if scope["agent"] is None and scope["session"] is None:
        manager = state.drop_manager(user)
        if manager is not None:
            await state.call(manager.close)
    return {"deleted": deleted}


@router.get("/{id:path}/history", responses=documented(MemoriesAnswer))
async def history(id: str, caller: CallerDep, user: str):
    """AgentMemory.history: every version, oldest first, the current one last."""
    caller.may_reach(user)
    memory = caller.state.require()
    await caller.check_ids([id], user, "history")
    return answer({"memories": to_json(await caller.state.call(memory.history, id, user=user))})


@router.get("/{id:path}/derived", responses=documented(MemoriesAnswer))
async def derived(id: str, caller: CallerDep, user: str):
    """The reflections, summaries and plans that link to memory ``id`` (what deleting it also deletes, first level)."""
    caller.may_reach(user)
    memory = caller.state.require()
    await caller.check_ids([id], user, "derived")
    kinds = caller.narrowed({"kind": list(DERIVED_KINDS)})
    found = await caller.state.call(memory.list_memories, user=user, limit=None, filters=kinds)
    return answer({"memories": to_json([m for m in found if id in m.links])})


@router.get("/{id:path}", responses=documented(MemoryAnswer))
async def get(id: str, caller: CallerDep, user: str):
    """AgentMemory.get: one memory (an older version too, by its own id); 404 if ``user`` has none."""
    caller.may_reach(user)
    found = await caller.state.call(caller.state.require().get, id, user=user)
    if found is None:
        raise ServerError("not_found", f"id={id!r}: user {user!r} has no memory with this id", "id")
    authorize_memory(caller.principal, found, "get")
    return answer({"memory": to_json(found)})


@router.patch("/{id:path}", responses=documented(MemoryAnswer))
async def update(id: str, body: UpdateBody, caller: CallerDep):
    """AgentMemory.update: a new version (text and/or metadata); the old one stays in the history."""
    caller.may_reach(body.user)
    memory = caller.state.require()
    arguments = body.arguments()
    user = arguments.pop("user")
    await caller.check_ids([id], user, "update")
    return answer({"memory": to_json(await caller.state.call(memory.update, id, user=user, **arguments))})


@router.delete("/{id:path}", responses=documented(Deleted))
async def delete(id: str, caller: CallerDep, user: str):
    """AgentMemory.delete: the memory, its older versions and what was derived from it; ``deleted``: whether anything held it."""
    caller.may_reach(user)
    memory = caller.state.require()
    await caller.check_ids([id], user, "delete")
    return {"deleted": await caller.state.call(memory.delete, id, user=user)}
