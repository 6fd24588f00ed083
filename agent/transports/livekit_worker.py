"""``python -m agent livekit-worker``: an agent worker that runs one Brisk call per LiveKit room.

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
gets its own event loop and, for it, its own LLM client and database engines (``job_resources``,
agent/transports/livekit.py). The price: a native
crash ends every room the worker holds, not just one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import signal
from typing import TYPE_CHECKING

import uvicorn
from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from loguru import logger

from agent.config import BriskConfig
from agent.metrics import BriskMetrics, setup_tracing
from agent.records.api import operator_check, operator_only
from agent.runtime.runtime import Runtime
from agent.transports.livekit import RoomJob, RoomRunner, job_resources, run_room

if TYPE_CHECKING:
    from livekit.agents import JobContext, JobRequest

# Without it each job thread's first start loads livekit-agents' own VAD and turn-detector
# weights (~250 MB) into the worker, for models Brisk never uses.
PRELOAD_ENV = "LIVEKIT_AGENTS_PRELOAD_LOCAL_INFERENCE"


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
