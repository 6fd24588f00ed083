"""Phone calls over Twilio Media Streams.

    POST /twilio/voice   Twilio's incoming-call webhook -> TwiML that streams the call to
                         wss://<host>/ws/twilio; when every line is taken, TwiML that says
                         so (``busy_text``) and hangs up
    WS   /ws/twilio      Twilio Media Streams. In: connected, start (streamSid, callSid),
                         media (base64 8 kHz mu-law, 20 ms each), mark, stop.
                         Out: media, mark (after each complete answer), clear (on barge-in).

The pipeline runs at 8 kHz in: pipecat's ``TwilioFrameSerializer`` then decodes each media
event into one 20 ms frame that the VAD sees at once and the STT buffers as is (it resamples
each transcription's clip in one shot), instead of waiting for a soxr stream resampler
(8 -> 16 kHz) to release a burst of ~95 ms. Output is resampled once, 24 -> 8 kHz, by
the output transport, which flushes the resampler's tail at the end of each answer.

When an auth token is configured every webhook must carry a valid ``X-Twilio-Signature``
over the public URL and the POST parameters (checked by the ``twilio`` package's
``RequestValidator``, which accepts the URL with or without its default port), and the TwiML
(built with ``twilio.twiml``) hands the stream a per-call token that its ``start`` message
must bring back: the WebSocket accepts only streams that Twilio opened for a call this
server answered, once, within ``STREAM_TOKEN_TTL_S``. Without an auth token phone calls are
taken only while calls are open (the server on loopback, or ``BRISK_ALLOW_OPEN``); the
webhook is rate-limited per client address and its body capped.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

from fastapi import APIRouter, HTTPException, Request, WebSocket, WebSocketDisconnect
from fastapi.datastructures import FormData
from fastapi.responses import Response
from loguru import logger
from pipecat.audio.filters.base_audio_filter import BaseAudioFilter
from pipecat.frames.frames import Frame, OutputTransportMessageUrgentFrame
from pipecat.serializers.twilio import TwilioFrameSerializer
from pipecat.serializers.base_serializer import FrameSerializer
from pipecat.transports.websocket.fastapi import FastAPIWebsocketParams, FastAPIWebsocketTransport
from twilio.request_validator import RequestValidator
from twilio.twiml.voice_response import VoiceResponse

from agent.call.admission import CallAdmission, Ticket
from agent.call.call_control import mask_number
from agent.call.call_runner import run_call
from agent.call.pipeline import TWILIO_SAMPLE_RATE, BuildCall, Call, build_call
from agent.call.stages import make_noise_filter
from agent.runtime.runtime import Runtime
from agent.security.access import Access, client_of, read_capped
from agent.transports.twilio_transfer import PhoneCallControl

VOICE_PATH = "/twilio/voice"
WEBHOOK_MAX_BYTES = 16384  # Twilio's voice webhook posts a few hundred bytes of form fields
STREAM_PATH = "/ws/twilio"
# Twilio sends "connected" and "start" right after the handshake.
START_TIMEOUT_S = 10.0
# WebSocket close codes (RFC 6455): policy violation, unsupported data, try again later.
CLOSE_POLICY, CLOSE_UNSUPPORTED, CLOSE_TRY_LATER = 1008, 1003, 1013

CallListener = Callable[[str, Call], None]


def phone_transport(websocket: WebSocket, serializer: FrameSerializer,
                    audio_in_filter: BaseAudioFilter | None = None) -> FastAPIWebsocketTransport:
    """A Twilio Media Stream on an accepted FastAPI WebSocket (agent/transports/twilio.py's
    serializer); ``audio_in_filter``: the call's own noise filter (``make_noise_filter``), or None."""
    return FastAPIWebsocketTransport(
        websocket=websocket,
        params=FastAPIWebsocketParams(
            audio_in_enabled=True,
            audio_in_sample_rate=TWILIO_SAMPLE_RATE,
            audio_in_filter=audio_in_filter,
            audio_out_enabled=True,
            audio_out_sample_rate=TWILIO_SAMPLE_RATE,
            serializer=serializer,
            # Twilio sends no Origin; the stream is authenticated by its token instead.
            allowed_origins=[],
        ),
    )


