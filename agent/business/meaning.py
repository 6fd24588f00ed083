"""What a caller's words are about, by meaning: the nearest of the business's own sentences.

Consumes a ``Business``, its fact lines (agent/business/facts.py) and the caller's words; returns
the topics ranked by how close the words lie to that topic's sentences (``MeaningIndex.ranked``),
the fact lines nearest them (``fact_lines``), and the priced item a question names in other words
("an e-bike" is the electric bike rental: ``item``).

The sentences ("anchors") are the file's own: every fact line, every intent example, each priced
item and policy named in a question's usual form ("How much is a basic tune-up?"), plus a few
questions any caller asks of any business about its hours, address and phone. They are embedded
once per process (the same file gives the same anchors, so every call shares one matrix); a
caller's turn is embedded once (a bounded cache: the scheduler, the fast path and the grounding
ask about the same final).

Two helps for a small embedding model, both for any business: a price asked in idiom ("what
would that set me back?") is said plainly before it is embedded, and a word of the turn that only
one topic's few lines hold ("transfer", "street") brings that topic a little nearer.

Why by meaning: matching words against examples answered the questions the file was tuned on and
refused the same questions worded the way callers talk ("When do you shut on weekdays?", "What
would a day on an e-bike set me back?"). The thresholds below were measured on the shipped
bike shop's first 32 questions only (docs/benchmarks.md, "Understanding any caller of any business"), then
checked on businesses and questions written after them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from agent.business.embedder import SentenceEmbedder
from agent.business.model import Business

# A turn at least this close to a topic's nearest sentence is about that topic.
ABOUT = 0.62
# Below this, nothing in the file is near the turn: no fact answers it.
NOTHING_NEAR = 0.30
# From this, a question no topic clearly takes is near a fact: it hears that fact said as the
# nearest thing the file says, with a person offered (agent/business/intents.py).
NEAR_A_FACT = 0.45
# The best topic must lead the next one by this much to be taken without an intent's keyword.
LEAD = 0.04
# Each word of the turn that at most two fact lines hold, all of one topic ("bank transfer" and
# the payment policy, "street" and the address), brings that topic this much closer, for at most
# ``RARE_WORDS_COUNTED`` words: a rare shared word is evidence a small embedding model misses
# ("Is it alright to do a bank transfer once you've finished?" lay 0.45 from the payment policy
# and was refused). Measured over the four shipped businesses' FAQ questions (docs/benchmarks.md).
RARE_WORD_BONUS = 0.03
RARE_WORDS_COUNTED = 2
# A priced item named in other words: its name this close to the turn ...
ITEM_NEAR = 0.45
# ... and this much closer than the next item's.
ITEM_LEAD = 0.05

# What a caller asks any business about its own basic facts, in the usual forms. Product
# knowledge, not one business's wording: every file has hours, an address and a phone.
_GENERIC = {
    "hours": ("What are your opening hours?", "When are you open?", "What time do you open?",
              "What time do you close?", "Are you open today?", "Are you open at the weekend?"),
    "address": ("Where are you located?", "What is your address?", "How do I get to you?"),
    "phone": ("What is your phone number?", "What number can I call?"),
}

# ... and what any caller asks a business that has a price list.
_ASKING_A_PRICE = ("How much does it cost?", "What do you charge for it?", "What is the price?")


# How callers ask a price in idiom, said plainly before the turn is embedded: all-MiniLM-L6-v2
# puts "What would it set me back to have the vet look at him?" nearer the repeat-prescriptions
# policy (it has "vets") than the prices. Any business's callers say these; none is one file's word.
_PRICE_IDIOMS = ((re.compile(r"\bset (?:me|us|you) back\b", re.IGNORECASE), "cost"),
                 (re.compile(r"\b(?:run|cost) (?:me|us|you)\b", re.IGNORECASE), "cost"),
                 (re.compile(r"\bwhat(?:'| i)?s the damage\b", re.IGNORECASE), "what is the cost"))


def plainly(text: str) -> str:
    """``text`` with a price idiom said plainly ("set me back" -> "cost")."""
    for idiom, plain in _PRICE_IDIOMS:
        text = idiom.sub(plain, text)
    return text


@dataclass(frozen=True)
class Anchor:
    """One sentence of the file, and the topic (an intent's name or a fact's topic) it stands for."""

    text: str
    topic: str
    fact: bool = False  # a fact line, which the LLM may be given to answer from


_SENTENCE = re.compile(r"[^.!?]+[.!?]*")
_CLAUSE = re.compile(r";|, (?:and|but|or|so) |, ")


def _article(item: str) -> str:
    return "an" if item[:1].lower() in "aeiou" else "a"


def anchors_of(business: Business, fact_lines: list[tuple[str, str]]) -> tuple[Anchor, ...]:
    """Every sentence of ``business`` a caller's words are compared with; ``fact_lines`` are (topic, line)."""
    anchors = [Anchor(line, topic, fact=True) for topic, line in fact_lines]
    for topic, line in fact_lines:
        # Each clause of a long line on its own too: a line that says three things lies far from a
        # question about one of them ("... bikes can be returned within 14 days if ridden less
        # than 20 miles" and "I only rode it ten miles, can I bring it back?").
        clauses = [c.strip() for c in _CLAUSE.split(line.rstrip(".")) if len(c.split()) >= 3]
        if len(clauses) > 1:
            anchors += [Anchor(clause, topic) for clause in clauses]
    for name, intent in business.intents.items():
        anchors += [Anchor(example, name) for example in intent.examples]
    for topic, questions in _GENERIC.items():
        anchors += [Anchor(q, topic) for q in questions]
    if business.prices:
        anchors += [Anchor(q, "prices") for q in _ASKING_A_PRICE]
    for item in business.prices:
        anchors += [Anchor(f"How much is {_article(item)} {item}?", "prices"),
                    Anchor(f"What does {_article(item)} {item} cost?", "prices")]
    for topic in business.policies:
        anchors.append(Anchor(f"What is your policy on {topic}?", topic))
    return tuple(anchors)


