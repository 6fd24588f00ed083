"""LiveKit's on-device end-of-turn model (turn-detector-v1-mini) as the audio's opinion on a pause.

Consumes the last 1.2 s of a caller's audio up to the pause (16-bit PCM, any rate); gives the
model's probability that the speaker has finished. The model comes with
``livekit-local-inference`` (installed with livekit-agents): offline, ~40 ms per prediction on
this machine. The native model is one per process, shared by every call (``EOT()`` instances
share it); ``predict`` releases the GIL, so predictions run on a small thread pool of their own,
never on the event loop, and two calls' pauses are judged side by side.

Why not livekit-agents' own ``TurnDetector`` stream: it is built around a LiveKit
``AgentSession`` (its audio channel, its language detection and endpointing); Brisk needs the
prediction alone, asked at pipecat's VAD stop by ``AdaptiveUserTurnStopStrategy``, which keeps
each call's audio. The threshold is the one livekit-agents uses for this model in English
(``LOCAL_LANGUAGES["en"]``, 0.36): below it, the end of turn is unlikely.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import soxr

MODEL_RATE = 16000
ENGLISH_THRESHOLD = 0.36  # livekit.agents.inference.eot.languages.LOCAL_LANGUAGES["en"]


class LiveKitEotCheck:
    """``probability(samples, rate)`` of a finished turn; one per process."""

    name = "livekit_eot"

    def __init__(self, threshold: float | None = None, workers: int = 2):
        """Load the model (call off the event loop: ~108 MB, a moment the first time)."""
        try:
            from livekit.local_inference import EOT, EOT_MAX_SAMPLES
        except ImportError as error:  # pragma: no cover - a dependency of livekit-agents
            raise RuntimeError("LiveKit's end-of-turn model needs livekit-local-inference: "
                               "pip install livekit-local-inference") from error
        self.threshold = ENGLISH_THRESHOLD if threshold is None else threshold
        self.max_audio_s = EOT_MAX_SAMPLES / MODEL_RATE
        self._window = EOT_MAX_SAMPLES
        self._model = EOT()
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="livekit-eot")

    async def probability(self, samples: np.ndarray, sample_rate: int) -> float:
        """The model's probability that ``samples`` (int16, ending at the pause) is a finished turn."""
        samples = samples[-round(self.max_audio_s * sample_rate):]
        if sample_rate != MODEL_RATE:
            audio = soxr.resample(samples.astype(np.float32) / 32768.0, sample_rate, MODEL_RATE)
            samples = np.clip(audio * 32768.0, -32768, 32767).astype(np.int16)
        pcm = np.ascontiguousarray(samples[-self._window:], dtype=np.int16)
        return float(await asyncio.get_running_loop().run_in_executor(self._executor, self._model.predict, pcm))

    def close(self) -> None:
        self._executor.shutdown(wait=False)
