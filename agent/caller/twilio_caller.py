"""Twilio's side of a Media Stream, over a real WebSocket: a phone caller for the benches and tests.

It speaks the protocol as Twilio does: ``connected`` then ``start`` (streamSid, callSid,
customParameters, 8 kHz mono mu-law), then a ``media`` event every 20 ms for the whole call
(silence between utterances, paced in real time on an absolute schedule), and ``stop`` on hang
up. From the server it takes ``media`` (recorded with its arrival time and "played" in order
in real time, like a phone's jitter buffer), ``mark`` (echoed once the audio sent before it has
played) and ``clear`` (drops what is still unplayed and echoes the pending marks at once).

The mu-law codec is G.711's, written here rather than borrowed from the server's code.

``dial`` places a call as Twilio does against a server on loopback: the voice webhook, then the
stream its TwiML names, with the parameters it gives (no signature: a server with no Twilio auth
token takes loopback calls unsigned, agent/transports/twilio.py).
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from dataclasses import dataclass, field
from xml.etree import ElementTree

import httpx
import numpy as np
import websockets

from agent.transports.twilio import STREAM_PATH, VOICE_PATH

SAMPLE_RATE = 8000
CHUNK_SAMPLES = 160  # 20 ms
AUDIBLE_RMS = 300.0
_BIAS, _CLIP = 0x84, 32635


def ulaw_encode(pcm: np.ndarray) -> bytes:
    """int16 samples -> G.711 mu-law bytes."""
    x = pcm.astype(np.int32)
    sign = (x < 0).astype(np.int32) << 7
    magnitude = np.minimum(np.abs(x), _CLIP) + _BIAS
    exponent = np.floor(np.log2(magnitude)).astype(np.int32) - 7
    mantissa = (magnitude >> (exponent + 3)) & 0x0F
    return (~(sign | (exponent << 4) | mantissa) & 0xFF).astype(np.uint8).tobytes()


def ulaw_decode(data: bytes) -> np.ndarray:
    """G.711 mu-law bytes -> int16 samples."""
    u = ~np.frombuffer(data, dtype=np.uint8).astype(np.int32) & 0xFF
    exponent = (u >> 4) & 0x07
    magnitude = ((((u & 0x0F) << 3) + _BIAS) << exponent) - _BIAS
    return np.where(u & 0x80, -magnitude, magnitude).astype(np.int16)


@dataclass
class ReceivedMedia:
    t: float  # monotonic arrival time
    pcm: np.ndarray  # int16, 8 kHz

    @property
    def rms(self) -> float:
        return float(np.sqrt(np.mean(self.pcm.astype(np.float64) ** 2))) if len(self.pcm) else 0.0


@dataclass
class Utterance:
    """Speech the caller said: when its first sample went out, so any sample's time is known."""

    samples: np.ndarray
    start_time: float | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def time_of_sample(self, index: int) -> float:
        assert self.start_time is not None
        return self.start_time + index / SAMPLE_RATE


