"""An audio end-of-turn model's stand-in: every pause gets the same verdict, and each question it is asked is kept."""

from __future__ import annotations

import numpy as np


class FixedTurnCheck:
    """Answers ``probability`` with ``verdict``; ``asked`` holds the seconds of audio of each question."""

    name = "fixed"
    max_audio_s = 8.0

    def __init__(self, verdict: float, threshold: float = 0.5):
        self.verdict = verdict
        self.threshold = threshold
        self.asked: list[float] = []

    async def probability(self, samples: np.ndarray, sample_rate: int) -> float:
        self.asked.append(len(samples) / sample_rate)
        return self.verdict
