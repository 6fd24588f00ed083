"""HTTP server: the web page, SmallWebRTC signalling and health.

    GET  /            the browser client (web/)
    POST /api/offer   {"sdp", "type": "offer"} -> {"sdp", "type", "pc_id"}   (starts a call)
    PATCH /api/offer  {"pc_id", "candidates": [...]}                          (trickle ICE)
    GET  /healthz     per-component JSON; 200 only when models and LLM are ready
    GET  /metrics     Prometheus metrics (agent/metrics.py)
    POST /twilio/voice, WS /ws/twilio    phone calls (agent/twilio.py)
    GET  /api/livekit/token              a caller's LiveKit room token (agent/livekit.py)
"""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from loguru import logger
from pipecat.transports.smallwebrtc.connection import IceServer, SmallWebRTCConnection
from pipecat.transports.smallwebrtc.request_handler import (
    IceCandidate,
    SmallWebRTCPatchRequest,
    SmallWebRTCRequest,
    SmallWebRTCRequestHandler,
)
from pipecat.workers.runner import WorkerRunner

from agent.config import BriskConfig
from agent.livekit import token_router
from agent.metrics import BriskMetrics, setup_tracing
from agent.pipeline import Flavor, build_call, webrtc_transport
from agent.runtime import Runtime
from agent.twilio import TwilioPhone

WEB_DIR = Path(__file__).resolve().parent.parent / "web"


class CallManager:
    """Runs one pipeline per WebRTC peer and tears it down when the peer goes away."""

    def __init__(self, runtime: Runtime, flavor: Flavor = "brisk"):
        self.runtime = runtime
        self.flavor = flavor
        self.tasks: dict[str, asyncio.Task] = {}
        self.calls: dict[str, object] = {}
        self.listeners: list = []  # callables(pc_id, Call) run when a call is assembled (tests, bench)

    @property
    def active(self) -> int:
        return sum(1 for t in self.tasks.values() if not t.done())

    async def start_call(self, connection: SmallWebRTCConnection) -> None:
        transport = webrtc_transport(connection)
        call = build_call(self.runtime.resources, transport, flavor=self.flavor)
        pc_id = connection.pc_id
        self.calls[pc_id] = call
        for listener in self.listeners:
            listener(pc_id, call)

        @transport.event_handler("on_client_disconnected")
        async def on_client_disconnected(_transport, _client):
            logger.info(f"call {pc_id}: client disconnected, ending the call")
            await call.worker.cancel(reason="client disconnected")

        async def run():
            runner = WorkerRunner(handle_sigint=False)
            try:
                await runner.add_workers(call.worker)
                await runner.run()
            except Exception:
                logger.exception(f"call {pc_id} failed")
            finally:
                logger.info(f"call {pc_id} ended: {json.dumps(call.latency.summary()['processors'])}")
                self.tasks.pop(pc_id, None)

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
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise _bad_request(413, f"offer too large ({declared} bytes > {max_bytes})")
    body = await request.body()
    if len(body) > max_bytes:
        raise _bad_request(413, f"offer too large ({len(body)} bytes > {max_bytes})")
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


def create_app(config: BriskConfig, runtime: Runtime | None = None, flavor: Flavor = "brisk") -> FastAPI:
    """The FastAPI app. Pass a started ``runtime`` to share one (tests, bench); else it starts its own."""
    owns_runtime = runtime is None
    runtime = runtime or Runtime(config)
    calls = CallManager(runtime, flavor=flavor)
    handler = SmallWebRTCRequestHandler(ice_servers=[IceServer(urls=u) for u in config.ice_servers])
    phone = TwilioPhone(
        runtime,
        auth_token=config.twilio_auth_token,
        public_url=config.public_url,
        max_calls=config.max_calls,
        flavor=flavor,
    )
    metrics = BriskMetrics(tracer=setup_tracing(config.otlp_endpoint))
    calls.listeners.append(metrics.listener("webrtc"))
    phone.listeners.append(metrics.listener("twilio"))

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if owns_runtime:
            try:
                await runtime.start()
            except Exception as e:
                # Keep serving /healthz so an operator can see why, instead of a dead port.
                runtime.error = f"{type(e).__name__}: {e}"
                logger.error(f"Brisk could not start: {runtime.error}")
        yield
        await calls.stop()
        await phone.stop()
        await handler.close()
        if owns_runtime:
            await runtime.stop()

    # Calls are traced by agent/metrics.py; FastAPI's own spans (on once tracing is set up)
    # would add a trace per HTTP request, Prometheus scrapes included, and per WebSocket.
    app = FastAPI(title="Brisk", lifespan=lifespan, telemetry={"tracing": False})
    app.state.runtime = runtime
    app.state.calls = calls
    app.state.phone = phone
    app.state.metrics = metrics

    @app.get("/healthz")
    async def healthz():
        ready, body = runtime.health()
        body["calls"] = calls.active + phone.active
        return JSONResponse(body, status_code=200 if ready else 503)

    @app.post("/api/offer")
    async def offer(request: Request):
        webrtc_request = await parse_offer(request, config.max_offer_bytes)
        if runtime.resources is None:
            raise HTTPException(status_code=503, detail=runtime.error or "Brisk is still starting; retry shortly")
        if webrtc_request.pc_id is None and calls.active >= config.max_calls:
            raise HTTPException(status_code=503, detail=f"busy: {calls.active} calls in progress")
        try:
            answer = await handler.handle_web_request(webrtc_request, calls.start_call)
        except HTTPException:
            raise
        except Exception as e:
            raise _bad_request(400, f"could not accept the offer: {e}") from None
        return answer

    @app.patch("/api/offer")
    async def ice_candidate(request: Request):
        try:
            data = await request.json()
            patch = SmallWebRTCPatchRequest(
                pc_id=data["pc_id"],
                candidates=[IceCandidate(**c) for c in data.get("candidates", [])],
            )
        except (ValueError, KeyError, TypeError) as e:
            raise _bad_request(400, f"malformed ICE candidate patch: {e}") from None
        await handler.handle_patch_request(patch)
        return {"status": "success"}

    app.include_router(metrics.router)
    app.include_router(phone.router)
    app.include_router(
        token_router(
            config.livekit_public_url or config.livekit_url,
            config.livekit_api_key,
            config.livekit_api_secret,
            ttl_secs=config.livekit_token_ttl_secs,
            agent_name=config.livekit_agent_name,
        )
    )
    # Last: a mount at "/" answers every path, so routes must come before it.
    app.mount("/", StaticFiles(directory=WEB_DIR, html=True), name="web")
    return app
