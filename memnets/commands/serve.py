"""`memnets serve mcp` (MCP hosts: Claude Desktop, IDEs, agent runtimes) and `memnets serve http` (REST).

``mcp`` parses its arguments, opens the memory and hands it to :mod:`memnets.integrations.mcp_server`;
over stdio, stdout carries the protocol: this command prints nothing there, and logs go to stderr.
``http`` parses its arguments into a :class:`memnets.server.run.ServerConfig` and serves it
(docs/server.md).
"""

from __future__ import annotations

import argparse
import os
import sys

from memnets.console import CommandParser, add_output_options, parse_args


def mcp_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="memnets serve mcp",
        description="Run an MCP server (official mcp SDK, 1.x) with memory tools on a memnets memory: "
        "add_memory, search_memory, list_memories, get_memory, update_memory, delete_memory, delete_all_memories.",
    )
    parser.add_argument(
        "location",
        nargs="?",
        metavar="LOCATION",
        help="the memory: a folder (created if missing) or a postgresql:// URL, as for serve http and memories",
    )
    parser.add_argument("--memory", default=None, metavar="LOCATION", help="deprecated spelling of LOCATION")
    parser.add_argument("--pack", default=None, help="a memory pack folder: its encoder and learned scorer")
    parser.add_argument(
        "--encoder",
        default=None,
        help="an encoder folder (Hugging Face format, e.g. written by MemoryEncoder.save_pretrained) "
        "used instead of the pack's or the default encoder",
    )
    parser.add_argument("--user", default=None, help="serve this user only; calls naming another user_id are refused")
    parser.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (the host starts this command) or streamable HTTP (default: stdio)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="HTTP address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="HTTP port (default: 8000); the endpoint is /mcp")
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="http only, repeatable: a further host name clients reach the server by (a reverse proxy's, "
        "the DNS name of a 0.0.0.0 bind); requests naming any other host in Host or Origin are refused "
        "(DNS rebinding). Loopback binds accept loopback addresses and localhost without it",
    )
    parser.add_argument(
        "--key-env",
        default=None,
        metavar="VAR",
        help="name of an environment variable holding the memory's encryption passphrase",
    )
    add_set_option(parser)
    parser.add_argument(
        "--token-env",
        default=None,
        metavar="VAR",
        help="http only: name of an environment variable holding a bearer token every request must carry "
        "(required when --host is not a loopback address)",
    )
    return add_output_options(parser)


def mcp_main(argv: list[str]) -> int:
    parser = mcp_parser()
    args = parse_args(parser, argv)
    if args.memory is not None:
        if args.location is not None:
            parser.error(f"give LOCATION once: {args.location!r} and --memory {args.memory!r}")
        print("memnets serve mcp: --memory DIR is deprecated, give LOCATION as the first argument", file=sys.stderr)
        args.location = args.memory
    if args.location is None:
        parser.error("LOCATION is required: a folder or a postgresql:// URL")
    if args.pack is not None and args.encoder is not None:
        parser.error("give --pack or --encoder, not both (a pack's scorer was fitted to its own encoder)")
    if args.user is not None and not args.user.strip():
        parser.error("--user must be a non-empty user id")
    if not 0 < args.port < 65536:
        parser.error(f"--port must be in 1..65535, got {args.port}")
    key = None
    if args.key_env is not None:
        key = os.environ.get(args.key_env)
        if not key:
            parser.error(f"--key-env: the environment variable {args.key_env} is not set")
    token = None
    if args.token_env is not None:
        token = os.environ.get(args.token_env)
        if not token or not token.strip():
            parser.error(f"--token-env: the environment variable {args.token_env} is not set")
    if args.allow_host and args.transport != "http":
        parser.error("--allow-host applies to the http transport only")
    options = _options(parser, args.set)
    from memnets.httpguard import host_names
    from memnets.integrations.mcp_server import check_exposure

    try:
        check_exposure(args.transport, args.host, token)
        if args.transport == "http":
            host_names(args.host, args.allow_host)
    except ValueError as error:
        parser.error(str(error))
    import memnets
    from memnets.integrations.mcp_server import serve
    from memnets.store.errors import ArchiveError

    try:
        memory = memnets.open(args.location, pack=args.pack, key=key, encoder=args.encoder, **options)
    except (OSError, ValueError, TypeError, ArchiveError) as error:  # a bad pack or encoder folder, a wrong key or dim
        print(f"memnets serve mcp: cannot open the memory: {error}", file=sys.stderr)
        return 1
    with memory:
        serve(
            memory,
            user=args.user,
            transport=args.transport,
            host=args.host,
            port=args.port,
            token=token,
            allowed_hosts=args.allow_host,
        )
    return 0


