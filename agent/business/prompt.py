"""The system prompt, generated from the business definition: the same bytes for the same file.

Consumes a ``Business``; returns the system prompt: how to answer (spoken, short, the fact
first, never a fact the business did not give, offer a person when unsure), then the facts as
lines. No clock time and nothing per call goes in, so the LLM server's prefix cache keeps every
turn's prefill down to the new words.
"""

from __future__ import annotations

from datetime import time

from agent.business.model import WEEKDAYS, Business, Hours

RULES = """\
You are Brisk, the voice assistant of {name}, {kind}. \
You are speaking on the phone, so your words are read aloud.

Rules for every answer:
- Lead with the answer in the first few words, then stop. One or two short sentences.
- Open with the fact itself, not with filler such as "Sure!" or "Great question": a short \
phrase ending in a comma or full stop. Say times, prices and numbers as you would speak them \
(9 in the morning, 45 dollars), without abbreviations such as a.m., e.g. or etc., and without \
quotation marks or brackets.
- Plain spoken English only: no lists, no markdown, no emoji, no URLs.
- Only state facts from the {noun} facts below. Just before each question you are given the \
facts about it: answer from those. If they do not answer the question, say you do not know \
and offer to connect the caller with a person. Never guess.
"""


def spoken_time(t: time) -> str:
    """A time of day as it is said: '9 in the morning', 'half past 5 in the afternoon', 'noon'."""
    if t == time(12, 0):
        return "noon"
    hour = t.hour % 12 or 12
    part = "in the morning" if t.hour < 12 else "in the afternoon" if t.hour < 17 else "in the evening"
    if t.minute == 0:
        return f"{hour} {part}"
    if t.minute == 30:
        return f"half past {hour} {part}"
    return f"{hour} {t.minute:02d} {part}"


def spoken_hours(hours: Hours | None) -> str:
    if hours is None:
        return "closed"
    return f"{spoken_time(hours.opens)} to {spoken_time(hours.closes)}"


def opening_hours(business: Business, days: tuple[str, ...] = WEEKDAYS) -> str:
    """The week (or ``days`` of it) in runs of days with the same hours: 'Monday to Friday 9 in the morning to ...'."""
    runs: list[tuple[str, str, Hours | None]] = []
    for day in days:
        hours = business.hours[day]
        if runs and runs[-1][2] == hours:
            runs[-1] = (runs[-1][0], day, hours)
        else:
            runs.append((day, day, hours))
    parts = []
    for first, last, hours in runs:
        joined = " and " if days.index(last) == days.index(first) + 1 else " to "  # not "Monday to Tuesday"
        days_said = first.title() if first == last else f"{first.title()}{joined}{last.title()}"
        parts.append(f"closed on {days_said}" if hours is None else f"{days_said} {spoken_hours(hours)}")
    return "; ".join(parts)


def system_prompt(business: Business) -> str:
    noun = business.kind.split()[-1] if business.kind else "business"
    lines = [
        RULES.format(name=business.name, kind=business.kind, noun=noun),
        f"{noun.title()} facts:",
        f"- Name: {business.name}.",
        f"- Address: {business.address}.",
        f"- Opening hours: {opening_hours(business)}.",
        f"- Phone: {business.phone}.",
    ]
    if business.prices:
        lines.append("- Prices: " + "; ".join(f"{item} {price}" for item, price in business.prices.items()) + ".")
    for topic, policy in business.policies.items():
        lines.append(f"- {topic.capitalize()}: {policy}.")
    return "\n".join(lines) + "\n"
