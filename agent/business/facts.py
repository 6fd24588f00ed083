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
"rental") and a few everyday variants too ("tire" is "tyre").

An order the caller names ("two large pepperonis and one large cheese") is worked out here
(``FactIndex.reckoning``) and put first in the facts, so the answer reads a total rather than
doing sums; the answer check (``supports``) lets only such worked-out numbers through.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

from agent.business.model import WEEKDAYS, Business
from agent.business.prompt import opening_hours, spoken_hours
from processors.turns.comparison_form import comparison_words

# Words too common to say what a question is about.
_STOP = frozenset(
    "a an the is are was do does did you your yours i im me my we us our can could would will "
    "please to of on in at for it be what whats hi hello there so and or tell know like just "
    "hey um uh ok okay have has get got any with about this that if how should shall may might must than then "
    # "need" asks, as "have" does: as an unknown word it made "you will need a photo ID" a claim
    # about something the file does not hold (FAQ suite, 2026-12-04: "What do I need to bring
    # to rent a bike?" got "don't know" for the right answer).
    "need needs".split()
)
NO_FACTS = "There is no fact about this."
# A fact line at least this close in meaning to a question is retrieved for it.
RELEVANT_NEAR = 0.45
# Words that ask for a kind of fact, beyond the fact's own words.
_ASKS = {
    "hours": "open opening opens close closed closing closes hours hour time when today tomorrow tonight now weekend",
    "address": "where address located location find directions street near nearby",
    "phone": "phone number call ring telephone",
    "prices": "price prices cost costs much charge charges pay fee",
}
# Words a caller calls any business by: they name the business itself, which every fact is about.
_SELF = frozenset("shop store business place company".split())
# Words a caller says for a word the file uses: American and British spellings, plain words.
_ALIASES = {"tire": "tyre", "tires": "tyres", "fix": "repair", "fixing": "repair", "puncture": "flat",
            "hire": "rental", "center": "centre", "color": "colour"}


# "I'd" without its apostrophe is "id", a word of "bring a photo ID": "I'd like to return a
# jacket" was about the rentals.
_I_WOULD = re.compile(r"\bi['\u2019]d\b", re.IGNORECASE)


def _words(text: str) -> set[str]:
    return {w for w in comparison_words(_I_WOULD.sub("I would", text)) if w not in _STOP}


def _same(a: str, b: str) -> bool:
    # A word and its longer forms ("rent"/"rental", "return"/"returns") are one word; a
    # spelling distance would also make "shop" "ship" and "bring" "ring".
    if a == b or _ALIASES.get(a) == b or _ALIASES.get(b) == a:
        return True
    short, long = sorted((a, b), key=len)
    return len(short) >= 4 and long.startswith(short)


@dataclass(frozen=True)
class Fact:
    """One fact as a line the model may repeat, and the words that make it relevant."""

    topic: str
    line: str
    words: frozenset[str]