def http_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="memnets serve http",
        description="Serve a memnets memory over REST (FastAPI + uvicorn): the memory API under /v1, "
        "/healthz, /readyz, /metrics, /openapi.json, /docs and the inspector at /ui (see docs/server.md).",
    )
    parser.add_argument("location", help="the memory: a folder (created if missing) or a postgresql:// URL")
    parser.add_argument("--pack", default=None, help="a memory pack folder: its encoder, heads and learned scorer")
    parser.add_argument(
        "--encoder", default=None, help="an encoder folder (Hugging Face format) instead of the default"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    parser.add_argument("--workers", type=int, default=1, help="server processes on the port (default: 1)")
    parser.add_argument(
        "--token-env", default=None, metavar="VAR", help="environment variable holding the admin bearer token"
    )
    parser.add_argument(
        "--tokens",
        default=None,
        metavar="FILE",
        help='JSON file of scoped tokens: {"<token>": "<user>"} or {"<token>": {"user": ..., "agent": ...}}',
    )
    parser.add_argument(
        "--key-env", default=None, metavar="VAR", help="environment variable holding the encryption passphrase"
    )
    add_set_option(parser)
    parser.add_argument("--no-batching", action="store_true", help="encode each request alone (no batching window)")
    parser.add_argument(
        "--batch-wait-ms", type=float, default=5.0, help="how long a request waits for others to share its forward pass"
    )
    parser.add_argument("--max-body", type=int, default=4 * 1024 * 1024, help="largest request body in bytes")
    parser.add_argument(
        "--cors-origin", action="append", default=[], metavar="ORIGIN", help="allow this origin by CORS (default: none)"
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a name clients reach the server by besides --host (a reverse proxy's); others get 421",
    )
    parser.add_argument(
        "--header-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="close a connection whose request head is not in within this many seconds (default: 10; 0: never)",
    )
    parser.add_argument(
        "--body-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="close a connection whose request body is not in this long after its head (default: 30; 0: never)",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=None,
        metavar="N",
        help="open connections per process; one more closes the one waiting longest for its request "
        "(default: half the file-descriptor limit; 0: no limit)",
    )
    parser.add_argument(
        "--access-log",
        choices=("route", "full", "off"),
        default="route",
        help="route: method, route template and status, no query string or path values (default); "
        "full: uvicorn's lines with the whole path and query string (user names, ids, filter values); off",
    )
    parser.add_argument(
        "--loop",
        choices=("auto", "asyncio", "uvloop"),
        default="auto",
        help="the event loop: auto (uvloop when installed, else asyncio; default)",
    )
    return add_output_options(parser)


def add_set_option(parser: argparse.ArgumentParser) -> None:
    """``--set NAME=VALUE``, read by :func:`_options`: what both servers pass on to ``memnets.open``."""
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a keyword argument of memnets.open (a ManagerConfig field or a store option), VALUE as JSON "
        "or else a string; repeatable, e.g. --set search=dense --set duplicate_threshold=0.95",
    )


def _options(parser: argparse.ArgumentParser, pairs: list[str]) -> dict:
    import json

    options = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.isidentifier():
            parser.error(f"--set takes NAME=VALUE with NAME a keyword argument of memnets.open, got {pair!r}")
        try:
            options[name] = json.loads(value)
        except ValueError:
            options[name] = value
    return options


def http_main(argv: list[str]) -> int:
    parser = http_parser()
    args = parse_args(parser, argv)
    if args.pack is not None and args.encoder is not None:
        parser.error("give --pack or --encoder, not both (a pack's scorer was fitted to its own encoder)")
    if not 0 <= args.batch_wait_ms <= 1000:
        parser.error(f"--batch-wait-ms must be in 0..1000, got {args.batch_wait_ms}")
    if args.max_body < 1024:
        parser.error(f"--max-body must be at least 1024 bytes, got {args.max_body}")
    from memnets.server.run import ServerConfig, check, serve

    config = ServerConfig(
        location=args.location,
        pack=args.pack,
        encoder=args.encoder,
        options=_options(parser, args.set),
        key_env=args.key_env,
        token_env=args.token_env,
        tokens_file=args.tokens,
        host=args.host,
        port=args.port,
        workers=args.workers,
        batching=not args.no_batching,
        max_wait_s=args.batch_wait_ms / 1000,
        max_body=args.max_body,
        cors_origins=args.cors_origin,
        allowed_hosts=args.allowed_host,
        header_timeout_s=args.header_timeout,
        body_timeout_s=args.body_timeout,
        max_connections=args.max_connections,
        access_log=args.access_log,
        loop=args.loop,
    )
    try:
        check(config)
    except ValueError as error:
        parser.error(str(error))
    serve(config)
    return 0
