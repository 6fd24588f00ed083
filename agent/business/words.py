"""How a caller's words are compared with the business file's: the words that carry a question,
when two forms are one word, which priced items a question names, and numbers said as words.

Pure text, no model: the fact retrieval, the answer check, the fast path and the order
reckoning (agent/business/facts.py, intents.py, orders.py) all compare words this one way.
"""

from __future__ import annotations

import re

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
# Words a caller says for a word the file uses: American and British spellings, plain words.
_ALIASES = {"tire": "tyre", "tires": "tyres", "fix": "repair", "fixing": "repair", "puncture": "flat",
            "hire": "rental", "center": "centre", "color": "colour"}
# Words that ask what something costs.
PRICE_WORDS = frozenset("price prices cost costs much charge charges pay fee".split())


# "I'd" without its apostrophe is "id", a word of "bring a photo ID": "I'd like to return a
# jacket" was about the rentals.
_I_WOULD = re.compile(r"\bi['\u2019]d\b", re.IGNORECASE)


def words(text: str) -> set[str]:
    """The words of ``text`` that say what it is about (no function words)."""
    return {w for w in comparison_words(_I_WOULD.sub("I would", text)) if w not in _STOP}


def same_word(a: str, b: str) -> bool:
    """Whether two word forms are one word to a listener ("tire"/"tyre", "rent"/"rental")."""
    # A word and its longer forms ("rent"/"rental", "return"/"returns") are one word; a
    # spelling distance would also make "shop" "ship" and "bring" "ring".
    if a == b or _ALIASES.get(a) == b or _ALIASES.get(b) == a:
        return True
    short, long = sorted((a, b), key=len)
    return len(short) >= 4 and long.startswith(short)


def item_words(item: str) -> set[str]:
    """The words that name a priced item ("city bike rental" -> city, bike, rental)."""
    return words(item)


def asked_items(question: str, items: list[str]) -> list[str]:
    """The priced items a question names, best first: those sharing the most words with it.

    "How much is it to rent a bike?" names both bike rentals; a question that shares no word
    with any item ("How much is a helmet?") names none.
    """
    asked = words(question)
    named = {item: {w for w in asked if any(same_word(w, i) or _ends_compound(i, w) for i in item_words(item))}
             for item in items}
    # One shared word that several items have ("bike") does not name an item: "How much does it
    # cost to ship a bike?" is about shipping.
    def names(item):
        shared = named[item]
        return len(shared) >= 2 or any(sum(1 for other in items if w in named[other]) == 1 for w in shared)
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


# Number words to digits, so "forty-five" in an answer meets "45" in a fact. A few lines, not a
# dependency: spoken answers about a business only say small whole numbers.
_UNITS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen".split())}
_TENS = {w: 10 * i for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()) if w != "_"}
_NUMBER_WORDS = re.compile(rf"\b({'|'.join(_TENS)})(?:[\s-]({'|'.join(_UNITS)}))?\b|\b({'|'.join(_UNITS)})\b")
_DIGITS = re.compile(r"\d+")


def numbers_as_digits(text: str) -> str:
    """``text`` lower-cased, with number words as digits ("forty-five dollars" -> "45 dollars")."""
    def digits(match: re.Match) -> str:
        if match.group(3):
            return str(_UNITS[match.group(3)])
        return str(_TENS[match.group(1)] + (_UNITS[match.group(2)] if match.group(2) else 0))

    return _NUMBER_WORDS.sub(digits, text.lower())


def numbers_in(text: str) -> set[str]:
    return set(_DIGITS.findall(numbers_as_digits(text)))


# Words that ask to combine facts, in any business: a total, a difference, a comparison.
RECKONING = frozenset({"together", "altogether", "total", "both", "combined", "difference",
                        "more", "less", "cheaper", "dearer", "expensive", "extra", "plus", "sum", "than", "between",
                        "versus", "compared", "come", "comes"})  # "what does that come to?"


def asks_to_reckon(text: str) -> bool:
    """Whether ``text`` asks for facts combined, not one read out: a total, a difference or a
    comparison ("what's that all together?", "is it cheaper to..."), or a price for a count the
    caller gives ("two city bikes for three days", "four of us"). "The electric one" is no count."""
    said = set(comparison_words(text))
    counts = {n for n in numbers_in(text) if n.isdigit() and 1 < int(n) <= 100}
    return bool(said & RECKONING) or bool(counts)


def article(noun: str) -> str:
    """The indefinite article a spoken noun takes ("an electric bike", "a city bike")."""
    return "an" if noun[:1].lower() in "aeiou" else "a"


# How a turn is put: a question, a request, or neither. The fast path, the tools' router and the
# answer check all read a turn's form this one way.
_QUESTION_OPENERS = frozenset(
    "what whats when where which who whom whose why how is are am was were do does did can could will would "
    "shall should may might have has".split()
)
# How a caller asks for something without a question: "I want...", "I'd like...", "I forgot...".
_REQUEST = re.compile(
    r"\b(?:i|id)(?: would| just| really)* (?:want|wanna|like|love|need)\b|\b(?:im|i am) (?:trying|looking)\b"
    r"|\bi (?:forgot|lost|cant|cannot|couldnt)\b"
)


def opens_a_question(text: str) -> bool:
    """A question's first word ("What...", "Do you..."): a question whatever the punctuation."""
    said = comparison_words(text)
    return bool(said and said[0] in _QUESTION_OPENERS)


def is_question(text: str) -> bool:
    """A question mark, or a question's first word ("Do you...", "Where...")."""
    return text.rstrip().endswith("?") or opens_a_question(text)


def is_request(text: str) -> bool:
    """Whether ``text`` asks for something in the first person ("I'd like to merge my accounts.")."""
    return bool(_REQUEST.search(" ".join(comparison_words(text))))


def asks_nothing(text: str) -> bool:
    """Words with no question anywhere in them and no request ("It's the parking near the shop.")."""
    return "?" not in text and not opens_a_question(text) and not is_request(text)
