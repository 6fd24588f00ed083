"""LiveKit rooms: caller tokens, and a worker that runs one Brisk pipeline per room it is given.

    GET /api/livekit/token[?room=NAME]   -> {"url", "room", "identity", "token"}

The token lets one caller join one room, publish a microphone and subscribe; nothing else (no
data channel, no screen share, no room admin), and it expires after ``ttl_secs``.

``python -m agent livekit-worker`` is an agent worker on ``livekit-agents``' ``AgentServer``, run
from our own asyncio program (not its click CLI). The library speaks the dispatch protocol on
the server's ``/agent`` WebSocket (register, answer offers, reconnect, report load and job
status); Brisk gives it the load (rooms in progress / ``max_rooms``, declining new rooms at
``load_threshold`` so the server offers them to another worker), the job (join the room with
the token the server minted, as pipecat's ``LiveKitTransport``, and run one pipeline there
until the caller leaves or the job is shut down), and the drain (on SIGTERM or SIGINT: take no
new room, wait up to ``drain_timeout_s`` for the rooms in progress, end the rest, exit; a
second signal ends them at once).

Jobs run on the library's thread executor, not its default process executor. A process per
job isolates a crash, but each would load its own Whisper, TTS and VAD models (a ``prewarm_fnc``
per process; only the LLM server could be shared, by URL): on 2 cores with ``BRISK_MAX_CALLS=4``
that is four copies of the models and a model load per process, for cores that run two
inferences at a time at most. Threads share the worker's one ``Runtime``, whose models are
thread-safe (Whisper serialises behind a lock; ONNX and CTranslate2 release the GIL); each job
gets its own event loop and, for it, its own LLM client (``job_resources``). The price: a native
crash ends every room the worker holds, not just one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import logging
import math
import os
import secrets
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

import uvicorn
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from livekit import api
from loguru import logger
from pipecat.workers.runner import WorkerRunner

from agent.config import BriskConfig
from agent.metrics import BriskMetrics, setup_tracing
from agent.call.call_control import CallControl
from agent.call.pipeline import Call, Flavor, Resources, build_call, livekit_transport
from agent.records.api import operator_check, operator_only
from agent.runtime.runtime import Runtime
from agent.security.access import Access
from processors.llm.openai_llm import make_openai_client

if TYPE_CHECKING:
    from livekit.agents import JobContext, JobRequest

TOKEN_PATH = "/api/livekit/token"
# Without it each job thread's first start loads livekit-agents' own VAD and turn-detector
# weights (~250 MB) into the worker, for models Brisk never uses.
PRELOAD_ENV = "LIVEKIT_AGENTS_PRELOAD_LOCAL_INFERENCE"

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


# -- worker --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RoomJob:
    """A room the server assigned to this worker."""

    job_id: str
    room: str
    url: str
    token: str  # minted by the server for this worker's participant in the room
    identity: str


RoomRunner = Callable[[RoomJob], Awaitable[None]]


class LiveKitWorker:
    """An agent worker on livekit-agents: takes rooms from a LiveKit server, runs ``run_room`` for each."""

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
        max_retries: int = 16,
    ):
        """Create the worker; ``run()`` connects it.

        Args:
            url: LiveKit server URL (``ws://livekit:7880``); the worker registers at ``<url>/agent``.
            api_key, api_secret: LiveKit API key and secret.
            run_room: Runs one room until it is over (on the job's thread and loop); cancelled to end it.
            agent_name: Register under this name (explicit dispatch); "" = every new room.
            max_rooms: Rooms that make a load of 1.0.
            load_threshold: No new room is taken once the load reaches this.
            drain_timeout_s: How long a drain waits for rooms in progress before ending them.
            max_retries: Reconnection attempts in a row before ``run()`` gives up.
        """
        # Imported here: the web server imports this module for its token route only.
        from livekit.agents import AgentServer, JobExecutorType, WorkerOptions, WorkerPermissions

        self.run_room = run_room
        self.max_rooms = max_rooms
        self.drain_timeout_s = drain_timeout_s
        self.registered = asyncio.Event()
        self._started = False
        self._promised = 0  # rooms accepted and not yet running
        self._drain_task: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()
        self.capacity = max(1, math.ceil(load_threshold * max_rooms - 1e-9))  # rooms at once
        self.server = AgentServer.from_server_options(
            WorkerOptions(
                entrypoint_fnc=self._entrypoint,
                request_fnc=self._request,
                load_fnc=lambda: self.load,
                load_threshold=load_threshold,
                job_executor_type=JobExecutorType.THREAD,
                # No job threads kept warm (one starts in a millisecond): livekit-agents 1.8.9
                # hangs closing a pool that is warming one, which it does whenever a room ends.
                num_idle_processes=0,
                agent_name=agent_name,
                ws_url=url,
                api_key=api_key,
                api_secret=api_secret,
                max_retry=max_retries,
                permissions=WorkerPermissions(can_update_metadata=False),
                # The library's own health endpoint: ours is worker_app, so keep it off the network.
                host="127.0.0.1",
                port=0,
            )
        )
        self.server.on("worker_started", lambda: setattr(self, "_started", True))  # its job pool exists
        self.server.on("worker_registered", lambda _worker_id, _server_info: self.registered.set())

    # -- state, from the library -----------------------------------------------------------

    @property
    def worker_id(self) -> str | None:
        return self.server.id if self.registered.is_set() else None

    @property
    def connected(self) -> bool:
        """Registered now: the library reconnects on its own, and says so only in this flag."""
        return self.registered.is_set() and not self.server._connecting

    @property
    def rooms(self) -> dict[str, str]:
        """Job id -> room name, for the rooms in progress."""
        if not self._started:
            return {}
        return {info.job.id: info.job.room.name for info in self.server.active_jobs}

    @property
    def load(self) -> float:
        return len(self.rooms) / self.max_rooms

    @property
    def draining(self) -> bool:
        return self.server.draining

    # -- lifecycle -------------------------------------------------------------------------

    async def run(self) -> None:
        """Connect, register and serve until drained or closed; raises once the server stays unreachable."""
        os.environ.setdefault(PRELOAD_ENV, "0")
        import livekit.agents.ipc._preload  # noqa: F401  (its one-time warm-up: now, not in a room)
        # livekit-rtc creates its process-wide FFI client on first use, unguarded: two job
        # threads joining their first rooms at once make two, and one never hears back.
        from livekit.rtc._ffi_client import FfiClient

        FfiClient.instance  # noqa: B018
        try:
            await self.server.run(devmode=False)
        finally:
            await self.server.aclose()

    async def drain(self) -> None:
        """Take no new room, let the rooms in progress end (up to the drain timeout), then leave."""
        if self.server.draining:
            return
        self._drain_task = asyncio.current_task()
        logger.info(f"LiveKit worker draining: {len(self.rooms)} rooms in progress")
        # The library reads a timeout of 0 as "wait for ever"; ours means "do not wait".
        timeout = self.drain_timeout_s if self.drain_timeout_s > 0 else 1e-3
        try:
            await self.server.drain(timeout=timeout)
        except asyncio.TimeoutError:
            logger.warning(f"drain timeout: ending {len(self.rooms)} rooms still in progress")
        finally:
            self._drain_task = None  # only the wait may be cut short: a close cut off never ends
        await self.server.aclose()

    async def close(self) -> None:
        """Disconnect now (rooms still running are ended)."""
        # A drain holds the library's lock until its rooms end: stop it, or closing waits for them.
        drain = self._drain_task
        if drain is not None and drain is not asyncio.current_task() and not drain.done():
            drain.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await drain
        await self.server.aclose()

    def install_signal_handlers(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Drain on SIGTERM or SIGINT; a second signal while draining ends the rooms at once."""
        loop = loop or asyncio.get_running_loop()

        def on_signal(sig: signal.Signals) -> None:
            if self.draining:
                logger.warning(f"{sig.name} while draining: leaving {len(self.rooms)} rooms now")
            # Held here: the loop keeps only a weak reference to a task.
            self._tasks.add(loop.create_task(self.close() if self.draining else self.drain()))

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal, sig)

    # -- jobs ------------------------------------------------------------------------------

    async def _request(self, request: JobRequest) -> None:
        # The library has declined already when its load was at the threshold, but it samples
        # the load off the event loop: an offer that comes as another room starts can pass on
        # a stale count. Counted here, on the loop, the rooms running and promised are exact.
        if len(self.rooms) + self._promised >= self.capacity:
            logger.info(f"declining room {request.room.name}: {len(self.rooms)} rooms, {self._promised} promised")
            await request.reject(terminate=False)  # so the server offers it to another worker
            return
        self._promised += 1
        try:
            # Returns once the room is assigned and running (or raises if never assigned).
            await request.accept(name="Brisk", identity=f"brisk-agent-{request.id}")
        finally:
            self._promised -= 1

    async def _entrypoint(self, ctx: JobContext) -> None:
        """Start the room on the job's thread and return: the library ends a job, and calls
        its shutdown callbacks, only once the entrypoint has returned."""
        info = ctx._info  # the assignment: no public accessor for the server's URL and token
        job = RoomJob(ctx.job.id, ctx.job.room.name, info.url, info.token, info.accept_arguments.identity)
        room = asyncio.create_task(self._serve(job), name=f"room-{job.room}")

        def on_room_end(task: asyncio.Task) -> None:
            if task.cancelled():
                return  # by leave(): the job is shutting down already
            error = task.exception()
            ctx.shutdown(f"room failed: {type(error).__name__}: {error}" if error else "the room ended")

        async def leave(reason: str) -> None:
            if not room.done():
                logger.info(f"ending room {job.room}: {reason}")
                room.cancel()
            await asyncio.gather(room, return_exceptions=True)

        room.add_done_callback(on_room_end)
        ctx.add_shutdown_callback(leave)
        # pipecat's transport joins the room, not ctx.connect() (one identity, one connection);
        # tell the job runner, or it warns that the job never connected.
        ctx._on_connect()

    async def _serve(self, job: RoomJob) -> None:
        logger.info(f"room {job.room}: job {job.job_id} starts")
        try:
            await self.run_room(job)
        except Exception:
            logger.exception(f"room {job.room} failed (job {job.job_id})")
            raise
        finally:
            logger.info(f"room {job.room}: job {job.job_id} is over")


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
    control = CallControl(job.room)
    control.transport = "livekit"
    call = build_call(resources, transport, flavor=flavor, control=control)
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
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(call.worker)
    await runner.run()
    if unjoined:
        raise ConnectionError(f"could not join room {job.room}: {unjoined[0]}")


@contextlib.asynccontextmanager
async def job_resources(resources: Resources) -> AsyncIterator[Resources]:
    """``resources`` with an LLM client of the job's own: each job runs on an event loop of its
    own, and an httpx connection pool belongs to the loop it was opened on. Models are shared."""
    config = resources.config
    client = make_openai_client(
        base_url=str(resources.llm_client.base_url),
        api_key=resources.llm_client.api_key,
        connect_timeout=config.llm_connect_timeout_secs,
        total_timeout=config.llm_timeout_secs,
    )
    try:
        yield dataclasses.replace(resources, llm_client=client)
    finally:
        await client.close()


class _SignalFreeServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self):
        # SIGTERM belongs to the worker's drain; uvicorn must not take it first.
        yield


