"""Temporal channel: date phrases resolved against a reference date, and proximity scoring.

`find_time_window("what did we deploy last week", ref)` -> the calendar week before ref's week.
Recency cues ("current", "latest", "now") resolve to a recency window that scores newer facts higher,
which is how "what is the current cache TTL" prefers the newest statement.
All datetimes are timezone-aware UTC.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np

MONTHS = {m: i + 1 for i, m in enumerate(
    "january february march april may june july august september october november december".split())}
MONTHS.update({m[:3]: i for m, i in list(MONTHS.items())})
MONTHS["sept"] = 9
WEEKDAYS = {d: i for i, d in enumerate("monday tuesday wednesday thursday friday saturday sunday".split())}
_NUM_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
              "eight": 8, "nine": 9, "ten": 10, "couple of": 2, "few": 3}
_MONTH_ALT = "|".join(sorted(MONTHS, key=len, reverse=True))
_DAY_ALT = "|".join(WEEKDAYS)

_ISO_RE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2}))?)?")
_AGO_RE = re.compile(r"\b(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|couple of|few)\s+"
                     r"(day|week|month|year)s?\s+ago\b")
_MONTH_DAY_RE = re.compile(rf"\b({_MONTH_ALT})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}}))?")
_DAY_MONTH_RE = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_ALT})\b(?:,?\s+(\d{{4}}))?")
_IN_MONTH_RE = re.compile(rf"\b(?:in|during|since|over|throughout|back in|early|late|mid)\s+({_MONTH_ALT})\b(?:\s+(\d{{4}}))?")
_WEEKDAY_RE = re.compile(rf"\b(last|on|this|past)\s+({_DAY_ALT})\b")
_RELATIVE = [
    (re.compile(r"\b(?:yesterday)\b"), "yesterday"),
    (re.compile(r"\b(?:today|this morning|this afternoon|this evening|tonight|earlier today)\b"), "today"),
    (re.compile(r"\b(?:last|past|previous)\s+week\b"), "last_week"),
    (re.compile(r"\bthis\s+week\b|\bearlier this week\b"), "this_week"),
    (re.compile(r"\b(?:last|past|previous)\s+month\b"), "last_month"),
    (re.compile(r"\bthis\s+month\b"), "this_month"),
    (re.compile(r"\b(?:last|past|previous)\s+year\b"), "last_year"),
    (re.compile(r"\bthis\s+year\b"), "this_year"),
]
_RECENCY_RE = re.compile(r"\b(?:current|currently|latest|now|nowadays|these days|most recent|most recently|"
                         r"recent|recently|right now|at the moment|anymore|still|newest|up to date)\b")

RECENCY_WINDOW_DAYS = 30.0


@dataclass(frozen=True)
class TimeWindow:
    start: datetime
    end: datetime  # exclusive
    phrase: str
    kind: str  # "range" | "recency"

    def as_dict(self) -> dict:
        return {"start": iso(self.start), "end": iso(self.end), "phrase": self.phrase, "kind": self.kind}


def parse_datetime(value: str | None) -> datetime | None:
    """ISO 8601 date or datetime (a trailing Z allowed) -> aware UTC datetime; None when unparseable."""
    if not value or not isinstance(value, str):
        return None
    s = value.strip()
    if s.endswith("Z") or s.endswith("z"):
        s = s[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(s)
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        return dt.astimezone(UTC)
    except (ValueError, OverflowError):  # OverflowError: an offset that moves year 1 or 9999 out of range
        return None


def iso(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _day(dt: datetime) -> datetime:
    return dt.replace(hour=0, minute=0, second=0, microsecond=0)


def _month_start(year: int, month: int) -> datetime:
    return datetime(year, month, 1, tzinfo=UTC)


def _next_month(dt: datetime) -> datetime:
    return _month_start(dt.year + (dt.month == 12), 1 if dt.month == 12 else dt.month + 1)


def _window(start: datetime, end: datetime, phrase: str) -> TimeWindow:
    return TimeWindow(start, end, phrase, "range")


def find_time_window(text: str, ref: datetime, allow_recency: bool = True) -> TimeWindow | None:
    """The first explicit time phrase in `text`, resolved against `ref`; else a recency cue; else None.
    A phrase whose date falls outside what datetime can hold ("100000 days ago", "year 9999 + 1") is no time
    phrase at all (instead of an OverflowError)."""
    try:
        return _find_time_window(text, ref, allow_recency)
    except (OverflowError, ValueError):
        return None


def _find_time_window(text: str, ref: datetime, allow_recency: bool) -> TimeWindow | None:
    t = text.lower()
    today = _day(ref)
    m = _ISO_RE.search(t)
    if m:
        y, mo, d = (int(x) for x in m.groups()[:3])
        try:
            s = datetime(y, mo, d, tzinfo=UTC)
            return _window(s, s + timedelta(days=1), m.group(0))
        except ValueError:
            pass
    for rx, kind in _RELATIVE:
        m = rx.search(t)
        if not m:
            continue
        ph = m.group(0)
        if kind == "yesterday":
            return _window(today - timedelta(days=1), today, ph)
        if kind == "today":
            return _window(today, today + timedelta(days=1), ph)
        monday = today - timedelta(days=today.weekday())
        if kind == "last_week":
            return _window(monday - timedelta(days=7), monday, ph)
        if kind == "this_week":
            return _window(monday, today + timedelta(days=1), ph)
        if kind == "last_month":
            first = _month_start(today.year, today.month)
            prev = first - timedelta(days=1)
            return _window(_month_start(prev.year, prev.month), first, ph)
        if kind == "this_month":
            return _window(_month_start(today.year, today.month), today + timedelta(days=1), ph)
        if kind == "last_year":
            return _window(datetime(today.year - 1, 1, 1, tzinfo=UTC), datetime(today.year, 1, 1, tzinfo=UTC), ph)
        if kind == "this_year":
            return _window(datetime(today.year, 1, 1, tzinfo=UTC), today + timedelta(days=1), ph)
    m = _AGO_RE.search(t)
    if m:
        n = int(m.group(1)) if m.group(1).isdigit() else _NUM_WORDS[m.group(1)]
        unit = m.group(2)
        days = {"day": 1, "week": 7, "month": 30, "year": 365}[unit] * n
        centre = today - timedelta(days=days)
        half = {"day": 0, "week": 3, "month": 15, "year": 182}[unit]
        return _window(centre - timedelta(days=half), centre + timedelta(days=half + 1), m.group(0))
    for rx, month_first in ((_MONTH_DAY_RE, True), (_DAY_MONTH_RE, False)):
        m = rx.search(t)
        if m:
            mon_s, day_s = (m.group(1), m.group(2)) if month_first else (m.group(2), m.group(1))
            mon, day = MONTHS[mon_s], int(day_s)
            year = int(m.group(3)) if m.group(3) else today.year
            try:
                s = datetime(year, mon, day, tzinfo=UTC)
            except ValueError:
                continue
            if not m.group(3) and s > today:
                s = s.replace(year=year - 1)
            return _window(s, s + timedelta(days=1), m.group(0))
    m = _IN_MONTH_RE.search(t)
    if m:
        mon = MONTHS[m.group(1)]
        year = int(m.group(2)) if m.group(2) else today.year
        if not m.group(2) and mon > today.month:
            year -= 1  # "in March" said in February means last March
        s = _month_start(year, mon)
        return _window(s, _next_month(s), m.group(0))
    m = _WEEKDAY_RE.search(t)
    if m:
        wd = WEEKDAYS[m.group(2)]
        back = (today.weekday() - wd) % 7
        if back == 0 and m.group(1) in ("last", "past"):
            back = 7
        s = today - timedelta(days=back)
        return _window(s, s + timedelta(days=1), m.group(0))
    if allow_recency:
        m = _RECENCY_RE.search(t)
        if m:
            return TimeWindow(today - timedelta(days=RECENCY_WINDOW_DAYS), today + timedelta(days=1), m.group(0),
                              "recency")
    return None


def proximity(fact_time: datetime | None, window: TimeWindow, ref: datetime) -> float:
    """1.0 inside the window, exp(-gap_days / scale) outside (scale = max(2, window length in days)).

    Recency windows score exp(-age_days / 30) so the newest fact wins among otherwise equal facts."""
    if fact_time is None:
        return 0.0
    if window.kind == "recency":
        age = max(0.0, (ref - fact_time).total_seconds() / 86400.0)
        return math.exp(-age / RECENCY_WINDOW_DAYS)
    if window.start <= fact_time < window.end:
        return 1.0
    gap_s = (window.start - fact_time).total_seconds() if fact_time < window.start else (
        fact_time - window.end).total_seconds()
    scale = max(2.0, (window.end - window.start).total_seconds() / 86400.0)
    return math.exp(-(gap_s / 86400.0) / scale)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_US = timedelta(microseconds=1)
_EXACT_US = 2 ** 53  # int64 microsecond gaps below this convert to float64 exactly (~285 years)


def micros(dt: datetime) -> int:
    """Microseconds since the epoch of an aware datetime, exactly (timedelta floor division: integers only)."""
    return (dt - _EPOCH) // _ONE_US


def proximity_all(times_us: np.ndarray, has_time: np.ndarray, window: TimeWindow, ref: datetime) -> np.ndarray:
    """`proximity` of every fact at once (times as `micros`, `has_time` False for a fact without one), bit for
    bit the same values: gaps are exact integer microseconds turned into seconds by one correctly rounded
    division, as `timedelta.total_seconds()` does, then the same float operations in the same order, and
    `math.exp` on each value (numpy's exp may round the last bit differently), without a Python loop of datetime
    arithmetic over every fact of the tenant."""
    n = int(times_us.shape[0])
    out = np.zeros(n)
    if n == 0:
        return out
    if window.kind == "recency":
        diff = micros(ref) - times_us
    else:
        start, end = micros(window.start), micros(window.end)
        inside = (times_us >= start) & (times_us < end)
        diff = np.where(times_us < start, start - times_us, times_us - end)
    if int(np.abs(diff[has_time]).max(initial=0)) >= _EXACT_US:  # beyond exact float conversion: the slow way
        return np.array([proximity(_EPOCH + timedelta(microseconds=t) if h else None, window, ref)
                         for t, h in zip(times_us.tolist(), has_time.tolist(), strict=True)])
    secs = diff.astype(np.float64) / 1e6
    if window.kind == "recency":
        age = np.maximum(0.0, secs / 86400.0)
        expo = -age / RECENCY_WINDOW_DAYS
    else:
        scale = max(2.0, (window.end - window.start).total_seconds() / 86400.0)
        expo = -(secs / 86400.0) / scale
    exp = math.exp
    vals = np.array([exp(x) for x in expo.tolist()])
    if window.kind != "recency":
        vals[inside] = 1.0
    vals[~has_time] = 0.0
    return vals


def resolve_occurred_at(sentence: str, said_at: datetime) -> datetime:
    """When the sentence's event happened: an explicit phrase ("yesterday") resolved against the time it was
    said, else the time it was said."""
    w = find_time_window(sentence, said_at, allow_recency=False)
    return w.start if w is not None else said_at
