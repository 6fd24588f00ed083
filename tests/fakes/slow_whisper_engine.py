"""A stand-in for ``WhisperEngine`` that takes a fixed time per call and records every call.

It answers ``transcribe_async`` like the real engine, so ``StreamingWhisperSTTService`` can be
driven without a model: the text names how much audio it was given ("heard 12800 samples"), so
a test can tell which call produced which transcript, and the call log shows overlap and
staleness.
"""

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from processors.stt.whisper_engine import SAMPLE_RATE, WhisperResult


@dataclass(frozen=True)
class EngineCall:
    """One call to ``transcribe_async``.

    Parameters:
        started_at: The engine's clock when the call began.
        ended_at: The engine's clock when it returned or was cancelled.
        audio_seconds: Length of the audio it was given.
        cancelled: Whether the caller cancelled it.
    """

    started_at: float
    ended_at: float
    audio_seconds: float
    cancelled: bool


class SlowWhisperEngine:
    """Duck-types ``WhisperEngine`` for the streaming STT service."""

    name = "slow-fake-whisper"
    language = "en"

    def __init__(
        self,
        *,
        delay_s: float = 0.1,
        no_speech_prob: float = 0.01,
        avg_logprob: float = -0.2,
        clock: Callable[[], float] = time.monotonic,
        label: str = "heard",
        error: Exception | None = None,
        text_of: Callable[[int], str] | None = None,
    ):
        """Set how long each call takes and the confidences every result reports.

        Args:
            delay_s: Seconds each call takes.
            no_speech_prob: Reported with every result.
            avg_logprob: Reported with every result.
            clock: Seconds clock for the call log (e.g. the pipeline's, to line calls up with
                observer timestamps).
            label: The transcript's first word, to tell two engines' transcripts apart.
            error: Raised by every call after its delay (a broken engine).
            text_of: The transcript of so many samples, instead of naming the count (words
                that stay the same while the audio grows, as a caller's do in a pause).
        """
        self.text_of = text_of
        self.label = label
        self.error = error
        self.delay_s = delay_s
        self.clock = clock
        self.no_speech_prob = no_speech_prob
        self.avg_logprob = avg_logprob
        self.calls: list[EngineCall] = []
        self.in_flight = 0
        self.max_in_flight = 0

    def text_for(self, samples: int) -> str:
        """The transcript this engine gives for ``samples`` samples of audio."""
        return self.text_of(samples) if self.text_of else f"{self.label} {samples} samples"

    async def transcribe_async(self, audio: np.ndarray, should_stop=None) -> WhisperResult:
        """Sleep ``delay_s``, log the call, and name the audio length in the text."""
        started = self.clock()
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        cancelled = True
        try:
            await asyncio.sleep(self.delay_s)
            cancelled = False
            if self.error is not None:
                raise self.error
        finally:
            self.in_flight -= 1
            self.calls.append(
                EngineCall(started, self.clock(), audio.size / SAMPLE_RATE, cancelled)
            )
        return WhisperResult(
            text=self.text_for(audio.size),
            no_speech_prob=self.no_speech_prob,
            avg_logprob=self.avg_logprob,
            window_frames=1000,
        )
