"""An MCP server on a memnets memory, built on the official ``mcp`` SDK (1.x, ``FastMCP``).

``memnets serve mcp LOCATION`` runs it over stdio (for hosts that start the server as a
subprocess) or streamable HTTP. Its tools map one to one onto :class:`memnets.api.AgentMemory`:

==================== =====================================================
tool                 AgentMemory call
==================== =====================================================
add_memory           ``add(text, user=user_id, metadata=metadata, kind=kind, ttl=ttl_seconds)`` (+ its ``outcome``)
add_messages         ``add_messages(messages, user=user_id, session=session_id, metadata=..., keep=..., roles=...)``
search_memory        ``search(query, user=user_id, k=k, filters=filters)``
list_memories        ``list_memories(user=user_id, limit=limit, offset=offset, filters=filters)``
get_memory           ``get(memory_id, user=user_id)``
memory_history       ``history(memory_id, user=user_id)``
update_memory        ``update(memory_id, text, user=user_id, metadata=metadata, merge_metadata=...)`` (text, metadata or both)
delete_memory        ``delete(memory_id, user=user_id)``
delete_all_memories  ``delete_all(user=user_id)``
==================== =====================================================

Every tool's arguments have a JSON schema (``filters`` with the operators of
:class:`memnets.store.MemoryFilter`, see :func:`filters_schema`); an argument a tool does not
take is a tool error, not silently dropped.

With ``user`` set, the server serves that user only: a call naming another ``user_id`` fails with
a tool error and touches nothing. Over HTTP, a ``token`` makes every request carry
``Authorization: Bearer <token>`` (anything else gets 401 before the MCP layer sees it); a host
other than a loopback address is refused without one, since the tools read and delete every
user's memories. Every HTTP request passes :class:`memnets.httpguard.HTTPGuard` first (Host and
Origin checked for the real bind host against DNS rebinding, the token, the body limit, contained
failures). Memory calls run in a worker thread, so a slow encode does not stall the server's event
loop, and any failure of one, a ``BaseException`` such as a tokenizer's Rust panic included, is a
tool error for that call: the session goes on. A request is at most 4 MiB over either transport
(over stdio see :mod:`memnets.integrations.mcp_stdio`); a longer one gets an error naming the
limit. Results are JSON objects (MCP structured content): a memory is ``{"id", "content", "t",
"created_at", "updated_at", "kind", "importance", "metadata", "expires_at", "valid_from",
"valid_to", "invalidated_by", "invalidation_score", "likely_replaced_by", "likely_replaced_score"}`` (as REST's;
``t`` is ``created_at``; ``expires_at`` and ``valid_to`` an ISO
time or null; ``search_memory``/``list_memories`` take ``as_of``/``known_at``), plus ``"score"`` in search results and
``"outcome"`` ("added", "updated" or "unchanged", as ``AgentMemory.add`` says) from add_memory and
update_memory. add_messages returns ``{"outcomes": [{"index", "role", "outcome", "reason", "memory"}]}``,
one per message in order (:class:`memnets.memory.messages.MessageOutcome`; ``memory`` null for a
skipped message): the REST route's outcomes, with the memory in this module's form.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from functools import partial
from typing import Annotated, Any, Literal

from memnets import __version__
from memnets.extras import needs_extra
from memnets.httpguard import HTTPGuard, check_bind, is_control_flow
from memnets.memory.fields import ARGUMENTS, ChatMessage, filters_schema
from memnets.records import MEMORY_KINDS

with needs_extra("memnets.integrations.mcp_server", "mcp"):
    import anyio
    from mcp.server.fastmcp import FastMCP
    from mcp.server.fastmcp.exceptions import ToolError
    from mcp.server.transport_security import TransportSecuritySettings
    from pydantic import ConfigDict, Field, TypeAdapter, WithJsonSchema

    from memnets.integrations.mcp_arguments import plain_errors

logger = logging.getLogger(__name__)

MAX_K = 100  # search results per call: a tool result goes into an LLM's context
MAX_LIMIT = 1000  # memories per list page

INSTRUCTIONS = (
    "Long-term memory for users: add_memory stores a fact or event for a user, search_memory finds "
    "the memories that best answer a query, list/get/update/delete manage them. Every call names the user_id."
)


def memory_json(memory, score: float | None = None) -> dict[str, Any]:
    """The JSON object a tool returns for one memory."""
    out = {
        "id": memory.id,
        "content": memory.content,
        "t": memory.t.isoformat(),
        "created_at": memory.created_at.isoformat(),
        "updated_at": memory.updated_at.isoformat(),
        "kind": memory.kind,
        "importance": float(memory.importance),
        "metadata": dict(memory.metadata or {}),
        "expires_at": memory.expires_at.isoformat() if memory.expires_at is not None else None,
        "valid_from": memory.valid_from.isoformat(),
        "valid_to": memory.valid_to.isoformat() if memory.valid_to is not None else None,
        "invalidated_by": memory.invalidated_by,
        "invalidation_score": memory.invalidation_score,
        "likely_replaced_by": memory.likely_replaced_by,
        "likely_replaced_score": memory.likely_replaced_score,
    }
    if score is not None:
        out["score"] = float(score)
    if memory.outcome is not None:
        out["outcome"] = memory.outcome
    return out


def outcome_json(outcome) -> dict[str, Any]:
    """The JSON object add_messages returns for one message's :class:`~memnets.memory.messages.MessageOutcome`."""
    memory = memory_json(outcome.memory) if outcome.memory is not None else None
    return {
        "index": outcome.index,
        "role": outcome.role,
        "outcome": outcome.outcome,
        "reason": outcome.reason,
        "memory": memory,
    }


