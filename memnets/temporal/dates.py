"""Time expressions of a turn resolved to absolute dates, by rule, from the turn's own time (no LLM).

"I moved to Berlin last month", said on 2024-05-07, is about April 2024; "yesterday" in a LoCoMo
session of 8 May 2023 is 7 May 2023, whatever day the memory is read. :func:`resolve_dates` finds
the expressions of a text and gives each a :class:`ResolvedDate`: the words as written and the
inclusive range of days they name (one day, a week, a month or a year). The rules, relative to the
turn's day ``D``:

=====================================  ==========================================================
expression                             resolves to
=====================================  ==========================================================
today, tonight, this morning/evening   ``D``
yesterday / the day before yesterday   ``D-1`` / ``D-2``
tomorrow / the day after tomorrow      ``D+1`` / ``D+2``
N days/weeks/months/years ago          ``D`` minus N units (N in digits or words, "a", "a couple of")
in N days/weeks/..., N ... from now    ``D`` plus N units
last / this / next week                Monday-Sunday of the week before / of / after ``D``'s
last / this / next weekend             Saturday-Sunday of the week before / of / after ``D``'s
last / this / next month, year         the calendar month or year before / of / after ``D``'s
last Friday, on Friday, Friday         the latest Friday before ``D`` (a turn mostly reports)
this Friday / next Friday              the first Friday on or after ``D`` / after ``D``
in May, May (a month alone)            May of ``D``'s year
last May / next May                    the latest May before ``D``'s month / the first after it
in 2022, May 2024                      that year / that month
2024-05-07, 7 May 2024, May 7th, 2024  that day (a day without a year: in ``D``'s year)
05/07/2024, 5/7/24                     that day, read month-first (``numeric="mdy"``, the default)
                                       or day-first (``numeric="dmy"``); impossible ones skipped
=====================================  ==========================================================

The write path stores the result under the metadata key :data:`DATES_KEY` (:func:`date_metadata`)
and may add the dates to the text it embeds (:func:`with_dates`, an option measured both ways).
"""

from __future__ import annotations

import bisect
import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

DATES_KEY = "resolved_dates"  # metadata key: [{"text": ..., "start": "YYYY-MM-DD", "end": "YYYY-MM-DD"}, ...]
NUMERIC_ORDERS = ("mdy", "dmy")

MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
MONTHS["sept"] = 9
WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "couple of": 2,
}  # fmt: skip

_MONTH = r"(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_WEEKDAY = r"(?P<weekday>" + "|".join(WEEKDAYS) + r")"
_COUNT = r"(?P<count>\d{1,3}|" + "|".join(sorted(NUMBERS, key=len, reverse=True)) + r")"
_UNIT = r"(?P<unit>day|week|month|year)s?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>\d{4})"
_WHICH = r"(?P<which>last|this|next|coming|past|previous)"


@dataclass(frozen=True)
class ResolvedDate:
    """A time expression of a text and the inclusive range of days it names."""

    text: str
    start: date
    end: date

    def as_dict(self) -> dict[str, str]:
        return {"text": self.text, "start": self.start.isoformat(), "end": self.end.isoformat()}

    def label(self) -> str:
        """``2024-05-07``, or ``2024-05-01..2024-05-31`` for a range."""
        if self.start == self.end:
            return self.start.isoformat()
        return f"{self.start.isoformat()}..{self.end.isoformat()}"


# ---------------------------------------------------------------------------------------------- calendar
def add_months(day: date, months: int) -> date:
    """``day`` moved by whole months, its day of month clipped to the target month's length."""
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    return date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))


def month_range(year: int, month: int) -> tuple[date, date]:
    return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])


def shift(day: date, count: int, unit: str) -> date:
    if unit == "day":
        return day + timedelta(days=count)
    if unit == "week":
        return day + timedelta(weeks=count)
    return add_months(day, count * (12 if unit == "year" else 1))


def _offset(which: str) -> int:
    return {"last": -1, "past": -1, "previous": -1, "this": 0, "next": 1, "coming": 1}[which]


# ---------------------------------------------------------------------------------------------- rules
Range = tuple[date, date]


def _relative_day(match: re.Match, day: date) -> Range:
    word = re.sub(r"\s+", " ", match.group(0).lower())
    delta = {"yesterday": -1, "the day before yesterday": -2, "tomorrow": 1, "the day after tomorrow": 2}.get(word, 0)
    return (day + timedelta(days=delta),) * 2


def _count(match: re.Match) -> int:
    raw = match.group("count").lower()
    return int(raw) if raw.isdigit() else NUMBERS[raw]


def _ago(match: re.Match, day: date) -> Range:
    return (shift(day, -_count(match), match.group("unit").lower()),) * 2


def _ahead(match: re.Match, day: date) -> Range:
    return (shift(day, _count(match), match.group("unit").lower()),) * 2


