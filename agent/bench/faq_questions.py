"""The FAQ suite's questions: what is said, in which voice, and what a right answer holds.

Questions about the shipped Harbor Lane Bikes file (agent/business/harbor_lane_bikes.yaml),
worded unlike its intents' examples, in eight espeak voices, some with fillers or a pause;
the last ones ask what the file does not say, so the right answer is "I don't know" and an
offer of a person. Facts are regular expressions over the graded answer (lower case, number
words as digits: agent/bench/faq.py ``normalize``); ``digits:`` matches a number however it is
grouped. A wrong fact is a fact said of the wrong thing ("a city bike rental is 45 dollars"); an
answer that adds true facts (both rental prices) is not wrong. A question about "today" or
"tomorrow" is graded against the day the suite runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from agent.bench.corpus import Utterance, spoken
from agent.business.model import WEEKDAYS, load_business


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


def _q(id, voice, wpm, parts, must=(), must_not=(), **kw) -> FaqQuestion:
    parts = parts if isinstance(parts, tuple) else (parts,)
    return FaqQuestion(spoken(id, "faq", voice, wpm, *parts), tuple(tuple(g) for g in must), tuple(must_not), **kw)


PHONE = ("digits:5550142",)
ADDRESS = (r"harbou?r lane",)
SIX_PM = (r"\b6\b", r"\b18")
_YES = r"^\W*(yes|yeah|sure)\b"

QUESTIONS: tuple[FaqQuestion, ...] = (
    # Opening hours
    _q("faq-sunday", "en-us", 165, "Are you guys open on Sundays?",
       must=[("closed", r"\bnot open\b")], must_not=[_YES, r"\bwe(?:'re| are) open on sunday"]),
    _q("faq-saturday-open", "en-gb", 160, "What time do you open on a Saturday morning?",
       must=[(r"\b10\b",)], must_not=[r"\b9 (in the morning|am)\b", r"\bclosed on saturday"]),
    _q("faq-friday-close", "en-us+f2", 170, "How late are you open on Friday?",
       must=[SIX_PM], must_not=[r"\bclosed on friday", r"\b4 in the afternoon\b"]),
    _q("faq-weekday-hours", "en-gb-scotland", 165, ("Um, what are your hours", 400, "during the week?"),
       must=[(r"\b9\b",), SIX_PM], must_not=[r"\bopen on sunday"]),
    _q("faq-tomorrow", "en-029", 150, "Will you be open tomorrow?", day_offset=1),
    _q("faq-today-close", "en-us+m3", 175, "What time do you close today?", day_offset=0),
    _q("faq-all-hours", "en-gb-x-rp", 155, "Could you tell me your opening times?",
       must=[(r"\b9\b",), SIX_PM], must_not=[r"\bopen on sunday"]),
    _q("faq-monday", "en-us+f5", 160, "Are you open on Monday mornings?",
       must=[(r"\b9\b",)], must_not=[r"\bclosed on monday", r"^\W*no\b"]),
    # Phone and address
    _q("faq-phone", "en-us", 170, "Can I have your phone number, please?", must=[PHONE]),
    _q("faq-ring", "en-gb", 155, "What number should I ring to reach the shop?", must=[PHONE]),
    _q("faq-where", "en-us+m3", 165, "Where is your shop?", must=[ADDRESS]),
    _q("faq-address", "en-gb-scotland", 160, "What's the address of the store?", must=[ADDRESS, (r"\b42\b",)]),
    _q("faq-ferry", "en-029", 150, "Is the shop near the ferry terminal?",
       must=[(r"ferry", r"next to")], must_not=[r"^\W*no\b"]),
    # Prices
    _q("faq-tune-up", "en-us+f2", 165, "How much is a basic tune up?",
       must=[(r"\b45\b",)], must_not=[r"tune-?\s?up[^.;,]*\b(12|20) dollars"]),
    _q("faq-flat", "en-us", 160, ("Uh, how much do you charge", 350, "to fix a flat tire?"),
       must=[(r"\b12\b",)], must_not=[r"(flat|tyre|tire)[^.;,]*\b(45|20) dollars"]),
    _q("faq-ebike", "en-gb-x-rp", 165, "What does an electric bike cost to rent for a day?",
       must=[(r"\b45\b",)], must_not=[r"electric[^.;,]*\b(20|12) dollars"]),
    _q("faq-city-bike", "en-us+f5", 170, "How much is it to rent a city bike?",
       must=[(r"\b20\b",)], must_not=[r"city[^.;,]*\b(45|12) dollars"]),
    _q("faq-tune-time", "en-gb", 165, "How long does a tune-up take?",
       must=[(r"\b1 day\b", r"one day", r"next day", r"a day")], must_not=[r"\b(2|3|two|three) days\b", r"\bhours?\b"]),
    # Returns, shipping, rentals
    _q("faq-return-unused", "en-us+m3", 160, "Can I return a helmet I never used?",
       must=[(r"\b30\b",)], must_not=[r"^\W*no\b", r"\bcannot\b", r"\bcan't\b"]),
    _q("faq-return-bike", "en-gb-scotland", 160, ("I bought a bike last week,", 450, "can I still return it?"),
       must=[(r"\b14\b",)], must_not=[r"^\W*no\b", r"\bcannot\b", r"\bcan't\b"]),
    _q("faq-receipt", "en-us", 175, "Do I need my receipt to get a refund?",
       must=[(r"receipt",)], must_not=[r"^\W*no\b"]),
    _q("faq-free-shipping", "en-029", 160, "Do you charge for delivery?",
       must=[(r"\b75\b",)], must_not=[r"^\W*no\W*$"]),
    _q("faq-ship-time", "en-us+f2", 170, "How fast do online orders ship?",
       must=[(r"\b2\b", r"\btwo\b")], must_not=[r"same day", r"\b(3|4|5) (business )?days"]),
    _q("faq-rent-id", "en-gb-x-rp", 160, "What do I need to bring to rent a bike?",
       must=[(r"\bid\b", r"identification")]),
    # Not in the file: "I don't know" and a person is the only right answer.
    _q("faq-helmets-kids", "en-us", 165, "Do you sell helmets for children?", unknown=True,
       must_not=[_YES, r"\bwe (do )?sell\b"]),
    _q("faq-dog", "en-gb", 160, "Can I bring my dog into the shop?", unknown=True, must_not=[_YES]),
    _q("faq-scooter", "en-us+f5", 170, "Do you repair electric scooters?", unknown=True,
       must_not=[_YES, r"\bwe (do )?repair\b"]),
    _q("faq-parking", "en-gb-scotland", 155, "Is there parking near the shop?", unknown=True,
       must_not=[_YES, r"\bthere is (free )?parking\b"]),
    _q("faq-student", "en-us+m3", 170, ("Um, do you offer", 300, "a student discount?"), unknown=True,
       must_not=[_YES, r"\b\d+ ?(%|percent)"]),
    _q("faq-cash", "en-029", 155, "Can I pay with cash?", unknown=True, must_not=[_YES]),
    _q("faq-helmet-price", "en-us+f2", 165, "How much is a bike helmet?", unknown=True,
       must_not=[r"helmets? (is|are|costs?) \d+", r"\b\d+ dollars"]),
    _q("faq-christmas", "en-gb-x-rp", 160, "Are you open on Christmas Day?", unknown=True,
       must_not=[_YES, r"^\W*no\b"]),
)


def expectations(question: FaqQuestion, now: datetime | None = None) -> tuple[tuple, tuple]:
    """(must, must_not) for ``question``; a today/tomorrow question gets that day's hours."""
    if question.day_offset is None:
        return question.must, question.must_not
    business = load_business()
    now = (now or datetime.now(business.zone)).astimezone(business.zone)
    day = WEEKDAYS[(now + timedelta(days=question.day_offset)).weekday()]
    hours = business.hours[day]
    if hours is None:
        return (("closed", r"\bnot open\b"),), (_YES,)
    times = []
    for t in (hours.opens, hours.closes) if question.day_offset else (hours.closes,):
        h12 = t.hour % 12 or 12
        times.append((rf"\b{h12}\b", rf"\b{t.hour}:"))
    return tuple(times), (r"\bclosed (today|tomorrow)\b", r"\bwe(?:'re| are) closed\b(?! on)")
