"""A scripted OpenAI-compatible LLM server: real HTTP + SSE on loopback, fixed answers, set speed.

It lets the benchmark measure pipeline overhead apart from model speed, and lets tests check
what the pipeline asked for: every request is recorded (messages, when it came, how many
tokens went out, whether the client hung up before the end).

    POST /v1/chat/completions   {"messages": [...], "stream": true}  -> SSE chunks, then [DONE]
    GET  /v1/models

Like OpenAI, it reports ``usage`` (prompt and completion tokens) on a plain completion, and on a
stream asked for it with ``stream_options: {"include_usage": true}`` as one last chunk with no
choices before ``[DONE]``; a stream the client hangs up on never gets that far. Tokens are
word-ish pieces (``_tokens``), the same count on both sides of the wire.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

DEFAULT_ANSWER = "We are open from nine to six on weekdays, and from ten to four on Saturday."


@dataclass
class RecordedRequest:
    messages: list[dict]
    received_at: float  # time.monotonic()
    tokens_sent: int = 0
    completed: bool = False
    disconnected: bool = False  # the client closed the stream before the last token
    first_token_at: float | None = None
    include_usage: bool = False  # the client asked for the usage chunk (stream_options)
    tools: list | None = None  # the tools the request offered, as sent
    max_tokens: int | None = None  # the cap the request asked for (a prompt-cache warm-up asks for 1)
    ttft_s: float = 0.0  # this request's time to first token and token rate (``ScriptedLLM.pace``)
    tokens_per_s: float = 1.0

    @property
    def last_user_text(self) -> str:
        return last_user_text(self.messages)

    @property
    def prompt_tokens(self) -> int:
        return sum(len(_tokens(str(m.get("content", "")))) for m in self.messages)

    def usage(self, completion_tokens: int) -> dict:
        """OpenAI's ``usage`` object for this request's prompt and ``completion_tokens``."""
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": completion_tokens,
                "total_tokens": self.prompt_tokens + completion_tokens,
                # No prompt cache here: a meter reads every prompt token as computed.
                "prompt_tokens_details": {"cached_tokens": 0}}


def last_user_text(messages: list[dict]) -> str:
    """The text of the last user message (its text parts, when it has several)."""
    users = [m for m in messages if m.get("role") == "user"]
    content = users[-1]["content"] if users else ""
    if isinstance(content, list):
        content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def _tokens(text: str) -> list[str]:
    """Word-ish pieces with their leading space, roughly how a BPE tokenizer splits English."""
    return re.findall(r"\s*\S+", text)


@dataclass
class ScriptedLLM:
    """Answers every chat completion with ``answer_for(messages)`` at a set TTFT and token rate."""

    ttft_s: float = 0.3
    tokens_per_s: float = 30.0
    answer_for: Callable[[list[dict]], str] = field(default=lambda _messages: DEFAULT_ANSWER)
    requests: list[RecordedRequest] = field(default_factory=list)
    # Per request (TTFT s, tokens/s), when the speed should vary as a real server's does; else the fixed two.
    pace: Callable[[], tuple[float, float]] | None = None

    def busy(self, since: int = 0) -> bool:
        """Whether a request from ``requests[since]`` on is still streaming."""
        return any(not (r.completed or r.disconnected) for r in self.requests[since:])

    def app(self) -> FastAPI:
        app = FastAPI(title="scripted-llm")

        @app.get("/v1/models")
        async def models():
            return {"object": "list", "data": [{"id": "scripted", "object": "model", "owned_by": "brisk"}]}

        @app.post("/v1/chat/completions")
        async def chat(request: Request):
            body = await request.json()
            messages = body.get("messages") or []
            record = RecordedRequest(messages=messages, received_at=time.monotonic(), tools=body.get("tools"),
                                     max_tokens=body.get("max_tokens", body.get("max_completion_tokens")),
                                     include_usage=bool((body.get("stream_options") or {}).get("include_usage")))
            record.ttft_s, record.tokens_per_s = self.pace() if self.pace else (self.ttft_s, self.tokens_per_s)
            self.requests.append(record)
            answer = self.answer_for(messages)
            if not body.get("stream"):
                await asyncio.sleep(record.ttft_s)
                record.completed = True
                return JSONResponse(_completion(answer, record.usage(len(_tokens(answer)))))
            return StreamingResponse(self._stream(record, answer, request), media_type="text/event-stream")

        return app

    async def _stream(self, record: RecordedRequest, answer: str, request: Request):
        deltas = [{"content": token} for token in _tokens(answer)]
        async for event in self.stream_deltas(record, deltas, "stop", request):
            yield event

    async def stream_deltas(self, record: RecordedRequest, deltas: list[dict], finish_reason: str,
                            request: Request, model: str = "scripted"):
        """SSE events for ``deltas``, one per token at the set TTFT and rate, then the finish."""
        completion_id = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        try:
            await asyncio.sleep(record.ttft_s)
            for i, delta in enumerate(deltas):
                if i:
                    await asyncio.sleep(1.0 / record.tokens_per_s)
                if await request.is_disconnected():
                    record.disconnected = True
                    return
                if record.first_token_at is None:
                    record.first_token_at = time.monotonic()
                record.tokens_sent += 1
                yield sse_chunk(completion_id, delta, model=model)
            yield sse_chunk(completion_id, {}, finish_reason=finish_reason, model=model)
            if record.include_usage:
                yield sse_usage_chunk(completion_id, record.usage(record.tokens_sent), model=model)
            yield "data: [DONE]\n\n"
            record.completed = True
        except asyncio.CancelledError:
            record.disconnected = True
            raise


def sse_chunk(completion_id: str, delta: dict, finish_reason: str | None = None, model: str = "scripted") -> str:
    """One OpenAI ``chat.completion.chunk`` as a server-sent event."""
    chunk = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
    return f"data: {json.dumps(chunk)}\n\n"


def sse_usage_chunk(completion_id: str, usage: dict, model: str = "scripted") -> str:
    """The last chunk of a stream asked for ``include_usage``: no choices, the whole usage."""
    chunk = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [],
        "usage": usage,
    }
    return f"data: {json.dumps(chunk)}\n\n"


def _completion(answer: str, usage: dict) -> dict:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "scripted",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
        "usage": usage,
    }