def _named_period(match: re.Match, day: date) -> Range:
    offset, unit = _offset(match.group("which").lower()), match.group("period").lower()
    if unit == "week":
        monday = day - timedelta(days=day.weekday()) + timedelta(weeks=offset)
        return monday, monday + timedelta(days=6)
    if unit == "weekend":  # the Saturday-Sunday of D's Monday-Sunday week, moved by weeks
        saturday = day - timedelta(days=day.weekday()) + timedelta(days=5, weeks=offset)
        return saturday, saturday + timedelta(days=1)
    if unit == "month":
        first = add_months(day.replace(day=1), offset)
        return month_range(first.year, first.month)
    year = day.year + offset
    return date(year, 1, 1), date(year, 12, 31)


def _weekday(match: re.Match, day: date) -> Range:
    target = WEEKDAYS[match.group("weekday").lower()]
    which = (match.group("which") or "").lower()
    if which in {"this", "coming"}:
        found = day + timedelta(days=(target - day.weekday()) % 7)
    elif which == "next":
        found = day + timedelta(days=(target - day.weekday() - 1) % 7 + 1)
    else:  # "last Friday", "on Friday", "Friday": the latest one before the turn's day
        found = day - timedelta(days=(day.weekday() - target - 1) % 7 + 1)
    return found, found


def _month_alone(match: re.Match, day: date) -> Range:
    month = MONTHS[match.group("month").lower().rstrip(".")]
    which = (match.group("which") or "").lower()
    year = day.year
    if which in {"last", "past", "previous"}:
        year -= 1 if month >= day.month else 0
    elif which in {"next", "coming"}:
        year += 1 if month <= day.month else 0
    return month_range(year, month)


def _month_year(match: re.Match, day: date) -> Range:
    return month_range(int(match.group("year")), MONTHS[match.group("month").lower().rstrip(".")])


def _year(match: re.Match, day: date) -> Range:
    year = int(match.group("year"))
    return date(year, 1, 1), date(year, 12, 31)


def _calendar_day(match: re.Match, day: date) -> Range | None:
    year = int(match.group("year")) if match.groupdict().get("year") else day.year
    try:
        found = date(year, MONTHS[match.group("month").lower().rstrip(".")], int(match.group("day")))
    except ValueError:  # 31 April, a day 0
        return None
    return found, found


def _iso_day(match: re.Match, day: date) -> Range | None:
    try:
        found = date(int(match.group("year")), int(match.group("m")), int(match.group("d")))
    except ValueError:
        return None
    return found, found


def _numeric_day(order: str) -> Callable[[re.Match, date], Range | None]:
    def resolve(match: re.Match, day: date) -> Range | None:
        first, second, year = int(match.group("a")), int(match.group("b")), int(match.group("y"))
        if year < 100:
            year += 2000
        month, dom = (first, second) if order == "mdy" else (second, first)
        try:
            found = date(year, month, dom)
        except ValueError:
            return None
        return found, found

    return resolve


def _rules(numeric: str) -> list[tuple[re.Pattern, Callable[[re.Match, date], Range | None]]]:
    def rule(pattern: str) -> re.Pattern:
        return re.compile(r"(?<![\w-])" + pattern + r"(?![\w-])", re.IGNORECASE)

    return [
        (rule(r"(?P<year>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})"), _iso_day),
        (rule(r"(?P<a>\d{1,2})/(?P<b>\d{1,2})/(?P<y>\d{4}|\d{2})"), _numeric_day(numeric)),
        (rule(_DAY + r"(?:\s+of)?\s+" + _MONTH + r"(?:,?\s+" + _YEAR + r")?"), _calendar_day),
        (rule(_MONTH + r"\s+" + _DAY + r"(?:,?\s+" + _YEAR + r")?"), _calendar_day),
        (rule(_MONTH + r",?\s+" + _YEAR), _month_year),
        (rule(r"(?:in|during|since|by|of)\s+" + _YEAR), _year),
        (
            rule(
                r"the\s+day\s+(?:before|after)\s+(?:yesterday|tomorrow)|yesterday|tomorrow|today|tonight"
                r"|this\s+(?:morning|afternoon|evening)"
            ),
            _relative_day,
        ),  # fmt: skip
        (rule(_COUNT + r"\s+" + _UNIT + r"\s+ago"), _ago),
        (rule(r"in\s+" + _COUNT + r"\s+" + _UNIT), _ahead),
        (rule(_COUNT + r"\s+" + _UNIT + r"\s+from\s+now"), _ahead),
        (rule(_WHICH + r"\s+(?P<period>weekend|week|month|year)"), _named_period),
        (rule(r"(?:(?:" + _WHICH + r"|on)\s+)?" + _WEEKDAY), _weekday),
        (rule(r"(?:(?:" + _WHICH + r"|in|during|since|until|by)\s+)?" + _MONTH), _month_alone),
    ]


