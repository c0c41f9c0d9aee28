"""The offline API docs page (``/docs``: no CDN) and the inspector's static files (``/ui``)."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, FastAPI
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

router = APIRouter()
DOCS_PAGE = resources.files("memnets.server").joinpath("ui", "docs.html").read_text(encoding="utf-8")  # read once


@router.get("/docs", include_in_schema=False)
async def docs():
    return HTMLResponse(DOCS_PAGE)


def mount_inspector(app: FastAPI) -> None:
    """Serve the inspector (plain HTML and JavaScript under memnets/server/ui) at ``/ui``."""
    app.mount("/ui", StaticFiles(packages=[("memnets.server", "ui")], html=True), name="ui")