# -- signatures ----------------------------------------------------------------------------


def webhook_params(body: bytes) -> FormData:
    """A webhook's ``application/x-www-form-urlencoded`` body, repeated keys kept.

    A multi-dict, as ``RequestValidator`` needs to sign each value of a repeated key.
    """
    return FormData(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))


# Twilio opens the stream within a second or two of our TwiML; a token older than this is stale.
STREAM_TOKEN_TTL_S = 120


def stream_token(auth_token: str, call_sid: str, expires: int | None = None) -> str:
    """The token the TwiML gives one call's stream: ``<expiry>.<HMAC>``, so only that call can
    open a stream, and only until it expires (it is spent by the stream it opens)."""
    expires = int(time.time()) + STREAM_TOKEN_TTL_S if expires is None else expires
    mac = hmac.new(auth_token.encode(), f"brisk-stream:{call_sid}:{expires}".encode(), hashlib.sha256).hexdigest()
    return f"{expires}.{mac}"


def stream_token_valid(auth_token: str, call_sid: str, token: str, now: float | None = None) -> bool:
    expires, _, _ = token.partition(".")
    if not expires.isdigit() or int(expires) < (time.time() if now is None else now):
        return False
    return hmac.compare_digest(token.encode(), stream_token(auth_token, call_sid, int(expires)).encode())


# -- TwiML ---------------------------------------------------------------------------------


def stream_twiml(stream_url: str, parameters: Mapping[str, str]) -> str:
    """<Response><Connect><Stream url=...> with custom parameters, escaped."""
    response = VoiceResponse()
    stream = response.connect().stream(url=stream_url)
    for name, value in parameters.items():
        stream.parameter(name=name, value=value)
    return response.to_xml()


def busy_twiml(text: str) -> str:
    """Tell the caller every line is taken, then end the call: a busy signal alone says nothing."""
    response = VoiceResponse()
    response.say(text)
    response.hangup()
    return response.to_xml()


# -- the stream ----------------------------------------------------------------------------


@dataclass
class StreamStart:
    """What Twilio's ``start`` message says about the stream."""

    stream_sid: str
    call_sid: str
    account_sid: str
    custom_parameters: dict[str, str]
    encoding: str
    sample_rate: int
    channels: int

    @classmethod
    def parse(cls, message: dict) -> "StreamStart":
        start = message.get("start") or {}
        media_format = start.get("mediaFormat") or {}
        stream_sid = message.get("streamSid") or start.get("streamSid")
        call_sid = start.get("callSid")
        if not stream_sid or not call_sid:
            raise ValueError("start message without streamSid/callSid")
        return cls(
            stream_sid=stream_sid,
            call_sid=call_sid,
            account_sid=start.get("accountSid", ""),
            custom_parameters=dict(start.get("customParameters") or {}),
            encoding=media_format.get("encoding", "audio/x-mulaw"),
            sample_rate=int(media_format.get("sampleRate", TWILIO_SAMPLE_RATE)),
            channels=int(media_format.get("channels", 1)),
        )


class TwilioStreamSerializer(TwilioFrameSerializer):
    """pipecat's Twilio serializer, plus the two inbound events it drops: ``mark`` and ``stop``.

    Media and DTMF go to pipecat's serializer unchanged. The Twilio REST hang-up is off: a
    call ends when the caller hangs up, and the stream closing ends the TwiML, hence the call.
    """

    def __init__(self, stream_sid: str, *, on_mark: Callable[[str], None], on_stop: Callable[[], None]):
        super().__init__(stream_sid, params=TwilioFrameSerializer.InputParams(auto_hang_up=False))
        self._on_mark = on_mark
        self._on_stop = on_stop

    async def deserialize(self, data: str | bytes) -> Frame | None:
        """Note played marks and the end of the stream; the rest is pipecat's."""
        try:
            message = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            logger.warning(f"ignoring a non-JSON Twilio message: {data[:80]!r}")
            return None
        event = message.get("event")
        if event == "mark":
            self._on_mark((message.get("mark") or {}).get("name", ""))
            return None
        if event == "stop":
            self._on_stop()
            return None
        return await super().deserialize(data)


