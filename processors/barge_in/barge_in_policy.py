"""When user speech interrupts the bot: minimum speech, minimum words, and backchannels.

Pure text and numbers, no frames: ``BargeInPolicy`` decides on a transcript, and
``transcript_words`` is how transcripts are split into the words it counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The list, the spellings Whisper writes for them ("Mmm", "Okay"; tiny.en hears an
# espeak "uh-huh" as "Uh-uh" half the time), and fillers, which alone are no interruption either.
DEFAULT_BACKCHANNELS = (
    "uh-huh", "uh-uh", "mm-hmm", "mhm", "mm", "hmm", "uh", "um",
    "yeah", "ok", "okay", "right", "嗯", "对",
)  # fmt: skip

# Latin words, or single CJK characters (CJK text has no spaces to split words at).
_WORD = re.compile(r"[a-z0-9']+|[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
_HELD_LETTER = re.compile(r"(.)\1{2,}")


def transcript_words(text: str) -> list[str]:
    """Lower-cased words of a transcript; hyphens join, held letters shorten ("Mmmm" -> "mm")."""
    return _WORD.findall(_HELD_LETTER.sub(r"\1\1", text.lower().replace("-", "")))


def _joined(words: list[str]) -> str:
    """Words said as one ("uh" "huh" -> "uhhuh", "m" "m" "m" -> "mm")."""
    return _HELD_LETTER.sub(r"\1\1", "".join(words))


@dataclass(frozen=True)
class BargeInPolicy:
    """When user speech interrupts the bot.

    Parameters:
        min_speech_secs: Speech must last this long (VAD-measured, from its estimated true start)
            before it interrupts the bot mid-answer.
        min_words: Words the (interim) transcript must hold before it interrupts the bot mid-answer.
        backchannels: Acknowledgements that never interrupt the bot mid-answer, alone or in a row
            ("yeah yeah", "uh huh", "嗯嗯"); matched on ``transcript_words``.
        bot_quiet_secs: The bot still counts as mid-answer this long after it stopped speaking,
            which covers the gap between two sentences.
    """

    min_speech_secs: float = 0.3
    min_words: int = 1
    backchannels: tuple[str, ...] = DEFAULT_BACKCHANNELS
    bot_quiet_secs: float = 0.5

    def __post_init__(self):
        if self.min_speech_secs < 0 or self.bot_quiet_secs < 0:
            raise ValueError("min_speech_secs and bot_quiet_secs must not be negative")
        if self.min_words < 1:
            raise ValueError("min_words must be at least 1")

    def is_backchannel(self, text: str) -> bool:
        """True when ``text`` is nothing but backchannels ("Uh huh, yeah." is)."""
        words = transcript_words(text)
        return bool(words) and self._backchannel_prefix_ends(words)[-1]

    def may_become_backchannel(self, text: str) -> bool:
        """True when ``text`` is a backchannel, or one still being said ("Ri" of "Right")."""
        words = transcript_words(text)
        if not words:
            return False
        vocabulary = self._vocabulary()
        reachable = self._backchannel_prefix_ends(words)
        return any(
            reachable[i] and any(v.startswith(_joined(words[i:])) for v in vocabulary)
            for i in range(len(words))
        ) or reachable[-1]

    def _vocabulary(self) -> set[str]:
        return {"".join(transcript_words(b)) for b in self.backchannels}

    def _backchannel_prefix_ends(self, words: list[str]) -> list[bool]:
        """reachable[j]: words[:j] splits into whole backchannels ("uh" + "huh" -> "uhhuh")."""
        vocabulary = self._vocabulary()
        reachable = [True] + [False] * len(words)
        for j in range(1, len(words) + 1):
            reachable[j] = any(reachable[i] and _joined(words[i:j]) in vocabulary for i in range(j))
        return reachable
