"""One rule for time: every datetime inside memnets is timezone-aware UTC.

:func:`as_utc` reads every time given to memnets: a datetime, a date (its midnight) or an ISO 8601
string of either. A naive datetime (no ``tzinfo``) is read as UTC, on every path: records, stores, scorers, the
manager and the API all pass what they are given through :func:`as_utc`. An aware datetime in
another zone keeps its instant and is converted to UTC. Where a time may be omitted (``t=``,
``now=``), it defaults to :func:`now`.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

from memnets.argerrors import ArgumentTypeError, ArgumentValueError, argument_name

MAX_TTL_SECONDS = 100 * 365.25 * 24 * 3600  # a time to live of at most a century


def as_utc(moment: datetime | date | str, name: str = "time") -> datetime:
    """``moment`` as an aware UTC datetime: the one reading of a time given to memnets (arguments, messages' times,
    REST bodies, filters). A datetime (naive: UTC), a date (its midnight, UTC) or an ISO 8601 string of either;
    ValueError naming ``name`` for a string that is not ISO 8601, TypeError for anything else."""
    if isinstance(moment, str):
        try:
            moment = datetime.fromisoformat(moment.strip())
        except ValueError:
            raise ArgumentValueError(
                f"{name} {moment!r:.60} is not an ISO 8601 time (like 2024-03-01 or 2024-03-01T09:30:00+01:00)",
                field=argument_name(name),
            ) from None
    elif isinstance(moment, date) and not isinstance(moment, datetime):
        moment = datetime.combine(moment, time())
    if not isinstance(moment, datetime):
        raise ArgumentTypeError(
            f"{name} must be a datetime, a date or an ISO 8601 string, got {type(moment).__name__} {moment!r:.40}",
            field=argument_name(name),
        )
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+14:00 is before year 1 in UTC (9999-12-31T23:00-02:00 after 9999)
        raise ArgumentValueError(
            f"{name} {moment.isoformat()} lies outside years 1-9999 once converted to UTC", field=argument_name(name)
        ) from None


def now() -> datetime:
    """The current time, aware UTC."""
    return datetime.now(UTC)


def as_utc_or_now(moment: datetime | None, name: str = "time") -> datetime:
    """:func:`as_utc` of ``moment``, or the current time when it is None."""
    return now() if moment is None else as_utc(moment, name)


def ttl_seconds(ttl, name: str = "ttl") -> float | None:
    """A time to live as positive, finite seconds: a ``timedelta`` or a number of seconds (None stays None).

    ValueError/TypeError naming ``name`` for anything else (zero, negative, NaN, over
    :data:`MAX_TTL_SECONDS`, a bool, a string): an expiry ``now + ttl`` must be a datetime (before
    year 10000), and 1e300 s overflowed it.
    """
    if ttl is None:
        return None
    if isinstance(ttl, timedelta):
        seconds = ttl.total_seconds()
    elif isinstance(ttl, (int, float)) and not isinstance(ttl, bool):
        seconds = float(ttl)
    else:
        raise ArgumentTypeError(
            f"{name} must be a timedelta or a number of seconds, got {type(ttl).__name__} {ttl!r:.40}",
            field=argument_name(name),
        )
    if not 0 < seconds <= MAX_TTL_SECONDS:
        raise ArgumentValueError(
            f"{name} must be a positive duration of at most {MAX_TTL_SECONDS:.0f} s (100 years), got {ttl!r}",
            field=argument_name(name),
        )
    return seconds
