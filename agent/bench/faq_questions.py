"""The FAQ suite's questions: what is said, in which voice, and what a right answer holds.

Each business has its questions in a file beside it (``shop.yaml`` -> ``shop.faq.yaml``): worded
the way callers talk, unlike its intents' examples, in eight espeak voices, some with fillers or
a pause; some ask what the file does not say, so the right answer is "I don't know" and an
offer of a person. Facts are regular expressions over the graded answer (lower case, number
words as digits: agent/bench/faq.py ``normalize``); ``digits:`` matches a number however it is
grouped. A wrong fact is a fact said of the wrong thing ("a city bike rental is 45 dollars"); an
answer that adds true facts (both rental prices) is not wrong. A question about "today" or
"tomorrow" is graded against the day the suite runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from pathlib import Path

import yaml

from agent.bench.corpus import Utterance, spoken
from agent.business.model import WEEKDAYS, Business, default_business_path, load_business

# How an answer to a question is graded (agent/bench/faq.py ``grade``).
OUTCOMES = ("correct", "wrong", "dont_know", "incomplete", "no_answer")


@dataclass(frozen=True)
class FaqQuestion:
    """One spoken question and its grading.

    Parameters:
        utterance: What is said (agent/bench/corpus.py).
        must: Groups of alternatives; a right answer holds one alternative of every group.
        must_not: Any of these in the answer is a wrong fact.
        unknown: The file does not answer it: only "don't know + a person" is right.
        day_offset: Asks about today (0) or tomorrow (1): ``must`` comes from that day's hours.
    """

    utterance: Utterance
    must: tuple[tuple[str, ...], ...] = ()
    must_not: tuple[str, ...] = ()
    unknown: bool = False
    day_offset: int | None = None
    tags: tuple[str, ...] = field(default=())

    @property
    def id(self) -> str:
        return self.utterance.id


class QuestionsError(ValueError):
    """A questions file that cannot be used; the message names the file and the question."""


def questions_path(business_path: Path | str | None) -> Path:
    """The questions file beside a business file: ``shop.yaml`` -> ``shop.faq.yaml``."""
    path = Path(business_path) if business_path else default_business_path()
    return path.with_name(f"{path.stem}.faq.yaml")


def load_questions(path: Path | str) -> tuple[FaqQuestion, ...]:
    """Read a questions file (``questions:``, each with ``id``, ``say``, ``voice``, ``wpm`` and
    ``must`` / ``must_not`` / ``unknown`` / ``day_offset``; the shipped files show the form)."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise QuestionsError(f"questions file {path}: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list):
        raise QuestionsError(f"questions file {path}: expected a list under 'questions:'")
    return questions_from(data["questions"], f"questions file {path}")


def questions_from(items: list, source: str, prefix: str = "faq-") -> tuple[FaqQuestion, ...]:
    """The questions of a file's list (``source`` names it in errors); ids get ``prefix``."""
    questions = []
    for n, item in enumerate(items, start=1):
        try:
            parts = item["say"] if isinstance(item["say"], list) else [item["say"]]
            if not all(isinstance(p, (str, int)) for p in parts) or not any(isinstance(p, str) for p in parts):
                raise ValueError("'say' is a sentence, or a list of sentences and pauses in ms")
            utterance = spoken(f"{prefix}{item['id']}", "faq", item.get("voice", "en-us"), int(item.get("wpm", 160)), *parts)
            must = tuple(tuple(group) for group in item.get("must", ()))
            must_not = tuple(item.get("must_not", ()))
            for pattern in [p for group in must for p in group] + list(must_not):
                if not pattern.startswith("digits:"):
                    re.compile(pattern)
            questions.append(FaqQuestion(utterance, must, must_not, bool(item.get("unknown", False)),
                                         item.get("day_offset")))
        except (KeyError, TypeError, ValueError, re.error) as error:
            name = item.get("id", n) if isinstance(item, dict) else n
            raise QuestionsError(f"{source}: question {name}: {error}") from None
    ids = [q.id for q in questions]
    if len(set(ids)) != len(ids):
        raise QuestionsError(f"{source}: ids repeat ({sorted({i for i in ids if ids.count(i) > 1})})")
    return tuple(questions)


_YES = r"^\W*(yes|yeah|sure)\b"
# The shipped shop's questions, read once (the FAQ suite's default).
QUESTIONS: tuple[FaqQuestion, ...] = load_questions(questions_path(None))


def expectations(question: FaqQuestion, now: datetime | None = None,
                 business: Business | None = None) -> tuple[tuple, tuple]:
    """(must, must_not) for ``question``; a today/tomorrow question gets that day's hours (of
    ``business``, the shipped shop when None)."""
    if question.day_offset is None:
        return question.must, question.must_not
    business = business or load_business()
    now = (now or datetime.now(business.zone)).astimezone(business.zone)
    day = WEEKDAYS[(now + timedelta(days=question.day_offset)).weekday()]
    hours = business.hours[day]
    if hours is None:
        return (("closed", r"\bnot open\b"),), (_YES,)
    times = []
    for t in (hours.opens, hours.closes) if question.day_offset else (hours.closes,):
        h12 = t.hour % 12 or 12
        said = {time(12, 0): ("noon",), time(0, 0): ("midnight",)}.get(t, ())
        times.append((rf"\b{h12}\b", rf"\b{t.hour}:", *said))
    return tuple(times), (r"\bclosed (today|tomorrow)\b", r"\bwe(?:'re| are) closed\b(?! on)")
