"""pipecat's Smart Turn v3 as a second opinion on a turn whose words look finished.

Consumes the last seconds of a caller's audio (16-bit PCM); gives the model's probability that
the speaker has finished. Loaded once per process and shared by every call (the model is what
is made for sharing); inferences run one at a time on a thread of their own, ~50 ms each on
this machine, off the event loop.

Why not pipecat's ``TurnAnalyzerUserTurnStopStrategy`` with ``LocalSmartTurnAnalyzerV3`` as a
stop strategy: that ends a turn only when the model says so, with 3 s of silence as the
fallback, and the model judges many finished espeak-voiced questions unfinished (``--suite
turns``: P95 end-of-turn 3.3 s); used only where the transcript cannot tell — a statement that
ends in a period, where Whisper writes "Saturday." for "Saturday, ..." — it catches unfinished
statements the words hide. pipecat's analyzer keeps one stream's audio in the object that holds
the model, so the model is used here through its prediction alone (``_predict_endpoint``), with
each call keeping its own audio.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import soxr

MODEL_RATE = 16000
MAX_AUDIO_S = 8.0  # the model looks at the last 8 s


class SmartTurnCheck:
    name = "smart_turn"
    max_audio_s = MAX_AUDIO_S

    def __init__(self, threshold: float | None = None):
        """Load the bundled Smart Turn v3 model (call off the event loop: it takes a moment)."""
        from pipecat.audio.turn.smart_turn.local_smart_turn_v3 import LocalSmartTurnAnalyzerV3

        self.threshold = 0.5 if threshold is None else threshold
        self._analyzer = LocalSmartTurnAnalyzerV3()
        self._analyzer.set_sample_rate(MODEL_RATE)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="smart-turn")

    async def probability(self, samples: np.ndarray, sample_rate: int) -> float:
        """The model's probability that ``samples`` (int16, ending at the pause) is a finished turn."""
        audio = samples[-round(MAX_AUDIO_S * sample_rate):].astype(np.float32) / 32768.0
        if sample_rate != MODEL_RATE:
            audio = soxr.resample(audio, sample_rate, MODEL_RATE)
        result = await asyncio.get_running_loop().run_in_executor(self._executor, self._analyzer._predict_endpoint, audio)
        return float(result["probability"])

    def close(self) -> None:
        self._executor.shutdown(wait=False)
