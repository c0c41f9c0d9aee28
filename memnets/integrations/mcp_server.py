"""An MCP server on a memnets memory, built on the official ``mcp`` SDK (1.x, ``FastMCP``).

``memnets serve mcp --memory DIR_OR_URI`` runs it over stdio (for hosts that start the server as a
subprocess) or streamable HTTP. Its tools map one to one onto :class:`memnets.api.AgentMemory`:

==================== =====================================================
tool                 AgentMemory call
==================== =====================================================
add_memory           ``add(text, user=user_id, metadata=metadata, ttl=ttl_seconds)``
search_memory        ``search(query, user=user_id, k=k)``
list_memories        ``list_memories(user=user_id, limit=limit, offset=offset)``
get_memory           ``get(memory_id, user=user_id)``
update_memory        ``update(memory_id, text, user=user_id, metadata=metadata)``
delete_memory        ``delete(memory_id, user=user_id)``
delete_all_memories  ``delete_all(user=user_id)``
==================== =====================================================

With ``user`` set, the server serves that user only: a call naming another ``user_id`` fails with
a tool error and touches nothing. Over HTTP, a ``token`` makes every request carry
``Authorization: Bearer <token>`` (anything else gets 401 before the MCP layer sees it); a host
other than a loopback address is refused without one, since the tools read and delete every
user's memories. Memory calls run in a worker thread, so a slow encode does not
stall the server's event loop. Results are JSON objects (MCP structured content): a memory is
``{"id", "content", "t", "kind", "importance", "metadata", "expires_at"}`` (``expires_at``: ISO time
or null), plus ``"score"`` in search results.
"""

from __future__ import annotations

import hmac
import logging
from functools import partial
from typing import Any, Literal

import anyio
from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from starlette.responses import JSONResponse

from memnets.netutil import is_loopback

logger = logging.getLogger(__name__)

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
        "kind": memory.kind,
        "importance": float(memory.importance),
        "metadata": dict(memory.metadata or {}),
        "expires_at": memory.expires_at.isoformat() if memory.expires_at is not None else None,
    }
    if score is not None:
        out["score"] = float(score)
    return out


