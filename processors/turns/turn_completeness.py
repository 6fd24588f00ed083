"""Whether what the caller has said so far is a finished turn, judged from its words.

Consumes a turn's transcript (its finals so far); gives ``None`` when the words could end a
turn, or why they can't: they end in a word that needs more ("and", "is", "my", "um"), in
punctuation Whisper writes at a break in a sentence ("...", ",", ":"), in a number being
dictated that is still short, in a name being spelled letter by letter, or in asking to be told
what has not been said yet ("Could you tell me?"); and, for an STT that
punctuates what it hears end (Whisper), in no closing punctuation at all. A question mark or an
ordinary last word is finished. Pure and cheap (microseconds), so it runs at every pause;
``adaptive_user_turn_stop.py`` decides on it.

Why words rather than pipecat's Smart Turn model on the audio: on this machine Smart Turn v3
costs ~166 ms a pause and judged flat TTS-voiced questions "incomplete" 40% of the time
(docs/benchmarks.md, End of turn); the transcript is there anyway, and the unfinished endings of
customer-service speech are few and regular. ``python -m agent bench --suite turns`` measures
both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Words a finished English sentence hardly ever ends on: conjunctions, prepositions, articles,
# possessives, "is"/"are" and hesitations. Not "so", "then", "that", "do", "can": "I think so.",
# "I'd like that.", "Yes, I do." end turns.
UNFINISHED_LAST_WORDS = frozenset("""
    and or but because cause plus
    um uh uhm er erm ah hmm mm like
    the a an my your our their his her its
    to of for with from at in on by about into onto than as if whose
    is are was were i i'm it's there's we're you're i'd i'll i've we'd
""".split())

# "Could you tell me? ... when you open on Sunday": these ask to be told something, and what comes
# next says what. Whole as a question by their words, so the question mark does not end them.
_TELL_WHAT = frozenset({(verb, who) for verb in ("tell", "show", "remind") for who in ("me", "us")}
                       | {("let", who, "know") for who in ("me", "us")})

# "is"/"are" end a sentence after a pronoun ("that's where it is"), not after a noun ("my number is").
_BE = frozenset("is are was were".split())
_SUBJECTS = frozenset("it that this there here they we you he she i one who what which".split())

# Words that say digits are being dictated ("my order number is four five ..."), and how many
# digits such a number has at least.
NUMBER_CUES = {"number": 4, "order": 4, "code": 4, "zip": 5, "postcode": 5, "account": 4, "reference": 4, "phone": 7}
NUMBER_WORDS = frozenset("zero oh one two three four five six seven eight nine ten".split())

_WORD = re.compile(r"[a-z0-9']+")
_CLOSED = re.compile(r"[.?!][\"'”’)]*$")


@dataclass(frozen=True)
class CompletenessRules:
    """What counts as unfinished; the defaults are the rules above.

    Parameters:
        last_words: A turn ending on one of these is unfinished.
        number_cues: Digits dictated after one of these words, fewer than its count, are unfinished.
        open_ending: Words with no closing punctuation (".", "?", "!") are unfinished. Only for
            an STT that punctuates the sentences it hears end, as Whisper does: its transcript of
            words cut by a pause ("Do you have", "I need a helmet. A lock") is left open. An STT
            that never punctuates would hold every turn.
    """

    last_words: frozenset[str] = field(default=UNFINISHED_LAST_WORDS)
    number_cues: dict[str, int] = field(default_factory=lambda: dict(NUMBER_CUES))
    open_ending: bool = False


def unfinished(text: str, rules: CompletenessRules = CompletenessRules()) -> str | None:
    """Why ``text`` can't be the end of the caller's turn, or None when it can."""
    stripped = text.strip()
    if not stripped:
        return None
    if stripped.endswith(("...", "…", ",", ";", ":", "-", "—")):
        return "ends mid-sentence (" + stripped[-1] + ")"
    words = _WORD.findall(stripped.lower())
    if tuple(words[-3:]) in _TELL_WHAT or tuple(words[-2:]) in _TELL_WHAT:
        return "asks to be told what is still to come"
    if stripped.endswith("?"):
        return None
    if not words:
        return None
    last = words[-1]
    if last in _BE and len(words) > 1 and words[-2] in _SUBJECTS:
        return None  # "... where it is.", "Here they are."
    if last in rules.last_words:
        return f"ends in {last!r}"
    dictated = _dictated_digits(words, rules.number_cues)
    if dictated is not None:
        return f"a number being dictated ({dictated} digits so far)"
    if len(words) >= 3 and all(len(w) == 1 and w.isalpha() for w in words[-2:]) and words[-1] not in ("a", "i"):
        return "a name being spelled"
    if rules.open_ending and not _CLOSED.search(stripped):
        return "no closing punctuation"
    return None


def _dictated_digits(words: list[str], cues: dict[str, int]) -> int | None:
    """The digits that end the words, when a number cue before them wants more; None otherwise."""
    count = 0
    for i in range(len(words) - 1, -1, -1):
        word = words[i]
        if word.isdigit():
            count += len(word)
        elif word in NUMBER_WORDS:
            count += 1
        else:
            wanted = max((cues.get(w, 0) for w in words[max(0, i - 3): i + 1]), default=0)
            return count if 0 < count < wanted else None
    return None