def facts_of(business: Business) -> list[Fact]:
    """Every fact in the business file, one line each, in the file's order."""
    facts = [
        Fact("address", f"We are at {business.address}.", frozenset(_words(business.address) | set(_ASKS["address"].split()))),
        Fact("phone", f"Our phone number is {business.phone}.", frozenset(_ASKS["phone"].split())),
        Fact("hours", f"We are open {opening_hours(business)}.",
             frozenset(set(_ASKS["hours"].split()) | set(WEEKDAYS) | {f"{d}s" for d in WEEKDAYS})),
    ]
    for day in WEEKDAYS:
        said = spoken_hours(business.hours[day])
        line = f"On {day.title()} we are closed." if said == "closed" else f"On {day.title()} we are open {said}."
        facts.append(Fact("hours", line, frozenset({day, f"{day}s"})))
    for item, price in business.prices.items():
        facts.append(Fact("prices", f"{article(item).capitalize()} {item} is {price}.", frozenset(_words(item) | set(_ASKS["prices"].split()))))
    for topic, policy in business.policies.items():
        # The words of the intent of the same name ask for this policy too ("delivery": shipping).
        asks = {w for k in business.intents[topic].keywords for w in _words(k)} if topic in business.intents else set()
        facts.append(Fact(topic, f"{policy[:1].upper()}{policy[1:]}.", frozenset(_words(topic) | _words(policy) | asks)))
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
            from agent.business.meaning import MeaningIndex

            self.meaning = MeaningIndex(business, [(f.topic, f.line) for f in self.facts], embedder,
                                        rare_words=self.rare_words)
        self.limit = limit
        self.noun = business.kind.split()[-1] if business.kind else "business"
        self.self_words = frozenset(_words(business.name) | {self.noun.lower()} | _SELF)
        # Worked out once: every check of a clause on the answer path reads them.
        self._line_words = {fact.line: _words(fact.line) | fact.words for fact in self.facts}
        self.price_lines = frozenset(fact.line for fact in self.facts if fact.topic == "prices")
        vocabulary = set().union(*self._line_words.values())
        for intent in business.intents.values():
            vocabulary |= set().union(*(_words(example) for example in intent.examples))
        self._vocabulary = frozenset(vocabulary | self.self_words)
        self._holding = functools.lru_cache(maxsize=1024)(self._count_holding)
        self._topics_holding = functools.lru_cache(maxsize=1024)(self._lines_holding)
        # The fast path, the grounding and every clause's check ask about the same question.
        self.scores = functools.lru_cache(maxsize=16)(self._scores)

    def _scores(self, question: str) -> tuple[tuple[float, Fact], ...]:
        """(score, fact) for each fact sharing a word with the question.

        A shared word counts more the fewer facts hold it (inverse document frequency): "ship"
        in "How much does it cost to ship a bike?" outweighs "much", which every price has.
        """
        scored = []
        asked = _words(question)
        for fact in self.facts:
            hits = [w for w in asked if any(_same(w, f) for f in fact.words)]
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
        return tuple(fact.topic for fact in self.facts if any(_same(word, w) for w in self._line_words[fact.line]))

    def distinctive(self, line: str) -> set[str]:
        """The words of a fact line that at most two facts hold ("city", "tune", "monday")."""
        lines = self._line_words.values()
        return {w for w in _words(line) if not w.isdigit() and sum(1 for words in lines if w in words) <= 2}

    def _count_holding(self, word: str) -> int:
        return max(1, sum(1 for fact in self.facts if any(_same(word, f) for f in fact.words)))

    def relevant(self, question: str) -> list[str]:
        """The fact lines the question is about, best first; [] when it matches none.

        A question about hours also gets the caller's date, so "today" and "tomorrow" mean
        the right days; it is never in the system prompt, which must stay the same bytes.
        """
        ranked: list[Fact] = []
        candidates = [fact for _, fact in sorted(self.scores(question), key=lambda pair: -pair[0])]
        if self.meaning is not None:
            # The lines nearest in meaning first ("shut" is "close"), then those sharing its words.
            by_line = {fact.line: fact for fact in self.facts}
            near = [by_line[line] for _, _, line in self.meaning.fact_lines(question, floor=RELEVANT_NEAR)]
            candidates = list(dict.fromkeys(near + candidates))
        for fact in candidates:
            # At most two lines of one topic, so a question that touches two topics gets both.
            if len(ranked) < self.limit and sum(1 for f in ranked if f.topic == fact.topic) < 2:
                ranked.append(fact)
        lines = [fact.line for fact in ranked]
        if any(fact.topic == "hours" for fact in ranked):
            lines.insert(0, today_line(self.business, self._clock()))
        return lines

    def words_of(self, line: str) -> set[str]:
        """A fact line's words and the words that ask for it ("time" for the hours)."""
        return self._line_words.get(line) or _words(line)

    def unknown_words(self, question: str) -> set[str]:
        """The question's words that no fact of the file holds in any form ("france", "helmet")."""
        return {w for w in _words(question) if w not in self._vocabulary and not any(_same(w, v) for v in self._vocabulary)}

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
        return {w for w in _words(question) - ignore
                if not w.isdigit() and not any(_same(w, s) for s in self.self_words)}

    def names_the_business(self, question: str) -> bool:
        """Whether the question calls the business by name or by what it is ("the store")."""
        return any(_same(w, s) for w in _words(question) for s in self.self_words)

    def within_topic(self, question: str, topic: str) -> bool:
        """Whether every word of the question (but the business's own name) is one a fact of
        ``topic`` holds: "the phone number of the ferry terminal" is not all phone."""
        held = [w for fact in self.facts if fact.topic == topic for w in self.words_of(fact.line)]
        return all(any(_same(w, h) for h in held) for w in _words(question) - self.self_words)

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

    def _items_in(self, segment: str, words: list[str], items: list[str]) -> list[str]:
        """The priced items a part of an order may name: one, by its words or else by meaning ("an
        e-bike"); several when its words fit each ("a normal bike"); none."""
        sharing = [item for item in items if any(same_word(w, i) for w in words for i in item_words(item))]
        named = asked_items(segment, items)
        if len(named) == 1 or not sharing:
            return named
        by_meaning = self.meaning.item(segment) if self.meaning is not None else None
        return [by_meaning] if by_meaning in (named or sharing) else named or sharing

    def reckoning(self, question: str) -> tuple[str, set[str]] | None:
        """What the order in ``question`` comes to, as a sentence the answer may repeat, and its
        numbers; None when the question names no order to work out, or one this cannot parse.

        "Two large pepperonis and one large cheese, what's that come to?" -> "2 large pepperoni
        pizzas and a large cheese pizza come to 60 dollars."; "Is it cheaper to rent a city bike
        for two days, or an electric bike for a day?" -> both totals and the difference. Only
        exact cases: every part names one priced item and its count, every number the caller
        says is a count or a length ("four of us" is neither), and each price is a plain amount,
        maybe per unit ("20 dollars a day", never "7 dollars for half a dozen").
        """
        if not self.business.prices or not asks_to_reckon(question):
            return None
        items = list(self.business.prices)
        said = [(words, self._items_in(segment, words, items))
                for segment in _parts_of(numbers_as_digits(question), items) if (words := comparison_words(segment))]
        named = {found[0] for _, found in said if len(found) == 1}
        parts: list[_Part] = []
        for words, found in said:
            if len(found) > 1:
                # By elimination: "a normal bike and an electric one" is the bike the other part is not.
                others = [item for item in found if item not in named]
                found = others if len(others) == 1 else []
            if not found:
                if any(w.isdigit() for w in words):
                    return None  # a number that counts nothing the file prices
                continue
            item = found[0]
            part = _part_of(words, item, self.business.prices[item])
            if part is None:
                return None
            parts.append(part)
        if not parts or len({p.currency for p in parts}) > 1:
            return None
        if len(parts) == 1 and parts[0].count == 1 and (parts[0].units or 1) == 1:
            return None  # one thing once: its price line says it
        # A length said once is for every part: "a city bike and an e-bike for two days".
        lengths = {p.unit: p.units for p in parts if p.units}
        parts = [replace(p, units=p.units or lengths.get(p.unit)) if p.unit else p for p in parts]
        return _worked_out(parts, comparing=len(parts) == 2 and bool(set(comparison_words(question)) & _COMPARING))

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
            lines.insert(0, reckoned[0])
        return " ".join(lines)


