"""A stand-in for a hibari voice that counts what it synthesises and can be held mid-sentence.

Each text is one "sentence" whose audio is a constant level unique to that text, so a test can
tell from the pushed audio which text it was made for.
"""

from __future__ import annotations

import threading

import numpy as np

SECONDS_PER_SENTENCE = 0.2


class CountingVoice:
    """Implements the two calls HibariTTSService makes: ``phonemize`` and ``from_phonemes``."""

    def __init__(self, sample_rate: int = 24000):
        self._sample_rate = sample_rate
        self._lock = threading.Lock()
        self._levels: dict[str, float] = {}
        self._gates: dict[str, threading.Event] = {}
        self.synthesised: list[str] = []  # in the order synthesis started
        self.threads: list[int] = []  # the thread each synthesis ran on

    def hold(self, text: str) -> threading.Event:
        """Make the synthesis of ``text`` wait until the returned event is set."""
        gate = threading.Event()
        self._gates[text] = gate
        return gate

    def level_of(self, text: str) -> int:
        """The int16 sample value of the audio made for ``text``."""
        # Converted the way HibariTTSService converts the voice's float samples.
        return int((np.full(1, self._level(text), np.float32) * 32767.0).astype("<i2")[0])

    def _level(self, text: str) -> float:
        with self._lock:
            return self._levels.setdefault(text, 0.05 * (len(self._levels) + 1))

    def phonemize(self, text: str) -> list[str]:
        return [text]

    def from_phonemes(self, phonemes: str, speed: float = 1.0) -> np.ndarray:
        with self._lock:
            self.synthesised.append(phonemes)
            self.threads.append(threading.get_ident())
        gate = self._gates.get(phonemes)
        if gate is not None:
            gate.wait(timeout=30)
        return np.full(int(self._sample_rate * SECONDS_PER_SENTENCE), self._level(phonemes), np.float32)