def message_schema() -> dict[str, Any]:
    """The JSON schema of one message of add_messages: :class:`memnets.memory.fields.ChatMessage`'s."""
    return TypeAdapter(ChatMessage).json_schema()


def described(name: str) -> Any:
    """``Field`` with the description of API argument ``name`` (:data:`memnets.memory.fields.ARGUMENTS`)."""
    return Field(description=ARGUMENTS[name].description)


UserId = Annotated[str, Field(min_length=1, description="the user whose memories to read or change")]
MemoryId = Annotated[str, Field(min_length=1, description="the memory's id")]
Metadata = Annotated[dict[str, Any] | None, described("metadata")]
AsOf = Annotated[datetime | None, described("as_of")]
KnownAt = Annotated[datetime | None, described("known_at")]
Messages = Annotated[
    list[dict[str, Any]],
    WithJsonSchema({"type": "array", "items": message_schema()}),
    Field(description="the conversation, oldest first: [{role, content, name?, time?, id?}, ...]"),
]
Filters = Annotated[
    dict[str, Any] | None,
    WithJsonSchema({"anyOf": [filters_schema(), {"type": "null"}], "default": None}),
    described("filters"),
]


def build_server(
    memory,
    *,
    user: str | None = None,
    name: str = "memnets",
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "WARNING",
) -> FastMCP:
    """A FastMCP server with the memory tools on ``memory`` (an AgentMemory; the caller closes it).

    Every tool's arguments have a full JSON schema and unknown arguments are refused (a tool error
    naming them), so a client's typo is never silently ignored.

    Args:
        memory: what ``memnets.open`` returned.
        user: serve this user only (others are refused), or None to serve every user.
        name: the server name shown to MCP hosts.
        host, port: where the streamable-HTTP transport listens (stdio ignores them).
        log_level: the level of the SDK's own logging and of uvicorn's (default WARNING: no line per call).
    """
    if user is not None and (not isinstance(user, str) or not user):
        raise ValueError(f"build_server: user must be a non-empty string or None, got {user!r}")
    # The SDK checks Host/Origin only when host is one of three exact strings; HTTPGuard (serve)
    # checks them for every host, so the SDK's check is off rather than a second, narrower one.
    server = FastMCP(
        name,
        instructions=INSTRUCTIONS,
        host=host,
        port=port,
        log_level=log_level,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    server._mcp_server.version = __version__  # serverInfo.version: memnets', not the SDK's (FastMCP takes none)

    def scoped(user_id: str) -> str:
        if user is not None and user_id != user:
            raise ToolError(f"this server serves user {user!r} only; user_id {user_id!r} is refused")
        return user_id

    async def call(function, *args, **kwargs):
        try:
            return await anyio.to_thread.run_sync(partial(function, *args, **kwargs))
        except Exception:
            raise  # FastMCP turns it into a tool error for this call
        except BaseException as error:  # e.g. pyo3's PanicException: it would take the session down
            if is_control_flow(error):
                raise
            logger.error("%s failed", function.__name__, exc_info=error)
            raise ToolError(f"{function.__name__} failed: {type(error).__name__}: {error}") from None

    def tool(function):
        """Register ``function`` as a tool whose arguments model refuses unknown arguments and answers a bad
        argument in one line (:mod:`memnets.integrations.mcp_arguments`)."""
        registered = server._tool_manager.add_tool(function)  # FastMCP.add_tool returns no Tool to adjust
        model = registered.fn_metadata.arg_model
        strict = type(model.__name__, (model,), {"model_config": ConfigDict(**model.model_config, extra="forbid")})
        registered.fn_metadata.arg_model = plain_errors(strict)  # one line naming the argument, not pydantic's dump
        registered.parameters = strict.model_json_schema(by_alias=True)
        return function

    @tool
    async def add_memory(
        text: Annotated[str, Field(min_length=1, description="the fact, preference or event to remember")],
        user_id: UserId,
        metadata: Metadata = None,
        kind: Annotated[Literal[MEMORY_KINDS], described("kind")] = "observation",
        ttl_seconds: Annotated[
            float | None,
            Field(gt=0, description="forget it that many seconds from now (omit to keep it until deleted)"),
        ] = None,
    ) -> dict[str, Any]:
        """Store a memory (a fact, preference or event) for the user; returns it with its id and outcome:
        "added" (new), "updated" (it changed a fact of an existing memory, whose old text is kept in
        its history) or "unchanged" (the user's memories said this already)."""
        added = await call(memory.add, text, user=scoped(user_id), metadata=metadata, kind=kind, ttl=ttl_seconds)
        return memory_json(added)

    @tool
    async def add_messages(
        messages: Messages,
        user_id: UserId,
        session_id: Annotated[str | None, Field(min_length=1, description="the conversation's session")] = None,
        metadata: Metadata = None,
        keep: Annotated[Literal["all", "important"], described("keep")] = "all",
        roles: Annotated[list[str] | None, described("roles")] = None,
    ) -> dict[str, Any]:
        """Store a conversation for the user: one memory per user message ("{speaker}: {text}"; ``roles`` for more),
        each with its outcome ("added", "updated", "unchanged", or "skipped" with the reason)."""
        outcomes = await call(
            memory.add_messages,
            messages,
            user=scoped(user_id),
            session=session_id,
            metadata=metadata,
            keep=keep,
            roles=roles,
        )
        return {"outcomes": [outcome_json(o) for o in outcomes]}

    @tool
    async def search_memory(
        query: Annotated[str, Field(min_length=1), described("query")],
        user_id: UserId,
        k: Annotated[int, Field(ge=1, le=MAX_K), described("k")] = 5,
        filters: Filters = None,
        as_of: AsOf = None,
        known_at: KnownAt = None,
    ) -> dict[str, Any]:
        """The user's k memories that best answer the query, best first, each with its score,
        among those passing the filters."""
        hits = await call(
            memory.search, query, user=scoped(user_id), k=k, filters=filters, as_of=as_of, known_at=known_at
        )
        return {"results": [memory_json(hit.memory, hit.score) for hit in hits]}

    @tool
    async def list_memories(
        user_id: UserId,
        limit: Annotated[int, Field(ge=0, le=MAX_LIMIT, description="how many memories, at most")] = 100,
        offset: Annotated[int, Field(ge=0, description="how many to skip first")] = 0,
        filters: Filters = None,
        as_of: AsOf = None,
        known_at: KnownAt = None,
    ) -> dict[str, Any]:
        """The user's current memories passing the filters, oldest first, one page (limit, offset)."""
        listed = await call(
            memory.list_memories,
            user=scoped(user_id),
            limit=limit,
            offset=offset,
            filters=filters,
            as_of=as_of,
            known_at=known_at,
        )
        return {"memories": [memory_json(m) for m in listed]}

    @tool
    async def get_memory(memory_id: MemoryId, user_id: UserId) -> dict[str, Any]:
        """One memory of the user by id."""
        found = await call(memory.get, memory_id, user=scoped(user_id))
        if found is None:
            raise ToolError(f"user {user_id!r} has no memory {memory_id!r}")
        return memory_json(found)

    @tool
    async def memory_history(memory_id: MemoryId, user_id: UserId) -> dict[str, Any]:
        """Every version of one memory: the older ones oldest first, then the current one."""
        versions = await call(memory.history, memory_id, user=scoped(user_id))
        if not versions:
            raise ToolError(f"user {user_id!r} has no memory {memory_id!r}")
        return {"versions": [memory_json(m) for m in versions]}

    @tool
    async def update_memory(
        memory_id: MemoryId,
        user_id: UserId,
        text: Annotated[str | None, Field(min_length=1, description="the new text (omit to keep it)")] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="the new metadata (omit to keep it)")] = None,
        merge_metadata: Annotated[bool, described("merge_metadata")] = False,
    ) -> dict[str, Any]:
        """Change the text and/or the metadata of one memory (at least one of them); the old version
        is kept in its history. Returns the new version with its outcome ("updated", or "unchanged")."""
        updated = await call(
            memory.update, memory_id, text, user=scoped(user_id), metadata=metadata, merge_metadata=merge_metadata
        )
        return memory_json(updated)

    @tool
    async def delete_memory(memory_id: MemoryId, user_id: UserId) -> dict[str, Any]:
        """Delete one memory of the user (and its older versions) for good."""
        return {"deleted": bool(await call(memory.delete, memory_id, user=scoped(user_id)))}

    @tool
    async def delete_all_memories(user_id: UserId) -> dict[str, Any]:
        """Delete every memory of the user for good; returns how many were deleted."""
        return {"deleted": int(await call(memory.delete_all, user=scoped(user_id)))}

    return server


