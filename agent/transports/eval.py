"""Calls placed by pipecat's eval harness (``pipecat.evals``), for ``python -m agent eval``.

    WS   /ws/eval    The harness's RTVI WebSocket. In: ``eval-connect`` first (its flags:
                     text or audio), then the user's text (RTVI ``send-text``), keypad
                     (``dtmf``) or audio (``raw-audio``, 16 kHz). Out: RTVI server
                     messages (the bot's text, its function calls) and, when asked, its audio.

Each connection is one call, built by the same ``build_call`` as a browser's or a phone's:
every processor as in a real call, the business's tools and forms included. In text modality
the harness's words reach the context as the user's message (RTVI ``send-text``) and the bot's
speech is not synthesised (``skip_tts``): what it would say without the LLM (a form's question)
goes on as its text (processors/tts/said_as_text.py), so the harness reads every answer; in
audio modality the harness speaks and the call
hears it through the VAD, Whisper and the turn strategies like any caller.

The route is on no server Brisk serves to callers: ``python -m agent eval`` mounts it on a
server of its own on a free loopback port (agent/evals/runner.py), so nothing reachable from
elsewhere can start a call through it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from loguru import logger
from pipecat.evals.fastapi_transport import EvalFastAPIWebsocketTransport
from pipecat.evals.serializer import EvalSerializer, parse_eval_connect
from pipecat.evals.transport import EvalTransportParams

from agent.call.call_control import CallControl
from agent.call.call_runner import run_call
from agent.call.pipeline import INPUT_SAMPLE_RATE, BuildCall, Call, build_call
from processors.tts.said_as_text import SaidAsText

EVAL_PATH = "/ws/eval"
CONNECT_TIMEOUT_S = 10.0
CLOSE_POLICY = 1008


class EvalLine:
    """The harness's calls: ``router`` holds the WebSocket route; ``calls`` the calls in progress,
    ``idle`` set while there is none; each of ``listeners`` is told of each call as it starts."""

    def __init__(self, runtime, *, build: BuildCall = build_call, max_duration_s: float | None = None):
        self.runtime = runtime
        self.build = build
        self.max_duration_s = max_duration_s
        self.calls: dict[str, Call] = {}
        self.idle = asyncio.Event()
        self.idle.set()
        self.listeners: list[Callable[[str, Call], None]] = []
        self.router = APIRouter()
        self.router.add_api_websocket_route(EVAL_PATH, self.connect)

    async def connect(self, websocket: WebSocket) -> None:
        await websocket.accept()
        try:
            first = json.loads(await asyncio.wait_for(websocket.receive_text(), CONNECT_TIMEOUT_S))
            flags = parse_eval_connect(first)
        except (asyncio.TimeoutError, ValueError, WebSocketDisconnect) as error:
            logger.warning(f"eval: no eval-connect message ({type(error).__name__}); closing")
            flags = None
        if flags is None:
            await websocket.close(code=CLOSE_POLICY, reason="expected eval-connect first")
            return
        transport = EvalFastAPIWebsocketTransport(
            websocket,
            EvalTransportParams(audio_in_enabled=True, audio_out_enabled=True, add_wav_header=False,
                                audio_in_sample_rate=INPUT_SAMPLE_RATE, serializer=EvalSerializer()),
            flags,
        )
        control = CallControl()
        read = {"after_llm": [SaidAsText()]} if flags.skip_tts else None
        call = self.build(self.runtime.resources, transport, control=control, insert=read)
        self.calls[control.call_id] = call
        self.idle.clear()
        for listener in self.listeners:
            listener(control.call_id, call)
        logger.info(f"eval: call {control.call_id} ({'text' if flags.skip_tts else 'audio'})")
        try:
            await run_call(call, label=f"eval call {control.call_id}", ticket=None,
                           max_duration_s=self.max_duration_s)
        finally:
            self.calls.pop(control.call_id, None)
            if not self.calls:
                self.idle.set()
