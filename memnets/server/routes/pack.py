"""``/v1/pack``: the pack's manifest as read when the memory was opened (never re-read from disk)."""

from __future__ import annotations

from fastapi import APIRouter

from memnets.server.caller import CallerDep
from memnets.server.wire import to_json

router = APIRouter(prefix="/v1/pack", tags=["pack"])


@router.get("")
async def pack_info(caller: CallerDep):
    """The pack's manifest (its evaluation metrics, thresholds, training data), or null without a pack."""
    state = caller.state
    memory = state.require()
    return {
        "pack": to_json(state.manifest),
        "ranker": "learned" if memory.scorer is not None else "cosine",
        "batching": state.batching,
    }
