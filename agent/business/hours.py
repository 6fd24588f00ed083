"""Opening hours, said for the day a caller asks about: a weekday, a range of days, the weekend,
today, tomorrow or now (in the business's time zone), or the whole week.

Consumes a ``Business``, the caller's words (as ``comparison_words``) and the moment they asked;
returns one spoken sentence ("On Friday we're open from 9 in the morning to 6 in the evening.").
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from agent.business.model import WEEKDAYS, Business
from agent.business.prompt import opening_hours, spoken_hours, spoken_time

_NOW_WORDS = {"now", "currently", "moment"}
_WEEKEND_WORDS = {"weekend", "weekends"}
_WEEKDAY_WORDS = {"weekday", "weekdays", "workday", "workdays"}
_DAY_SPAN = re.compile(rf"\b({'|'.join(WEEKDAYS)})s? (?:to|through|till|until|thru) ({'|'.join(WEEKDAYS)})s?\b")
# Every word that names when: a follow-up that says one asks about that day ("And on Sunday?").
DAY_WORDS = frozenset({*WEEKDAYS, *(f"{d}s" for d in WEEKDAYS), "today", "tonight", "tomorrow",
                       *_NOW_WORDS, *_WEEKEND_WORDS, *_WEEKDAY_WORDS})
# Days the weekly hours do not cover. "May" is left out: it asks as often as it dates.
SPECIAL_DAYS = frozenset(
    "christmas xmas easter holiday holidays thanksgiving halloween "
    "january february march april june july august september october november december".split()
)


def hours_for(business: Business, words: list[str], now: datetime) -> str:
    """The hours for the day ``words`` ask about, as one sentence; ``now`` (aware) says what today is."""
    asked = set(words)
    now = now.astimezone(business.zone)
    if asked & _NOW_WORDS:
        return _open_now(business, now)
    said = " ".join(words)
    span = _DAY_SPAN.search(said)
    if span:  # "Monday to Friday", "from Tuesday through Thursday": every day between
        first, last = WEEKDAYS.index(span.group(1)), WEEKDAYS.index(span.group(2))
        if first < last:
            return _week(business, WEEKDAYS[first:last + 1])
    named = [day for day in WEEKDAYS if day in asked or f"{day}s" in asked]
    if not named and asked & _WEEKEND_WORDS:
        named = ["saturday", "sunday"]
    if not named and (asked & _WEEKDAY_WORDS or "during the week" in said):
        return _week(business, WEEKDAYS[:5])
    if named:
        return " ".join(_on(business, day) for day in named)
    if "tomorrow" in asked:
        return _on(business, WEEKDAYS[(now + timedelta(days=1)).weekday()], when="tomorrow")
    if "today" in asked or "tonight" in asked:
        return _on(business, WEEKDAYS[now.weekday()], when="today")
    return _week(business, WEEKDAYS)


def _week(business: Business, days: tuple[str, ...]) -> str:
    """The hours of ``days`` as one sentence: "We're open Monday to Friday ..., and closed on Sunday."."""
    runs = opening_hours(business, days).split("; ")
    open_runs = [r for r in runs if not r.startswith("closed")]
    closed = [r.removeprefix("closed on ") for r in runs if r.startswith("closed")]
    said = f"We're open {'; '.join(open_runs)}" if open_runs else "We're closed"
    if closed and open_runs:
        said += f", and closed on {' and '.join(closed)}"
    elif closed:
        said += f" on {' and '.join(closed)}"
    return said + "."



def _on(business: Business, day: str, when: str | None = None) -> str:
    hours = business.hours[day]
    said = f"{when}, {day.title()}" if when else f"on {day.title()}"
    if hours is None:
        return f"We're closed {said}."
    opener = f"{said}," if when else said
    return f"{opener[0].upper()}{opener[1:]} we're open from {spoken_hours(hours)}."


def _open_now(business: Business, now: datetime) -> str:
    hours = business.hours[WEEKDAYS[now.weekday()]]
    if hours is not None and hours.opens <= now.time() < hours.closes:
        return f"Yes, we're open now, until {spoken_time(hours.closes)}."
    for ahead in range(0, 8):
        day = now + timedelta(days=ahead)
        h = business.hours[WEEKDAYS[day.weekday()]]
        if h is not None and (ahead > 0 or now.time() < h.opens):
            when = "later today" if ahead == 0 else "tomorrow" if ahead == 1 else f"on {WEEKDAYS[day.weekday()].title()}"
            return f"We're closed right now; we open {when} at {spoken_time(h.opens)}."
    return "We're closed right now."
