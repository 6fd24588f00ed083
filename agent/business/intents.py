"""Frequent questions answered from the business file, no LLM: the fast path's matcher and answers.

Consumes the caller's words (a final transcript, or the stable partial a draft was made from);
returns a ``FastAnswer`` (the intent and the sentence to say), or None for the LLM.

A question is an intent (or, with the facts' meaning index, a fact topic: agent/business/meaning.py)
when its words are close in meaning to that topic's sentences, clearly closer than to any other;
a question only near a fact hears that fact said as what it is, with a person offered; a follow-up
("And on Sunday?") is answered as the caller's turn before was. Without the meaning index, and
before it, by words: matching must not misfire, so a question is an intent only when both hold:
- it contains one of the intent's keywords, and
- its content words (function words such as "the", "do", "your" left out, so "What time does
  the shop open" and "What time do you open" agree) are close to one of the intent's
  examples': difflib's ratio over the words, at least ``MIN_SIMILARITY``. "How do I find the
  best trails?" shares only "find" with "How do I find you?", and is left to the LLM.
When two intents qualify the closer one wins. A question the intents do not cover has no
keyword or no close example and goes to the LLM, with the facts it is about
(agent/business/facts.py); a question no fact of the file is about either ("Do you sell
helmets for children?"), or mostly about words no fact holds ("How much is the monthly
plan?"), is answered with the file's ``unknown_answer``, since a small model asked it guesses
("Yes, we do") or, at best, says the same after a second of LLM time.

Opening hours are answered for the day the question asks about: a weekday, "today",
"tomorrow" or "now", from the caller's moment in the business's time zone; with no day, the
whole week; a holiday or a date, which weekly hours do not cover, gets ``unknown_answer``.
Prices are answered for the items the question names (agent/business/facts.py
``asked_items``); naming none, the LLM answers with the price lines. Words that were misheard
but sound the same ("tuna" for "tune") still match, by their Metaphone keys (``match``).
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Callable
from datetime import datetime
from difflib import SequenceMatcher

import jellyfish

from agent.business.facts import FactIndex
from agent.business.words import (article, asked_items, asks_nothing, asks_to_reckon, is_question, is_request, item_words,
                                  numbers_as_digits, opens_a_question, same_word)
from agent.business.meaning import ABOUT, LEAD, NEAR_A_FACT, NOTHING_NEAR
from agent.business.model import WEEKDAYS, Business, Intent
from agent.business.hours import DAY_WORDS, SPECIAL_DAYS, hours_for
from processors.fast_path import FastAnswer
from processors.turns.comparison_form import comparison_words

# Below this a question shares too few content words with every example to be that intent.
MIN_SIMILARITY = 0.7
# From this share of its words unknown to the file, a question no intent matches is not the
# file's to answer. Questions the file answers in other words stay below it ("How late are you
# open on Friday?", 1/3: FAQ suite); half catches "Can I pay with cash?".
UNKNOWN_SHARE = 0.5
# A request needs this many words no fact holds to be the file's "I don't know": one is often
# the caller thinking aloud ("I need to think about it.", "I'd like a bike for my daughter.").
UNKNOWN_REQUEST_WORDS = 2
# Words that ask about the conversation itself, not the business.
_CONVERSATION_WORDS = frozenset("say said saying repeat again sorry mean meant catch hear heard pardon".split())
# Words that say how a thing is asked, not what about: not counted in that share, so "Do I need
# my receipt?" and "Yeah, but what about Sunday?" are all known words. A list, not a tagger:
# no English part-of-speech model installs from PyPI with its weights (spaCy's do not).
_ASKING_WORDS = frozenset(
    "which but yeah yes yep no nope not need needs get go going come take bring make use see give let help "
    "also still really very all some every same more most only even ever too well right oh ah sure "
    "hang hold wait on up out into over off from by during before after until late early soon "
    "other another instead anything something thing things one way kind".split()
)
_FUNCTION_WORDS = frozenset(
    "a an the is are was do does did you your yours i im me my we us our can could would will "
    "please to of on in at for it be what whats hi hello there so and or tell know like just "
    "hey um uh ok okay ill ive want".split()
)


# Any day a question names is the same word to the matcher: "open today" is "open on Sunday".
_DAY_WORDS = frozenset({*WEEKDAYS, *(f"{d}s" for d in WEEKDAYS), "today", "tonight", "tomorrow", "now", "weekend"})


# How a fact kind is answered when the file wrote no intent for it (the file's own intent of that
# name wins): the implicit intents are matched by meaning alone, so their keywords and examples
# are placeholders the model requires.
_IMPLICIT_ANSWERS = {"hours": "{hours}", "address": "We're at {address}.", "phone": "Our phone number is {phone}."}


def implicit_intents(business: Business) -> dict[str, Intent]:
    """An answer for every kind of fact the file holds: hours, address, phone, prices, each policy."""
    answers = dict(_IMPLICIT_ANSWERS)
    if business.prices:
        answers["prices"] = "{price}"
    for topic in business.policies:
        answers[topic] = f"{{policies[{topic}]}}."
    return {name: Intent(keywords=[name], examples=[name], answer=answer) for name, answer in answers.items()}


def content_words(text: str, items: frozenset[str] = frozenset(), keep: frozenset[str] = frozenset()) -> list[str]:
    """The words that carry the question, any day as "day" and a run of item words as one "item".

    A word of ``keep`` (the intents' keywords) stays itself: "rent" asks for a booking even
    though "rental" names an item."""
    words = []
    for w in comparison_words(numbers_as_digits(text)):
        if w in _FUNCTION_WORDS:
            continue
        if w.isdigit():  # a number said digit by digit is one number ("4 5 7 2")
            if not words or words[-1] != "digits":
                words.append("digits")
            continue
        if items and w not in keep and any(same_word(w, i) for i in items):
            if not words or words[-1] != "item":
                words.append("item")
            continue
        words.append("day" if w in _DAY_WORDS else w)
    return words




def _written(word: str) -> str:
    return word


def _sound(word: str) -> str:
    # "item" and "day" stand for any item or day: they are placeholders, not words to say.
    return word if word in ("item", "day") else jellyfish.metaphone(word) or word


class IntentMatcher:
    """The business's intents, ready to answer; call it with the caller's words."""

    def __init__(self, business: Business, *, clock: Callable[[], datetime] | None = None,
                 facts: FactIndex | None = None, sounds_alike: bool = True, hedge: bool = True):
        """Args:
            clock: the current moment (aware); the wall clock in the business's zone when None.
            facts: when given, a question that no intent and no fact of the file is about gets
                the file's ``unknown_answer`` (intent "unknown") instead of an LLM guess.
            sounds_alike: also match words by how they sound (see ``match``).
            hedge: a question near a fact but not plainly about it, or asking details a policy
                does not mention, gets that fact with a hedge and a person; without, the LLM's.
        """
        self.sounds_alike = sounds_alike
        self.hedge = hedge
        self.business = business
        self._clock = clock or (lambda: datetime.now(business.zone))
        self._facts = facts
        self._meaning = facts.meaning if facts is not None else None
        # Every fact kind is answerable whether or not the file wrote an intent for it.
        self.intents = {**implicit_intents(business), **business.intents}
        # Tools that open a multi-step task (a booking: a tool that changes something): a question
        # about the task is not a request to start it.
        self._task_tools = {name for name, tool in business.declared_tools.items() if tool.changes}
        # Any priced item is the same word to the matcher: "a tune-up" is "a city bike rental".
        self._items = frozenset(w for item in business.prices for w in item_words(item))
        self._keywords = {
            name: {w for keyword in intent.keywords for w in comparison_words(keyword)}
            for name, intent in business.intents.items()
        }
        self._keep = frozenset().union(*self._keywords.values()) if self._keywords else frozenset()
        self._examples = {
            name: [content_words(example, self._items, self._keep) for example in intent.examples]
            for name, intent in business.intents.items()
        }
        # Pure in the words: the Whisper scheduler asks about the same final several times (its
        # doubt, then which of two transcripts to keep, then ``about_the_file``), on the event loop.
        self.recognises = functools.lru_cache(maxsize=256)(self._recognises)

    def match(self, text: str) -> tuple[str, float] | None:
        """(intent, similarity to its closest example), or None.

        Words are compared as written first; when nothing matches, as they sound (their
        Metaphone keys), so a mishearing that keeps the sound ("tuna" for "tune", "chipping"
        for "shipping") still finds its intent. Both rules need a keyword and a close example.
        """
        found = (self._match(text, _written) or self._meant(text)
                 or (self._match(text, _sound) if self.sounds_alike else None))
        if found and self.intents[found[0]].tool in self._task_tools and asks_rather_than_requests(text):
            return self._meant(text)  # about the task, not a request to start it
        return found

    def _meant(self, text: str) -> tuple[str, float] | None:
        """The topic the words are about by meaning (agent/business/meaning.py), when close and clear.

        A tool that opens a multi-step task is only for words that ask for it ("I'd like to hire
        a bike", "Can I book ...?"): a question about the task ("What do I need to rent a bike?")
        is about its facts, and "I have a question about renting bikes." is not a booking."""
        if self._meaning is None:
            return None
        among = set(self.intents)
        if asks_rather_than_requests(text) or not requests(text):
            among -= {name for name, intent in self.intents.items() if intent.tool in self._task_tools}
        return self._meaning.topic(text, among)

    def _match(self, text: str, form: Callable[[str], str]) -> tuple[str, float] | None:
        words = {form(w) for w in comparison_words(text)}
        content = [form(w) for w in content_words(text, self._items, self._keep)]
        best = None
        for name in self.business.intents:
            if not words & {form(k) for k in self._keywords[name]}:
                continue
            examples = ([form(w) for w in example] for example in self._examples[name])
            score = max(SequenceMatcher(None, example, content, autojunk=False).ratio() for example in examples)
            if score >= MIN_SIMILARITY and (best is None or score > best[1]):
                best = (name, score)
        return best

    def _recognises(self, text: str) -> bool:
        """Whether one of the intents asks ``text`` (as ``__call__`` reads it; "unknown" is not one).

        Whisper's second opinion hears again a final the business does not recognise
        (processors/stt/whisper_scheduler.py), because a question about the shop that matches none
        of its intents is as often a mishearing ("open on certain days") as a new question."""
        return self.match(text) is not None or self._topic_asked(text) is not None

    def about_the_file(self, text: str) -> bool:
        """Whether ``text`` is about anything the file holds: an intent asks it, a fact shares a
        word with it, or it names the business. "Do you have this sofa in blue?" is not; "Are you
        open on certain days?" ("open") and "What's that race on the store?" ("store") are. True
        without facts."""
        if self._facts is None or self.recognises(text):
            return True
        return bool(self._facts.relevant(text)) or self._facts.names_the_business(text)

    def unknown_details(self, text: str) -> list[str]:
        """The words of ``text`` no fact of the file holds, in the order said ("child", "seat")."""
        if self._facts is None:
            return []
        unknown = self._facts.unknown_words(text)
        return list(dict.fromkeys(w for w in comparison_words(text) if w in unknown))

    def __call__(self, text: str, earlier: str = "", bot_said: str = "") -> FastAnswer | None:
        """The answer to ``text``; ``earlier``, the caller's turn before, answers a follow-up that
        leans on it ("How much is a city bike?" ... "What about the electric one?"). ``bot_said``
        is the tools' (agent/tools/router.py): the matcher answers facts, not offers."""
        answer = self._answer_to(text)
        if answer is not None and answer.tool is None and answer.intent in ("prices", "unsure:prices") \
                and asks_to_reckon(text):
            # A fixed answer reads out one fact; a total, a difference or a price for the caller's
            # count is the LLM's to work out from the facts (its numbers held to them: facts.py).
            return None
        if (earlier and leans_on_before(text) and (answer is None or answer.intent == "unknown"
                                                   or answer.intent.startswith("unsure:"))
                and not (self._facts and self._facts.unknown_asked(text, ignore=_ASKING_WORDS))):
            # Only a follow-up in the file's own words: "And do you sell helmets?" asks something new.
            return self._follow_up(text, earlier) or answer
        return answer

    def _follow_up(self, text: str, earlier: str) -> FastAnswer | None:
        """``text`` answered as the same kind of question as ``earlier``: its day, item or detail
        in place of the one asked before ("And on Sunday?" after the hours of Saturday)."""
        matched = self.match(earlier)
        name = matched[0] if matched else self._topic_asked(earlier)
        if name is None or self.intents[name].answer is None:
            return None
        answer = self._answer(name, text)
        if answer is None or (name == "hours" and not _names_a_day(text)):
            answer = self._answer(name, f"{earlier} {text}")
        if answer is None or answer == self.business.unknown_answer:
            return None
        return FastAnswer(name, answer)

    def _answer_to(self, text: str) -> FastAnswer | None:
        matched = self.match(text)
        name = matched[0] if matched else self._topic_asked(text)
        if name is None and self.hedge and self._asks_when(text):
            # A guess that the day's hours are what is asked, so said as one, with a person: a
            # table for Friday night is not known, but when the place is open that night is.
            return self._hedged("hours", self._answer("hours", text))
        if name is None:
            unsure = self._nearest_fact_answer(text)
            if unsure is not None:
                return unsure
            if self._not_in_the_file(text):
                return FastAnswer("unknown", self.business.unknown_answer)
            return None
        intent = self.intents[name]
        if intent.tool is not None:
            # What the words hold for the tool is the caller's router's to read (agent/tools/router.py).
            return FastAnswer(name, "", tool=intent.tool)
        answer = self._answer(name, text)
        if answer is None:  # a price of no item the list names
            return FastAnswer("unknown", self.business.unknown_answer) if self._not_in_the_file(text) else None
        if answer == self.business.unknown_answer:
            return FastAnswer("unknown", answer)
        if ((matched is None or name in self.business.policies or asks_nothing(text))
                and self._facts and self._facts.unknown_words(text)):
            # The policy read for a question with details it does not mention ("Do you ship
            # to France?"): true, but maybe not the whole answer, so a person is offered; an LLM
            # that can say what the policy means for the detail asked says that instead. So too
            # for words that ask nothing and hold a word no fact does: most often a question
            # misheard ("It's the parking near the shop." for "Is there parking ...?", 10 dB
            # noise), where the nearest fact said plainly answers what was not asked.
            if not self.hedge:
                return None
            # Said as the nearest thing the file says, not as the answer: "Do you ship to
            # Canada?" read the shipping policy plainly and sounded like a yes (A/B, 2026-12-06).
            return self._hedged(name, answer)
        return FastAnswer(name, answer)

    def _answer(self, name: str, text: str) -> str | None:
        """What intent ``name``'s template says to ``text``: None for a price of no listed item."""
        template = self.intents[name].answer
        if "{hours" in template and set(comparison_words(text)) & SPECIAL_DAYS:
            # The file has weekly hours only: a holiday's are not known, and a guess is wrong.
            return self.business.unknown_answer
        # Working out the day (or item) asked about is only for templates that say it.
        price = ""
        if "{price}" in template:
            price = self.price_answer(text)
            if price is None:
                return None
        fields = _Facts(self.business, hours=self.hours_answer(text) if "{hours" in template else "", price=price)
        answer = string.Formatter().vformat(template, (), fields)
        return answer[:1].upper() + answer[1:]

    def _asks_when(self, text: str) -> bool:
        """A question that names a day and is about nothing else of the file asks when the
        business is there that day, however it is worded ("Would I still catch you on a
        Tuesday?", "Could someone come round Friday after half five?"): the day's hours answer it."""
        if not (is_question(text) and _names_a_day(text)) or set(comparison_words(text)) & SPECIAL_DAYS:
            return False
        if self._meaning is None:
            return False
        ranked = self._meaning.ranked(text)
        # Another topic plainly nearer than the hours ("Do you deliver on Sundays?") is that topic's.
        hours = next((score for topic, score, _ in ranked if topic == "hours"), 0.0)
        return not ranked or ranked[0][0] == "hours" or ranked[0][1] - hours < LEAD

    def _nearest_fact_answer(self, text: str) -> FastAnswer | None:
        """For a question near a fact of the file but not clearly about it (``NEAR_A_FACT`` to
        ``ABOUT``): that fact, said as what it is, the nearest thing the file says, with a
        person offered ("I'm not sure that's what you're asking, but we don't take cash or
        cheques. Would you like me to put you through to a person?"). True whatever was asked,
        and the caller who asked something else hears that it is not known; a small model given
        the same fact answered "Yes, you can pay cash" (bench, text runs)."""
        if self._meaning is None or not self.hedge or not is_question(text):
            return None
        answering = {name for name, intent in self.intents.items() if intent.answer is not None}
        ranked = [r for r in self._meaning.ranked(text) if r[0] in answering]
        if not ranked or not NEAR_A_FACT <= ranked[0][1] < ABOUT:
            return None
        answer = self._answer(ranked[0][0], text)
        if answer is None or answer == self.business.unknown_answer:
            return None
        return self._hedged(ranked[0][0], answer)

    def _hedged(self, name: str, answer: str) -> FastAnswer:
        """``answer`` said as the nearest thing the file says, with a person (intent "unsure:<name>")."""
        return FastAnswer(f"unsure:{name}", self.business.unsure(answer))

    def _not_in_the_file(self, text: str) -> bool:
        """Whether ``text``, which no intent matches, asks about something the file does not hold.

        A question: either no fact is about it, or at least ``UNKNOWN_SHARE`` of its words are
        ones no fact holds ("How much is the monthly plan?", "Can I pay with cash?"): a common
        word of it ("much", "pay") retrieves a fact, and a 0.5B model given that fact answers
        from it or says it does not know, after a second or more of LLM time (bench,
        2026-12-02: all 12 such turns "I'm sorry, I don't know that"). A request
        (``is_request``: "I want to cancel my subscription.") the same, when at least
        ``UNKNOWN_REQUEST_WORDS`` of its words are unknown: the embedded model said it did not
        know to every such request in every bench run, 1-3 s after the turn end, and once
        asked back for "the name of the person who charged you twice". Any other statement is
        the LLM's ("I have a question.", "My name is Anna."), as is a question or request
        about what was said ("What did you say the price was?"), which the LLM has."""
        if self._facts is None or asks_for_person(text) or set(comparison_words(text)) & _CONVERSATION_WORDS:
            return False
        if is_question(text):
            if self._meaning is not None:
                nearest = self._meaning.nearest(text)
                if nearest < NOTHING_NEAR:
                    return True
                if nearest >= NEAR_A_FACT:
                    # Near something the file says that no answer template could say (a price of
                    # no listed item, say): the LLM reads the nearest facts, held to them.
                    return False
            return not self._facts.relevant(text) or self._mostly_unknown(text)
        return (is_request(text) and self._mostly_unknown(text)
                and len(self._facts.unknown_asked(text, ignore=_ASKING_WORDS)) >= UNKNOWN_REQUEST_WORDS)

    def _mostly_unknown(self, text: str) -> bool:
        return self._facts.unknown_share(text, ignore=_ASKING_WORDS) >= UNKNOWN_SHARE

    def _topic_asked(self, text: str) -> str | None:
        """An intent whose keyword the question holds and whose topic is the fact it is most
        about, though it is worded unlike every example.

        A policy is the answer whatever the detail asked ("Can I return a helmet I never
        used?"): it is read out with a person offered. Any other topic only when every word of
        the question is one the topic's facts hold ("Is the shop near the ferry terminal?" is
        the address): "Is the cafe next door open on Sunday?" is not about the shop's hours,
        nor "the phone number of the ferry terminal" about its phone."""
        if self._facts is None:
            return None
        words = set(comparison_words(text))
        topic = self._facts.top_topic(text)
        if topic not in self.business.intents or not words & self._keywords[topic]:
            return None
        if topic in self.business.policies or self._facts.within_topic(text, topic):
            return topic
        return None

    def hours_answer(self, text: str) -> str:
        """The opening hours for the day ``text`` asks about, as one spoken sentence (agent/business/hours.py)."""
        return hours_for(self.business, comparison_words(text), self._clock())

    def price_answer(self, text: str) -> str | None:
        """The price of each item ``text`` names, as one sentence; None when it names none."""
        items = asked_items(text, list(self.business.prices))
        if not items and self._meaning is not None and (item := self._meaning.item(text)):
            items = [item]  # named in other words: "an e-bike" is the electric bike rental
        if not items:
            return None
        said = [f"{article(item)} {item} is {self.business.prices[item]}" for item in items]
        return (", and ".join(said) if len(said) < 3 else "; ".join(said)) + "."


_PERSON_WORDS = frozenset("person human someone somebody agent representative manager staff operator".split())


# How a follow-up opens: "And on Sunday?", "What about the electric one?", "How about Monday?".
_FOLLOW_UP = re.compile(r"^(?:and|or|also|so|then|what about|how about|and what about|and how about|what if)\b")
# Any shorter turn leans on the one before it as well ("Sunday?", "The electric one?").
_FOLLOW_UP_WORDS = 4


def leans_on_before(text: str) -> bool:
    """Whether ``text`` reads as a follow-up to the turn before: it opens as one, or is a few words."""
    said = " ".join(comparison_words(text))
    return bool(_FOLLOW_UP.match(said)) or (len(said.split()) <= _FOLLOW_UP_WORDS and not opens_a_question(text))


def _names_a_day(text: str) -> bool:
    return bool(set(comparison_words(text)) & DAY_WORDS)


def asks_rather_than_requests(text: str) -> bool:
    """A question that asks about something ("What do I need to rent a bike?", "Is there anything
    I need to show you?"), not a request put as one ("Can I book a bike for Saturday?", "Could
    you reserve two bikes?")."""
    words = comparison_words(text)
    return opens_a_question(text) and tuple(words[:2]) not in _REQUEST_OPENINGS


def requests(text: str) -> bool:
    """Whether ``text`` asks for something to be done: "I'd like ...", "Can I ...?", "Could you ...?"."""
    return is_request(text) or tuple(comparison_words(text)[:2]) in _REQUEST_OPENINGS


# "Can I ...?", "Could you ...?": how a request is put as a question.
_REQUEST_OPENINGS = frozenset((verb, who) for verb in ("can", "could", "may", "would", "will")
                              for who in ("i", "we", "you"))


def asks_for_person(text: str) -> bool:
    return bool(set(comparison_words(text)) & _PERSON_WORDS)


class _Facts(dict):
    """What an answer template may read; an unknown name is a clear error, not a blank."""

    def __init__(self, business: Business, *, hours: str, price: str = ""):
        super().__init__(
            name=business.name, phone=business.phone, address=business.address, hours=hours, price=price,
            prices=business.prices, policies=business.policies,
        )

    def __missing__(self, key):
        raise KeyError(f"answer templates know {sorted(self)}, not {key!r}")