class PhoneCall:
    """One phone call: its pipeline, and what the phone told us about playback."""

    def __init__(self, start: StreamStart):
        self.start = start
        self.call: Call | None = None
        self.marks_sent: dict[str, float] = {}  # mark name -> time.monotonic() it was sent
        self.marks_played: dict[str, float] = {}  # mark name -> when the phone said it played
        self.caller_hung_up = False
        self._ending: asyncio.Task | None = None
        self._mark_waiters: dict[str, asyncio.Event] = {}

    def wait_for_mark(self, name: str) -> asyncio.Event:
        """An event set once the phone says it played up to the mark ``name``."""
        return self._mark_waiters.setdefault(name, asyncio.Event())

    def mark_played(self, name: str) -> None:
        now = time.monotonic()
        self.marks_played[name] = now
        waiter = self._mark_waiters.pop(name, None)
        if waiter is not None:
            waiter.set()
        sent = self.marks_sent.get(name)
        if sent is not None:
            logger.debug(f"call {self.start.call_sid}: {name} played {1000 * (now - sent):.0f} ms after it was sent")

    def caller_stopped(self) -> None:
        self.caller_hung_up = True
        self.end("caller hung up")

    def end(self, reason: str) -> None:
        """Cancel the pipeline once, from its own task: the caller may be the input transport."""
        if self._ending is None:
            logger.info(f"call {self.start.call_sid}: {reason}, ending the call")
            self._ending = asyncio.get_running_loop().create_task(self.call.hang_up(reason))

    async def send_mark(self, record: dict) -> None:
        # A mark after a complete answer: Twilio echoes it once the phone has played that far.
        if record.get("interrupted"):
            return
        name = f"turn-{record['turn']}"
        self.marks_sent[name] = time.monotonic()
        message = {"event": "mark", "streamSid": self.start.stream_sid, "mark": {"name": name}}
        await self.call.worker.queue_frame(OutputTransportMessageUrgentFrame(message=message))