@functools.lru_cache(maxsize=8)
def _anchor_vectors(embedder: SentenceEmbedder, texts: tuple[str, ...]) -> np.ndarray:
    # Keyed by the sentences, so every call of one business (and a file loaded twice) shares one matrix.
    return embedder.embed(texts)


class MeaningIndex:
    """The business's sentences, embedded; ask it what a caller's words are about."""

    def __init__(self, business: Business, fact_lines: list[tuple[str, str]], embedder: SentenceEmbedder,
                 rare_words: Callable[[str], dict[str, int]] | None = None):
        """``rare_words``: for a turn, how many of its words only one topic's few lines hold, per topic."""
        self.business = business
        self._rare_words = rare_words
        self.embedder = embedder
        self.anchors = anchors_of(business, fact_lines)
        self._vectors = _anchor_vectors(embedder, tuple(a.text for a in self.anchors))
        index = {topic: i for i, topic in enumerate(dict.fromkeys(a.topic for a in self.anchors))}
        self._topics = tuple(index)
        self._topic_of = np.array([index[a.topic] for a in self.anchors])
        self._fact_rows = np.array([i for i, a in enumerate(self.anchors) if a.fact], dtype=int)
        self._items = tuple(business.prices)
        self._item_vectors = _anchor_vectors(embedder, self._items) if self._items else None
        self.vector = functools.lru_cache(maxsize=64)(self._vector)
        self.ranked = functools.lru_cache(maxsize=64)(self._ranked)

    def _vector(self, text: str) -> np.ndarray:
        """The turn's vectors: the whole, and each question of a turn of several sentences ("Where
        are you guys at? I'm trying to find the place."), which the sentences around it dilute. A
        statement around it is context, not what is asked: "I'm catching the ferry. Can I leave my
        bike with you?" is not about the address."""
        text = plainly(text)
        sentences = [s.strip() for s in _SENTENCE.findall(text) if len(s.split()) >= 2]
        questions = [s for s in sentences if s.endswith("?")] if len(sentences) > 1 else []
        return np.stack([self.embedder.vector(piece) for piece in [text, *questions]])

    def _similarity(self, vectors: np.ndarray, text: str) -> np.ndarray:
        """Each row of ``vectors``' similarity to the turn (to its nearest piece)."""
        return (vectors @ self.vector(text).T).max(axis=1)

    def _ranked(self, text: str) -> tuple[tuple[str, float, str], ...]:
        """(topic, similarity, nearest sentence) for every topic, closest first."""
        scores = self._similarity(self._vectors, text)
        best: dict[int, int] = {}
        for index in np.argsort(-scores):
            best.setdefault(int(self._topic_of[index]), int(index))
        rare = self._rare_words(text) if self._rare_words else {}
        ranked = [(self._topics[t], float(scores[i]) + RARE_WORD_BONUS * min(rare.get(self._topics[t], 0), RARE_WORDS_COUNTED),
                   self.anchors[i].text) for t, i in best.items()]
        return tuple(sorted(ranked, key=lambda r: -r[1]))

    def topic(self, text: str, among: set[str] | None = None) -> tuple[str, float] | None:
        """The topic ``text`` is about (of ``among``, when given), when it is near enough and
        clearly nearer than the next; None otherwise."""
        ranked = [r for r in self.ranked(text) if among is None or r[0] in among]
        if not ranked or ranked[0][1] < ABOUT:
            return None
        if len(ranked) > 1 and ranked[0][1] - ranked[1][1] < LEAD:
            return None
        return ranked[0][0], ranked[0][1]

    def fact_lines(self, text: str, floor: float = NOTHING_NEAR) -> list[tuple[float, str, str]]:
        """(similarity, topic, line) of the fact lines at least ``floor`` close to ``text``, closest first."""
        scores = self._similarity(self._vectors[self._fact_rows], text)
        order = np.argsort(-scores)
        return [(float(scores[i]), self.anchors[self._fact_rows[i]].topic, self.anchors[self._fact_rows[i]].text)
                for i in order if scores[i] >= floor]

    def nearest(self, text: str) -> float:
        """How close ``text`` lies to anything in the file (the best similarity)."""
        ranked = self.ranked(text)
        return ranked[0][1] if ranked else 0.0

    def item(self, text: str) -> str | None:
        """The priced item ``text`` names in other words ("an e-bike" -> "electric bike rental"), or None."""
        if self._item_vectors is None:
            return None
        scores = self._similarity(self._item_vectors, text)
        order = np.argsort(-scores)
        best = float(scores[order[0]])
        runner_up = float(scores[order[1]]) if len(order) > 1 else -1.0
        if best >= ITEM_NEAR and best - runner_up >= ITEM_LEAD:
            return self._items[int(order[0])]
        return None