_RULES = {order: _rules(order) for order in NUMERIC_ORDERS}
# What every rule's match holds: a word at a word's start (a month, a weekday, a unit or period, a
# named day), four digits (a year, an ISO date) or digits around a slash (5/7/24). A text without
# one names no time, and most texts a memory writes hold none ("room 12" neither), so the rules
# (thirteen scans of the text) run only past this one search.
_MAY_NAME_A_TIME = re.compile(
    r"\d{4}|\d/\d|\b(?:"
    + "|".join(
        sorted(
            {*MONTHS, *WEEKDAYS, "yesterday", "tomorrow", "today", "tonight", "morning", "afternoon", "evening"}
            | {"day", "week", "weekend", "month", "year"},
            key=len,
            reverse=True,
        )
    )
    + ")"
)  # searched in the lower-cased text: three times faster than the same pattern with IGNORECASE
# month abbreviations that are also everyday words: only with a preposition or a day ("may", "mar")
_AMBIGUOUS_MONTHS = {"may", "march", "mar", "jan", "jun", "dec", "aug", "sept"}


def resolve_dates(text: str, at: datetime | date, *, numeric: str = "mdy") -> list[ResolvedDate]:
    """The time expressions of ``text`` resolved from ``at`` (the turn's time), in text order.

    ``numeric``: how ``05/07/2024`` reads, ``"mdy"`` (May 7) or ``"dmy"`` (5 July).
    Overlapping matches keep the longest ("May 7th, 2024" is one date, not a month and a year);
    an expression that names no real day (31/02/2024), or one outside the calendar's years 1-9999
    ("tomorrow" of 9999-12-31), is left out.
    """
    if numeric not in NUMERIC_ORDERS:
        raise ValueError(f"resolve_dates: numeric must be one of {NUMERIC_ORDERS}, got {numeric!r}")
    if not isinstance(at, (date, datetime)):
        raise TypeError(f"resolve_dates: at must be a datetime or date, got {type(at).__name__}")
    if not _MAY_NAME_A_TIME.search(text.lower()):
        return []
    day = at.date() if isinstance(at, datetime) else at
    found: list[tuple[int, int, ResolvedDate | None]] = []  # None: words naming no real day
    for pattern, resolve in _RULES[numeric]:
        for match in pattern.finditer(text):
            if not _ambiguous_month(match):
                span = _in_calendar(resolve, match, day)
                found.append((match.start(), match.end(), span and ResolvedDate(match.group(0), *span)))
    return [resolved for _, _, resolved in disjoint(found) if resolved is not None]


def disjoint(found: list[tuple[int, int, object]]) -> list[tuple[int, int, object]]:
    """The (start, end, value) spans of ``found`` that are kept, by start: the longest first, each where it
    overlaps none kept ("April 31" keeps "April" from counting). The kept spans are disjoint and sorted, so
    one bisect finds a span's neighbours (a scan of all kept had been quadratic in the matches: "monday "
    100,000 times took 6 s)."""
    starts: list[int] = []
    ends: list[int] = []
    chosen = []
    for start, end, value in sorted(found, key=lambda item: (item[0] - item[1], item[0])):
        i = bisect.bisect_right(starts, start)
        if (i == 0 or ends[i - 1] <= start) and (i == len(starts) or end <= starts[i]):
            starts.insert(i, start)
            ends.insert(i, end)
            chosen.append((start, end, value))
    return sorted(chosen, key=lambda item: item[0])


def _in_calendar(resolve: Callable[[re.Match, date], Range | None], match: re.Match, day: date) -> Range | None:
    """``resolve(match, day)``, or None when the days it names lie outside years 1-9999: "tomorrow" of
    9999-12-31 or "next year" of 9999 (from a memory's ``t`` or a search's ``now``) had raised
    OverflowError / ValueError out of the write path and the time features."""
    try:
        return resolve(match, day)
    except (OverflowError, ValueError):  # date arithmetic past the calendar / date(10000, ...)
        return None


def _ambiguous_month(match: re.Match) -> bool:
    """A bare month word that is an everyday word ("I may go", "the sun"): no preposition, no day."""
    groups = match.groupdict()
    month = groups.get("month")
    if month is None or groups.get("day") or groups.get("year") or groups.get("which"):
        return False
    if month.lower() not in _AMBIGUOUS_MONTHS:
        return False
    return match.group(0).lower().strip().rstrip(".") == month.lower().rstrip(".")


def date_metadata(text: str, at: datetime | date, *, numeric: str = "mdy") -> dict[str, list[dict[str, str]]]:
    """``{DATES_KEY: [...]}`` for a memory's metadata (empty when ``text`` names no time)."""
    resolved = resolve_dates(text, at, numeric=numeric)
    return {DATES_KEY: [item.as_dict() for item in resolved]} if resolved else {}


def with_dates(text: str, resolved: list[ResolvedDate]) -> str:
    """``text`` with each resolved expression followed by its date: "yesterday (2024-05-06)".

    The embedding-text option: a question about "May 2024" then meets the memory that said "last
    month" in June 2024.
    """
    out, position = [], 0
    for item in resolved:
        index = text.find(item.text, position)
        if index < 0:
            continue
        end = index + len(item.text)
        out += [text[position:end], f" ({item.label()})"]
        position = end
    return "".join(out) + text[position:]
