"""When a partial transcript is stable enough to draft an answer from (speculative drafts: docs/architecture.md).

Consumes partial texts (and the silence after them); emits a ``Stability`` (the text and the
rule that fired) or None. Pure text, unit-tested on tables.
"""

from __future__ import annotations

import re
import unicodedata
from collections import deque
from dataclasses import dataclass

from processors.turns.comparison_form import comparison_form

_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class StabilityConfig:
    """When a partial transcript is stable enough to draft an answer from.

    The base rule: the last ``consecutive`` partials end with the same last ``tail_chars``
    characters and the text has at least ``min_chars`` characters. Any extra trigger fires on
    its own (each still needs ``min_chars``); set it to ``None`` (or ``()``) to switch it off.
    Texts are compared in :func:`comparison_form`, so fillers ("um", "uh", "you know", 嗯,
    那个), case and punctuation never make two partials differ.

    ``min_silence_s`` (off by default: the playbook's rules are text-only) additionally makes
    every rule wait until the user has been silent that long after the partial's audio.
    Streaming Whisper often repeats a partial in the middle of a word ("What did your phone?"
    twice, for "What is your phone number?"), and each such draft is superseded — a second
    request; 0.1 s of silence rules those out and still comes ahead of the VAD stop.

    Parameters:
        consecutive: K, partials that must agree (1 = every partial is stable).
        tail_chars: N, trailing characters compared (the whole text when shorter).
        min_chars: M, shortest text worth a draft.
        end_words: Phrases that end a request; one at the end of a partial makes it stable.
            A phrase ending in punctuation ("right?") must end the partial with that
            punctuation; the others are matched as whole words.
        silence_s: A partial heard up to the start of at least this much silence is stable.
        question_min_chars: A partial ending in "?" with at least this many characters is
            stable.
        min_silence_s: Silence every rule also needs after the partial's audio (0 = off).
    """

    consecutive: int = 2
    tail_chars: int = 8
    min_chars: int = 6
    end_words: tuple[str, ...] | None = ("right?", "that's it", "please")
    silence_s: float | None = 0.25
    question_min_chars: int | None = 30
    min_silence_s: float = 0.0

    def __post_init__(self):
        if self.consecutive < 1 or self.tail_chars < 1 or self.min_chars < 0 or self.min_silence_s < 0:
            raise ValueError("consecutive and tail_chars must be >= 1, min_chars and min_silence_s >= 0")

    @property
    def silence_thresholds(self) -> tuple[float, ...]:
        """Silence lengths at which a partial heard before them may become stable."""
        return tuple(t for t in (self.min_silence_s, self.silence_s) if t)


@dataclass(frozen=True)
class Stability:
    """A stable partial: its text and which rule made it stable."""

    text: str
    reason: str  # "repeated_tail" | "end_word" | "silence" | "question"


class StablePartialDetector:
    """Feeds on partial transcripts and says which one is stable (see :class:`StabilityConfig`)."""

    def __init__(self, config: StabilityConfig | None = None):
        """Args: config: the rules; the defaults when None."""
        self.config = config or StabilityConfig()
        self._tails: deque[str] = deque(maxlen=self.config.consecutive)
        self._latest = ""
        end_words = self.config.end_words or ()
        self._punctuated_end_words = tuple(
            _raw_form(w) for w in end_words if w and not w[-1].isalnum()
        )
        self._word_end_words = tuple(
            comparison_form(w) for w in end_words if w and w[-1].isalnum()
        )

    def reset(self):
        """Forget every partial (a new turn)."""
        self._tails.clear()
        self._latest = ""

    def feed(self, text: str, *, silence_s: float = 0.0) -> Stability | None:
        """Take the next partial.

        Args:
            text: The partial transcript.
            silence_s: How much silence followed the audio this partial was made from (0 when
                the audio it heard was still speech).

        Returns:
            The partial as a :class:`Stability` when it is stable, else None.
        """
        self._latest = text
        form = comparison_form(text)
        self._tails.append(form[-self.config.tail_chars :])
        return self._check(text, form, silence_s)

    def on_silence(self, silence_s: float) -> Stability | None:
        """Re-check the latest partial now that ``silence_s`` of silence followed its audio."""
        if not self._latest:
            return None
        return self._check(self._latest, comparison_form(self._latest), silence_s)

    def _check(self, text: str, form: str, silence_s: float) -> Stability | None:
        config = self.config
        if len(form) < max(1, config.min_chars) or silence_s < config.min_silence_s:
            return None
        if (
            len(self._tails) == config.consecutive
            and all(tail == self._tails[-1] for tail in self._tails)
        ):
            return Stability(text, "repeated_tail")
        if self._ends_with_end_word(text, form):
            return Stability(text, "end_word")
        if config.silence_s is not None and silence_s >= config.silence_s:
            return Stability(text, "silence")
        if (
            config.question_min_chars is not None
            and text.rstrip().endswith(("?", "？"))
            and len(form) >= config.question_min_chars
        ):
            return Stability(text, "question")
        return None

    def _ends_with_end_word(self, text: str, form: str) -> bool:
        raw = _raw_form(text)
        if any(_ends_with_words(raw, w) for w in self._punctuated_end_words):
            return True
        return any(_ends_with_words(form, w) for w in self._word_end_words)


def _raw_form(text: str) -> str:
    """Case-folded, apostrophes unified, spaces collapsed; punctuation kept."""
    text = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
    return _SPACES.sub(" ", text).strip()


def _ends_with_words(text: str, phrase: str) -> bool:
    if not phrase or not text.endswith(phrase):
        return False
    before = text[: -len(phrase)]
    return not before or not before[-1].isalnum()