class TwilioPhone:
    """The Twilio routes (``.router``) and the phone calls in progress (``.calls``)."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        auth_token: str | None = None,
        public_url: str | None = None,
        admission: CallAdmission | None = None,
        busy_text: str = "Sorry, all our lines are busy right now. Please call again in a few minutes.",
        max_duration_s: float | None = None,
        build: BuildCall = build_call,
        access: Access | None = None,
    ):
        """Create the routes.

        Args:
            runtime: The process runtime; calls are refused until its resources are ready.
            auth_token: Twilio auth token. When set, webhooks must be signed and streams
                must carry the token the TwiML gave them; when None nothing is checked.
            public_url: The base URL Twilio uses to reach this server (``https://host``):
                the stream URL and the signed URL derive from it. When None, they come from
                the request's ``X-Forwarded-Proto``/``X-Forwarded-Host`` or ``Host``.
            admission: The process's call limit, shared with every other transport (a gate
                of 4 lines of its own when None). A webhook reserves a line for its call;
                the stream claims it.
            busy_text: Spoken, before hanging up, to a caller when every line is taken.
            max_duration_s: Longest a phone call may last (None: no limit).
            build: What assembles each call (``agent.call.pipeline.build_call``, or one's own).
            access: The server's doors (rate limits; whether calls are open): without an
                auth token, phone calls are only taken while calls are open (loopback).
        """
        self.runtime = runtime
        self.access = access
        self.auth_token = auth_token
        self._validator = RequestValidator(auth_token) if auth_token else None
        self.public_url = public_url
        self.admission = admission or CallAdmission(4)
        self.busy_text = busy_text
        self.max_duration_s = max_duration_s
        self.build = build
        self.calls: dict[str, PhoneCall] = {}  # streamSid -> call in progress
        self._reserved: dict[str, Ticket] = {}  # CallSid -> the line its webhook took
        self._callers: dict[str, str] = {}  # CallSid -> its masked From, until its stream starts
        self.listeners: list[CallListener] = []  # listener(stream_sid, Call) when a call is assembled
        self._tasks: set[asyncio.Task] = set()
        self.router = APIRouter()
        self.router.add_api_route(VOICE_PATH, self.voice_webhook, methods=["POST"], include_in_schema=False)
        self.router.add_api_websocket_route(STREAM_PATH, self.media_stream)

    @property
    def active(self) -> int:
        return len(self.calls)

    # -- webhook ---------------------------------------------------------------------------

    def _public_base(self, request: Request) -> tuple[str, str]:
        """(scheme, host) Twilio used to reach us."""
        if self.public_url:
            parts = urlsplit(self.public_url)
            return parts.scheme, parts.netloc
        headers = request.headers
        proto = headers.get("x-forwarded-proto", request.url.scheme).split(",")[0].strip()
        host = headers.get("x-forwarded-host", headers.get("host", "")).split(",")[0].strip()
        return proto, host

    def _unauthenticated_refused(self) -> bool:
        """No auth token, and the server is reachable from elsewhere: nobody can tell Twilio from anyone."""
        return self.auth_token is None and self.access is not None and not self.access.open_calls

    async def voice_webhook(self, request: Request) -> Response:
        if self.access is not None:
            self.access.limit(request, "twilio")
        if self._unauthenticated_refused():
            logger.warning(f"refused a Twilio webhook from {client_of(request)}: BRISK_TWILIO_AUTH_TOKEN is not set")
            raise HTTPException(status_code=403, detail="phone calls need BRISK_TWILIO_AUTH_TOKEN on a server reachable "
                                                        "from elsewhere")
        # Twilio posts application/x-www-form-urlencoded.
        params = webhook_params(await read_capped(request, WEBHOOK_MAX_BYTES, "Twilio webhook"))
        scheme, host = self._public_base(request)
        if self._validator is not None:
            query = f"?{request.url.query}" if request.url.query else ""
            signed_url = f"{scheme}://{host}{request.url.path}{query}"
            if not self._validator.validate(signed_url, params, request.headers.get("x-twilio-signature", "")):
                logger.warning(f"rejected a Twilio webhook with a bad signature for {signed_url}")
                raise HTTPException(status_code=403, detail="invalid Twilio signature")
        call_sid = params.get("CallSid", "")
        caller = mask_number(params.get("From", ""))
        self._reserved = {sid: t for sid, t in self._reserved.items() if not t.released}
        self._callers = {sid: c for sid, c in self._callers.items() if sid in self._reserved}
        resources = self.runtime.resources
        ticket = None if resources is None else self.admission.admit("twilio", call_sid, reserve=True)
        if ticket is None:
            logger.warning(f"call {call_sid}: every line is taken or Brisk is not ready; telling the caller")
            if resources is not None and resources.records is not None and call_sid:
                try:
                    await resources.records.add_busy(call_sid, transport="twilio", caller=caller)
                except Exception:  # the caller still hears why; the log says what was not kept
                    logger.exception(f"call {call_sid}: the busy call could not be recorded")
            return Response(busy_twiml(self.busy_text), media_type="application/xml")
        self._reserved[call_sid] = ticket
        self._callers[call_sid] = caller
        # Twilio only dials wss://; plain ws:// only when the public URL says http (a local tunnel).
        ws_scheme = "ws" if self.public_url and scheme == "http" else "wss"
        stream_url = f"{ws_scheme}://{host}{STREAM_PATH}"
        parameters = {"token": stream_token(self.auth_token, call_sid)} if self.auth_token else {}
        logger.info(f"call {call_sid} from {caller or '?'}: streaming to {stream_url}")
        return Response(stream_twiml(stream_url, parameters), media_type="application/xml")

    # -- stream ----------------------------------------------------------------------------

    async def media_stream(self, websocket: WebSocket) -> None:
        if self.access is not None and self.access.retry_after(websocket, "twilio") is not None:
            logger.warning(f"rate limit: Twilio stream from {client_of(websocket)} refused")
            await websocket.close(code=CLOSE_TRY_LATER, reason="too many streams; retry later")
            return
        await websocket.accept()
        try:
            start = await asyncio.wait_for(_read_start(websocket), START_TIMEOUT_S)
        except WebSocketDisconnect:
            return
        except (asyncio.TimeoutError, ValueError) as e:
            logger.warning(f"Twilio stream refused: {e or 'no start message'}")
            await websocket.close(code=CLOSE_POLICY, reason="expected connected/start")
            return
        if self._unauthenticated_refused():
            logger.warning(f"Twilio stream {start.stream_sid} refused: BRISK_TWILIO_AUTH_TOKEN is not set")
            await websocket.close(code=CLOSE_POLICY, reason="unauthenticated stream")
            return
        if self.auth_token:
            token = start.custom_parameters.get("token", "")
            reserved = self._reserved.get(start.call_sid)
            if not stream_token_valid(self.auth_token, start.call_sid, token) or reserved is None or reserved.released:
                # Wrong, expired, or spent: its call's stream already opened (a token works once).
                logger.warning(f"Twilio stream {start.stream_sid} refused: missing, wrong, expired or used stream token")
                await websocket.close(code=CLOSE_POLICY, reason="unauthenticated stream")
                return
        if (start.encoding, start.sample_rate, start.channels) != ("audio/x-mulaw", TWILIO_SAMPLE_RATE, 1):
            await websocket.close(code=CLOSE_UNSUPPORTED, reason="expected 8 kHz mono audio/x-mulaw")
            return
        ticket = self._reserved.pop(start.call_sid, None)
        if ticket is None or ticket.released:
            # A stream whose webhook this process did not answer (or answered too long ago).
            ticket = None if self.runtime.resources is None else self.admission.admit("twilio", start.call_sid)
        if ticket is None:
            await websocket.close(code=CLOSE_TRY_LATER, reason="busy")
            return
        ticket.claim()
        try:
            await self._run_call(websocket, start, ticket)
        finally:
            ticket.release()

    async def _run_call(self, websocket: WebSocket, start: StreamStart, ticket: Ticket) -> None:
        phone = PhoneCall(start)
        serializer = TwilioStreamSerializer(start.stream_sid, on_mark=phone.mark_played, on_stop=phone.caller_stopped)
        config = self.runtime.config
        transport = phone_transport(websocket, serializer, make_noise_filter(config))
        control = PhoneCallControl(
            phone, transfer_number=config.transfer_number, account_sid=config.twilio_account_sid,
            auth_token=self.auth_token, api_url=config.twilio_api_url,
        )
        call = phone.call = self.build(
            self.runtime.resources, transport, input_sample_rate=TWILIO_SAMPLE_RATE,
            control=control,
        )
        control.worker = call.worker
        control.caller = self._callers.pop(start.call_sid, "")
        call.latency.add_turn_listener(phone.send_mark)
        self.calls[start.stream_sid] = phone
        for listener in self.listeners:
            listener(start.stream_sid, call)

        @transport.event_handler("on_client_disconnected")
        async def on_client_disconnected(_transport, _websocket):
            phone.end("Twilio closed the stream")

        task = asyncio.current_task()
        self._tasks.add(task)
        logger.info(f"call {start.call_sid}: stream {start.stream_sid} started")
        if config.greet_first:
            call.greet()  # the stream is the call, already connected
        try:
            await run_call(call, label=f"call {start.call_sid}", ticket=ticket, max_duration_s=self.max_duration_s)
        finally:
            self._tasks.discard(task)
            self.calls.pop(start.stream_sid, None)
            logger.info(f"call {start.call_sid} ended: {json.dumps(call.latency.summary()['processors'])}")

    async def stop(self) -> None:
        """End every phone call (server shutdown)."""
        for phone in list(self.calls.values()):
            phone.end("server shutting down")
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)


async def _read_start(websocket: WebSocket) -> StreamStart:
    while True:
        message = json.loads(await websocket.receive_text())
        event = message.get("event")
        if event == "start":
            return StreamStart.parse(message)
        if event != "connected":
            raise ValueError(f"expected connected/start, got {event!r}")