def check_exposure(transport: str, host: str, token: str | None) -> None:
    """Raise ValueError, saying why, for a transport that is not stdio or http, a token without
    http, or http on a host other machines can reach without a token."""
    if transport not in ("stdio", "http"):
        raise ValueError(f"transport must be 'stdio' or 'http', got {transport!r}")
    if transport == "stdio" and token is not None:
        raise ValueError("a token applies to the http transport only (stdio has no network listener)")
    if transport == "http":
        check_bind(host, token)


def serve(
    memory,
    *,
    user: str | None = None,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    allowed_hosts: Iterable[str] = (),
) -> None:
    """Run the MCP server on ``memory`` until the client disconnects (stdio) or the process is stopped (http).

    ``token`` (http only): the bearer token every request must carry; required unless ``host`` is
    a loopback address. ``allowed_hosts`` (http only): further names clients reach the server by
    (a reverse proxy's, a wildcard bind's DNS name), accepted in ``Host`` and ``Origin``.
    """
    check_exposure(transport, host, token)
    # the SDK and uvicorn log at the level the command set (memnets.console: WARNING unless -vv)
    level = logging.getLevelName(max(logging.DEBUG, min(logging.getLogger().getEffectiveLevel(), logging.CRITICAL)))
    server = build_server(memory, user=user, host=host, port=port, log_level=level)
    logger.info(
        "memnets MCP server over %s%s%s",
        transport,
        f" on http://{host}:{port}/mcp" if transport == "http" else "",
        " (bearer token required)" if token is not None else "",
    )
    if transport == "stdio":
        from memnets.integrations.mcp_stdio import run_stdio  # the SDK's stdio transport with a message limit

        anyio.run(run_stdio, server)
        return
    import uvicorn  # what FastMCP.run("streamable-http") does, with the guard in front of the app

    app = HTTPGuard(server.streamable_http_app(), host=host, token=token, allowed_hosts=allowed_hosts)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=server.settings.log_level.lower(),
    )
    anyio.run(uvicorn.Server(config).serve)
