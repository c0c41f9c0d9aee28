"""Progress of long loops, one helper for the whole package.

On a terminal, :func:`track` is a tqdm bar. Anywhere else (a file, a pipe, a CI log) a bar
redraws itself with carriage returns hundreds of times, so there it writes one plain line every
``PLAIN_EVERY_S`` seconds and one when the loop ends. ``set_progress("off")`` (``memnets ... -q``)
or ``MEMNETS_PROGRESS=off`` turns both off; ``bar`` / ``plain`` force one of them.

:func:`quiet_loading` turns off the progress bars third-party loaders draw (transformers'
"Loading weights" bar on every model load) for the duration of a load.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

MODES = ("auto", "bar", "plain", "off")
PLAIN_EVERY_S = 30.0  # a line every 30 s keeps a log of an hour-long run to ~120 lines per loop
_mode: str | None = None  # set_progress's choice; None reads MEMNETS_PROGRESS


def set_progress(mode: str | None) -> None:
    """Choose how :func:`track` reports: ``auto`` (a bar on a terminal, plain lines elsewhere),
    ``bar``, ``plain`` or ``off``; None goes back to ``$MEMNETS_PROGRESS`` (default ``auto``)."""
    if mode is not None and mode not in MODES:
        raise ValueError(f"set_progress: mode must be one of {MODES} or None, got {mode!r}")
    global _mode
    _mode = mode


def progress_mode() -> str:
    """The mode in force: set_progress's, else ``$MEMNETS_PROGRESS``, else ``auto``."""
    mode = _mode or os.environ.get("MEMNETS_PROGRESS", "auto").strip().lower() or "auto"
    if mode not in MODES:
        raise ValueError(f"MEMNETS_PROGRESS must be one of {MODES}, got {mode!r}")
    return mode


def track(
    iterable: Iterable | None = None,
    *,
    total: int | None = None,
    desc: str = "",
    unit: str = "it",
    disable: bool = False,
    leave: bool = True,
    stream: TextIO | None = None,
):
    """A progress reporter over ``iterable`` (or for manual ``update(n)`` calls with ``total``).

    The same interface either way: iterate it, or ``update(n)``, ``set_postfix(**values)``, ``n``,
    ``close()`` and use as a context manager. ``disable`` turns it off for this loop.
    """
    stream = stream if stream is not None else sys.stderr
    mode = progress_mode()
    if total is None and iterable is not None and hasattr(iterable, "__len__"):
        total = len(iterable)
    if disable or mode == "off":
        return PlainProgress(iterable, total=total, desc=desc, unit=unit, stream=None)
    if mode == "bar" or (mode == "auto" and _is_terminal(stream)):
        from tqdm.auto import tqdm

        return tqdm(iterable, total=total, desc=desc, unit=unit, leave=leave, file=stream)
    return PlainProgress(iterable, total=total, desc=desc, unit=unit, stream=stream)


def _is_terminal(stream) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class PlainProgress:
    """tqdm's interface, written as one plain line every ``every`` seconds and a last one at the end
    (``stream=None``: silent, only counting)."""

    def __init__(
        self,
        iterable: Iterable | None = None,
        *,
        total: int | None = None,
        desc: str = "",
        unit: str = "it",
        stream: TextIO | None = None,
        every: float | None = None,
    ):
        self.iterable = iterable
        self.total = total
        self.desc = desc
        self.unit = unit
        self.stream = stream
        self.every = PLAIN_EVERY_S if every is None else every
        self.n = 0
        self.postfix: dict[str, Any] = {}
        self.started = self.last = time.monotonic()
        self.closed = False

    def __iter__(self) -> Iterator:
        if self.iterable is None:
            raise TypeError("PlainProgress: nothing to iterate (built without an iterable)")
        try:
            for item in self.iterable:
                yield item
                self.update(1)
        finally:
            self.close()

    def __len__(self) -> int:
        return self.total or 0

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if self.stream is not None and now - self.last >= self.every:
            self.last = now
            self._write(now)

    def set_postfix(self, **values: Any) -> None:
        self.postfix = values

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.stream is not None:
            self._write(time.monotonic(), done=True)

    def _write(self, now: float, done: bool = False) -> None:
        seconds = now - self.started
        count = f"{self.n}/{self.total}" if self.total else f"{self.n}"
        share = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        rate = f", {self.n / seconds:.1f} {self.unit}/s" if seconds > 0 else ""
        extra = "".join(f", {name}={value}" for name, value in self.postfix.items())
        state = "done in" if done else "after"
        print(
            f"{self.desc or 'progress'}: {count} {self.unit}{share}{rate}{extra}, {state} {seconds:.0f} s",
            file=self.stream,
            flush=True,
        )

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@contextmanager
def quiet_loading():
    """Inside the block, transformers draws no progress bars (its "Loading weights" bar); the
    setting before the block comes back after it."""
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()
