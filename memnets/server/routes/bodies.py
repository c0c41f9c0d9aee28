"""Request bodies: the fields a route reads by name, every other field passed through as an API argument."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from memnets.server.wire import arguments_from_json


class ArgumentsBody(BaseModel):
    """A JSON object whose fields are an API call's keyword arguments (extra fields pass through)."""

    model_config = ConfigDict(extra="allow")

    def arguments(self) -> dict[str, Any]:
        """The fields the client sent, as the API call's keyword arguments (times parsed)."""
        return arguments_from_json(self.model_dump(exclude_unset=True))
