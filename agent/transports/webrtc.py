"""Browser calls over WebRTC: SmallWebRTC signalling and one pipeline per peer.

    POST  /api/session {} -> {"token", "expires_in", "ice_servers"}          (the page, first)
    POST  /api/offer   {"sdp", "type": "offer"} -> {"sdp", "type", "pc_id", "call_id"}   (starts a call;
                       call_id names its record, /api/calls/{call_id})
    PATCH /api/offer   {"pc_id", "candidates": [...]}                          (trickle ICE)

Every route is rate-limited per client address and Origin-checked, and its body is capped
while it is read (agent/security/access.py); an offer needs a credential unless calls are open:
the session's single-use token (``X-Brisk-Call-Token``) or ``Authorization: Bearer
<BRISK_API_KEY>``. Offers are checked before aiortc sees them (size, JSON shape, SDP type and
syntax), ICE candidates too, and get a 4xx with the reason when they are wrong; the server
keeps serving whatever a client sends.
A new call takes a line from the process's ``CallAdmission`` before any pipeline is built
(503 with ``Retry-After`` when every line is taken) and gives it back when it ends; an ended
call leaves no trace in ``CallManager``.
"""

from __future__ import annotations

import asyncio
import functools
import json

from collections.abc import Callable

from aiortc.jitterbuffer import JitterBuffer
from aiortc.sdp import candidate_from_sdp
from fastapi import APIRouter, HTTPException, Request
from loguru import logger
from pipecat.transports.smallwebrtc.connection import IceServer, SmallWebRTCConnection
from pipecat.transports.smallwebrtc.request_handler import (
    IceCandidate,
    SmallWebRTCPatchRequest,
    SmallWebRTCRequest,
    SmallWebRTCRequestHandler,
)
from pipecat.frames.frames import EndFrame
from pipecat.processors.frameworks.rtvi.frames import RTVIServerMessageFrame
from pipecat.audio.filters.base_audio_filter import BaseAudioFilter
from pipecat.transports.base_transport import TransportParams
from pipecat.transports.smallwebrtc.transport import SmallWebRTCTransport

from agent.call.admission import CallAdmission, Ticket
from agent.call.call_control import CallControl, Outcome
from agent.call.call_runner import run_call
from agent.call.pipeline import INPUT_SAMPLE_RATE, OUTPUT_SAMPLE_RATE, BuildCall, build_call
from agent.call.stages import make_noise_filter
from agent.runtime.runtime import Runtime
from agent.security.access import Access, read_capped

OFFER_PATH = "/api/offer"
SESSION_PATH = "/api/session"
SESSION_MAX_BYTES = 1024  # the page posts nothing that matters
# A busy caller's page may try again after this long.
RETRY_AFTER_S = 5


def call_id_of(pc_id: str) -> str:
    """The call's id in its record and in ``/api/calls/{id}``: pipecat's peer connection id
    ("SmallWebRTCConnection#0-<hex>") holds a '#', which a URL path would have to quote."""
    return f"webrtc-{pc_id.rsplit('-', 1)[-1]}"


def webrtc_transport(connection: SmallWebRTCConnection, audio_in_filter: BaseAudioFilter | None = None) -> SmallWebRTCTransport:
    """A browser's (or aiortc caller's) WebRTC peer connection; ``audio_in_filter``: the call's
    own noise filter (``make_noise_filter``), or None."""
    return SmallWebRTCTransport(
        webrtc_connection=connection,
        params=TransportParams(
            audio_in_enabled=True,
            audio_in_sample_rate=INPUT_SAMPLE_RATE,
            audio_in_filter=audio_in_filter,
            audio_out_enabled=True,
            audio_out_sample_rate=OUTPUT_SAMPLE_RATE,
            # On an interruption the chunk being written still plays out: 20 ms chunks instead of
            # pipecat's 40 halve that tail (decision -> last audio out P95 88 -> 20 ms here).
            audio_out_10ms_chunks=2,
        ),
    )


# aiortc's RTCRtpReceiver keeps its jitter buffer in this (name-mangled) attribute.
_JITTER_BUFFER = "_RTCRtpReceiver__jitter_buffer"


def hand_on_input_audio_sooner(connection: SmallWebRTCConnection, prefetch_packets: int) -> None:
    """Let the call's input audio go on to the VAD ``prefetch_packets`` packets after it arrives.

    aiortc's receiver holds 4 packets (~80 ms) in its jitter buffer, the margin a player needs to
    play out evenly; the VAD and Whisper only need the packets in order, which the buffer keeps
    with any prefetch (it waits for a missing packet either way). aiortc has no setting for it,
    so the buffer is replaced before the first packet arrives (the answer is not sent yet). A
    peer connection pipecat makes anew on a renegotiation (``restart_pc``) keeps aiortc's.
    """
    for receiver in connection.pc.getReceivers():
        if receiver.track is None or receiver.track.kind != "audio":
            continue
        if not isinstance(getattr(receiver, _JITTER_BUFFER, None), JitterBuffer):
            logger.warning(f"call {connection.pc_id}: this aiortc keeps no {_JITTER_BUFFER}: input audio keeps its playout delay")
            continue
        setattr(receiver, _JITTER_BUFFER, JitterBuffer(capacity=16, prefetch=prefetch_packets))


