"""MCP tool arguments that fail their schema, answered in one line that names the argument.

The SDK validates a tool's arguments with pydantic and returns the ValidationError as it prints:
several lines per argument, the model's internal name (``search_memoryArguments``) and a link to
pydantic's docs, which an agent's LLM reads as noise. :func:`in_one_line` says the same thing as
``argument k: must be at least 1, got 0``; :func:`plain_errors` gives an arguments model that raises
it instead of the ValidationError.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

MAX_SHOWN = 60  # characters of a refused value repeated in the answer


def shown(value: Any) -> str:
    """A refused value as the answer repeats it: its repr, cut to MAX_SHOWN characters."""
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


def what_is_wrong(error: dict[str, Any], takes: list[str]) -> str:
    """One pydantic error (an item of ``ValidationError.errors()``) as "argument NAME: what is wrong"."""
    name = ".".join(str(part) for part in error["loc"]) or "arguments"
    kind, context = error["type"], error.get("ctx") or {}
    if kind == "missing":
        return f"argument {name} is required"
    if kind == "extra_forbidden":
        return f"unknown argument {name} (this tool takes {', '.join(takes)})"
    if kind == "string_too_short" and context.get("min_length") == 1:
        return f"argument {name}: must be non-empty text"
    bounds = {"greater_than_equal": "at least", "less_than_equal": "at most", "greater_than": "greater than"}
    if kind in bounds:
        bound = next(iter(context.values()), "")
        return f"argument {name}: must be {bounds[kind]} {bound}, got {shown(error['input'])}"
    message = error["msg"].replace("Input should be", "must be").replace("Value error, ", "")
    return f"argument {name}: {message[0].lower()}{message[1:]}, got {shown(error['input'])}"


def in_one_line(error: ValidationError, takes: list[str]) -> str:
    """Every error of ``error`` in one line, "; " between them."""
    return "; ".join(what_is_wrong(item, takes) for item in error.errors(include_url=False))


def plain_errors(model: type[BaseModel]) -> type[BaseModel]:
    """``model`` (a tool's arguments model) whose ``model_validate`` raises a ValueError of one line (the SDK
    answers it as the tool's error) instead of pydantic's ValidationError."""
    takes = list(model.model_fields)

    class Arguments(model):
        @classmethod
        def model_validate(cls, obj: Any, *args: Any, **kwargs: Any):
            try:
                return super().model_validate(obj, *args, **kwargs)
            except ValidationError as error:
                raise ValueError(in_one_line(error, takes)) from None

    Arguments.__name__ = model.__name__
    return Arguments
