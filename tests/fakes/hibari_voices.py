"""The real hibari voice with one sentence made to wait or to fail, for TTS service tests.

Both implement the two calls ``HibariTTSService`` makes (``phonemize``, ``from_phonemes``) and
count sentences in the order their synthesis starts.
"""

from __future__ import annotations

import threading

from processors.tts.hibari_tts import load_voice


class GatedVoice:
    """The real hibari voice, except that sentence number ``hold_at`` waits for ``gate`` first."""

    def __init__(self, hold_at: int, gate: threading.Event):
        self._voice = load_voice()
        self._hold_at = hold_at
        self._gate = gate
        self.sentences_started = 0
        self.gate_opened: bool | None = None

    def phonemize(self, text):
        return self._voice.phonemize(text)

    def from_phonemes(self, phonemes, speed=1.0):
        self.sentences_started += 1
        if self.sentences_started - 1 == self._hold_at:
            self.gate_opened = self._gate.wait(timeout=30)
        return self._voice.from_phonemes(phonemes, speed)


class FailingVoice:
    """The real hibari voice, except that sentence number ``fail_at`` raises."""

    def __init__(self, fail_at: int):
        self._voice = load_voice()
        self._fail_at = fail_at
        self._sentences = 0

    def phonemize(self, text):
        return self._voice.phonemize(text)

    def from_phonemes(self, phonemes, speed=1.0):
        self._sentences += 1
        if self._sentences - 1 == self._fail_at:
            raise RuntimeError("synthesis blew up")
        return self._voice.from_phonemes(phonemes, speed)