def today_line(business: Business, now: datetime | None = None) -> str:
    """The caller's date in the business's time zone: a date, never a clock time (prefix cache)."""
    now = (now or datetime.now(business.zone)).astimezone(business.zone)
    day = WEEKDAYS[now.weekday()]
    hours = spoken_hours(business.hours[day])
    today = "today we are closed" if hours == "closed" else f"today we are open {hours}"
    return f"Today is {day.title()}, {now.day} {now:%B %Y}, and {today}."


def item_words(item: str) -> set[str]:
    """The words that name a priced item ("city bike rental" -> city, bike, rental)."""
    return _words(item)


def same_word(a: str, b: str) -> bool:
    """Whether two word forms are one word to a listener ("tire"/"tyre", "rent"/"rental")."""
    return _same(a, b)


def asked_items(question: str, items: list[str]) -> list[str]:
    """The priced items a question names, best first: those sharing the most words with it.

    "How much is it to rent a bike?" names both bike rentals; a question that shares no word
    with any item ("How much is a helmet?") names none.
    """
    asked = _words(question)
    named = {item: {w for w in asked if any(_same(w, i) or _ends_compound(i, w) for i in item_words(item))}
             for item in items}
    # One shared word that several items have ("bike") does not name an item: "How much does it
    # cost to ship a bike?" is about shipping.
    def names(item):
        words = named[item]
        return len(words) >= 2 or any(sum(1 for other in items if w in named[other]) == 1 for w in words)
    best = max((len(named[item]) for item in items if names(item)), default=0)
    return [item for item in items if best and names(item) and len(named[item]) == best]


_SUFFIXES = ("ing", "ed", "es", "s")
# A compound's first part is at least this long ("micro" of "microchipping"): "bring" is no compound of "ring".
_COMPOUND_HEAD = 3


