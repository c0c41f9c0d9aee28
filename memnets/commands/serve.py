"""`memnets serve mcp`: serve a memory to MCP hosts (Claude Desktop, IDEs, agent runtimes).

Parses its arguments, opens the memory and hands it to :mod:`memnets.integrations.mcp_server`.
Over stdio, stdout carries the protocol: this command prints nothing there, and logs go to stderr.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys


def mcp_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memnets serve mcp",
        description="Run an MCP server (official mcp SDK, 1.x) with memory tools on a memnets memory: "
        "add_memory, search_memory, list_memories, get_memory, update_memory, delete_memory, delete_all_memories.",
    )
    parser.add_argument(
        "--memory", required=True, help="the memory: a folder (created if missing) or a postgresql:// URL"
    )
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
    parser.add_argument(
        "--token-env",
        default=None,
        metavar="VAR",
        help="http only: name of an environment variable holding a bearer token every request must carry "
        "(required when --host is not a loopback address)",
    )
    return parser


def mcp_main(argv: list[str]) -> int:
    parser = mcp_parser()
    args = parser.parse_args(argv)
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
    from memnets.httpguard import host_names
    from memnets.integrations.mcp_server import check_exposure

    try:
        check_exposure(args.transport, args.host, token)
        if args.transport == "http":
            host_names(args.host, args.allow_host)
    except ValueError as error:
        parser.error(str(error))
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")

    import memnets
    from memnets.integrations.mcp_server import serve
    from memnets.store.errors import ArchiveError

    try:
        memory = memnets.open(args.memory, pack=args.pack, key=key, encoder=args.encoder)
    except (OSError, ValueError, TypeError, ArchiveError) as error:  # a bad pack or encoder folder, a wrong key or dim
        print(f"memnets serve mcp: cannot open the memory: {error}", file=sys.stderr)
        return 2
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
