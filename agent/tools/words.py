"""What a caller's words hold for a tool: an order number, a day, a name, yes/no, keyed digits.

Plain rules over the transcript (or the keypad's "DTMF: 4572#"), used when the words are
routed to a tool by intent and at each step of a form (agent/tools/arguments.py reads a
declared tool's arguments with them). Each returns None when the words do not say it, so the
step asks again instead of guessing.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

from agent.business.words import numbers_as_digits
from agent.business.model import WEEKDAYS
from processors.turns.comparison_form import comparison_words

_DTMF = re.compile(r"^\s*DTMF:\s*([0-9*#]+)\s*$")
_YES = frozenset("yes yeah yep yup sure correct right ok okay please absolutely definitely perfect great".split())
_NO = frozenset("no nope nah dont cancel not wrong stop".split())
_NAME_LEADS = re.compile(r"\b(?:my name is|name is|name's|it's under|under the name|under|this is|i am|i'm|it's|its)\s+(.+)$", re.I)
_NOT_NAMES = frozenset("the a an please thanks thank you um uh er so well yes no".split())
_DIGIT_LIST_COMMA = re.compile(r"(?<=\b\d),\s*(?=\d\b)")  # the comma in "4, 5": between single digits


def keyed_digits(text: str) -> str | None:
    """The digits of a keypad entry ("DTMF: 4572#" -> "4572"), or None for spoken words."""
    match = _DTMF.match(text)
    return match.group(1).rstrip("#").replace("*", "") if match else None


def order_number(text: str) -> str | None:
    """The order number said or keyed: the longest run of digits, spoken digit by digit or not.

    "four five seven two", "4, 5, 7, 2" and "45 72" are 4572; a number of fewer than 3 digits is not an order
    number ("I ordered 2 helmets").
    """
    keyed = keyed_digits(text)
    if keyed is not None:
        return keyed or None
    runs, current = [], ""
    # Whisper writes digits said one by one as a list now and then ("4, 5, 7, 2"): one number.
    text = _DIGIT_LIST_COMMA.sub(" ", text.replace("-", " "))
    for token in re.findall(r"\d+|\S+", numbers_as_digits(text)):
        if token.isdigit():
            current += token
        elif token.strip(".,!?") in ("oh", "o") and current:
            current += "0"
        elif re.fullmatch(r"\d+[.,!?]", token):
            current += token[:-1]
            runs.append(current)
            current = ""
        else:
            if current:
                runs.append(current)
            current = ""
    if current:
        runs.append(current)
    best = max(runs, key=len, default="")
    return best if len(best) >= 3 else None


def day(text: str, now: datetime) -> date | None:
    """The day meant: today, tomorrow, or the next such weekday (today if it is that day)."""
    words = comparison_words(text)
    if "today" in words or "tonight" in words:
        return now.date()
    if "tomorrow" in words:
        return now.date() + timedelta(days=1)
    for index, weekday in enumerate(WEEKDAYS):
        if weekday in words or f"{weekday}s" in words:
            return now.date() + timedelta(days=(index - now.weekday()) % 7)
    return None


def name(text: str) -> str | None:
    """The name given ("My name is Anna Lee." -> "Anna Lee"; "Anna." -> "Anna")."""
    said = text.strip().rstrip(".!?")
    match = _NAME_LEADS.search(said)
    if match:
        said = match.group(1)
    words = [w for w in re.findall(r"[A-Za-z][A-Za-z'-]*", said) if w.lower() not in _NOT_NAMES]
    if not words or len(words) > 4:
        return None
    return " ".join(w[:1].upper() + w[1:] for w in words)


_STATED_NAME = re.compile(r"\b(?:(?:my|the) name(?: is|'s)|name is|under the name(?: of)?)\s+([^,.;!?]+?)(?:\s+and\b|[,.;!?]|$)", re.I)


def stated_name(text: str) -> str | None:
    """A name a whole request states ("... my name is Anna Lee."), not one a bare answer gives."""
    match = _STATED_NAME.search(text)
    return name(match.group(1)) if match else None


def yes_or_no(text: str) -> bool | None:
    words = set(comparison_words(text.replace("n't", " not")))
    yes, no = bool(words & _YES), bool(words & _NO)
    return yes if yes != no else None