class BrowserCallControl(CallControl):
    """A browser call's controls: the page is told (RTVI server messages) that the bot ends the
    call (``{"type": "call-ending", "by", "outcome"}``) or that a person is being connected
    (``{"type": "transfer", "text"}``), and shows it; the call then ends after the bot's words."""

    transport = "webrtc"

    @property
    def can_transfer(self) -> bool:
        return True

    async def ending(self, by: str, outcome: Outcome = "completed") -> None:
        await super().ending(by, outcome)
        await self.worker.queue_frame(RTVIServerMessageFrame(data={"type": "call-ending", "by": by, "outcome": outcome}))

    async def transfer(self, worker, *, failed_text: str) -> None:
        text = "A person is being connected."
        await worker.queue_frames([RTVIServerMessageFrame(data={"type": "transfer", "text": text}), EndFrame()])


class CallManager:
    """Runs one pipeline per WebRTC peer and tears it down when the peer goes away."""

    def __init__(self, runtime: Runtime, build: BuildCall = build_call, max_duration_s: float | None = None):
        self.runtime = runtime
        self.build = build
        self.max_duration_s = max_duration_s
        self.tasks: dict[str, asyncio.Task] = {}  # calls in progress only
        self.calls: dict[str, object] = {}
        self.listeners: list = []  # callables(pc_id, Call) run when a call is assembled (tests, bench)

    @property
    def active(self) -> int:
        return sum(1 for t in self.tasks.values() if not t.done())

    async def start_call(self, connection: SmallWebRTCConnection, ticket: Ticket | None = None) -> None:
        hand_on_input_audio_sooner(connection, self.runtime.config.webrtc_input_prefetch_packets)
        transport = webrtc_transport(connection, make_noise_filter(self.runtime.config))
        pc_id = connection.pc_id
        control = BrowserCallControl(call_id_of(pc_id))
        call = self.build(self.runtime.resources, transport, control=control)
        control.worker = call.worker
        if ticket is not None:
            ticket.call_id = control.call_id
            ticket.claim()
        self.calls[pc_id] = call
        for listener in self.listeners:
            listener(pc_id, call)

        @transport.event_handler("on_client_connected")
        async def on_client_connected(_transport, _client):
            if self.runtime.config.greet_first:
                call.greet()

        @transport.event_handler("on_client_disconnected")
        async def on_client_disconnected(_transport, _client):
            logger.info(f"call {pc_id}: client disconnected, ending the call")
            await call.hang_up(reason="client disconnected")

        async def run():
            try:
                await run_call(call, label=f"call {pc_id}", ticket=ticket, max_duration_s=self.max_duration_s)
            finally:
                logger.info(f"call {pc_id} ended: {json.dumps(call.latency.summary()['processors'])}")
                self.tasks.pop(pc_id, None)
                self.calls.pop(pc_id, None)
                # A call ended from this side (idle, too long) must not leave its peer connected.
                try:
                    await connection.disconnect()
                except Exception as e:
                    logger.debug(f"call {pc_id}: closing the peer connection: {e}")

        self.tasks[pc_id] = asyncio.create_task(run(), name=f"call-{pc_id}")

    async def stop(self) -> None:
        for call in list(self.calls.values()):
            await call.worker.cancel(reason="server shutting down")
        if self.tasks:
            await asyncio.wait(list(self.tasks.values()), timeout=5)


def _bad_request(status: int, detail: str) -> HTTPException:
    logger.warning(f"rejected offer: {detail}")
    return HTTPException(status_code=status, detail=detail)


async def parse_offer(request: Request, max_bytes: int) -> SmallWebRTCRequest:
    """Validate an offer before aiortc sees it: size, JSON shape, SDP type and syntax."""
    body = await read_capped(request, max_bytes, "offer")
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise _bad_request(400, "offer body is not JSON") from None
    if not isinstance(data, dict):
        raise _bad_request(400, 'offer must be a JSON object {"sdp", "type"}')
    sdp, sdp_type = data.get("sdp"), data.get("type")
    if not isinstance(sdp, str) or not sdp.startswith("v=0"):
        raise _bad_request(400, "offer.sdp must be an SDP string starting with 'v=0'")
    if sdp_type != "offer":
        raise _bad_request(400, f"offer.type must be 'offer', got {sdp_type!r}")
    if "m=audio" not in sdp:
        raise _bad_request(400, "offer has no audio media section (m=audio)")
    pc_id = data.get("pc_id")
    if pc_id is not None and not isinstance(pc_id, str):
        raise _bad_request(400, "offer.pc_id must be a string")
    return SmallWebRTCRequest(sdp=sdp, type=sdp_type, pc_id=pc_id, restart_pc=bool(data.get("restart_pc")))