def build_server(
    memory, *, user: str | None = None, name: str = "memnets", host: str = "127.0.0.1", port: int = 8000
) -> FastMCP:
    """A FastMCP server with the memory tools on ``memory`` (an AgentMemory; the caller closes it).

    Args:
        memory: what ``memnets.open`` returned.
        user: serve this user only (others are refused), or None to serve every user.
        name: the server name shown to MCP hosts.
        host, port: where the streamable-HTTP transport listens (stdio ignores them).
    """
    if user is not None and (not isinstance(user, str) or not user):
        raise ValueError(f"build_server: user must be a non-empty string or None, got {user!r}")
    server = FastMCP(name, instructions=INSTRUCTIONS, host=host, port=port)

    def scoped(user_id: str) -> str:
        if not isinstance(user_id, str) or not user_id:
            raise ToolError("user_id must be a non-empty string")
        if user is not None and user_id != user:
            raise ToolError(f"this server serves user {user!r} only; user_id {user_id!r} is refused")
        return user_id

    async def call(function, *args, **kwargs):
        return await anyio.to_thread.run_sync(partial(function, *args, **kwargs))

    @server.tool()
    async def add_memory(
        text: str, user_id: str, metadata: dict[str, Any] | None = None, ttl_seconds: float | None = None
    ) -> dict[str, Any]:
        """Store a new memory (a fact, preference or event) for the user; returns it with its id.

        ttl_seconds: forget it that many seconds from now (omit to keep it until deleted).
        """
        added = await call(memory.add, text, user=scoped(user_id), metadata=metadata, ttl=ttl_seconds)
        return memory_json(added)

    @server.tool()
    async def search_memory(query: str, user_id: str, k: int = 5) -> dict[str, Any]:
        """The user's k memories that best answer the query, best first, each with its score."""
        hits = await call(memory.search, query, user=scoped(user_id), k=k)
        return {"results": [memory_json(hit.memory, hit.score) for hit in hits]}

    @server.tool()
    async def list_memories(user_id: str, limit: int = 100, offset: int = 0) -> dict[str, Any]:
        """The user's memories, oldest first, one page (limit, offset)."""
        listed = await call(memory.list_memories, user=scoped(user_id), limit=limit, offset=offset)
        return {"memories": [memory_json(m) for m in listed]}

    @server.tool()
    async def get_memory(memory_id: str, user_id: str) -> dict[str, Any]:
        """One memory of the user by id."""
        found = await call(memory.get, memory_id, user=scoped(user_id))
        if found is None:
            raise ToolError(f"user {user_id!r} has no memory {memory_id!r}")
        return memory_json(found)

    @server.tool()
    async def update_memory(
        memory_id: str, text: str, user_id: str, metadata: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Replace the text (and metadata, if given) of one memory; the old version is kept in its history."""
        updated = await call(memory.update, memory_id, text, user=scoped(user_id), metadata=metadata)
        return memory_json(updated)

    @server.tool()
    async def delete_memory(memory_id: str, user_id: str) -> dict[str, Any]:
        """Delete one memory of the user (and its older versions) for good."""
        return {"deleted": bool(await call(memory.delete, memory_id, user=scoped(user_id)))}

    @server.tool()
    async def delete_all_memories(user_id: str) -> dict[str, Any]:
        """Delete every memory of the user for good; returns how many were deleted."""
        return {"deleted": int(await call(memory.delete_all, user=scoped(user_id)))}

    return server


class BearerTokenGate:
    """ASGI middleware: an HTTP request passes only with ``Authorization: Bearer <token>``
    (compared in constant time); any other gets 401 with ``WWW-Authenticate: Bearer``. Lifespan
    events pass through, so the MCP session manager starts and stops as without it."""

    def __init__(self, app, token: str) -> None:
        if not isinstance(token, str) or not token.strip():
            raise ValueError("BearerTokenGate: token must be a non-empty string")
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                refusal = JSONResponse(
                    {"error": "unauthorized: send Authorization: Bearer <token>"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


def check_exposure(transport: str, host: str, token: str | None) -> None:
    """Raise ValueError, saying why, for a transport that is not stdio or http, a token without
    http, or http on a host other machines can reach without a token."""
    if transport not in ("stdio", "http"):
        raise ValueError(f"transport must be 'stdio' or 'http', got {transport!r}")
    if transport == "stdio" and token is not None:
        raise ValueError("a token applies to the http transport only (stdio has no network listener)")
    if transport == "http" and token is None and not is_loopback(host):
        raise ValueError(
            f"host {host!r} is reachable from other machines and the tools read and delete every user's "
            "memories: give a bearer token (memnets serve mcp --token-env VAR) or listen on 127.0.0.1"
        )


def serve(
    memory,
    *,
    user: str | None = None,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
) -> None:
    """Run the MCP server on ``memory`` until the client disconnects (stdio) or the process is stopped (http).

    ``token`` (http only): the bearer token every request must carry; required unless ``host`` is
    a loopback address.
    """
    check_exposure(transport, host, token)
    server = build_server(memory, user=user, host=host, port=port)
    logger.info(
        "memnets MCP server over %s%s%s",
        transport,
        f" on http://{host}:{port}/mcp" if transport == "http" else "",
        " (bearer token required)" if token is not None else "",
    )
    if transport == "stdio":
        server.run("stdio")
        return
    import uvicorn  # what FastMCP.run("streamable-http") does, with the token gate in front of the app

    app = server.streamable_http_app()
    config = uvicorn.Config(
        app if token is None else BearerTokenGate(app, token),
        host=host,
        port=port,
        log_level=server.settings.log_level.lower(),
    )
    anyio.run(uvicorn.Server(config).serve)
