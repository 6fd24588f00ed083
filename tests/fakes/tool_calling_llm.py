"""A scripted OpenAI-compatible LLM server that calls a tool before it answers.

Like ``agent.scripted_llm.ScriptedLLM`` (real HTTP + SSE on loopback, every request
recorded), except that a conversation whose last message is not a tool result is answered
with one streamed tool call (``tool_name`` with ``arguments``, split over several chunks the
way real servers stream them); once the tool result is in the messages it streams
``answer_for(messages)`` as text.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass

from fastapi import Request

from agent.scripted_llm import RecordedRequest, ScriptedLLM, sse_chunk


def _chunk(completion_id: str, delta: dict, finish_reason: str | None = None) -> str:
    return sse_chunk(completion_id, delta, finish_reason, model="scripted-tools")


@dataclass
class ToolCallingLLM(ScriptedLLM):
    """Answers with a call to ``tool_name`` first, then with text once the result is back."""

    tool_name: str = "check_opening_hours"
    arguments: str = '{"day": "saturday"}'

    async def _stream(self, record: RecordedRequest, answer: str, request: Request):
        if record.messages and record.messages[-1].get("role") == "tool":
            async for chunk in super()._stream(record, answer, request):
                yield chunk
            return
        completion_id = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        call_id = f"call_{uuid.uuid4().hex[:8]}"
        half = len(self.arguments) // 2
        pieces = [
            {"index": 0, "id": call_id, "type": "function", "function": {"name": self.tool_name, "arguments": ""}},
            {"index": 0, "function": {"arguments": self.arguments[:half]}},
            {"index": 0, "function": {"arguments": self.arguments[half:]}},
        ]
        try:
            await asyncio.sleep(self.ttft_s)
            for i, piece in enumerate(pieces):
                if i:
                    await asyncio.sleep(1.0 / self.tokens_per_s)
                if await request.is_disconnected():
                    record.disconnected = True
                    return
                if record.first_token_at is None:
                    record.first_token_at = time.monotonic()
                record.tokens_sent += 1
                yield _chunk(completion_id, {"tool_calls": [piece]})
            yield _chunk(completion_id, {}, finish_reason="tool_calls")
            yield "data: [DONE]\n\n"
            record.completed = True
        except asyncio.CancelledError:
            record.disconnected = True
            raise
