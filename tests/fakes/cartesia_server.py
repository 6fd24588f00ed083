"""A local stand-in for Cartesia's TTS websocket, speaking the protocol as pipecat's
`CartesiaTTSService` (pipecat 1.14, API version 2026-03-01) uses it.

Serves ``ws://127.0.0.1:<port>/tts/websocket``. The handshake needs the API key in the
``X-API-Key`` header (or the older ``api_key`` query parameter) and a ``Cartesia-Version`` header
(or ``cartesia_version`` parameter); anything else is refused with HTTP 401 / 400.

Requests are JSON text messages:
  - generation: ``context_id``, ``transcript``, ``continue``, ``model_id``,
    ``voice: {"mode": "id", "id"}``, ``output_format: {"container": "raw",
    "encoding": "pcm_s16le" | "pcm_f32le", "sample_rate"}``, ``add_timestamps``, and optionally
    ``language``, ``max_buffer_delay_ms``, ``generation_config``...; an empty transcript with
    ``continue: false`` closes the context (pipecat's flush).
  - cancel: ``{"context_id", "cancel": true}``: no more audio for that context.
Responses, each with ``context_id``: ``chunk`` (base64 audio), ``timestamps``
(``word_timestamps: {words, start, end}``, seconds from the context's start), ``flush_done`` after
each input when ``max_buffer_delay_ms`` is 0, ``done`` once a closed context has all its audio
out, and ``error`` (``status_code``, ``title``, ``message``) for a malformed request.

As Cartesia documents, a context's transcripts are concatenated verbatim: a word is spoken once
the whitespace after it has arrived (or the context closes), so "course," followed by "we" is the
word "course,we". The audio is real: each word is a tone whose pitch comes from the word, so what
came back can be matched to what was sent. ``chunk_interval_s`` paces the chunks (0: as fast as
possible; ``chunk_seconds``: real time).
"""

import asyncio
import base64
import json
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

import numpy as np
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

PATH = "/tts/websocket"
_ENCODINGS = {"pcm_s16le", "pcm_f32le"}


@dataclass
class StandInContext:
    """What one Cartesia context received and sent back."""

    context_id: str
    transcripts: list[str] = field(default_factory=list)
    # Words spoken for each input, and their audio (the concatenated `chunk` payloads).
    spoken: list[list[str]] = field(default_factory=list)
    audio: list[bytes] = field(default_factory=list)
    done: bool = False
    cancelled: bool = False
    # Only `transcript`, `continue` and `duration` may change between a context's inputs.
    settings: dict | None = None
    pending: str = ""
    elapsed_s: float = 0.0
    opened_at: float = field(default_factory=time.monotonic)  # when its first input was taken up

    @property
    def words(self) -> list[str]:
        return [word for words in self.spoken for word in words]


