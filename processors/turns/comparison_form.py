"""How transcripts are compared: one normal form for drafts, finals and stability checks.

Pure text, no frames: NFKC, case-folded, no apostrophes, fillers or punctuation, and the words
(CJK: characters) of that form.
"""

from __future__ import annotations

import re
import unicodedata

from processors.llm.context_window import strip_fillers

_APOSTROPHES = re.compile(r"['\u2019\u02bc]")
_PUNCTUATION = re.compile(r"[^\w\s]")
_SPACES = re.compile(r"\s+")
# A word, or a single CJK character (CJK text has no spaces between words).
_WORD = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]|\w+")


def comparison_form(text: str) -> str:
    """The text as compared: NFKC, case-folded, no apostrophes, fillers or punctuation."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _APOSTROPHES.sub("", text)
    text = strip_fillers(text, aggressive=True)
    text = _PUNCTUATION.sub(" ", text)
    return _SPACES.sub(" ", text).strip()


def comparison_words(text: str) -> list[str]:
    """The words of :func:`comparison_form` (a CJK character counts as one word)."""
    return _WORD.findall(comparison_form(text))
