"""A caller's microphone that stays silent until the test tells it to say something.

Unlike ``agent.caller.aiortc_caller.WavMicrophone`` (one WAV, fixed timing), a test can react to what the
bot does: ask, wait until the bot is mid-answer, then talk over it. Every 20 ms frame's send time
is kept, so latencies are measured from the exact moment a given sample left the caller.
"""

import asyncio
import time
from collections import deque

import numpy as np
from aiortc import MediaStreamTrack
from av import AudioFrame

from agent.caller.aiortc_caller import audio_frame

FRAME_MS = 20


class Utterance:
    """One clip handed to ``ScriptedMicrophone.say``, and when each of its frames went out."""

    def __init__(self, samples: np.ndarray, frame_samples: int):
        self.samples = samples.astype(np.int16)
        self.frame_samples = frame_samples
        self.sent_at: list[float] = []  # time.monotonic() each frame was handed to WebRTC
        self.done = asyncio.Event()

    def time_of_sample(self, index: int) -> float:
        """When the frame holding sample ``index`` of the clip went out."""
        return self.sent_at[index // self.frame_samples]


class ScriptedMicrophone(MediaStreamTrack):
    """An audio track: silence in real time, and the clips given to ``say`` in turn."""

    kind = "audio"

    def __init__(self, sample_rate: int = 16000):
        super().__init__()
        self.sample_rate = sample_rate
        self.frame_samples = sample_rate * FRAME_MS // 1000
        self.finished = asyncio.Event()  # WebRTCCaller waits on it; set once nothing is left to say
        self._pending: deque[Utterance] = deque()
        self._offset = 0
        self._start: float | None = None
        self._pts = 0

    def say(self, samples: np.ndarray) -> Utterance:
        """Queue a clip (int16 mono at ``sample_rate``); it plays after those before it."""
        utterance = Utterance(samples, self.frame_samples)
        self._pending.append(utterance)
        self.finished.clear()
        return utterance

    async def recv(self) -> AudioFrame:
        if self._start is None:
            self._start = time.monotonic()
        delay = self._start + self._pts / self.sample_rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        chunk = np.zeros(self.frame_samples, dtype=np.int16)
        if self._pending:
            utterance = self._pending[0]
            piece = utterance.samples[self._offset : self._offset + self.frame_samples]
            chunk[: len(piece)] = piece
            utterance.sent_at.append(time.monotonic())
            self._offset += self.frame_samples
            if self._offset >= len(utterance.samples):
                self._pending.popleft()
                self._offset = 0
                utterance.done.set()
                if not self._pending:
                    self.finished.set()
        frame = audio_frame(chunk, self.sample_rate, self._pts)
        self._pts += self.frame_samples
        return frame
