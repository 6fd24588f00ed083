"""LiveKit rooms: caller tokens, and one Brisk call in a room the worker is given.

    GET /api/livekit/token[?room=NAME]   -> {"url", "room", "identity", "token"}

The token lets one caller join one room, publish a microphone and subscribe; nothing else (no
data channel, no screen share, no room admin), and it expires after ``ttl_secs``.

``run_room`` joins the room as pipecat's ``LiveKitTransport`` with the token the server minted,
and runs one call there through ``run_call`` (agent/call/call_runner.py), as the WebRTC and
Twilio transports do: its record with every turn, the post-call webhook, the maximum duration.
The worker that takes rooms from the LiveKit server is agent/transports/livekit_worker.py; each
room runs on a job thread's event loop, with an LLM client and database engines of its own
(``job_resources``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import re
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable

from fastapi import APIRouter, HTTPException, Request
from livekit import api
from loguru import logger
from pipecat.audio.filters.base_audio_filter import BaseAudioFilter
from pipecat.transports.livekit.transport import LiveKitParams, LiveKitTransport

from agent.call.call_control import CallControl
from agent.call.call_runner import run_call
from agent.call.pipeline import INPUT_SAMPLE_RATE, OUTPUT_SAMPLE_RATE, BuildCall, Call, build_call
from agent.call.resources import Resources
from agent.call.stages import make_noise_filter
from agent.security.access import Access
from processors.llm.openai_llm import make_openai_client

TOKEN_PATH = "/api/livekit/token"

CallListener = Callable[[str, Call], None]


# -- caller tokens -------------------------------------------------------------------------


def participant_token(
    api_key: str,
    api_secret: str,
    *,
    room: str,
    identity: str,
    ttl_secs: int = 600,
    agent_name: str = "",
) -> str:
    """A token that lets ``identity`` join ``room``, publish a microphone and listen.

    With ``agent_name`` the token also asks the server to dispatch that agent to the room
    (needed when workers register with an agent name: explicit dispatch).
    """
    token = (
        api.AccessToken(api_key, api_secret)
        .with_identity(identity)
        .with_ttl(datetime.timedelta(seconds=ttl_secs))
        .with_grants(
            api.VideoGrants(
                room_join=True,
                room=room,
                can_publish=True,
                can_publish_sources=["microphone"],
                can_subscribe=True,
                can_publish_data=False,
                can_update_own_metadata=False,
            )
        )
    )
    if agent_name:
        token = token.with_room_config(api.RoomConfiguration(agents=[api.RoomAgentDispatch(agent_name=agent_name)]))
    return token.to_jwt()


def token_router(
    url: str | None,
    api_key: str | None,
    api_secret: str | None,
    *,
    ttl_secs: int = 600,
    agent_name: str = "",
    access: Access | None = None,
) -> APIRouter:
    """``GET /api/livekit/token``; answers 503 until LiveKit is configured. The server names a
    fresh room per request and the token grants that room only; with ``access`` a request is
    rate-limited, Origin-checked and needs a call credential as an offer does.

    Args:
        url: The LiveKit URL callers connect to (``wss://livekit.example.com``).
        api_key, api_secret: LiveKit API key and secret.
        ttl_secs: How long a token stays valid for joining.
        agent_name: The workers' agent name, when they use explicit dispatch.
    """
    router = APIRouter()

    @router.get(TOKEN_PATH)
    async def livekit_token(request: Request, room: str | None = None):
        if access is not None:
            access.limit(request, "livekit")
            access.check_origin(request)
            access.authorize_call(request)
        if not (url and api_key and api_secret):
            raise HTTPException(status_code=503, detail="LiveKit is not configured: set BRISK_LIVEKIT_URL, "
                                "BRISK_LIVEKIT_API_KEY and BRISK_LIVEKIT_API_SECRET")
        if room is not None:
            raise HTTPException(status_code=400, detail="the server chooses the room: each caller gets a fresh one")
        room = f"brisk-{secrets.token_hex(8)}"
        identity = f"caller-{secrets.token_hex(4)}"
        token = participant_token(
            api_key, api_secret, room=room, identity=identity, ttl_secs=ttl_secs, agent_name=agent_name
        )
        return {"url": url, "room": room, "identity": identity, "token": token}

    return router


@dataclasses.dataclass(frozen=True)
class RoomJob:
    """A room the server assigned to this worker."""

    job_id: str
    room: str
    url: str
    token: str  # minted by the server for this worker's participant in the room
    identity: str


RoomRunner = Callable[[RoomJob], Awaitable[None]]


# -- Brisk in a room -----------------------------------------------------------------------


def livekit_transport(url: str, token: str, room: str, audio_in_filter: BaseAudioFilter | None = None) -> LiveKitTransport:
    """Brisk as a participant of one LiveKit room (the server mints the token for the worker);
    ``audio_in_filter``: the call's own noise filter (``make_noise_filter``), or None."""
    return LiveKitTransport(
        url=url,
        token=token,
        room_name=room,
        params=LiveKitParams(
            audio_in_enabled=True,
            audio_in_sample_rate=INPUT_SAMPLE_RATE,
            audio_in_filter=audio_in_filter,
            audio_out_enabled=True,
            audio_out_sample_rate=OUTPUT_SAMPLE_RATE,
            # One mixed stream for the one VAD and STT (immediate with a single caller).
            audio_in_user_tracks=False,
        ),
    )


async def run_room(
    resources: Resources,
    job: RoomJob,
    *,
    build: BuildCall = build_call,
    listeners: tuple[CallListener, ...] = (),
    join: Callable[..., LiveKitTransport] = livekit_transport,
) -> None:
    """One Brisk call in ``job``'s room, until the last caller leaves, the call reaches its maximum
    duration or the task is cancelled; run, recorded and limited as every transport's calls are.
    ``join(url, token, room, audio_in_filter)`` makes the room's transport (a room of a test's own
    in tests)."""
    transport = join(job.url, job.token, job.room, make_noise_filter(resources.config))
    control = CallControl(call_id_of(job))
    control.transport = "livekit"
    control.caller = job.room  # where the caller is: a room's participants are not numbers
    call = build(resources, transport, control=control)
    control.worker = call.worker
    for listener in listeners:
        listener(job.room, call)

    @transport.event_handler("on_first_participant_joined")
    async def on_first_participant_joined(_transport, _participant_id):
        if resources.config.greet_first:
            call.greet()

    @transport.event_handler("on_participant_disconnected")
    async def on_participant_disconnected(_transport, participant_id):
        if not transport.get_participants():
            logger.info(f"room {job.room}: {participant_id} left, nobody else is here")
            await call.hang_up(reason="the caller left")

    @transport.event_handler("on_disconnected")
    async def on_disconnected(_transport):
        await call.hang_up(reason="disconnected from the room")

    unjoined: list[str] = []

    @call.worker.event_handler("on_pipeline_error")
    async def on_pipeline_error(_worker, frame):
        # A transport that gave up joining the room is unusable, and pipecat would run on
        # without it for ever, holding one of the worker's rooms.
        if frame.processor in (transport.input(), transport.output()) and not frame.processor.is_usable:
            unjoined.append(str(frame.error))
            await call.worker.cancel(reason="could not join the room")

    # Cancelling this task cancels the runner's wait; it then ends the pipeline and leaves.
    max_duration = resources.config.call_max_duration_secs or None
    await run_call(call, label=f"room {job.room}", ticket=None, max_duration_s=max_duration)
    if unjoined:
        raise ConnectionError(f"could not join room {job.room}: {unjoined[0]}")


def call_id_of(job: RoomJob) -> str:
    """The record id of a room's call: the job's, which LiveKit never gives twice, URL-safe."""
    return "livekit-" + re.sub(r"[^A-Za-z0-9_-]", "-", job.job_id)


@contextlib.asynccontextmanager
async def job_resources(resources: Resources) -> AsyncIterator[Resources]:
    """``resources`` with an LLM client of the job's own: each job runs on an event loop of its
    own, and an httpx connection pool belongs to the loop it was opened on; so do the stores'
    database connections. Models are shared."""
    config = resources.config
    client = make_openai_client(
        base_url=str(resources.llm_client.base_url),
        api_key=resources.llm_client.api_key,
        connect_timeout=config.llm_connect_timeout_secs,
        total_timeout=config.llm_timeout_secs,
    )
    records = resources.records.for_another_loop() if resources.records is not None else None
    store = resources.store.for_another_loop() if resources.store is not None else None
    try:
        yield dataclasses.replace(resources, llm_client=client, records=records, store=store)
    finally:
        await client.close()
        for opened in (records, store):
            if opened is not None:
                await opened.close()
