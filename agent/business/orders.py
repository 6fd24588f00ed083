"""What an order the caller names comes to, worked out from the business's prices.

Consumes the caller's words and the file's prices; returns a sentence the answer may say ("2
large pepperoni pizzas and a large cheese pizza come to 60 dollars.") and its numbers, or None.
agent/business/facts.py puts the sentence first in the LLM's facts and lets its numbers through
the answer check: a 0.5B model reading "21 dollars" and "18 dollars" does not add them up.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NamedTuple

from agent.business.meaning import plainly
from agent.business.words import (PRICE_WORDS, RECKONING, article, asked_items, asks_to_reckon, item_words,
                                  numbers_as_digits, numbers_in, same_word)
from processors.turns.comparison_form import comparison_words

# What a caller's order is made of: a priced item, how many, and (for a price per day or per
# hour) for how long. Parsed, not asked of the LLM: a 0.5B model guesses at "2 x 21 + 18".
_PRICE = re.compile(r"^(\d+(?:\.\d+)?) (\w+)(?: (?:a|an|per) (\w+))?\s*(?:,|$)")
_ONE = frozenset({"a", "an", "one", "single"})
# Words that join the parts of an order ("two large pepperonis and one large cheese").
_JOINERS = ("and", "plus", "with", "or", "then", "also")
# Words that ask which of two is cheaper, not what both come to.
_COMPARING = frozenset({"cheaper", "dearer", "difference", "versus", "compared", "or", "than"})
# Words that ask what something costs or comes to; an idiom for it is said plainly first ("set me back").
_SUM_WORDS = PRICE_WORDS | RECKONING - {"more", "less", "extra", "than", "between", "both"}
# A count said this far before the item's words is its count ("2 large pepperonis").
_COUNT_REACH = 3
_HEARD_TWO = frozenset({"to", "too"})


class Reckoned(NamedTuple):
    """An order worked out: the sentence, every number it says (counts and lengths too: an answer
    may say them), and the ones that answer what was asked (the total; for two compared, both and
    the difference)."""

    sentence: str
    numbers: set[str]
    results: set[str]


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


def _asks_a_sum(question: str) -> bool:
    return bool(set(comparison_words(plainly(question))) & _SUM_WORDS)


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


def _heard_two(words: list[str], plural: int, name: set[str]) -> bool:
    """Whether the caller's "two" was written "to" right before the plural item ("rent to city
    bikes", "too large cheese pizzas"), as Whisper does: only the item's own words between them,
    as the name says them ("to rent city bikes" is renting, and says no count)."""
    for at in range(max(0, plural - _COUNT_REACH), plural):
        if words[at] in _HEARD_TWO and all(w in name for w in words[at + 1:plural]):
            return True
    return False


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
    name = item_words(item)
    plural = next((i for i, w in enumerate(words) if w.endswith("s") and any(w != n and same_word(w, n) for n in name)), None)
    if counted is not None:
        count = _count(words[counted])
        used.add(counted)
    elif plural is not None and _heard_two(words, plural, name):
        count = 2
    elif plural is not None:
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


def _worked_out(parts: list[_Part], comparing: bool) -> Reckoned:
    """What ``parts`` come to (or, ``comparing`` two, each and the gap)."""
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
        return Reckoned(sentence + ".", numbers_in(sentence), {_number(c) for c in [*costs, gap] if c})
    said = [p.said() for p in parts]
    listed = said[0] if len(said) == 1 else ", ".join(said[:-1]) + f" and {said[-1]}"
    verb = "comes" if len(parts) == 1 and parts[0].count == 1 else "come"
    sentence = f"{listed[:1].upper()}{listed[1:]} {verb} to {_money(sum(costs), currency)}{per}."
    return Reckoned(sentence, numbers_in(sentence), {_number(sum(costs))})


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


def order_total(prices: dict[str, str], question: str,
                item_by_meaning: Callable[[str], str | None] | None = None) -> Reckoned | None:
    """What the order in ``question`` comes to, as a sentence the answer may repeat, and its
    numbers; None when the question names no order to work out, or one this cannot parse.

    "Two large pepperonis and one large cheese, what's that come to?" -> "2 large pepperoni
    pizzas and a large cheese pizza come to 60 dollars."; "Is it cheaper to rent a city bike
    for two days, or an electric bike for a day?" -> both totals and the difference. Only
    exact cases: every part names one priced item and its count, every number the caller
    says is a count or a length ("four of us" is neither), and each price is a plain amount,
    maybe per unit ("20 dollars a day", never "7 dollars for half a dozen").
    """
    if not prices or not asks_to_reckon(question) or not _asks_a_sum(question):
        return None  # "I rented two bikes and one had a flat, can I return it?" orders nothing
    items = list(prices)
    said = [(words, _items_in(segment, words, items, item_by_meaning))
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
        part = _part_of(words, item, prices[item])
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
    if len({p.unit for p in parts}) > 1:
        # Priced per day beside a thing priced once: a total "a day" would be wrong, so one day.
        parts = [replace(p, units=p.units or 1) if p.unit else p for p in parts]
    return _worked_out(parts, comparing=len(parts) == 2 and bool(set(comparison_words(question)) & _COMPARING))


def _items_in(segment: str, words: list[str], items: list[str],
              item_by_meaning: Callable[[str], str | None] | None) -> list[str]:
    """The priced items a part of an order may name: one, by its words or else by meaning ("an
    e-bike"); several when its words fit each ("a normal bike"); none."""
    sharing = [item for item in items if any(same_word(w, i) for w in words for i in item_words(item))]
    named = asked_items(segment, items)
    if len(named) == 1 or not sharing:
        return named
    by_meaning = item_by_meaning(segment) if item_by_meaning else None
    return [by_meaning] if by_meaning in (named or sharing) else named or sharing
