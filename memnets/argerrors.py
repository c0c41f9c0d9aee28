"""Errors of one bad argument that carry the argument's name.

A door that reports errors field by field (the REST server's ``{"error": {"field": ...}}``) reads
:func:`field_of` instead of guessing the name from the message. They are a ValueError, a TypeError
and a KeyError, so callers that catch those keep catching them. ``MissingInputError`` is the one input
that was not given at all (a training command's conversations): the ``memnets`` command exits 2 on it.
"""

from __future__ import annotations


class NamedArgument:
    """Mixin of an exception about one argument: its ``field`` names it (kept through pickling)."""

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.field = field

    def __reduce__(self):
        return _rebuild, (type(self), str(self), self.field)


def _rebuild(cls, message: str, field: str | None):
    return cls(message, field=field)


class ArgumentValueError(NamedArgument, ValueError):
    """``field`` has a value of the right type that is not allowed (empty, out of range, unknown)."""


class ArgumentTypeError(NamedArgument, TypeError):
    """``field`` has a value of the wrong type."""


class UnknownIdError(NamedArgument, KeyError):
    """``field`` names a memory id that is not there (for this user)."""

    def __str__(self) -> str:  # the message, not KeyError's repr of it
        return str(self.args[0])


class MissingInputError(FileNotFoundError):
    """An input a command must read was neither given nor found; the message says where it looked. Its one
    subclass, ``memnets.training.data.location.DataNotFoundError``, is defined on the training side, which
    ``memnets.cli`` (the serving side) does not import: the CLI catches this base as a usage error."""


def argument_name(described: str) -> str:
    """The argument a checker's description of it names: ``"Memory 'm1': t"`` -> ``"t"`` (its last part)."""
    return described.rsplit(": ", 1)[-1]


def field_of(error: BaseException) -> str | None:
    """The argument ``error`` is about, when it says so; else None."""
    return getattr(error, "field", None)
