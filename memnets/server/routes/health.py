"""``/healthz`` (the process answers), ``/readyz`` (the memory is open and its store answers) and ``/metrics``."""

from __future__ import annotations

import anyio
from fastapi import APIRouter
from fastapi.responses import Response

from memnets.server.auth import AuthError
from memnets.server.caller import CallerDep, StateDep
from memnets.server.state import RETRY_AFTER_S, ServerError

READY_TIMEOUT_S = 5  # a store slower than this to answer is not ready

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz():
    """The process answers (it may still be loading: see /readyz)."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(state: StateDep):
    """Ready once the memory is open (encoder loaded) and the store answers a query now."""
    memory = state.require()
    try:
        with anyio.fail_after(READY_TIMEOUT_S):
            await state.call(memory.ping)
    except TimeoutError:
        raise ServerError(
            "unavailable",
            f"the store did not answer within {READY_TIMEOUT_S} s",
            headers={"Retry-After": str(RETRY_AFTER_S)},
        ) from None
    return {"status": "ready", "batching": state.batching}  # no token needed: nothing of where the store is


@router.get("/metrics")
async def metrics(caller: CallerDep):
    """Prometheus text format: requests, latencies, errors, gate decisions, encode batch sizes."""
    if not caller.principal.admin:
        raise AuthError(403, "forbidden: /metrics needs the admin token")
    return Response(caller.state.metrics.render(), media_type=caller.state.metrics.content_type)
