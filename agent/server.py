"""The HTTP app: composes the page, every transport's routes, health and metrics.

    GET  /            the browser client (web/, package data)
    POST /api/session, POST /api/offer, PATCH /api/offer    browser calls (agent/transports/webrtc.py)
    GET  /healthz     {"ready"}; 200 only when models and LLM are ready; per-component details
                      for the operator (BRISK_OPERATOR_KEY, or this machine when none is set)
    GET  /metrics     Prometheus metrics (agent/metrics.py); the operator's only, like /healthz's details
    POST /twilio/voice, WS /ws/twilio    phone calls (agent/transports/twilio.py)
    GET  /api/livekit/token              a caller's LiveKit room token (agent/transports/livekit.py)
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from importlib import resources

from fastapi import Depends, FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from loguru import logger

from agent.call.admission import CallAdmission
from agent.config import BriskConfig
from agent.metrics import BriskMetrics, setup_tracing
from agent.call.pipeline import BuildCall, build_call
from agent.records.api import operator_check, operator_only, records_router
from agent.runtime.runtime import Runtime
from agent.security.access import Access
from agent.security.ice_servers import page_ice_servers
from agent.transports.livekit import token_router
from agent.transports.twilio import TwilioPhone
from agent.transports.webrtc import WebRTCSignalling


def web_dir():
    """The browser client's files, wherever Brisk is installed (``web`` is package data)."""
    return resources.files("web")


def create_app(config: BriskConfig, runtime: Runtime | None = None, build: BuildCall = build_call) -> FastAPI:
    """The FastAPI app. Pass a started ``runtime`` to share one (tests, bench); else it starts its own.
    ``build`` assembles every call of every transport (docs/extending.md)."""
    owns_runtime = runtime is None
    runtime = runtime or Runtime(config)
    # One limit for every transport of this process, taken before any pipeline is built.
    admission = CallAdmission(config.max_calls)
    access = Access.for_config(config)
    max_duration = config.call_max_duration_secs or None
    webrtc = WebRTCSignalling(
        runtime,
        admission=admission,
        ice_servers=config.ice_servers,
        max_offer_bytes=config.max_offer_bytes,
        max_duration_s=max_duration,
        build=build,
        access=access,
        page_ice_servers=lambda: page_ice_servers(config.ice_servers, config.turn_secret, config.turn_ttl_secs),
    )
    calls = webrtc.calls
    phone = TwilioPhone(
        runtime,
        auth_token=config.twilio_auth_token,
        public_url=config.public_url,
        admission=admission,
        busy_text=config.busy_text,
        max_duration_s=max_duration,
        build=build,
        access=access,
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
        await webrtc.stop()
        await phone.stop()
        if owns_runtime:
            await runtime.stop()

    # Calls are traced by agent/metrics.py; FastAPI's own spans (on once tracing is set up)
    # would add a trace per HTTP request, Prometheus scrapes included, and per WebSocket.
    app = FastAPI(title="Brisk", lifespan=lifespan, telemetry={"tracing": False})
    app.state.runtime = runtime
    app.state.calls = calls
    app.state.admission = admission
    app.state.phone = phone
    app.state.metrics = metrics
    app.state.access = access
    is_operator = operator_check(config.operator_key)

    @app.get("/healthz")
    async def healthz(request: Request):
        ready, body = runtime.health()
        if not is_operator(request):
            # Process ids, file paths and the LLM's URL are the operator's to see.
            return JSONResponse({"ready": ready}, status_code=200 if ready else 503)
        body["calls"] = admission.active
        body["calls_by_transport"] = admission.by_transport()
        return JSONResponse(body, status_code=200 if ready else 503)

    app.include_router(webrtc.router)
    # What the calls do is the operator's to see, like their records (Prometheus sends the key).
    app.include_router(metrics.router, dependencies=[Depends(operator_only(config.operator_key))])
    app.include_router(phone.router)
    app.include_router(
        token_router(
            config.livekit_public_url or config.livekit_url,
            config.livekit_api_key,
            config.livekit_api_secret,
            ttl_secs=config.livekit_token_ttl_secs,
            agent_name=config.livekit_agent_name,
            access=access,
        )
    )
    app.include_router(records_router(runtime, config.operator_key))

    @app.get("/calls", include_in_schema=False)
    async def calls_page():
        # The page is static; the records it shows are behind the operator key (/api/calls).
        return FileResponse(str(web_dir() / "calls.html"))
    # Last: a mount at "/" answers every path, so routes must come before it.
    app.mount("/", StaticFiles(directory=web_dir(), html=True), name="web")
    return app
