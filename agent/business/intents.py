"""Frequent questions answered from the business file, no LLM: the fast path's matcher and answers.

Consumes the caller's words (a final transcript, or the stable partial a draft was made from);
returns a ``FastAnswer`` (the intent and the sentence to say), or None for the LLM.

Matching must not misfire, so a question is an intent only when both hold:
- it contains one of the intent's keywords, and
- its content words (function words such as "the", "do", "your" left out, so "What time does
  the shop open" and "What time do you open" agree) are close to one of the intent's
  examples': difflib's ratio over the words, at least ``MIN_SIMILARITY``. "How do I find the
  best trails?" shares only "find" with "How do I find you?", and is left to the LLM.
When two intents qualify the closer one wins. A question the intents do not cover ("Do you
sell helmets for children?") has no keyword or no close example and goes to the LLM.

Opening hours are answered for the day the question asks about: a weekday, "today",
"tomorrow" or "now", from the caller's moment in the business's time zone; with no day, the
whole week.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from datetime import datetime, timedelta
from difflib import SequenceMatcher

from agent.business.model import WEEKDAYS, Business
from agent.business.prompt import opening_hours, spoken_hours, spoken_time
from processors.fast_path import FastAnswer
from processors.turns.comparison_form import comparison_words

# Below this a question shares too few content words with every example to be that intent.
MIN_SIMILARITY = 0.7
_FUNCTION_WORDS = frozenset(
    "a an the is are was do does did you your yours i im me my we us our can could would will "
    "please to of on in at for it be what whats hi hello there so and or tell know like just "
    "hey um uh ok okay".split()
)


# Any day a question names is the same word to the matcher: "open today" is "open on Sunday".
_DAY_WORDS = frozenset({*WEEKDAYS, *(f"{d}s" for d in WEEKDAYS), "today", "tonight", "tomorrow", "now", "weekend"})


def content_words(text: str) -> list[str]:
    return ["day" if w in _DAY_WORDS else w for w in comparison_words(text) if w not in _FUNCTION_WORDS]
_NOW_WORDS = {"now", "currently", "moment"}


class IntentMatcher:
    """The business's intents, ready to answer; call it with the caller's words."""

    def __init__(self, business: Business, *, clock: Callable[[], datetime] | None = None):
        """Args: clock: the current moment (aware); the wall clock in the business's zone when None."""
        self.business = business
        self._clock = clock or (lambda: datetime.now(business.zone))
        self._examples = {
            name: [content_words(example) for example in intent.examples] for name, intent in business.intents.items()
        }
        self._keywords = {
            name: {w for keyword in intent.keywords for w in comparison_words(keyword)}
            for name, intent in business.intents.items()
        }

    def match(self, text: str) -> tuple[str, float] | None:
        """(intent, similarity to its closest example), or None."""
        words = set(comparison_words(text))
        content = content_words(text)
        best = None
        for name in self.business.intents:
            if not words & self._keywords[name]:
                continue
            score = max(SequenceMatcher(None, example, content, autojunk=False).ratio() for example in self._examples[name])
            if score >= MIN_SIMILARITY and (best is None or score > best[1]):
                best = (name, score)
        return best

    def __call__(self, text: str) -> FastAnswer | None:
        matched = self.match(text)
        if matched is None:
            return None
        name = matched[0]
        template = self.business.intents[name].answer
        # Working out the day asked about is only for templates that say the hours.
        fields = _Facts(self.business, hours=self.hours_answer(text) if "{hours" in template else "")
        answer = string.Formatter().vformat(template, (), fields)
        return FastAnswer(name, answer[:1].upper() + answer[1:])

    def hours_answer(self, text: str) -> str:
        """The opening hours for the day ``text`` asks about, as one spoken sentence."""
        words = set(comparison_words(text))
        now = self._clock().astimezone(self.business.zone)
        today = WEEKDAYS[now.weekday()]
        if words & _NOW_WORDS:
            return self._open_now(now)
        for day in WEEKDAYS:
            if day in words or f"{day}s" in words:
                return self._on(day)
        if "tomorrow" in words:
            return self._on(WEEKDAYS[(now + timedelta(days=1)).weekday()], when="tomorrow")
        if "today" in words or "tonight" in words:
            return self._on(today, when="today")
        return f"We're open {opening_hours(self.business).replace('; closed', ', and closed')}."

    def _on(self, day: str, when: str | None = None) -> str:
        hours = self.business.hours[day]
        said = f"{when}, {day.title()}" if when else f"on {day.title()}"
        if hours is None:
            return f"We're closed {said}."
        opener = f"{said}," if when else said
        return f"{opener[0].upper()}{opener[1:]} we're open from {spoken_hours(hours)}."

    def _open_now(self, now: datetime) -> str:
        hours = self.business.hours[WEEKDAYS[now.weekday()]]
        if hours is not None and hours.opens <= now.time() < hours.closes:
            return f"Yes, we're open now, until {spoken_time(hours.closes)}."
        for ahead in range(0, 8):
            day = now + timedelta(days=ahead)
            h = self.business.hours[WEEKDAYS[day.weekday()]]
            if h is not None and (ahead > 0 or now.time() < h.opens):
                when = "later today" if ahead == 0 else "tomorrow" if ahead == 1 else f"on {WEEKDAYS[day.weekday()].title()}"
                return f"We're closed right now; we open {when} at {spoken_time(h.opens)}."
        return "We're closed right now."


class _Facts(dict):
    """What an answer template may read; an unknown name is a clear error, not a blank."""

    def __init__(self, business: Business, *, hours: str):
        super().__init__(
            name=business.name, phone=business.phone, address=business.address, hours=hours,
            prices=business.prices, policies=business.policies,
        )

    def __missing__(self, key):
        raise KeyError(f"answer templates know {sorted(self)}, not {key!r}")