class TwilioMediaStreamClient:
    """Plays Twilio's part of one call against ``url`` (``ws://host:port/ws/twilio``)."""

    def __init__(
        self,
        url: str,
        *,
        call_sid: str = "CA00000000000000000000000000000001",
        stream_sid: str = "MZ00000000000000000000000000000001",
        account_sid: str = "AC00000000000000000000000000000001",
        custom_parameters: dict[str, str] | None = None,
    ):
        self.url = url
        self.call_sid = call_sid
        self.stream_sid = stream_sid
        self.account_sid = account_sid
        self.custom_parameters = custom_parameters or {}
        self.media: list[ReceivedMedia] = []
        self.events: list[tuple[float, dict]] = []  # every message from the server but media
        self.marks_echoed: list[tuple[float, str]] = []
        self.media_sent = 0
        self.close_code: int | None = None
        self.closed = asyncio.Event()
        self._sequence = 0
        self._queue: list[Utterance] = []
        self._played_until = 0.0
        self._pending_marks: list[tuple[asyncio.Task, str]] = []
        self._tasks: list[asyncio.Task] = []

    # -- call lifecycle ----------------------------------------------------------------------

    async def connect(self) -> None:
        """Open the stream: handshake, ``connected``, ``start``, then the 20 ms media clock."""
        self.ws = await websockets.connect(self.url, max_size=None)
        await self._send({"event": "connected", "protocol": "Call", "version": "1.0.0"})
        await self._send(
            {
                "event": "start",
                "start": {
                    "accountSid": self.account_sid,
                    "streamSid": self.stream_sid,
                    "callSid": self.call_sid,
                    "tracks": ["inbound"],
                    "customParameters": self.custom_parameters,
                    "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": SAMPLE_RATE, "channels": 1},
                },
                "streamSid": self.stream_sid,
            }
        )
        self._tasks = [asyncio.create_task(self._microphone()), asyncio.create_task(self._reader())]

    async def say(self, samples: np.ndarray) -> Utterance:
        """Speak int16 8 kHz ``samples`` after anything already queued; returns once all went out."""
        utterance = Utterance(samples.astype(np.int16))
        self._queue.append(utterance)
        await utterance.done.wait()
        return utterance

    async def press(self, keys: str, gap_s: float = 0.15) -> None:
        """Press keypad keys, one ``dtmf`` event each, as Twilio sends them."""
        for key in keys:
            await self._send({"event": "dtmf", "streamSid": self.stream_sid, "dtmf": {"track": "inbound_track", "digit": key}})
            await asyncio.sleep(gap_s)

    async def hang_up(self, timeout: float = 10.0) -> bool:
        """Send ``stop``; True when the server then closed the stream itself within ``timeout``."""
        for task in self._tasks[:1]:
            task.cancel()
        await self._send({"event": "stop", "stop": {"accountSid": self.account_sid, "callSid": self.call_sid}})
        try:
            await asyncio.wait_for(self.closed.wait(), timeout)
            closed_by_server = True
        except asyncio.TimeoutError:
            closed_by_server = False
        await self.close()
        return closed_by_server

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for task, _ in self._pending_marks:
            task.cancel()
        await self.ws.close()

    # -- what came back ----------------------------------------------------------------------

    @property
    def received(self) -> list[ReceivedMedia]:
        """What came back, as the WebRTC caller names it (agent/bench/listening.py reads either)."""
        return self.media

    def events_of(self, kind: str) -> list[tuple[float, dict]]:
        return [(t, e) for t, e in self.events if e.get("event") == kind]

    def first_audible_after(self, t: float) -> float | None:
        for chunk in self.media:
            if chunk.t > t and chunk.rms >= AUDIBLE_RMS:
                return chunk.t
        return None

    def audio_between(self, t0: float, t1: float) -> np.ndarray:
        chunks = [c.pcm for c in self.media if t0 < c.t <= t1]
        return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int16)

    # -- internals ---------------------------------------------------------------------------

    async def _send(self, message: dict) -> None:
        self._sequence += 1
        await self.ws.send(json.dumps({**message, "sequenceNumber": str(self._sequence)}))

    async def _microphone(self) -> None:
        # Twilio sends a media event every 20 ms whether the caller speaks or not.
        silence = np.zeros(CHUNK_SAMPLES, dtype=np.int16)
        t0 = time.monotonic()
        chunk_index = 0
        offset = 0
        while True:
            utterance = self._queue[0] if self._queue else None
            if utterance is None:
                chunk = silence
            else:
                if offset == 0:
                    utterance.start_time = t0 + chunk_index * CHUNK_SAMPLES / SAMPLE_RATE
                chunk = utterance.samples[offset : offset + CHUNK_SAMPLES]
                offset += CHUNK_SAMPLES
                if len(chunk) < CHUNK_SAMPLES:
                    chunk = np.concatenate([chunk, silence[: CHUNK_SAMPLES - len(chunk)]])
            await self._send(
                {
                    "event": "media",
                    "media": {
                        "track": "inbound",
                        "chunk": str(chunk_index + 1),
                        "timestamp": str(chunk_index * 20),
                        "payload": base64.b64encode(ulaw_encode(chunk)).decode(),
                    },
                    "streamSid": self.stream_sid,
                }
            )
            self.media_sent += 1
            if utterance is not None and offset >= len(utterance.samples):
                self._queue.pop(0)
                offset = 0
                utterance.done.set()
            chunk_index += 1
            await asyncio.sleep(max(0.0, t0 + chunk_index * CHUNK_SAMPLES / SAMPLE_RATE - time.monotonic()))

    async def _reader(self) -> None:
        try:
            async for raw in self.ws:
                now = time.monotonic()
                message = json.loads(raw)
                event = message.get("event")
                if event == "media":
                    pcm = ulaw_decode(base64.b64decode(message["media"]["payload"]))
                    self.media.append(ReceivedMedia(now, pcm))
                    self._played_until = max(now, self._played_until) + len(pcm) / SAMPLE_RATE
                    continue
                self.events.append((now, message))
                if event == "mark":
                    name = message["mark"]["name"]
                    task = asyncio.create_task(self._echo_mark_when_played(name, self._played_until))
                    self._pending_marks.append((task, name))
                elif event == "clear":
                    self._played_until = now
                    for task, name in self._pending_marks:
                        if not task.done():
                            task.cancel()
                            await self._echo_mark(name)
                    self._pending_marks.clear()
        except websockets.ConnectionClosed:
            pass
        finally:
            self.close_code = self.ws.close_code
            self.closed.set()

    async def _echo_mark_when_played(self, name: str, played_at: float) -> None:
        await asyncio.sleep(max(0.0, played_at - time.monotonic()))
        await self._echo_mark(name)

    async def _echo_mark(self, name: str) -> None:
        self.marks_echoed.append((time.monotonic(), name))
        try:
            await self._send({"event": "mark", "mark": {"name": name}, "streamSid": self.stream_sid})
        except websockets.ConnectionClosed:
            pass


async def dial(base_url: str, call_sid: str, *, caller: str = "+15550100",
               called: str = "+15550199") -> TwilioMediaStreamClient:
    """A call to the Brisk server at ``base_url`` (``http://host:port``), connected and streaming."""
    async with httpx.AsyncClient(base_url=base_url) as http:
        response = await http.post(VOICE_PATH, data={"CallSid": call_sid, "From": caller, "To": called})
        response.raise_for_status()
    stream = ElementTree.fromstring(response.text).find("./Connect/Stream")
    if stream is None:
        raise RuntimeError(f"the voice webhook answered no stream: {response.text[:200]}")
    parameters = {p.get("name"): p.get("value") for p in stream.findall("Parameter")}
    host = base_url.split("://", 1)[1]
    client = TwilioMediaStreamClient(f"ws://{host}{STREAM_PATH}", call_sid=call_sid,
                                     stream_sid=f"MZ{call_sid.removeprefix('CA')}", custom_parameters=parameters)
    await client.connect()
    return client