def word_tone(word: str, sample_rate: int, seconds: float) -> np.ndarray:
    """A faded sine for one word, pitched by the word, so its audio can be told from others."""
    frequency = 220.0 + 20.0 * (sum(map(ord, word)) % 32)
    t = np.arange(int(sample_rate * seconds)) / sample_rate
    tone = 0.3 * np.sin(2 * np.pi * frequency * t)
    fade = min(len(tone) // 2, int(sample_rate * 0.005))
    if fade:
        ramp = np.linspace(0.0, 1.0, fade)
        tone[:fade] *= ramp
        tone[-fade:] *= ramp[::-1]
    return tone


def _encode(samples: np.ndarray, encoding: str) -> bytes:
    if encoding == "pcm_f32le":
        return samples.astype("<f4").tobytes()
    return (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2").tobytes()


class CartesiaStandIn:
    """``async with CartesiaStandIn() as cartesia:`` serves on a free loopback port at ``cartesia.url``."""

    def __init__(
        self,
        *,
        api_key: str = "test",
        seconds_per_word: float = 0.12,
        chunk_seconds: float = 0.04,
        chunk_interval_s: float = 0.0,
    ):
        """Create the stand-in.

        Args:
            api_key: The only key the handshake accepts.
            seconds_per_word: Length of each word's tone.
            chunk_seconds: Audio per ``chunk`` message.
            chunk_interval_s: Pause after each ``chunk`` message.
        """
        self._api_key = api_key
        self._seconds_per_word = seconds_per_word
        self._chunk_seconds = chunk_seconds
        self._chunk_interval_s = chunk_interval_s
        self._server = None
        self.url = ""
        self.handshakes: list[dict] = []
        self.messages: list[dict] = []
        self.contexts: dict[str, StandInContext] = {}

    async def __aenter__(self) -> "CartesiaStandIn":
        self._server = await serve(
            self._serve, "127.0.0.1", 0, process_request=self._check_handshake
        )
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"ws://127.0.0.1:{port}{PATH}"
        return self

    async def __aexit__(self, *exc):
        self._server.close()
        await self._server.wait_closed()

    def audio(self, context_id: str) -> bytes:
        """All audio sent for a context, in order."""
        return b"".join(self.contexts[context_id].audio)

    def _check_handshake(self, connection: ServerConnection, request):
        url = urlsplit(request.path)
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        key = request.headers.get("X-API-Key") or query.get("api_key")
        version = request.headers.get("Cartesia-Version") or query.get("cartesia_version")
        self.handshakes.append({"path": url.path, "api_key": key, "version": version})
        if url.path != PATH:
            return connection.respond(HTTPStatus.NOT_FOUND, "not found\n")
        if key != self._api_key:
            return connection.respond(HTTPStatus.UNAUTHORIZED, "invalid API key\n")
        if not version:
            return connection.respond(HTTPStatus.BAD_REQUEST, "Cartesia-Version is required\n")
        return None

    async def _serve(self, websocket: ServerConnection):
        inputs: asyncio.Queue[dict] = asyncio.Queue()
        speaker = asyncio.create_task(self._speak(websocket, inputs))
        try:
            async for raw in websocket:
                try:
                    message = json.loads(raw)
                except (TypeError, ValueError):
                    await self._error(websocket, "", "Invalid JSON", f"not JSON: {raw!r:.80}")
                    continue
                self.messages.append(message)
                context_id = message.get("context_id")
                if message.get("cancel") is True:
                    # Acted on at once, not behind the audio still being sent.
                    if context_id in self.contexts:
                        self.contexts[context_id].cancelled = True
                    continue
                await inputs.put(message)
        except ConnectionClosed:
            pass
        finally:
            speaker.cancel()

    async def _speak(self, websocket: ServerConnection, inputs: asyncio.Queue):
        try:
            while True:
                message = await inputs.get()
                await self._generate(websocket, message)
        except ConnectionClosed:
            pass

    async def _generate(self, websocket: ServerConnection, message: dict):
        context_id = message.get("context_id")
        problem = self._invalid(message)
        if problem:
            await self._error(websocket, context_id or "", "Invalid request", problem)
            return
        context = self.contexts.setdefault(context_id, StandInContext(context_id))
        if context.cancelled:
            return
        settings = {k: v for k, v in message.items() if k not in ("transcript", "continue", "duration")}
        if context.done:
            await self._error(websocket, context_id, "Context closed", "the context is done")
            return
        if context.settings is None:
            context.settings = settings
        elif settings != context.settings:
            await self._error(websocket, context_id, "Invalid request", "settings changed mid-context")
            return

        more = message["continue"]
        context.transcripts.append(message["transcript"])
        context.pending += message["transcript"]
        if more:
            # Only words followed by whitespace are known to be complete.
            cut = max(context.pending.rfind(" "), context.pending.rfind("\n")) + 1
            ready, context.pending = context.pending[:cut], context.pending[cut:]
        else:
            ready, context.pending = context.pending, ""
        words = ready.split()
        await self._send_words(websocket, context, words, message)
        if context.cancelled:
            return
        if more and message.get("max_buffer_delay_ms") == 0:
            await self._send(websocket, {"type": "flush_done", "context_id": context_id,
                                         "flush_done": True, "done": False, "status_code": 206})
        if not more:
            context.done = True
            await self._send(websocket, {"type": "done", "context_id": context_id, "done": True,
                                         "status_code": 206})

    async def _send_words(self, websocket, context: StandInContext, words: list[str], message: dict):
        output = message["output_format"]
        rate, encoding = output["sample_rate"], output["encoding"]
        samples = (
            np.concatenate([word_tone(w, rate, self._seconds_per_word) for w in words])
            if words
            else np.zeros(0)
        )
        audio = _encode(samples, encoding)
        step = int(rate * self._chunk_seconds) * (4 if encoding == "pcm_f32le" else 2)
        sent = b""
        for start in range(0, len(audio), step):
            if context.cancelled:
                break
            piece = audio[start : start + step]
            await self._send(websocket, {"type": "chunk", "context_id": context.context_id,
                                         "data": base64.b64encode(piece).decode(), "done": False,
                                         "status_code": 206, "step_time": self._chunk_seconds})
            sent += piece
            if self._chunk_interval_s:
                await asyncio.sleep(self._chunk_interval_s)
        context.spoken.append(words)
        context.audio.append(sent)
        if words and message.get("add_timestamps") and not context.cancelled:
            starts = [context.elapsed_s + k * self._seconds_per_word for k in range(len(words))]
            await self._send(websocket, {
                "type": "timestamps", "context_id": context.context_id, "done": False,
                "status_code": 206,
                "word_timestamps": {"words": words, "start": starts,
                                    "end": [s + self._seconds_per_word for s in starts]},
            })
        context.elapsed_s += len(words) * self._seconds_per_word

    @staticmethod
    def _invalid(message: dict) -> str | None:
        if not isinstance(message.get("context_id"), str) or not message["context_id"]:
            return "context_id is required"
        if not isinstance(message.get("transcript"), str):
            return "transcript must be a string"
        if not isinstance(message.get("continue"), bool):
            return "continue must be a boolean"
        if not message.get("model_id"):
            return "model_id is required"
        voice = message.get("voice") or {}
        if voice.get("mode") != "id" or not voice.get("id"):
            return "voice must be {'mode': 'id', 'id': ...}"
        output = message.get("output_format") or {}
        if output.get("container") != "raw" or output.get("encoding") not in _ENCODINGS:
            return f"unsupported output_format {output}"
        if not isinstance(output.get("sample_rate"), int) or output["sample_rate"] <= 0:
            return "output_format.sample_rate must be a positive integer"
        return None

    async def _error(self, websocket, context_id: str, title: str, detail: str):
        await self._send(websocket, {"type": "error", "context_id": context_id, "done": True,
                                     "status_code": 400, "title": title, "message": detail})

    @staticmethod
    async def _send(websocket, payload: dict):
        await websocket.send(json.dumps(payload))
