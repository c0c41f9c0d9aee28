"""A settable wall clock for tests: ``memnets.timeutil.now`` is what every part of memnets reads the
time through (records, stores, the API, the manager), so advancing this clock expires memories
without sleeping. The ``clock`` fixture (tests/conftest.py) installs one starting at :data:`START`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

START = datetime(2030, 1, 1, tzinfo=UTC)


class Clock:
    """A settable wall clock for memnets (``memnets.timeutil.now``)."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
