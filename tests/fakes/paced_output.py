"""A voice and a listener that take real time, for testing barge-in without models or a network.

``ToneTTSService`` is pipecat's ``TTSService`` speaking each sentence as a tone whose length
follows the text (as a real voice's does), after a set synthesis delay; it records what it was
asked to say and what was cancelled mid-synthesis. ``PacedOutputTransport`` is pipecat's own
output transport in front of a peer that plays audio in real time: like a WebRTC track, each
write returns once its chunk has been played, and every write (and every interruption that
reaches it) is recorded with its times.
"""

import asyncio
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, fields

import numpy as np
from pipecat.frames.frames import (
    Frame,
    InterruptionFrame,
    OutputAudioRawFrame,
    StartFrame,
    TTSAudioRawFrame,
)
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.settings import TTSSettings
from pipecat.services.tts_service import TTSService
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.transports.base_transport import TransportParams

SAMPLE_RATE = 24000
FRAME_S = 0.04


class ToneTTSService(TTSService):
    """Speaks ``len(text) / chars_per_second`` seconds of tone per sentence, ``delay_s`` after it starts."""

    def __init__(self, *, delay_s: float = 0.0, chars_per_second: float = 15.0, **kwargs):
        """Create the service.

        Args:
            delay_s: Time from a sentence reaching synthesis to its first audio.
            chars_per_second: Speaking rate: how long each sentence's audio lasts.
            **kwargs: Passed to ``TTSService``.
        """
        kwargs.setdefault("sample_rate", SAMPLE_RATE)
        super().__init__(
            push_start_frame=True,
            push_stop_frames=True,
            settings=TTSSettings(**{f.name: None for f in fields(TTSSettings) if f.name != "extra"}),
            **kwargs,
        )
        self.delay_s = delay_s
        self.chars_per_second = chars_per_second
        self.requested: list[str] = []  # sentences handed to synthesis
        self.cancelled: list[str] = []  # sentences whose synthesis was cancelled before the end

    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        """Yield the sentence's tone in 40 ms frames, as fast as a voice faster than real time."""
        self.requested.append(text)
        finished = False
        try:
            await asyncio.sleep(self.delay_s)
            seconds = len(text.strip()) / self.chars_per_second
            t = np.arange(int(seconds * self.sample_rate)) / self.sample_rate
            pcm = (np.sin(2 * np.pi * 220 * t) * 8000).astype("<i2").tobytes()
            step = int(FRAME_S * self.sample_rate) * 2
            for start in range(0, len(pcm), step):
                yield TTSAudioRawFrame(pcm[start : start + step], self.sample_rate, 1, context_id=context_id)
            finished = True
        finally:
            if not finished:
                self.cancelled.append(text)


@dataclass(frozen=True)
class Write:
    started_at: float  # time.monotonic() when the transport handed the chunk to the peer
    played_at: float  # when the peer had played it
    rms: float


class PacedOutputTransport(BaseOutputTransport):
    """pipecat's output transport whose peer plays each chunk in real time before taking the next."""

    def __init__(self, **kwargs):
        """Create the transport with audio output enabled."""
        super().__init__(TransportParams(audio_out_enabled=True), **kwargs)
        self.writes: list[Write] = []
        self.interruptions: list[float] = []  # time.monotonic() of each InterruptionFrame here

    async def start(self, frame: StartFrame):
        """Start and declare itself ready, as a connected transport does."""
        await super().start(frame)
        await self.set_transport_ready(frame)

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Note interruptions, then do what pipecat's transport does."""
        if isinstance(frame, InterruptionFrame):
            self.interruptions.append(time.monotonic())
        await super().process_frame(frame, direction)

    async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
        """Play the chunk: return after its duration."""
        started = time.monotonic()
        samples = np.frombuffer(frame.audio, dtype="<i2").astype(np.float64)
        await asyncio.sleep(len(samples) / (frame.sample_rate * frame.num_channels))
        rms = float(np.sqrt(np.mean(samples**2))) if len(samples) else 0.0
        self.writes.append(Write(started, time.monotonic(), rms))
        return True

    def audible_writes(self) -> list[Write]:
        """The writes that carried sound, not silence."""
        return [w for w in self.writes if w.rms > 100]
