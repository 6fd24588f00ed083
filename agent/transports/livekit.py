"""LiveKit rooms: caller tokens, and a worker that runs one Brisk pipeline per room it is given.

    GET /api/livekit/token[?room=NAME]   -> {"url", "room", "identity", "token"}

The token lets one caller join one room, publish a microphone and subscribe; nothing else (no
data channel, no screen share, no room admin), and it expires after ``ttl_secs``.

``python -m agent livekit-worker`` registers with the LiveKit server as an agent worker, over
the same dispatch protocol livekit-agents speaks (protobuf ``WorkerMessage``/``ServerMessage``
on the server's ``/agent`` WebSocket, authenticated by an ``agent`` grant):

- the server offers a room (``AvailabilityRequest``); the worker accepts while its load
  (rooms in progress or promised / ``max_rooms``) is under ``load_threshold``, and declines
  otherwise, so the server offers the room to another worker: several workers share the
  load, and each reports it (``UpdateWorkerStatus``) every few seconds and on every change;
- on ``JobAssignment`` it joins the room with the token the server minted and runs one
  pipeline there (``pipecat.transports.livekit.transport.LiveKitTransport``) until the caller
  leaves or the server ends the job (``JobTermination``), reporting ``UpdateJobStatus``;
- on SIGTERM (or SIGINT) it drains: it declares itself full, takes no new room, waits up to
  ``drain_timeout_s`` for the rooms in progress to end, ends the rest, and exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import re
import secrets
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import uvicorn
from fastapi import APIRouter, FastAPI, HTTPException
from fastapi.responses import JSONResponse
from livekit import api
from livekit.protocol import agent as agent_pb
from livekit.protocol import models as models_pb
from loguru import logger
from pipecat.workers.runner import WorkerRunner

from agent.config import BriskConfig
from agent.metrics import BriskMetrics, setup_tracing
from agent.pipeline import Call, Flavor, Resources, build_call, livekit_transport
from agent.runtime import Runtime

TOKEN_PATH = "/api/livekit/token"
ROOM_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

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
) -> APIRouter:
    """``GET /api/livekit/token``; answers 503 until LiveKit is configured.

    Args:
        url: The LiveKit URL callers connect to (``wss://livekit.example.com``).
        api_key: LiveKit API key.
        api_secret: LiveKit API secret.
        ttl_secs: How long a token stays valid for joining.
        agent_name: The workers' agent name, when they use explicit dispatch.
    """
    router = APIRouter()

    @router.get(TOKEN_PATH)
    async def livekit_token(room: str | None = None):
        if not (url and api_key and api_secret):
            raise HTTPException(status_code=503, detail="LiveKit is not configured: set BRISK_LIVEKIT_URL, "
                                "BRISK_LIVEKIT_API_KEY and BRISK_LIVEKIT_API_SECRET")
        room = room or f"brisk-{secrets.token_hex(6)}"
        if not ROOM_NAME.match(room):
            raise HTTPException(status_code=400, detail="room must be 1-64 letters, digits, '-' or '_'")
        identity = f"caller-{secrets.token_hex(4)}"
        token = participant_token(
            api_key, api_secret, room=room, identity=identity, ttl_secs=ttl_secs, agent_name=agent_name
        )
        return {"url": url, "room": room, "identity": identity, "token": token}

    return router


# -- worker --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RoomJob:
    """A room the server assigned to this worker."""

    job_id: str
    room: str
    url: str
    token: str  # minted by the server for this worker's participant in the room
    identity: str


RoomRunner = Callable[[RoomJob], Awaitable[None]]


def agent_url(url: str) -> str:
    """The server's worker endpoint: ``ws(s)://host[/path]/agent`` for an http(s) or ws(s) URL."""
    parts = urlsplit(url)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") + "/agent", "", ""))


class LiveKitWorker:
    """An agent worker: takes rooms from a LiveKit server and runs ``run_room`` for each."""

    def __init__(
        self,
        url: str,
        api_key: str,
        api_secret: str,
        run_room: RoomRunner,
        *,
        agent_name: str = "",
        max_rooms: int = 4,
        load_threshold: float = 0.75,
        drain_timeout_s: float = 300.0,
        status_interval_s: float = 2.5,
        assignment_timeout_s: float = 7.5,
        max_retries: int = 16,
        version: str = "brisk",
    ):
        """Create the worker; ``run()`` connects it.

        Args:
            url: LiveKit server URL (``ws://livekit:7880``).
            api_key: LiveKit API key.
            api_secret: LiveKit API secret.
            run_room: Runs one room until it is over; cancelled to end it early.
            agent_name: Register under this name (explicit dispatch); "" = every new room.
            max_rooms: Rooms that make a load of 1.0.
            load_threshold: No new room is taken once the load reaches this.
            drain_timeout_s: How long a drain waits for rooms in progress before ending them.
            status_interval_s: How often the load is reported.
            assignment_timeout_s: How long an accepted room stays promised without assignment.
            max_retries: Reconnection attempts in a row before ``run()`` gives up.
            version: Reported to the server at registration.
        """
        self.url = url
        self.api_key = api_key
        self.api_secret = api_secret
        self.run_room = run_room
        self.agent_name = agent_name
        self.max_rooms = max_rooms
        self.load_threshold = load_threshold
        self.drain_timeout_s = drain_timeout_s
        self.status_interval_s = status_interval_s
        self.assignment_timeout_s = assignment_timeout_s
        self.max_retries = max_retries
        self.version = version
        self.worker_id: str | None = None
        self.registered = asyncio.Event()
        self.draining = False
        self.rooms: dict[str, asyncio.Task] = {}  # job id -> its room's task
        self._promised: dict[str, asyncio.Future] = {}  # accepted job id -> its assignment
        self._outbox: asyncio.Queue[agent_pb.WorkerMessage] = asyncio.Queue()
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._closed = False
        self._tasks: set[asyncio.Task] = set()

    @property
    def load(self) -> float:
        return (len(self.rooms) + len(self._promised)) / self.max_rooms

    @property
    def accepting(self) -> bool:
        return not self.draining and not self._closed and self.load < self.load_threshold

    # -- lifecycle -------------------------------------------------------------------------

    async def run(self) -> None:
        """Connect, register and serve until drained; reconnects when the server goes away."""
        failures = 0
        async with aiohttp.ClientSession() as session:
            while not self._closed:
                try:
                    await self._session(session)
                    failures = 0
                except (aiohttp.ClientError, ConnectionError, asyncio.TimeoutError) as e:
                    if self._closed:
                        break
                    # A connection that got as far as registering was a success: start afresh.
                    failures = 1 if self.registered.is_set() else failures + 1
                    if failures > self.max_retries:
                        raise ConnectionError(f"LiveKit server unreachable after {self.max_retries} retries: {e}")
                    delay = min(2.0 * (failures - 1), 10.0)
                    logger.warning(f"LiveKit worker connection lost ({e}); retrying in {delay:.0f} s")
                    self.registered.clear()
                    await asyncio.sleep(delay)

    async def drain(self) -> None:
        """Take no new room, let the rooms in progress end (up to the drain timeout), then stop."""
        if self.draining:
            return
        self.draining = True
        logger.info(f"LiveKit worker draining: {len(self.rooms)} rooms in progress")
        self._send_status()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.drain_timeout_s
        # Rooms already promised to the server still arrive, and are served like the rest.
        while (self.rooms or self._promised) and loop.time() < deadline:
            waiting = [*self.rooms.values(), *self._promised.values()]
            await asyncio.wait(waiting, timeout=deadline - loop.time(), return_when=asyncio.FIRST_COMPLETED)
            await asyncio.sleep(0)  # let a room whose assignment just came in start
        if self.rooms:
            logger.warning(f"drain timeout: ending {len(self.rooms)} rooms still in progress")
        await self.close()

    async def close(self) -> None:
        """Disconnect now (rooms still running are ended)."""
        self._closed = True
        for task in list(self.rooms.values()):
            task.cancel()
        if self.rooms:
            await asyncio.wait(list(self.rooms.values()))
        if self._ws is not None:
            # Let the status and job updates already queued reach the server first.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._outbox.join(), timeout=2.0)
            await self._ws.close()

    def install_signal_handlers(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Drain on SIGTERM or SIGINT (orchestrators send SIGTERM before they kill); a second
        signal while draining ends the rooms and leaves at once."""
        loop = loop or asyncio.get_running_loop()

        def on_signal(sig: signal.Signals) -> None:
            if self.draining:
                logger.warning(f"{sig.name} while draining: leaving {len(self.rooms)} rooms now")
                self._spawn(self.close(), "close")
            else:
                self._spawn(self.drain(), f"drain on {sig.name}")

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal, sig)

    # -- protocol --------------------------------------------------------------------------

    async def _session(self, session: aiohttp.ClientSession) -> None:
        token = api.AccessToken(self.api_key, self.api_secret).with_grants(api.VideoGrants(agent=True)).to_jwt()
        ws = await session.ws_connect(agent_url(self.url), headers={"Authorization": f"Bearer {token}"}, heartbeat=30)
        self._ws = ws
        try:
            await self._register(ws)
            sender = asyncio.create_task(self._send_loop(ws))
            reporter = asyncio.create_task(self._status_loop())
            try:
                await self._receive_loop(ws)
            finally:
                reporter.cancel()
                sender.cancel()
                await asyncio.gather(reporter, sender, return_exceptions=True)
        finally:
            self._ws = None
            await ws.close()
        if not self._closed:
            raise ConnectionError("the LiveKit server closed the worker connection")

    async def _register(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        message = agent_pb.WorkerMessage()
        message.register.type = agent_pb.JobType.JT_ROOM
        message.register.agent_name = self.agent_name
        message.register.version = self.version
        message.register.allowed_permissions.CopyFrom(
            models_pb.ParticipantPermission(can_publish=True, can_subscribe=True, can_publish_data=True, agent=True)
        )
        await ws.send_bytes(message.SerializeToString())
        reply = agent_pb.ServerMessage()
        reply.ParseFromString(await asyncio.wait_for(ws.receive_bytes(), timeout=10))
        if reply.WhichOneof("message") != "register":
            raise ConnectionError(f"expected a register response, got {reply.WhichOneof('message')}")
        self.worker_id = reply.register.worker_id
        self.registered.set()
        logger.info(f"LiveKit worker {self.worker_id} registered (agent name {self.agent_name!r})")
        self._send_status()

    async def _receive_loop(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        async for raw in ws:
            if raw.type != aiohttp.WSMsgType.BINARY:
                continue
            message = agent_pb.ServerMessage()
            message.ParseFromString(raw.data)
            kind = message.WhichOneof("message")
            if kind == "availability":
                self._spawn(self._answer_availability(message.availability.job), "availability")
            elif kind == "assignment":
                self._on_assignment(message.assignment)
            elif kind == "termination":
                self._on_termination(message.termination.job_id)

    async def _send_loop(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        while True:
            message = await self._outbox.get()
            try:
                await ws.send_bytes(message.SerializeToString())
            finally:
                self._outbox.task_done()

    async def _status_loop(self) -> None:
        while True:
            await asyncio.sleep(self.status_interval_s)
            self._send_status()

    def _send_status(self) -> None:
        status = agent_pb.WorkerStatus.WS_AVAILABLE if self.accepting else agent_pb.WorkerStatus.WS_FULL
        update = agent_pb.UpdateWorkerStatus(
            status=status, load=min(self.load, 1.0), job_count=len(self.rooms), draining=self.draining
        )
        self._outbox.put_nowait(agent_pb.WorkerMessage(update_worker=update))

    def _send_job_status(self, job_id: str, status: int, error: str = "") -> None:
        update = agent_pb.UpdateJobStatus(job_id=job_id, status=status, error=error)
        self._outbox.put_nowait(agent_pb.WorkerMessage(update_job=update))

    async def _answer_availability(self, job: agent_pb.Job) -> None:
        answer = agent_pb.WorkerMessage()
        answer.availability.job_id = job.id
        if not self.accepting:
            logger.info(f"declining room {job.room.name}: load {self.load:.2f}, draining={self.draining}")
            answer.availability.available = False
            self._outbox.put_nowait(answer)
            return
        identity = f"brisk-agent-{job.id}"
        answer.availability.available = True
        answer.availability.participant_identity = identity
        answer.availability.participant_name = "Brisk"
        assignment = asyncio.get_running_loop().create_future()
        self._promised[job.id] = assignment
        self._send_status()
        self._outbox.put_nowait(answer)
        try:
            assigned = await asyncio.wait_for(assignment, self.assignment_timeout_s)
        except asyncio.TimeoutError:
            logger.warning(f"room {job.room.name}: accepted but never assigned")
            return
        finally:
            self._promised.pop(job.id, None)
        room = RoomJob(job.id, job.room.name, assigned.url or self.url, assigned.token, identity)
        self.rooms[job.id] = self._spawn(self._run_job(room), f"room-{room.room}")

    def _on_assignment(self, assignment: agent_pb.JobAssignment) -> None:
        future = self._promised.get(assignment.job.id)
        if future is None or future.done():
            logger.warning(f"assignment for a job this worker did not accept: {assignment.job.id}")
            return
        future.set_result(assignment)

    def _on_termination(self, job_id: str) -> None:
        task = self.rooms.get(job_id)
        if task is not None:
            logger.info(f"the server ended job {job_id}")
            task.cancel()

    async def _run_job(self, room: RoomJob) -> None:
        self._send_job_status(room.job_id, agent_pb.JobStatus.JS_RUNNING)
        self._send_status()
        logger.info(f"joined room {room.room} (job {room.job_id})")
        status, error = agent_pb.JobStatus.JS_SUCCESS, ""
        try:
            await self.run_room(room)
        except asyncio.CancelledError:
            pass  # ended by the server, a drain timeout or a shutdown: a clean end for the job
        except Exception as e:
            logger.exception(f"room {room.room} failed")
            status, error = agent_pb.JobStatus.JS_FAILED, f"{type(e).__name__}: {e}"
        finally:
            self.rooms.pop(room.job_id, None)
            self._send_job_status(room.job_id, status, error)
            self._send_status()
            logger.info(f"left room {room.room} (job {room.job_id})")

    def _spawn(self, coro, name: str) -> asyncio.Task:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


# -- Brisk in a room -----------------------------------------------------------------------


async def run_room(
    resources: Resources,
    job: RoomJob,
    *,
    flavor: Flavor = "brisk",
    listeners: tuple[CallListener, ...] = (),
) -> None:
    """One Brisk pipeline in ``job``'s room, until the last caller leaves or the task is cancelled."""
    transport = livekit_transport(job.url, job.token, job.room)
    call = build_call(resources, transport, flavor=flavor)
    for listener in listeners:
        listener(job.room, call)

    @transport.event_handler("on_participant_disconnected")
    async def on_participant_disconnected(_transport, participant_id):
        if not transport.get_participants():
            logger.info(f"room {job.room}: {participant_id} left, nobody else is here")
            await call.worker.cancel(reason="the caller left")

    @transport.event_handler("on_disconnected")
    async def on_disconnected(_transport):
        await call.worker.cancel(reason="disconnected from the room")

    # Cancelling this task cancels the runner's wait; it then ends the pipeline and leaves.
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(call.worker)
    await runner.run()


class _SignalFreeServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self):
        # SIGTERM belongs to the worker's drain; uvicorn must not take it first.
        yield


def worker_app(runtime: Runtime, worker: LiveKitWorker, metrics: BriskMetrics) -> FastAPI:
    """The worker's own HTTP endpoints: ``/healthz`` and ``/metrics``."""
    # No HTTP spans: this app only answers health checks and scrapes.
    app = FastAPI(title="Brisk LiveKit worker", telemetry={"tracing": False})
    app.include_router(metrics.router)

    @app.get("/healthz")
    async def healthz():
        ready, body = runtime.health()
        registered = worker.registered.is_set()
        body["livekit"] = {
            "registered": registered,
            "worker_id": worker.worker_id,
            "rooms": len(worker.rooms),
            "load": round(worker.load, 3),
            "draining": worker.draining,
        }
        ok = ready and registered and not worker.draining
        return JSONResponse(body, status_code=200 if ok else 503)

    return app


async def run_worker(config: BriskConfig) -> None:
    """``python -m agent livekit-worker``: models once, then rooms until SIGTERM drains it."""
    if not (config.livekit_url and config.livekit_api_key and config.livekit_api_secret):
        raise ValueError("livekit-worker needs BRISK_LIVEKIT_URL, BRISK_LIVEKIT_API_KEY and BRISK_LIVEKIT_API_SECRET")
    runtime = Runtime(config)
    await runtime.start()
    metrics = BriskMetrics(tracer=setup_tracing(config.otlp_endpoint))
    track = metrics.listener("livekit")

    async def brisk_room(job: RoomJob) -> None:
        await run_room(runtime.resources, job, listeners=(track,))

    worker = LiveKitWorker(
        config.livekit_url,
        config.livekit_api_key,
        config.livekit_api_secret,
        brisk_room,
        agent_name=config.livekit_agent_name,
        max_rooms=config.max_calls,
        load_threshold=config.livekit_load_threshold,
        drain_timeout_s=config.livekit_drain_timeout_secs,
    )
    worker.install_signal_handlers()
    http = _SignalFreeServer(
        uvicorn.Config(worker_app(runtime, worker, metrics), host=config.host, port=config.port, log_level="warning")
    )
    http_task = asyncio.create_task(http.serve())
    try:
        await worker.run()
    finally:
        http.should_exit = True
        await http_task
        await runtime.stop()
