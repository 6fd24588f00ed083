"""A real WebRTC caller (aiortc): speaks a WAV into Brisk in real time and records the answer.

Used by ``agent call``, the benchmark and the end-to-end tests. Every sent and received
audio frame is timestamped with ``time.monotonic()``, so voice-to-voice latency is measured
from the true end of speech in the WAV to the first audible bot audio that arrives.
"""

from __future__ import annotations

import asyncio
import fractions
import json
import time
import uuid
from dataclasses import dataclass, field

import httpx
import numpy as np
from aiortc import MediaStreamTrack, RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError
from av import AudioFrame

FRAME_MS = 20
# Received audio this loud (int16 RMS) counts as audible bot speech, not codec noise/silence.
AUDIBLE_RMS = 300.0


def audio_frame(chunk: np.ndarray, sample_rate: int, pts: int) -> AudioFrame:
    """One mono int16 frame for an aiortc audio track, stamped ``pts`` samples into the stream."""
    frame = AudioFrame.from_ndarray(chunk.reshape(1, -1), format="s16", layout="mono")
    frame.sample_rate = sample_rate
    frame.pts = pts
    frame.time_base = fractions.Fraction(1, sample_rate)
    return frame


class WavMicrophone(MediaStreamTrack):
    """An audio track that plays int16 mono samples in real time, then silence (an open mic)."""

    kind = "audio"

    def __init__(self, samples: np.ndarray, sample_rate: int):
        super().__init__()
        self.samples = samples.astype(np.int16)
        self.sample_rate = sample_rate
        self.frame_samples = sample_rate * FRAME_MS // 1000
        self.start_time: float | None = None  # monotonic time the first sample went out
        self.finished = asyncio.Event()
        self._index = 0
        self._pts = 0

    async def recv(self) -> AudioFrame:
        if self.readyState != "live":
            # A stopped microphone sends nothing more, as a caller who has gone does.
            raise MediaStreamError
        if self.start_time is None:
            self.start_time = time.monotonic()
        # Pace by the wall clock so the server hears the WAV exactly as a person would say it.
        due = self.start_time + self._pts / self.sample_rate
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        chunk = self.samples[self._index : self._index + self.frame_samples]
        self._index += self.frame_samples
        if len(chunk) < self.frame_samples:
            if self._index >= len(self.samples):
                self.finished.set()
            chunk = np.pad(chunk, (0, self.frame_samples - len(chunk)))
        frame = audio_frame(chunk, self.sample_rate, self._pts)
        self._pts += self.frame_samples
        return frame

    def say(self, samples: np.ndarray) -> int:
        """Play ``samples`` next, after what is still to play (silence meanwhile); returns the
        index of their first sample, for ``time_of_sample``. A caller's next utterance."""
        start = max(self._index, len(self.samples))
        pad = np.zeros(start - len(self.samples), dtype=np.int16)
        self.samples = np.concatenate([self.samples, pad, samples.astype(np.int16)])
        self.finished.clear()
        return start

    def time_of_sample(self, index: int) -> float:
        """Monotonic time at which sample ``index`` of the WAV was played."""
        assert self.start_time is not None
        return self.start_time + index / self.sample_rate


@dataclass
class ReceivedAudio:
    t: float  # monotonic arrival time
    pcm: np.ndarray  # int16 mono
    sample_rate: int

    @property
    def rms(self) -> float:
        return float(np.sqrt(np.mean(self.pcm.astype(np.float64) ** 2))) if len(self.pcm) else 0.0


