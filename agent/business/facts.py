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
doing sums; the answer check (``supports``, its rules in agent/business/answer_support.py) lets
only such worked-out numbers through. How words
are compared (one word in two forms, the items a question names) is agent/business/words.py.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from agent.business.answer_support import NO_FACTS, supports as _supports
from agent.business.meaning import NEAR_A_FACT, NOTHING_NEAR, MeaningIndex
from agent.business.model import WEEKDAYS, Business
from agent.business.orders import Reckoned, order_total
from agent.business.prompt import opening_hours, spoken_hours
from agent.business.words import PRICE_WORDS, article, numbers_in, same_word, words

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
    first, _, rest = week.partition("; ")
    if not first.startswith("closed"):
        return f"We are open {week}."
    return f"We are {first}; open {rest}." if rest else f"We are {first}."


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
        # The answer check asks on every clause of an answer about the same question (~0.5 ms a time).
        self.unknown_words = functools.lru_cache(maxsize=16)(self._unknown_words)

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

    def _unknown_words(self, question: str) -> frozenset[str]:
        """The question's words that no fact of the file holds in any form ("france", "helmet")."""
        return frozenset(w for w in words(question) if w not in self._vocabulary and not any(same_word(w, v) for v in self._vocabulary))

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
