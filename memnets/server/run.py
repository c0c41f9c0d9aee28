"""Run the REST server with uvicorn: one process, or ``workers`` processes on one port.

:class:`ServerConfig` is everything a worker needs to open the memory and build the app. With one
worker the app runs in this process; with more, uvicorn starts them and each calls
:func:`app_from_environment`, which reads the config from ``MEMNETS_SERVER_CONFIG`` (JSON; secrets
such as tokens and the encryption key are not in it: each worker reads them from the environment
variables their names point to).

Many workers, one memory:

- PostgreSQL: every worker holds its own connection pool; the database is the one shared state,
  so any number of workers (on any number of machines) serve the same memory.
- The embedded store (SQLite + FAISS): every worker opens the same folder; SQLite serialises the
  writes, and each worker's FAISS index replays the archive's change log before every search, so
  every worker sees every write and delete of the others (tests/server/test_server_workers.py). What is
  per worker: a near-duplicate check and its write are one step within a worker, not across
  workers (two workers adding the same text at the same instant may store it twice), and each
  worker's managers (the /v1/users/{user}/manager tiers) are its own.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

from memnets.extras import needs_extra
from memnets.httpguard import HTTPGuard, allowed_origins, check_bind
from memnets.server.auth import Tokens
from memnets.server.protocol import ConnectionLimits, GuardedH11Protocol, use_limits
from memnets.server.wire import guard_error_body

logger = logging.getLogger(__name__)

CONFIG_ENV = "MEMNETS_SERVER_CONFIG"
ACCESS_LOGS = ("route", "full", "off")
# uvicorn's event loops; auto: uvloop (of the server extra) when installed. uvloop took ~10 % less of the
# event loop's CPU per request than asyncio's loop under 50 clients (docs/history.md, "uvloop and httptools").
LOOPS = ("auto", "asyncio", "uvloop")
# OpenMP's wait policy for a server process (unless OMP_WAIT_POLICY is set). torch's and FAISS's
# OpenMP threads spin after every parallel region by default; a server's event loop, worker threads and
# the clients share their cores, so the spinning burns the CPU the others need. 50 clients on 2 shared
# cores (load 6-7): server CPU 30.6 -> 10.7 ms per request, 14.8 -> 69.5 requests/s (docs/benchmarks.md).
OPENMP_WAIT_POLICY = "PASSIVE"
# With --workers N every worker runs its own encoder: on the cores it shares with N - 1 others, one
# encoder on all of them would make N x cores OpenMP threads wait at each other's barriers. So each worker
# gets cores // N threads (OMP_NUM_THREADS, unless set): 2 cores, 2 workers of one thread each is the
# layout the encoder is fastest in alone (docs/history.md, "Workers and traced passes").
THREADS_ENV = "OMP_NUM_THREADS"


@dataclass
class ServerConfig:
    """How to open the memory and serve it (JSON-serialisable, so workers can rebuild it)."""

    location: str
    pack: str | None = None
    encoder: str | None = None
    options: dict = field(default_factory=dict)  # memnets.open's other keyword arguments
    key_env: str | None = None
    token_env: str | None = None
    tokens_file: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 1
    batching: bool = True
    max_wait_s: float = 0.005
    max_body: int = 4 * 1024 * 1024
    cors_origins: list[str] = field(default_factory=list)
    allowed_hosts: list[str] = field(default_factory=list)  # names clients reach the server by besides --host
    header_timeout_s: float = 10.0  # a request head not in by then: the connection is closed
    body_timeout_s: float = 30.0  # a body not in this long after its head: closed
    max_connections: int | None = None  # None: half the file-descriptor limit (memnets.server.protocol)
    access_log: str = "route"  # "route" (method, route template, status), "full" (uvicorn's, with query strings), "off"
    loop: str = "auto"  # the event loop: "asyncio", "uvloop", or auto (uvloop when installed)

    def event_loop(self) -> str:
        """uvicorn's ``loop`` for this config, ``"auto"`` resolved; ImportError naming the server extra
        for ``"uvloop"`` when it is not installed."""
        if self.loop not in LOOPS:
            raise ValueError(f"--loop must be one of {', '.join(LOOPS)}, got {self.loop!r}")
        if self.loop == "auto":
            return "uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio"
        if self.loop == "uvloop":
            with needs_extra("the server's --loop uvloop", "server"):
                import uvloop  # noqa: F401
        return self.loop

    def limits(self) -> ConnectionLimits:
        """The read deadlines and connection limit of every connection (:mod:`memnets.server.protocol`)."""
        return ConnectionLimits(
            header_timeout_s=self.header_timeout_s,
            body_timeout_s=self.body_timeout_s,
            max_connections=self.max_connections,
            full_access_log=self.access_log == "full",
        )

    def tokens(self) -> Tokens:
        admin = os.environ.get(self.token_env) if self.token_env else None
        if self.token_env and not (admin and admin.strip()):
            raise ValueError(f"--token-env: the environment variable {self.token_env} is not set")
        return Tokens.load(admin, self.tokens_file)

    def key(self) -> str | None:
        if self.key_env is None:
            return None
        key = os.environ.get(self.key_env)
        if not key:
            raise ValueError(f"--key-env: the environment variable {self.key_env} is not set")
        return key

    def open_memory(self, wrap: Callable | None = None):
        """Open the memory; ``wrap`` (the server's: a BatchingEncoder around it) turns the encoder of
        the pack, of ``--encoder`` or the default one into the encoder the memory is opened with."""
        import memnets
        from memnets.nn.loading import load_encoder

        wrap = wrap or (lambda encoder: encoder)
        options = dict(self.options)
        backend = options.pop("backend", None)  # None: torch where installed, else ONNX Runtime (memnets.nn.loading)
        if self.pack is not None:
            from memnets.memory.opening import pack_from

            pack = pack_from(self.pack, backend)
            pack = replace(pack, encoder=wrap(pack.encoder))
            return memnets.open(self.location, pack=pack, key=self.key(), **options)
        encoder = load_encoder(self.encoder, backend)
        return memnets.open(self.location, encoder=wrap(encoder), key=self.key(), **options)


def build_app(config: ServerConfig):
    """The app of ``config`` behind the HTTP door guard (:class:`memnets.httpguard.HTTPGuard`: Host and
    Origin for the real bind host, the CORS origins passing the Origin check, the body limit, contained
    failures); the memory opens in the background once the app starts. The guard checks no token: the
    app resolves each token to its scope."""
    from memnets.server.app import create_app

    origins = allowed_origins(config.cors_origins)  # as browsers write them: the guard and CORS compare alike
    app = create_app(
        config.open_memory,
        tokens=config.tokens(),
        batching=config.batching,
        max_wait_s=config.max_wait_s,
        cors_origins=origins or None,
        pack=config.pack,
        access_log=config.access_log == "route",
    )
    return HTTPGuard(
        app,
        host=config.host,
        allowed_hosts=config.allowed_hosts,
        cors_origins=origins,
        max_body_bytes=config.max_body,
        error_body=guard_error_body,
    )


def app_from_environment():
    """The app of the config in ``MEMNETS_SERVER_CONFIG`` (uvicorn's factory in each worker)."""
    raw = os.environ.get(CONFIG_ENV)
    if not raw:
        raise RuntimeError(f"{CONFIG_ENV} is not set: start workers with memnets.server.run.serve")
    config = ServerConfig(**json.loads(raw))
    use_limits(config.limits())
    return build_app(config)


def check(config: ServerConfig) -> None:
    """ValueError, saying why, for a config that cannot serve: a bad port or worker count, an exposed
    host without tokens, a CORS origin that is not one, a token variable or tokens file that cannot be
    read, a memory that does not open."""
    if not 0 < config.port < 65536:
        raise ValueError(f"--port must be in 1..65535, got {config.port}")
    if config.workers < 1:
        raise ValueError(f"--workers must be at least 1, got {config.workers}")
    if config.access_log not in ACCESS_LOGS:
        raise ValueError(f"--access-log must be one of {', '.join(ACCESS_LOGS)}, got {config.access_log!r}")
    try:
        config.event_loop()
    except ImportError as error:  # --loop uvloop without it installed
        raise ValueError(str(error)) from None
    config.limits()  # a timeout or connection limit out of range: its name and range
    allowed_origins(config.cors_origins)  # '*' or not an origin: named
    check_bind(config.host, "configured" if config.tokens().required else None)
    config.key()


def passive_openmp() -> None:
    """OpenMP threads that sleep when they have no work instead of spinning (``OMP_WAIT_POLICY``, unless
    set), for the OpenMP runtimes loaded after this call (torch's, FAISS's; uvicorn's workers inherit it):
    see :data:`OPENMP_WAIT_POLICY`. A runtime reads the variable once, when it loads."""
    if "OMP_WAIT_POLICY" in os.environ:
        return
    os.environ["OMP_WAIT_POLICY"] = OPENMP_WAIT_POLICY
    if "torch" in sys.modules or "faiss" in sys.modules:
        logger.warning(
            "memnets server: torch or faiss was imported before serve(); OMP_WAIT_POLICY applies only if set before"
        )


def share_cores(workers: int) -> None:
    """With ``workers`` > 1, each worker's OpenMP runtimes (torch's, FAISS's; an ONNX Runtime session takes
    torch's count) on ``cores // workers`` threads, at least one (``OMP_NUM_THREADS``, unless set; the
    workers inherit it and read it when they load torch): see :data:`THREADS_ENV`."""
    if workers > 1 and THREADS_ENV not in os.environ:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        os.environ[THREADS_ENV] = str(max(1, cores // workers))


def serve(config: ServerConfig) -> None:
    """Serve ``config`` until stopped (SIGINT/SIGTERM shut down cleanly; SIGKILL loses no acknowledged write).
    OpenMP's threads sleep when idle (:func:`passive_openmp`) unless ``OMP_WAIT_POLICY`` is set, and
    workers share the cores (:func:`share_cores`)."""
    import uvicorn

    passive_openmp()
    share_cores(config.workers)
    check(config)
    options = {"http": GuardedH11Protocol, "loop": config.event_loop()}
    logger.info("memnets server: event loop %s", options["loop"])
    if config.workers == 1:
        use_limits(config.limits())
        uvicorn.run(build_app(config), host=config.host, port=config.port, log_level="info", **options)
        return
    with config.open_memory():  # create the store once, before the workers race to (and fail fast here)
        pass
    os.environ[CONFIG_ENV] = json.dumps(asdict(config))
    uvicorn.run(
        "memnets.server.run:app_from_environment",
        factory=True,
        host=config.host,
        port=config.port,
        workers=config.workers,
        log_level="info",
        **options,
    )
