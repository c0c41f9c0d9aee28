"""Request bodies (the fields a route reads by name, every other field passed through as an API argument)
and the answers of the routes that return memories."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from memnets.server.wire import arguments_from_json


class ArgumentsBody(BaseModel):
    """A JSON object whose fields are an API call's keyword arguments (extra fields pass through)."""

    model_config = ConfigDict(extra="allow")

    def arguments(self) -> dict[str, Any]:
        """The fields the client sent, as the API call's keyword arguments (times parsed)."""
        return arguments_from_json(self.model_dump(exclude_unset=True))


def answer(content: dict[str, Any]) -> JSONResponse:
    """The JSON answer of a route whose ``content`` :func:`~memnets.server.wire.to_json` made JSON-ready:
    a response, so that FastAPI does not walk it again (its ``jsonable_encoder`` took ~240 us for a search
    of 5 hits, more than to_json itself). The same bytes as returning ``content``."""
    return JSONResponse(content)