def parse_patch(body: bytes) -> SmallWebRTCPatchRequest:
    """Validate trickled ICE candidates before aiortc sees them: a malformed one is a 400, not a 500."""
    try:
        data = json.loads(body)
        if not isinstance(data, dict) or not isinstance(data.get("pc_id"), str):
            raise ValueError('expected {"pc_id": str, "candidates": [...]}')
        raw = data.get("candidates", [])
        if not isinstance(raw, list) or not all(isinstance(c, dict) for c in raw):
            raise ValueError("candidates must be a list of objects")
        candidates = [IceCandidate(**c) for c in raw]
        for c in candidates:
            if not isinstance(c.candidate, str) or not isinstance(c.sdp_mid, str) \
                    or isinstance(c.sdp_mline_index, bool) or not isinstance(c.sdp_mline_index, int):
                raise ValueError("each candidate needs candidate (str), sdp_mid (str), sdp_mline_index (int)")
            if c.candidate:
                candidate_from_sdp(c.candidate)
    except (ValueError, KeyError, TypeError, IndexError, AssertionError) as e:  # aiortc asserts on bad SDP
        raise _bad_request(400, f"malformed ICE candidate patch: {e}") from None
    return SmallWebRTCPatchRequest(pc_id=data["pc_id"], candidates=candidates)


class WebRTCSignalling:
    """The offer routes (``.router``) and the browser calls in progress (``.calls``)."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        admission: CallAdmission,
        ice_servers: list[str],
        max_offer_bytes: int,
        max_duration_s: float | None = None,
        build: BuildCall = build_call,
        access: Access,
        page_ice_servers: Callable[[], list[dict]] = list,
    ):
        self.runtime = runtime
        self.admission = admission
        self.max_offer_bytes = max_offer_bytes
        self.access = access
        self.page_ice_servers = page_ice_servers
        self.calls = CallManager(runtime, build=build, max_duration_s=max_duration_s)
        self.handler = SmallWebRTCRequestHandler(ice_servers=[IceServer(urls=u) for u in ice_servers])
        self.router = APIRouter()
        self.router.add_api_route(SESSION_PATH, self.session, methods=["POST"])
        self.router.add_api_route(OFFER_PATH, self.offer, methods=["POST"])
        self.router.add_api_route(OFFER_PATH, self.ice_candidate, methods=["PATCH"])

    async def session(self, request: Request):
        """A call token for the page, with the ICE servers its peer connection should use."""
        self.access.limit(request, "session")
        self.access.check_origin(request)
        self.access.authorize_session(request)
        await read_capped(request, SESSION_MAX_BYTES, "session request")
        return {"token": self.access.tokens.issue(), "expires_in": int(self.access.tokens.ttl_s),
                "ice_servers": self.page_ice_servers()}

    async def offer(self, request: Request):
        self.access.limit(request, "offer")
        self.access.check_origin(request)
        webrtc_request = await parse_offer(request, self.max_offer_bytes)
        if webrtc_request.pc_id not in self.calls.calls:
            self.access.authorize_call(request)  # a renegotiation of a call in progress needs none
        if self.runtime.resources is None:
            raise HTTPException(status_code=503, detail=self.runtime.error or "Brisk is still starting; retry shortly")
        ticket = None
        if webrtc_request.pc_id not in self.calls.calls:
            # Taken here, before any await: concurrent offers cannot all pass.
            ticket = self.admission.admit("webrtc")
            if ticket is None:
                raise HTTPException(
                    status_code=503,
                    detail=f"busy: all {self.admission.max_calls} lines are taken; retry shortly",
                    headers={"Retry-After": str(RETRY_AFTER_S)},
                )
        try:
            answer = await self.handler.handle_web_request(
                webrtc_request, functools.partial(self.calls.start_call, ticket=ticket)
            )
        except HTTPException:
            raise
        except Exception as e:
            raise _bad_request(400, f"could not accept the offer: {e}") from None
        finally:
            if ticket is not None and ticket.call_id == "":
                ticket.release()  # no call was started with it
        if isinstance(answer, dict) and answer.get("pc_id"):
            answer["call_id"] = call_id_of(answer["pc_id"])  # its record's id: /api/calls/{call_id}
        return answer

    async def ice_candidate(self, request: Request):
        # The pc_id is the capability: only the peer that made the offer knows it.
        self.access.limit(request, "patch")
        self.access.check_origin(request)
        patch = parse_patch(await read_capped(request, self.max_offer_bytes, "ICE candidate patch"))
        try:
            await self.handler.handle_patch_request(patch)
        except HTTPException:
            raise
        except Exception as e:  # aiortc refusing a candidate it parsed: the client's, not ours
            raise _bad_request(400, f"ICE candidate refused: {e}") from None
        return {"status": "success"}

    async def stop(self) -> None:
        await self.calls.stop()
        await self.handler.close()