@dataclass
class WebRTCCaller:
    """Calls a Brisk server over real WebRTC (host candidates only, no STUN)."""

    base_url: str
    received: list[ReceivedAudio] = field(default_factory=list)
    messages: list[tuple[float, dict]] = field(default_factory=list)
    pc_id: str | None = None
    call_id: str | None = None  # the call's record: /api/calls/{call_id}

    async def connect(self, mic: WavMicrophone, timeout: float = 30.0) -> None:
        self.mic = mic
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self.pc.addTransceiver(mic, direction="sendrecv")
        self.channel = self.pc.createDataChannel("rtvi")
        self._reader: asyncio.Task | None = None
        self.connected = asyncio.Event()

        @self.channel.on("open")
        def on_open():
            self.channel.send(
                json.dumps(
                    {
                        "label": "rtvi-ai",
                        "type": "client-ready",
                        "id": uuid.uuid4().hex[:8],
                        "data": {"version": "1.0.0", "about": {"library": "brisk-aiortc-caller"}},
                    }
                )
            )

        @self.channel.on("message")
        def on_message(message):
            try:
                self.messages.append((time.monotonic(), json.loads(message)))
            except (TypeError, ValueError):
                pass

        @self.pc.on("track")
        def on_track(track):
            if track.kind == "audio":
                self._reader = asyncio.create_task(self._read(track))

        @self.pc.on("connectionstatechange")
        def on_state():
            if self.pc.connectionState == "connected":
                self.connected.set()

        await self.pc.setLocalDescription(await self.pc.createOffer())
        async with httpx.AsyncClient(timeout=timeout) as http:
            r = await http.post(
                f"{self.base_url}/api/offer",
                json={"sdp": self.pc.localDescription.sdp, "type": self.pc.localDescription.type},
            )
            r.raise_for_status()
            answer = r.json()
        self.pc_id = answer["pc_id"]
        self.call_id = answer.get("call_id")
        await self.pc.setRemoteDescription(RTCSessionDescription(sdp=answer["sdp"], type=answer["type"]))
        await asyncio.wait_for(self.connected.wait(), timeout)

    async def _read(self, track) -> None:
        while True:
            try:
                frame = await track.recv()
            except Exception:
                return
            pcm = frame.to_ndarray().reshape(-1, len(frame.layout.channels))[:, 0].astype(np.int16)
            self.received.append(ReceivedAudio(time.monotonic(), pcm, frame.sample_rate))

    def first_audible_after(self, t: float) -> float | None:
        """Arrival time of the first audible bot audio after monotonic time ``t``."""
        for chunk in self.received:
            if chunk.t > t and chunk.rms >= AUDIBLE_RMS:
                return chunk.t
        return None

    def audible_spans(self, gap: float = 0.6) -> list[tuple[float, float]]:
        """(start, end) arrival times of stretches of audible bot audio."""
        spans: list[tuple[float, float]] = []
        for chunk in self.received:
            if chunk.rms < AUDIBLE_RMS:
                continue
            if spans and chunk.t - spans[-1][1] <= gap:
                spans[-1] = (spans[-1][0], chunk.t)
            else:
                spans.append((chunk.t, chunk.t))
        return spans

    def messages_of(self, kind: str) -> list[dict]:
        return [m for _, m in self.messages if m.get("type") == kind]

    def turn_records(self) -> list[dict]:
        return [
            m["data"]
            for m in self.messages_of("server-message")
            if isinstance(m.get("data"), dict) and m["data"].get("type") == "turn-latency"
        ]

    def recorded_audio(self) -> tuple[np.ndarray, int]:
        if not self.received:
            return np.zeros(0, dtype=np.int16), 48000
        return np.concatenate([c.pcm for c in self.received]), self.received[0].sample_rate

    async def wait_until_quiet(self, after: float, quiet_secs: float = 2.0, max_secs: float = 60.0) -> None:
        """Wait until the bot has spoken after monotonic time ``after`` and then been silent for ``quiet_secs``."""
        deadline = time.monotonic() + max_secs
        while time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            spans = [s for s in self.audible_spans() if s[1] > after]
            if spans and time.monotonic() - spans[-1][1] >= quiet_secs:
                return

    async def close(self) -> None:
        if self._reader:
            self._reader.cancel()
        await self.pc.close()
