"""Whether an LLM's answer says nothing the business file does not hold: the rules of the answer
check (processors/llm/answer_check.py calls them through ``FactIndex.supports``).

Consumes a ``FactIndex`` (agent/business/facts.py: the question's fact lines, the words the file
holds, an order worked out from its prices), the caller's words and the answer so far; returns
whether all of it may be said. Rules a reader can follow, not a model's opinion: every number said
is one the caller or the question's facts said (or one worked out from them); a yes must come
from a fact that holds what was asked, and never agree to what a fact denies; an order is said to
come to the amount worked out, not another; a turn no fact is about, or a statement most of whose
words none holds, is told no fact. Pure and cheap: it runs on every clause of a streamed answer.
"""

from __future__ import annotations

import re

from agent.business.words import RECKONING, asks_nothing, numbers_in, opens_a_question, same_word, words
from processors.turns.comparison_form import comparison_words

# The grounding's line for a question no fact is about (agent/business/facts.py); read back by a
# small model, it is no answer.
NO_FACTS = "There is no fact about this."

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


def worked_out_numbers(index, facts: list[str], question: str, naming: set[str] | None = None) -> set[str]:
    """The numbers an answer may work out from what the file and the caller said: a number of a
    price the caller named, times the caller's own numbers ("two city bikes for three days" is
    2 x 3 x 20 = 120), and the sum or difference of two such from two prices the caller named
    ("a city bike and an e-bike for a day" is 20 + 45). A tune-up never costs 45 + 20: the caller
    named one thing, so nothing is added to it."""
    asked = words(question) if naming is None else naming  # the words that name the caller's items
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


def _claimed(sentence: str, *, few_words: bool = False) -> str:
    """What ``sentence`` claims: all of it; what comes before its "I don't know" (or offer of a
    person), however short ("We are hiring, I'm sorry, I don't know that." claims "We are
    hiring", heard in the FAQ suite's noisy calls); nothing for a question back, nor for a few
    words ("Hello!") unless ``few_words``. The answer is checked clause by clause as it streams,
    so "We are hiring," is judged before the rest of its sentence comes: said back to a caller's
    word no fact holds, its three words are a claim (a 10 dB call, 2026-12-07)."""
    said = _DONT_KNOW.search(sentence.lower())
    if said:
        return sentence[:said.start()]
    if sentence.strip().endswith("?") or (not few_words and len(sentence.split()) <= 3):
        return ""
    return sentence


def supports(index, question: str, answer: str) -> bool:
    """Whether ``answer`` (so far) to ``question`` says nothing the file behind ``index`` (a
    ``FactIndex``) does not hold; see the module docstring."""
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
    if "?" not in question and index.unknown_share(question) > _MOSTLY_UNKNOWN and _answer_tells_a_fact(
            index, facts, question, answer):
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
    if any(unknown & words(_claimed(sentence, few_words=True)) for sentence in _SENTENCE.findall(answer)
           if sentence.strip()):
        return False
    if _says_another_total(index, question, answer):
        return False
    # Worked out only from prices the caller named, so a word the file does not know beside them
    # ("a tune-up on mine") borrows nothing: a helmet's price is never worked out.
    new_numbers = numbers_in(answer) - numbers_in(question)
    if new_numbers:  # the check runs on every clause of a streaming answer: most say no number
        # An item's word said only before a word no fact holds names that thing, not the item: "a
        # electric cougar" (a phone call's "electric scooters", 2026-12-07) is no electric bike.
        naming = asked_words - _modifiers_of_the_unknown(index, question, unknown)
        new_numbers -= worked_out_numbers(index, facts, question, naming)
        for number in new_numbers:
            if not any(number in numbers_in(line) and (not strict or index.distinctive(line) & (
                    naming if line in index.price_lines else mentioned)) for line in facts):
                return False
    # "Yes"/"no" to a yes-or-no question must come with something from the facts beyond the
    # question's own words; "Yes, we repair electric scooters." only echoes the question.
    # The question is the turn's last clause: "I'm catching the ferry, can I leave my bike here?"
    # asks yes or no as plainly as "Can I leave my bike here?". A last clause that opens no
    # question is one Whisper's comma cut from it: "Um, have your daughter, tandem we could rent
    # for the afternoon?" (a browser call's words as a partial may punctuate them, 2026-12-07)
    # asks from "have".
    parts = _CLAUSES.split(question)
    clauses = [c for c in parts if len(c.split()) >= 2]
    last = clauses[-1] if clauses else question
    if not opens_a_question(last):
        last = next((c for c in reversed(parts) if set(comparison_words(c)[:1]) & _YES_NO_QUESTION), last)
    asked = comparison_words(last)
    said = comparison_words(answer)
    if (said and said[0] in _YES_NO_ANSWER and not (asked and asked[0] in _YES_NO_QUESTION)
            and index.unknown_share(question) > _MOSTLY_UNKNOWN):
        # "Sure!" to a turn that is no yes-or-no question agrees with what was said, and what was
        # said is mostly what the file does not know ("You're hiring delivery drivers right to home.").
        return False
    if _agrees_with_what_a_fact_denies(index, question, facts, said):
        return False
    yes_or_no = bool(asked) and asked[0] in _YES_NO_QUESTION
    if said and said[0] in _YES_NO_ANSWER and not yes_or_no and asks_nothing(question):
        # "Sure!" and a fact, to words that ask nothing, agree to what they say: Whisper writes a
        # question it mishears as a statement ("I'm catching the ferry. I leave my bike with you
        # for the day.", a 10 dB call, 2026-12-07, heard "Sure! I'm at 42 Harbor Lane ..."). Held
        # to a yes-or-no question's rule below. "Sure! What time suits you?" only acknowledges.
        yes_or_no = _answer_tells_a_fact(index, facts, question, answer)
    if yes_or_no and said and said[0] in _YES_NO_ANSWER:
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


