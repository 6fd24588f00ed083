"""Commit or cancel a draft: pipecat ``EagerMatchPolicy`` on a normalised word similarity.

Consumes two transcripts (the one a draft was made from, and the final); returns a score in
[0, 1] and whether the draft still answers the final.
"""

from __future__ import annotations

from difflib import SequenceMatcher

from pipecat.turns.user_stop import EagerMatchPolicy

from processors.turns.comparison_form import comparison_words


class SimilarityMatch(EagerMatchPolicy):
    """Keep a draft when its text and the final transcript are at least ``threshold`` alike.

    The score is difflib's ratio (2 * matching / total) over the *words* of the two
    :func:`comparison_form` texts (CJK: characters): 1.0 for texts that differ only in case,
    punctuation or fillers. Words, not characters, because one changed word is one changed
    meaning: "...open on Saturday" vs "...open on Sunday" scores 0.94 on characters but 0.86
    on words, so with 0.92 a short question never survives a changed word, while a long
    one survives a small ASR wobble or an added "please".
    """

    def __init__(self, threshold: float = 0.92):
        """Args: threshold: lowest score that keeps the draft, in [0, 1]."""
        if not 0.0 <= threshold <= 1.0:
            raise ValueError("threshold must be in [0, 1]")
        self.threshold = threshold

    def score(self, eager: str, final: str) -> float:
        """Similarity of the two transcripts in [0, 1]."""
        a, b = comparison_words(eager), comparison_words(final)
        if a == b:
            return 1.0
        return SequenceMatcher(None, a, b, autojunk=False).ratio()

    def matches(self, eager: str, final: str) -> bool:
        """Whether the draft made from ``eager`` still answers ``final``."""
        return self.score(eager, final) >= self.threshold
