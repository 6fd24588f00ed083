"""A scripted OpenAI-compatible LLM server that calls a tool before it answers.

Like ``agent.bench.scripted_llm.ScriptedLLM`` (real HTTP + SSE on loopback, every request
recorded), except that a conversation whose last message is not a tool result is answered
with one streamed tool call (``tool_name`` with ``arguments``, split over several chunks the
way real servers stream them); once the tool result is in the messages it streams
``answer_for(messages)`` as text.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from fastapi import Request

from agent.bench.scripted_llm import RecordedRequest, ScriptedLLM


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
        call_id = f"call_{uuid.uuid4().hex[:8]}"
        half = len(self.arguments) // 2
        pieces = [
            {"index": 0, "id": call_id, "type": "function", "function": {"name": self.tool_name, "arguments": ""}},
            {"index": 0, "function": {"arguments": self.arguments[:half]}},
            {"index": 0, "function": {"arguments": self.arguments[half:]}},
        ]
        deltas = [{"tool_calls": [piece]} for piece in pieces]
        async for event in self.stream_deltas(record, deltas, "tool_calls", request, model="scripted-tools"):
            yield event