def _says_another_total(index, question: str, answer: str) -> bool:
    """Whether ``answer`` says the caller's order comes to an amount other than the one worked out
    from the file's prices. Each number of it may be a price the facts hold, so the number check
    lets it by: "A large pepperoni pizza and a large cheese pizza come to 21 dollars." (a 10 dB
    noisy call, 2026-12-07) said one pizza's price as the sum, and the worked-out sentence after it
    said 39: the caller heard two totals."""
    reckoned = index.reckoning(question)
    if reckoned is None:
        return False
    allowed = reckoned.numbers | numbers_in(question)  # the sentence's numbers hold its results
    for sentence in _SENTENCE.findall(answer):
        for said in _TOTAL_SAID.finditer(sentence):
            amount = said.group(1)
            if amount is None and (before := _AMOUNT_BEFORE.search(sentence[:said.start()])):
                amount = before.group(1)
            if amount is not None and not numbers_in(amount) <= allowed:
                return True
    return False


def _agrees_with_what_a_fact_denies(index, question: str, facts: list[str], said: list[str]) -> bool:
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
            content = words(after)
            denied = [w for w in comparison_words(after) if w in content]
            if denied and denied[-1] in index.distinctive(line) and any(same_word(denied[-1], w) for w in asked):
                return True
    return False


def _modifiers_of_the_unknown(index, question: str, unknown: set[str]) -> set[str]:
    """The words of ``question`` that name part of a priced item ("electric") right before a word
    no fact holds ("cougar"): in English the last word of a noun phrase says what it is."""
    if not unknown:
        return set()
    said = comparison_words(question)
    item_words = {w for line in index.price_lines for w in index.distinctive(line)}
    return {before for before, word in zip(said, said[1:])
            if word in unknown and any(same_word(before, w) for w in item_words)}


def _answer_tells_a_fact(index, facts: list[str], question: str, answer: str) -> bool:
    """Whether any sentence of ``answer`` claims something of ``facts`` (``_claimed``, ``_tells_a_fact``)."""
    return any(_tells_a_fact(index, facts, question, _claimed(sentence)) for sentence in _SENTENCE.findall(answer))


def _tells_a_fact(index, facts: list[str], question: str, claim: str) -> bool:
    """Whether ``claim`` says something of ``facts``: a number, or a word of a line's own (one at
    most two lines hold) that the caller did not say."""
    if not claim.strip():
        return False
    if numbers_in(claim) - numbers_in(question):
        return True
    told = words(claim) - words(question)
    return any(told & index.distinctive(line) for line in facts)