class _ToLoguru(logging.Handler):
    """livekit-agents logs with ``logging``; Brisk's log is loguru's."""

    def emit(self, record: logging.LogRecord) -> None:
        level = record.levelname if record.levelname in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL") else "DEBUG"
        logger.opt(exception=record.exc_info).log(level, f"{record.name}: {record.getMessage()}")


def _route_library_logs(level: str) -> None:
    handler = _ToLoguru()
    # Every room starts its job thread on demand (none are kept warm), which it warns about.
    handler.addFilter(lambda record: not record.getMessage().startswith("no warmed process available"))
    library = logging.getLogger("livekit.agents")
    library.setLevel({"TRACE": "DEBUG", "SUCCESS": "INFO"}.get(level, level))
    library.addHandler(handler)
    library.propagate = False


def worker_app(runtime: Runtime, worker: LiveKitWorker, metrics: BriskMetrics) -> FastAPI:
    """The worker's own HTTP endpoints: ``/healthz`` and ``/metrics``."""
    # No HTTP spans: this app only answers health checks and scrapes.
    app = FastAPI(title="Brisk LiveKit worker", telemetry={"tracing": False})
    app.include_router(metrics.router, dependencies=[Depends(operator_only(runtime.config.operator_key))])

    is_operator = operator_check(runtime.config.operator_key)

    @app.get("/healthz")
    async def healthz(request: Request):
        ready, body = runtime.health()
        if not is_operator(request):  # process ids, paths and URLs are the operator's to see
            ok = ready and worker.connected and not worker.draining
            return JSONResponse({"ready": ok}, status_code=200 if ok else 503)
        body["livekit"] = {
            "registered": worker.connected,
            "worker_id": worker.worker_id,
            "rooms": len(worker.rooms),
            "load": round(worker.load, 3),
            "draining": worker.draining,
        }
        ok = ready and worker.connected and not worker.draining
        return JSONResponse(body, status_code=200 if ok else 503)

    return app


async def run_worker(config: BriskConfig) -> None:
    """``python -m agent livekit-worker``: models once, then rooms until SIGTERM drains it."""
    if not (config.livekit_url and config.livekit_api_key and config.livekit_api_secret):
        raise ValueError("livekit-worker needs BRISK_LIVEKIT_URL, BRISK_LIVEKIT_API_KEY and BRISK_LIVEKIT_API_SECRET")
    _route_library_logs(config.log_level)
    runtime = Runtime(config)
    await runtime.start()
    metrics = BriskMetrics(tracer=setup_tracing(config.otlp_endpoint))
    track = metrics.listener("livekit")

    async def brisk_room(job: RoomJob) -> None:
        async with job_resources(runtime.resources) as resources:
            await run_room(resources, job, listeners=(track,))

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