def _stem(word: str) -> str:
    """``word`` without an -ing/-ed/-s ending or a doubled last consonant ("chipped", "chipping": "chip")."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiou" else word


def _ends_compound(compound: str, word: str) -> bool:
    """Whether an item's word is a compound ending in ``word``: "microchipping" and "chipped",
    "gearbox" and "box". Item names only: there a caller names a thing by its last part."""
    head, tail = _stem(compound), _stem(word)
    return len(tail) >= 4 and head.endswith(tail) and len(head) - len(tail) >= _COMPOUND_HEAD


def vocabulary_of(business: Business) -> str:
    """What Whisper is told callers talk about: the file's ``stt_prompt``, or one made from it.

    Phrased as speech, since Whisper reads it as text said before the call's words: "Questions
    to <name>, <kind> at <address>: opening hours, ..., <items>, <topics>." A business tunes
    its own in the file; the shipped one is the form that heard best over the FAQ questions,
    the bench corpus and rental questions together (README, FAQ suite).
    """
    if business.stt_prompt:
        return business.stt_prompt
    items = [f"{'an' if i[:1].lower() in 'aeiou' else 'a'} {i}" for i in business.prices]
    topics = ["opening hours", "the address", "the phone number", *(f"prices of {i}" for i in items[:1]), *items[1:],
              *business.policies, *business.vocabulary]
    listed = ", ".join(topics[:-1]) + f" and {topics[-1]}"
    return f"Questions to {business.name}, {business.kind} at {business.address}: {listed}."


# Number words to digits, so "forty-five" in an answer meets "45" in a fact. A few lines, not a
# dependency: spoken answers about a business only say small whole numbers.
_UNITS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen".split())}
_TENS = {w: 10 * i for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()) if w != "_"}
_NUMBER_WORDS = re.compile(rf"\b({'|'.join(_TENS)})(?:[\s-]({'|'.join(_UNITS)}))?\b|\b({'|'.join(_UNITS)})\b")
_DIGITS = re.compile(r"\d+")
_YES_NO_QUESTION = frozenset("is are am was were do does did can could will would shall should may might have has".split())
_YES_NO_ANSWER = frozenset("yes yeah yep no nope sure absolutely certainly course definitely".split())


def numbers_as_digits(text: str) -> str:
    """``text`` lower-cased, with number words as digits ("forty-five dollars" -> "45 dollars")."""
    def digits(match: re.Match) -> str:
        if match.group(3):
            return str(_UNITS[match.group(3)])
        return str(_TENS[match.group(1)] + (_UNITS[match.group(2)] if match.group(2) else 0))

    return _NUMBER_WORDS.sub(digits, text.lower())


def numbers_in(text: str) -> set[str]:
    return set(_DIGITS.findall(numbers_as_digits(text)))


_SENTENCE = re.compile(r"[^.!?]+[.!?]*")
# Words that ask to combine facts, in any business: a total, a difference, a comparison.
RECKONING = frozenset({"together", "altogether", "total", "both", "combined", "difference",
                        "more", "less", "cheaper", "dearer", "expensive", "extra", "plus", "sum", "than", "between",
                        "versus", "compared", "come", "comes"})  # "what does that come to?"
_CLAUSES = re.compile(r"[,.;:!?]")
_HEARD_AS_TO = re.compile(r"\b(?:to|too)\s+(?:[a-z]+\s+)?[a-z]+[^s's]s\b")
# A turn more than this much of whose words no fact holds is mostly about what the file does not know.
_MOSTLY_UNKNOWN = 0.5
_DONT_KNOW = re.compile(r"\b(not sure|don'?t know|do not know|no information|person|someone|colleague|put you through|connect you)\b")


def asks_to_reckon(text: str) -> bool:
    """Whether ``text`` asks for facts combined, not one read out: a total, a difference or a
    comparison ("what's that all together?", "is it cheaper to..."), or a price for a count the
    caller gives ("two city bikes for three days", "four of us"). "The electric one" is no count."""
    words = set(comparison_words(text))
    counts = {n for n in numbers_in(text) if n.isdigit() and 1 < int(n) <= 100}
    return bool(words & RECKONING) or bool(counts)


def worked_out_numbers(index: FactIndex, facts: list[str], question: str) -> set[str]:
    """The numbers an answer may work out from what the file and the caller said: a number of a
    price the caller named, times the caller's own numbers ("two city bikes for three days" is
    2 x 3 x 20 = 120), and the sum or difference of two such from two prices the caller named
    ("a city bike and an e-bike for a day" is 20 + 45). A tune-up never costs 45 + 20: the caller
    named one thing, so nothing is added to it."""
    asked = _words(question)
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
        worked |= {int(n) for n in reckoned[1] if n.isdigit()}
    for i, first in enumerate(per_line):
        for second in per_line[i + 1:]:
            worked |= {a + b for a in first for b in second} | {abs(a - b) for a in first for b in second}
    return {str(n) for n in worked if n > 0}


# What a caller's order is made of: a priced item, how many, and (for a price per day or per
# hour) for how long. Parsed, not asked of the LLM: a 0.5B model guesses at "2 x 21 + 18".
_PRICE = re.compile(r"^(\d+(?:\.\d+)?) (\w+)(?: (?:a|an|per) (\w+))?\s*(?:,|$)")
_ONE = frozenset({"a", "an", "one", "single"})
# Words that join the parts of an order ("two large pepperonis and one large cheese").
_JOINERS = ("and", "plus", "with", "or", "then", "also")
# Words that ask which of two is cheaper, not what both come to.
_COMPARING = frozenset({"cheaper", "dearer", "difference", "versus", "compared", "or", "than"})
# A count said this far before the item's words is its count ("2 large pepperonis").
_COUNT_REACH = 3


@dataclass(frozen=True)
class _Part:
    """One part of an order: ``count`` of ``item`` at ``amount`` (per ``unit``, for ``units``)."""

    item: str
    count: int
    amount: float
    currency: str
    unit: str | None  # "day" for "20 dollars a day"
    units: int | None  # how many the caller said ("for three days"), or None

    @property
    def cost(self) -> float:
        return self.amount * self.count * (self.units or 1)

    def said(self) -> str:
        named = f"{article(self.item)} {self.item}" if self.count == 1 else f"{self.count} {_plural(self.item)}"
        if self.unit and self.units:
            named += f" for a {self.unit}" if self.units == 1 else f" for {self.units} {self.unit}s"
        return named


def _parts_of(text: str, items: list[str]) -> list[str]:
    """``text`` split where its parts join, but not inside an item's name the caller says
    ("consultation with a vet" is one part)."""
    said = comparison_words(text)
    kept = set()
    for item in items:
        name = re.findall(r"\w+", item.lower())
        for i, word in enumerate(name[1:-1], start=1):
            if word in _JOINERS and all(any(same_word(w, side) for w in said) for side in (name[i - 1], name[i + 1])):
                kept.add(word)
    return re.split("|".join([",", ";", *(rf"\b{w}\b" for w in _JOINERS if w not in kept)]), text)


def _count(word: str) -> int | None:
    return 1 if word in _ONE else int(word) if word.isdigit() else None


def _part_of(words: list[str], item: str, price: str) -> _Part | None:
    """The part of an order ``words`` say of ``item``; None when its count, or its price, is not plain."""
    plain = _PRICE.match(price.strip())
    if plain is None:
        return None
    amount, currency, unit = float(plain.group(1)), plain.group(2), plain.group(3)
    used = set()
    # The count before any of the item's words: "rent 2 city bikes" counts bikes, not renting.
    naming = [i for i, w in enumerate(words) if any(same_word(w, n) for n in item_words(item))]
    counted = next((i for at in naming for i in reversed(range(max(0, at - _COUNT_REACH), at))
                    if _count(words[i]) is not None), None)
    if counted is not None:
        count = _count(words[counted])
        used.add(counted)
    elif any(w != n and w.endswith("s") and same_word(w, n) for w in words for n in item_words(item)):
        return None  # "pepperonis" and no count: how many is not said
    else:
        count = 1
    units = None
    if unit:
        length = next((i - 1 for i, w in enumerate(words) if i and w in (unit, f"{unit}s")
                       and _count(words[i - 1]) is not None), None)
        if length is not None:
            units = _count(words[length])
            used.add(length)
    if any(w.isdigit() and w != "1" for i, w in enumerate(words) if i not in used):
        return None  # a number that is neither this part's count nor its length ("the electric one" is no number)
    return _Part(item, count, amount, currency, unit, units)


def _worked_out(parts: list[_Part], comparing: bool) -> tuple[str, set[str]]:
    """The sentence that says what ``parts`` come to (or, ``comparing`` two, each and the gap), and its numbers."""
    currency = parts[0].currency
    per = next((f" {article(p.unit)} {p.unit}" for p in parts if p.unit and not p.units), "")
    costs = [p.cost for p in parts]
    if comparing:
        first, second = parts
        sentence = (f"{first.said().capitalize()} is {_money(first.cost, currency)}{per}, "
                    f"and {second.said()} is {_money(second.cost, currency)}{per}")
        gap = abs(first.cost - second.cost)
        if gap:
            cheaper = min(parts, key=lambda p: p.cost)
            sentence += f", so {cheaper.said()} is {_money(gap, currency)} less"
        return sentence + ".", {_number(c) for c in [*costs, gap]}
    said = [p.said() for p in parts]
    listed = said[0] if len(said) == 1 else ", ".join(said[:-1]) + f" and {said[-1]}"
    verb = "comes" if len(parts) == 1 and parts[0].count == 1 else "come"
    return (f"{listed[:1].upper()}{listed[1:]} {verb} to {_money(sum(costs), currency)}{per}.",
            {_number(c) for c in [*costs, sum(costs)]})


def _plural(item: str) -> str:
    head, of, rest = item.partition(" of ")  # "slices of cheese pizza"
    if head.endswith("s"):
        plural = head
    elif head.endswith("y") and head[-2:-1] not in "aeiou":
        plural = head[:-1] + "ies"
    else:
        plural = head + "s"
    return plural + of + rest


def _number(amount: float) -> str:
    return str(int(amount)) if float(amount).is_integer() else f"{amount:.2f}"


def _money(amount: float, currency: str) -> str:
    return f"{_number(amount)} {currency}"


def article(noun: str) -> str:
    """The indefinite article a spoken noun takes ("an electric bike", "a city bike")."""
    return "an" if noun[:1].lower() in "aeiou" else "a"


def _not_a_claim(sentence: str) -> bool:
    """A question back, a few words ("Hello!", "You're welcome."), or "I don't know"/a person."""
    sentence = sentence.strip()
    return sentence.endswith("?") or len(sentence.split()) <= 3 or bool(_DONT_KNOW.search(sentence.lower()))


def _supports(index: FactIndex, question: str, answer: str) -> bool:
    if NO_FACTS.lower().rstrip(".") in answer.lower():  # the grounding message read back
        return False
    facts = index.relevant(question)
    if not facts:
        # Nothing in the file is about it: small talk, a question back, or "I don't know" only.
        # A claim here can only be made up ("A student discount is offered to students..."), and
        # the caller's words said back ("High-bird wheels, cash.") help no one.
        if _words(answer) and _words(answer) <= _words(question):
            return False
        return all(_not_a_claim(sentence) for sentence in _SENTENCE.findall(answer) if sentence.strip())
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
    asked_words = _words(question)
    mentioned = asked_words | _words(answer)
    # A number word ("three days") is the caller's count, and a word of reckoning ("together",
    # "cheaper") asks to combine what the file holds: neither is a thing the file does not know.
    unknown = {w for w in index.unknown_words(question) if not numbers_in(w) and w not in RECKONING}
    strict = bool(unknown)
    # A claim about what the caller asked that the file does not know, their word said back in a
    # statement ("The parking near the shop is at 42 Harbor Lane."), is made up from the facts
    # that happened to be retrieved.
    if any(unknown & _words(sentence) for sentence in _SENTENCE.findall(answer)
           if sentence.strip() and not _not_a_claim(sentence)):
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
    if asked and asked[0] in _YES_NO_QUESTION and said and said[0] in _YES_NO_ANSWER:
        # The yes or no must come from one fact that holds every word of the question the file
        # knows: "Do you repair electric cougars?" has "repair" in one fact and "electric" in
        # another, and no fact says yes to both.
        known = _words(question) - unknown - index.self_words
        if not any(all(any(_same(k, w) for w in index.words_of(line)) for k in known) for line in facts):
            return False
        fact_words = _words(" ".join(facts)) - index.self_words
        told = {w for w in _words(answer)
                if w not in _YES_NO_ANSWER and not any(_same(w, n) for n in [*index.self_words, *asked])}
        return any(any(_same(w, f) for f in fact_words) for w in told)
    return True
