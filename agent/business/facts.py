"""The business's facts, one spoken line each, and the few a question is about (retrieval).

Consumes a ``Business`` and the caller's words; returns the fact lines most relevant to the
question (``FactIndex.relevant``), and the caller's date in the business's time zone
(``today_line``), given with any question about opening hours; and the words Whisper should
expect callers to say (``vocabulary_of``).

The lines are sentences as the business would say them ("A basic tune-up is 45 dollars, ready
in one day."). Why retrieval when the system prompt already lists every fact: a 0.5B model recalls a fact put
next to the question far better than one twenty lines up ("Are you open on Sunday?" answered
"Yes" with Sunday's "closed" in the prompt). The lines come from the file only, worded the way
an answer says them, so the model can repeat them and has nothing to invent.

Scoring is by meaning first (agent/business/meaning.py: the lines nearest the question), then
word overlap with each line's topic words (a fact's own words plus a few words that ask for it:
"cost" for prices, "when" for hours), a word's longer forms counting as the word ("rent" is
"rental") and a few everyday variants too ("tire" is "tyre"); room left is given to the one-line
topics (a policy, the address) the question lies nearest by any of their sentences.

An order the caller names ("two large pepperonis and one large cheese") is worked out
(agent/business/orders.py) and put first in the facts, so the answer reads a total rather than
doing sums; the answer check (``supports``) lets only such worked-out numbers through. How words
are compared (one word in two forms, the items a question names) is agent/business/words.py.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from agent.business.meaning import NEAR_A_FACT, NOTHING_NEAR, MeaningIndex
from agent.business.model import WEEKDAYS, Business
from agent.business.orders import Reckoned, order_total
from agent.business.prompt import opening_hours, spoken_hours
from agent.business.words import PRICE_WORDS, RECKONING, article, numbers_in, same_word, words
from processors.turns.comparison_form import comparison_words

NO_FACTS = "There is no fact about this."
# A fact line at least this close in meaning to a question is retrieved for it.
RELEVANT_NEAR = 0.45
# Topics this close to the nearest topic of a question give their nearest line too (``_topic_lines``).
TOPIC_SPREAD = 0.1
# Words that ask for a kind of fact, beyond the fact's own words.
_ASKS = {
    "hours": frozenset("open opening opens close closed closing closes hours hour time when today tomorrow tonight now "
                       "weekend".split()),
    "address": frozenset("where address located location find directions street near nearby".split()),
    "phone": frozenset("phone number call ring telephone".split()),
    "prices": PRICE_WORDS,
}
_DAY_NAMES = frozenset(WEEKDAYS) | {f"{day}s" for day in WEEKDAYS}
# Words a caller calls any business by: they name the business itself, which every fact is about.
_SELF = frozenset("shop store business place company".split())


@dataclass(frozen=True)
class Fact:
    """One fact as a line the model may repeat, and the words that make it relevant."""

    topic: str
    line: str
    words: frozenset[str]


def _the_week(business: Business) -> str:
    """The week's hours as one line: "We are open Monday to Friday ...; closed on Sunday.", and
    for a week that starts closed, "We are closed on Monday; open Tuesday to ..." (it read "We are
    open closed on Monday", which the LLM is given as a fact)."""
    week = opening_hours(business)
    if week.startswith("closed") and "; " in week:
        first, rest = week.split("; ", 1)
        return f"We are {first}; open {rest}."
    return f"We are {week}." if week.startswith("closed") else f"We are open {week}."


def facts_of(business: Business) -> list[Fact]:
    """Every fact in the business file, one line each, in the file's order."""
    facts = [
        Fact("address", f"We are at {business.address}.", frozenset(words(business.address) | _ASKS["address"])),
        Fact("phone", f"Our phone number is {business.phone}.", _ASKS["phone"]),
        Fact("hours", _the_week(business), frozenset(_ASKS["hours"] | _DAY_NAMES)),
    ]
    for day in WEEKDAYS:
        said = spoken_hours(business.hours[day])
        line = f"On {day.title()} we are closed." if said == "closed" else f"On {day.title()} we are open {said}."
        facts.append(Fact("hours", line, frozenset({day, f"{day}s"})))
    for item, price in business.prices.items():
        facts.append(Fact("prices", f"{article(item).capitalize()} {item} is {price}.", frozenset(words(item) | _ASKS["prices"])))
    for topic, policy in business.policies.items():
        # The words of the intent of the same name ask for this policy too ("delivery": shipping).
        asks = {w for k in business.intents[topic].keywords for w in words(k)} if topic in business.intents else set()
        facts.append(Fact(topic, f"{policy[:1].upper()}{policy[1:]}.", frozenset(words(topic) | words(policy) | asks)))
    return facts


class FactIndex:
    """The business's facts, ready to be looked up by a question."""

    def __init__(self, business: Business, *, limit: int = 3, clock: Callable[[], datetime] | None = None,
                 embedder=None):
        """Args: limit: most fact lines returned for one question; clock: now (aware), the wall clock
        when None; embedder: a ``SentenceEmbedder``, to find facts by meaning as well as by words
        (``meaning``; None: by words only)."""
        self.business = business
        self._clock = clock or (lambda: datetime.now(business.zone))
        self.facts = facts_of(business)
        self.meaning = None
        if embedder is not None:
            self.meaning = MeaningIndex(business, [(f.topic, f.line) for f in self.facts], embedder,
                                        rare_words=self.rare_words)
        self.limit = limit
        self.noun = business.kind.split()[-1] if business.kind else "business"
        self.self_words = frozenset(words(business.name) | {self.noun.lower()} | _SELF)
        # Worked out once: every check of a clause on the answer path reads them.
        self._line_words = {fact.line: words(fact.line) | fact.words for fact in self.facts}
        self.price_lines = frozenset(fact.line for fact in self.facts if fact.topic == "prices")
        # One day's hours: the lines asked for by that day's name alone.
        self.day_lines = frozenset(fact.line for fact in self.facts
                                   if fact.topic == "hours" and fact.words <= _DAY_NAMES)
        held = Counter(fact.topic for fact in self.facts)
        self._only_line = {fact.topic: fact.line for fact in self.facts if held[fact.topic] == 1}
        vocabulary = set().union(*self._line_words.values())
        for intent in business.intents.values():
            vocabulary |= set().union(*(words(example) for example in intent.examples))
        self._vocabulary = frozenset(vocabulary | self.self_words)
        self._holding = functools.lru_cache(maxsize=1024)(self._count_holding)
        self._topics_holding = functools.lru_cache(maxsize=1024)(self._lines_holding)
        # The fast path, the grounding and every clause's check ask about the same question.
        self.scores = functools.lru_cache(maxsize=16)(self._scores)
        # The grounding and every clause's check that says a number ask about the same order.
        self.reckoning = functools.lru_cache(maxsize=16)(self._reckoning)

    def _scores(self, question: str) -> tuple[tuple[float, Fact], ...]:
        """(score, fact) for each fact sharing a word with the question.

        A shared word counts more the fewer facts hold it (inverse document frequency): "ship"
        in "How much does it cost to ship a bike?" outweighs "much", which every price has.
        """
        scored = []
        asked = words(question)
        for fact in self.facts:
            hits = [w for w in asked if any(same_word(w, f) for f in fact.words)]
            if hits:
                weight = sum(math.log(1 + len(self.facts) / self._holding(w)) for w in hits)
                # A specific line (one day, one item) beats the general one on the same words.
                scored.append((weight + 1 / (1 + len(fact.words)), fact))
        return tuple(scored)

    def rare_words(self, question: str) -> dict[str, int]:
        """Per topic, how many of the question's words at most two fact lines hold, all of that
        topic ("transfer": payment; "street": the address). The business's own name is no evidence."""
        counts: dict[str, int] = {}
        for word in self._asked(question, frozenset()):
            topics = self._topics_holding(word)  # one entry per line
            if 0 < len(topics) <= 2 and len(set(topics)) == 1:
                counts[topics[0]] = counts.get(topics[0], 0) + 1
        return counts

    def _lines_holding(self, word: str) -> tuple[str, ...]:
        """The topic of each fact line that holds ``word`` in any form."""
        return tuple(fact.topic for fact in self.facts if any(same_word(word, w) for w in self._line_words[fact.line]))

    def distinctive(self, line: str) -> set[str]:
        """The words of a fact line that at most two facts hold ("city", "tune", "monday")."""
        lines = self._line_words.values()
        return {w for w in words(line) if not w.isdigit() and sum(1 for held in lines if w in held) <= 2}

    def _count_holding(self, word: str) -> int:
        return max(1, sum(1 for fact in self.facts if any(same_word(word, f) for f in fact.words)))

    def relevant(self, question: str) -> list[str]:
        """The fact lines the question is about, best first; [] when it matches none.

        A question about hours also gets the caller's date, so "today" and "tomorrow" mean
        the right days; it is never in the system prompt, which must stay the same bytes.
        """
        ranked: list[Fact] = []
        candidates = [fact for _, fact in sorted(self.scores(question), key=lambda pair: -pair[0])]
        if self.meaning is not None:
            # The lines nearest in meaning first ("shut" is "close"), then those sharing its words,
            # then, in the room left, the lines of the topics it is nearest.
            by_line = {fact.line: fact for fact in self.facts}
            near = [by_line[line] for _, _, line in self.meaning.fact_lines(question, floor=RELEVANT_NEAR)]
            if near or candidates:
                candidates += [by_line[line] for line in self._topic_lines(question)]
            candidates = list(dict.fromkeys(near + candidates))
        for fact in candidates:
            # At most two lines of one topic, so a question that touches two topics gets both.
            if len(ranked) < self.limit and sum(1 for f in ranked if f.topic == fact.topic) < 2:
                ranked.append(fact)
        lines = [fact.line for fact in ranked]
        if any(fact.topic == "hours" for fact in ranked):
            lines.insert(0, today_line(self.business, self._clock()))
        return lines

    def _topic_lines(self, question: str) -> list[str]:
        """The line of each one-line topic (a policy, the address, the phone) the question lies
        nearest, by any of the topic's sentences, nearest first: "What's your postcode?" is nearest
        the address by "What is your address?", though no fact line is near it, and "We'd need a
        dozen pies, do you want money up front?" the large-orders policy by its clause about a
        deposit. Only topics within ``TOPIC_SPREAD`` of the nearest topic, and at least
        ``NOTHING_NEAR`` from the question. The hours and prices are left to the day or item
        named: their lines differ by that alone, so the nearest of them by meaning is arbitrary."""
        ranked = [(topic, score) for topic, score, _ in self.meaning.ranked(question)]
        best = ranked[0][1] if ranked else 0.0
        return [self._only_line[topic] for topic, score in ranked
                if topic in self._only_line and score >= max(NOTHING_NEAR, best - TOPIC_SPREAD)]

    def words_of(self, line: str) -> set[str]:
        """A fact line's words and the words that ask for it ("time" for the hours)."""
        return self._line_words.get(line) or words(line)

    def unknown_words(self, question: str) -> set[str]:
        """The question's words that no fact of the file holds in any form ("france", "helmet")."""
        return {w for w in words(question) if w not in self._vocabulary and not any(same_word(w, v) for v in self._vocabulary)}

    def unknown_share(self, question: str, ignore: frozenset[str] = frozenset()) -> float:
        """The share of the question's words (but ``ignore`` and the business's own name) no fact
        holds: 2/3 for "How much is the monthly plan?", whose "much" alone is one a fact holds."""
        asked = self._asked(question, ignore)
        return len(self.unknown_words(question) & asked) / len(asked) if asked else 0.0

    def unknown_asked(self, question: str, ignore: frozenset[str] = frozenset()) -> set[str]:
        """The words ``unknown_share`` counts as unknown ("cancel", "subscription")."""
        return self.unknown_words(question) & self._asked(question, ignore)

    def _asked(self, question: str, ignore: frozenset[str]) -> set[str]:
        # A digit is left out: Whisper writes what it mishears as one ("a 2-up" for "a tune-up").
        return {w for w in words(question) - ignore
                if not w.isdigit() and not any(same_word(w, s) for s in self.self_words)}

    def names_the_business(self, question: str) -> bool:
        """Whether the question calls the business by name or by what it is ("the store")."""
        return any(same_word(w, s) for w in words(question) for s in self.self_words)

    def within_topic(self, question: str, topic: str) -> bool:
        """Whether every word of the question (but the business's own name) is one a fact of
        ``topic`` holds: "the phone number of the ferry terminal" is not all phone."""
        held = [w for fact in self.facts if fact.topic == topic for w in self.words_of(fact.line)]
        return all(any(same_word(w, h) for h in held) for w in words(question) - self.self_words)

    def top_topic(self, question: str) -> str | None:
        """The topic of the fact the question is most about, or None."""
        ranked = sorted(self.scores(question), key=lambda pair: -pair[0])
        return ranked[0][1].topic if ranked else None

    def supports(self, question: str, answer: str) -> bool:
        """Whether ``answer`` (so far) to ``question`` says nothing the file does not hold.

        Two checks a reader can follow, not a model's opinion: every number said is one the
        question's facts (or the caller) said; and a bare "yes"/"no" to a yes-or-no question
        comes with a word of those facts beyond the question's own words.
        """
        return _supports(self, question, answer)

    def _reckoning(self, question: str) -> Reckoned | None:
        """What an order the question names comes to (agent/business/orders.py), or None."""
        return order_total(self.business.prices, question, self.meaning.item if self.meaning else None)

    def instead(self, question: str, said: str = "") -> str | None:
        """What to say in place of an answer to ``question`` the check refused or the model gave
        up on, when the file has something better than "I don't know". The order worked out
        (the caller asked for a sum, and the file's prices give it), after whatever was ``said``
        already; else, when nothing was said, the fact line nearest the question in meaning (at
        least ``NEAR_A_FACT``), said as what it is with a person offered ("I'm not sure that's
        what you're asking, but all our work is guaranteed for 12 months ..."), as the fast path
        says a fact it is not sure was asked. Never a price (another item's price said to "How
        much is a helmet?" sounds like its price). None when there is neither: then the
        don't-know line is right.

        Why: a 0.5B model handed the right line often answers beside it ("If the leak comes
        back, do I pay again?" got the gas emergency line, "Yes, we are covered."), and the
        caller heard "I don't know" about a fact the file holds (FAQ suite, text runs)."""
        reckoned = self.reckoning(question)
        if reckoned:
            return reckoned.sentence
        if said.strip():
            return None
        # Near in meaning only: a line that merely shares a word ("Bring a photo ID to rent a
        # bike." to "Can I bring my dog into the shop?") is no better than "I don't know".
        # Nor one day's hours: another day's, said to "Will you be open tomorrow?", sound like
        # tomorrow's ("on Sunday we are closed" on a Sunday, to a phone call's misheard question).
        line = next((line for _, topic, line in self.meaning.fact_lines(question, floor=NEAR_A_FACT)
                     if topic != "prices" and line not in self.day_lines), None) if self.meaning else None
        return self.business.unsure(line) if line else None

    def lacking(self, question: str, answer: str) -> str | None:
        """What a whole ``answer`` to ``question`` lacks that the file gives: the order worked out,
        when the answer never says its results (the total; for two compared, both and the gap). A 0.5B model
        handed "2 city bike rentals for 3 days come to 120 dollars." answered "20 dollars a day,
        three days." (embedded A/B): true, and no answer to what was asked. None otherwise."""
        reckoned = self.reckoning(question)
        # Read as an answer's numbers are read: "12.50" is 12 and 50.
        if not reckoned or numbers_in(" ".join(reckoned.results)) <= numbers_in(answer):
            return None
        return reckoned.sentence

    def grounding(self, question: str) -> str:
        """The message the LLM reads just before the question: its facts, or that there are none.

        Plain sentences with no heading or instructions (those are in the system prompt): a
        0.5B model sometimes reads this message back, and then the caller hears facts.
        """
        lines = self.relevant(question)
        if not lines:
            return NO_FACTS
        reckoned = self.reckoning(question)
        if reckoned:  # worked out here, first: the caller asked for it, and a small model gets sums wrong
            lines.insert(0, reckoned.sentence)
        return " ".join(lines)


def today_line(business: Business, now: datetime | None = None) -> str:
    """The caller's date in the business's time zone: a date, never a clock time (prefix cache)."""
    now = (now or datetime.now(business.zone)).astimezone(business.zone)
    day = WEEKDAYS[now.weekday()]
    hours = spoken_hours(business.hours[day])
    today = "today we are closed" if hours == "closed" else f"today we are open {hours}"
    return f"Today is {day.title()}, {now.day} {now:%B %Y}, and {today}."


def vocabulary_of(business: Business) -> str:
    """What Whisper is told callers talk about: the file's ``stt_prompt``, or one made from it.

    Phrased as speech, since Whisper reads it as text said before the call's words: "Questions
    to <name>, <kind> at <address>: opening hours, ..., <items>, <topics>." A business tunes
    its own in the file; the shipped one is the form that heard best over the FAQ questions,
    the bench corpus and rental questions together (docs/benchmarks.md, FAQ suite).
    """
    if business.stt_prompt:
        return business.stt_prompt
    items = [f"{'an' if i[:1].lower() in 'aeiou' else 'a'} {i}" for i in business.prices]
    topics = ["opening hours", "the address", "the phone number", *(f"prices of {i}" for i in items[:1]), *items[1:],
              *business.policies, *business.vocabulary]
    listed = ", ".join(topics[:-1]) + f" and {topics[-1]}"
    return f"Questions to {business.name}, {business.kind} at {business.address}: {listed}."


_YES_NO_QUESTION = frozenset("is are am was were do does did can could will would shall should may might have has".split())
_YES_NO_ANSWER = frozenset("yes yeah yep no nope sure absolutely certainly course definitely".split())


_SENTENCE = re.compile(r"[^.!?]+[.!?]*")
_CLAUSES = re.compile(r"[,.;:!?]")
# An answer saying what something comes to, and the amount it says: "... come to 21 dollars",
# "the total is 39", "45 altogether" reads its amount before the word.
_TOTAL_SAID = re.compile(r"\b(?:(?:comes?|coming|came|adds? up|adding up) to|total(?:s|led|ing)?|(?:all? ?together|in all))\b"
                         r"(?:\D{0,20}?(\d+(?:\.\d+)?))?")
_AMOUNT_BEFORE = re.compile(r"(\d+(?:\.\d+)?)\D{0,12}$")
_HEARD_AS_TO = re.compile(r"\b(?:to|too)\s+(?:[a-z]+\s+)?[a-z]+[^s's]s\b")
# A turn more than this much of whose words no fact holds is mostly about what the file does not know.
_MOSTLY_UNKNOWN = 0.5
_AGREEING = _YES_NO_ANSWER - {"no", "nope"}
_NEGATION = re.compile(r"\b(?:don'?t|do not|doesn'?t|does not|can'?t|cannot|can not|won'?t|will not|not|never|no)\b", re.I)
_DONT_KNOW = re.compile(r"\b(not sure|don'?t know|do not know|no information|person|someone|colleague|put you through|connect you)\b")


def worked_out_numbers(index: FactIndex, facts: list[str], question: str) -> set[str]:
    """The numbers an answer may work out from what the file and the caller said: a number of a
    price the caller named, times the caller's own numbers ("two city bikes for three days" is
    2 x 3 x 20 = 120), and the sum or difference of two such from two prices the caller named
    ("a city bike and an e-bike for a day" is 20 + 45). A tune-up never costs 45 + 20: the caller
    named one thing, so nothing is added to it."""
    asked = words(question)
    given = {int(n) for n in numbers_in(question) if n.isdigit() and 0 < int(n) <= 100}
    if _HEARD_AS_TO.search(question.lower()):
        given.add(2)  # "rent to city bikes": Whisper writes the caller's "two" as "to" before a plural
    given = sorted(given)
    named = [line for line in facts if line in index.price_lines and {w for w in index.distinctive(line) & asked
                                                                      if not numbers_in(w)}]
    per_line = []
    for line in named:
        scaled = {int(n) for n in numbers_in(line) if n.isdigit()}
        for f in list(scaled):
            for i, a in enumerate(given):
                scaled.add(f * a)
                scaled.update(f * a * b for b in given[i + 1:])
        per_line.append(scaled)
    # The caller's own counts may be said back ("two" heard as "to" is the caller's two).
    worked = set(given).union(*per_line) if per_line else set()
    reckoned = index.reckoning(question)
    if reckoned:  # three items or more, which the pairs below do not reach
        worked |= {int(n) for n in reckoned.numbers if n.isdigit()}
    for i, first in enumerate(per_line):
        for second in per_line[i + 1:]:
            worked |= {a + b for a in first for b in second} | {abs(a - b) for a in first for b in second}
    return {str(n) for n in worked if n > 0}


def _not_a_claim(sentence: str) -> bool:
    """A question back, a few words ("Hello!", "You're welcome."), or "I don't know"/a person."""
    sentence = sentence.strip()
    return sentence.endswith("?") or len(sentence.split()) <= 3 or bool(_DONT_KNOW.search(sentence.lower()))


def _claimed(sentence: str) -> str:
    """What ``sentence`` claims: all of it; what comes before its "I don't know" (or offer of a
    person), however short ("We are hiring, I'm sorry, I don't know that." claims "We are
    hiring", heard in the FAQ suite's noisy calls); nothing for a question back or a few words."""
    said = _DONT_KNOW.search(sentence.lower())
    if said:
        return sentence[:said.start()]
    return "" if _not_a_claim(sentence) else sentence


def _supports(index: FactIndex, question: str, answer: str) -> bool:
    if NO_FACTS.lower().rstrip(".") in answer.lower():  # the grounding message read back
        return False
    facts = index.relevant(question)
    if not facts:
        # Nothing in the file is about it: small talk, a question back, or "I don't know" only.
        # A claim here can only be made up ("A student discount is offered to students..."), and
        # the caller's words said back ("High-bird wheels, cash.") help no one.
        if words(answer) and words(answer) <= words(question):
            return False
        return all(_not_a_claim(sentence) for sentence in _SENTENCE.findall(answer) if sentence.strip())
    if "?" not in question and index.unknown_share(question) > _MOSTLY_UNKNOWN and any(
            _tells_a_fact(index, facts, question, _claimed(sentence)) for sentence in _SENTENCE.findall(answer)):
        # A statement most of whose words no fact holds: what retrieval found for it answers
        # nothing it said ("You're hiring delivery drivers right to home." heard the delivery
        # line, on a clean browser call; a bathroom refit heard three lines read back). "I'm sorry
        # to hear that." and a question back tell no fact, and stay.
        return False
    # Every number said must be one the caller said, or one a retrieved fact holds. When the
    # question names something the file does not know ("helmet"), that fact must also be about
    # what is said: a word of its own (one at most two facts have: "city", "tune") in the
    # question or the answer. "A bike helmet is 20 dollars a day" takes its 20 from the city
    # bike rental and is refused.
    # A price needs its item named by the caller, not only by the answer: "Flat tyre repair is 12
    # dollars" to "I pay with cash." prices a thing nobody asked about (an hours line may be
    # named by the answer alone: "during the week" is Monday to Friday).
    # When every word of the question is one the file knows, the retrieved lines are about it
    # and any of their numbers may be said.
    asked_words = words(question)
    mentioned = asked_words | words(answer)
    # A number word ("three days") is the caller's count, and a word of reckoning ("together",
    # "cheaper") asks to combine what the file holds: neither is a thing the file does not know.
    unknown = {w for w in index.unknown_words(question) if not numbers_in(w) and w not in RECKONING}
    strict = bool(unknown)
    # A claim about what the caller asked that the file does not know, their word said back in a
    # statement ("The parking near the shop is at 42 Harbor Lane."), is made up from the facts
    # that happened to be retrieved.
    if any(unknown & words(_claimed(sentence)) for sentence in _SENTENCE.findall(answer) if sentence.strip()):
        return False
    if _says_another_total(index, question, answer):
        return False
    # Worked out only from prices the caller named, so a word the file does not know beside them
    # ("a tune-up on mine") borrows nothing: a helmet's price is never worked out.
    new_numbers = numbers_in(answer) - numbers_in(question)
    if new_numbers:  # the check runs on every clause of a streaming answer: most say no number
        new_numbers -= worked_out_numbers(index, facts, question)
    for number in new_numbers:
        if not any(number in numbers_in(line) and (not strict or index.distinctive(line) & (
                asked_words if line in index.price_lines else mentioned)) for line in facts):
            return False
    # "Yes"/"no" to a yes-or-no question must come with something from the facts beyond the
    # question's own words; "Yes, we repair electric scooters." only echoes the question.
    # The question is the turn's last clause: "I'm catching the ferry, can I leave my bike here?"
    # asks yes or no as plainly as "Can I leave my bike here?".
    asked = comparison_words(next((c for c in reversed(_CLAUSES.split(question)) if len(c.split()) >= 2), question))
    said = comparison_words(answer)
    if (said and said[0] in _YES_NO_ANSWER and not (asked and asked[0] in _YES_NO_QUESTION)
            and index.unknown_share(question) > _MOSTLY_UNKNOWN):
        # "Sure!" to a turn that is no yes-or-no question agrees with what was said, and what was
        # said is mostly what the file does not know ("You're hiring delivery drivers right to home.").
        return False
    if _agrees_with_what_a_fact_denies(index, question, facts, said):
        return False
    if asked and asked[0] in _YES_NO_QUESTION and said and said[0] in _YES_NO_ANSWER:
        # The yes or no must come from one fact that holds every word of the question the file
        # knows: "Do you repair electric cougars?" has "repair" in one fact and "electric" in
        # another, and no fact says yes to both.
        known = words(question) - unknown - index.self_words
        if not any(all(any(same_word(k, w) for w in index.words_of(line)) for k in known) for line in facts):
            return False
        fact_words = words(" ".join(facts)) - index.self_words
        told = {w for w in words(answer)
                if w not in _YES_NO_ANSWER and not any(same_word(w, n) for n in [*index.self_words, *asked])}
        return any(any(same_word(w, f) for f in fact_words) for w in told)
    return True


def _says_another_total(index: FactIndex, question: str, answer: str) -> bool:
    """Whether ``answer`` says the caller's order comes to an amount other than the one worked out
    from the file's prices. Each number of it may be a price the facts hold, so the number check
    lets it by: "A large pepperoni pizza and a large cheese pizza come to 21 dollars." (a 10 dB
    noisy call, 2026-12-07) said one pizza's price as the sum, and the worked-out sentence after it
    said 39: the caller heard two totals."""
    reckoned = index.reckoning(question)
    if reckoned is None:
        return False
    allowed = reckoned.results | reckoned.numbers | numbers_in(question)
    for sentence in _SENTENCE.findall(answer):
        for said in _TOTAL_SAID.finditer(sentence):
            amount = said.group(1)
            if amount is None and (before := _AMOUNT_BEFORE.search(sentence[:said.start()])):
                amount = before.group(1)
            if amount is not None and not numbers_in(amount) <= allowed:
                return True
    return False


def _agrees_with_what_a_fact_denies(index: FactIndex, question: str, facts: list[str], said: list[str]) -> bool:
    """Whether an answer opening "Sure!" or "Yes" agrees to the very thing a fact line of the
    question denies: the last word a negated clause of it holds ("we don't take checks") is a
    word of the question, and one of the line's own (at most two lines hold it). "Then it's cool
    that I write you a check ..." (a 10 dB call, 2026-12-07) heard "Sure! Please provide the
    location." beside the payment line. Only that last word: "We don't deliver outside 3 miles"
    denies nothing to "Do you deliver on Sundays?"; and only a word of the line's own: "We don't
    see emergencies outside our opening hours" denies no "Sure!" to "What are your hours?"."""
    if not said or said[0] not in _AGREEING:
        return False
    asked = words(question)
    for line in facts:
        for clause in _CLAUSES.split(line):
            negation = _NEGATION.search(clause)
            if negation is None:
                continue
            after = clause[negation.end():]
            denied = [w for w in comparison_words(after) if w in words(after)]
            if denied and denied[-1] in index.distinctive(line) and any(same_word(denied[-1], w) for w in asked):
                return True
    return False


def _tells_a_fact(index: FactIndex, facts: list[str], question: str, claim: str) -> bool:
    """Whether ``claim`` says something of ``facts``: a number, or a word of a line's own (one at
    most two lines hold) that the caller did not say."""
    if not claim.strip():
        return False
    if numbers_in(claim) - numbers_in(question):
        return True
    told = words(claim) - words(question)
    return any(told & index.distinctive(line) for line in facts)

