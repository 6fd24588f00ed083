"""Keep the prompt prefix warm in the LLM server's prefix cache for the life of a call.

Consumes: ``StartFrame`` (sends the first warm-up as soon as the call starts, before the
user's first word), ``LLMContextFrame`` going downstream (a real request refreshes the cache,
so the next re-warm is counted from it), ``EndFrame`` / ``CancelFrame`` (stops).
Every frame passes on unchanged; put it right before the LLM service.
Emits: nothing into the pipeline. The warm-up is an out-of-band completion (``max_tokens=1``)
on the same OpenAI-compatible client, with the same leading messages the LLM service sends:
the system prompt, then the per-session messages, rendered by pipecat's OpenAI adapter.
Measures: ``warmups`` (how many were sent), ``warmup_durations_s`` and ``failures``.

A provider's prompt cache expires after some minutes idle (5-10 for the big APIs); an
embedded llama.cpp server keeps only the last prompt, which another call may have replaced.
Re-warming ``rewarm_after_s`` after the last request keeps the next turn's prefill short
(the prefix cache: docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from openai import AsyncOpenAI
from pipecat.frames.frames import CancelFrame, EndFrame, Frame, LLMContextFrame, StartFrame
from pipecat.processors.aggregators.llm_context import LLMContext, LLMContextMessage
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from processors.llm.prompt_cache import PromptCache

# Some chat templates reject a conversation without a user turn. Everything before the user
# text is shared with a real request, so the cache covers system prompt and session data.
WARM_UP_USER_TURN = {"role": "user", "content": "Hi"}


class PrefixWarmer(FrameProcessor):
    """Warms the prompt prefix at call start and again before the cache expires."""

    def __init__(
        self,
        *,
        client: AsyncOpenAI,
        model: str,
        system_prompt: str,
        session_messages: Sequence[LLMContextMessage] = (),
        rewarm_after_s: float | None = 240.0,
        convert_developer_to_user: bool = False,
        tools=None,
        **kwargs,
    ):
        """Create the warmer.

        Args:
            client: The process-wide OpenAI-compatible client the LLM service uses.
            model: The model name the LLM service requests.
            system_prompt: The LLM service's system instruction, byte for byte.
            session_messages: The per-session messages pinned after the system prompt (the
                same list given to ``ContextWindow``).
            rewarm_after_s: Re-warm when no request went out for this long; set it below the
                provider's cache TTL. None warms only at call start.
            convert_developer_to_user: As the LLM service does (``not
                supports_developer_role``), so "developer" session messages render the same.
            tools: The ``ToolsSchema`` the call's requests offer: a chat template puts the
                tools in the prompt's prefix, so the warm-up must offer the same ones.
            **kwargs: Passed to ``FrameProcessor``.
        """
        super().__init__(**kwargs)
        self._cache = PromptCache(client=client, model=model, system_prompt=system_prompt,
                                  convert_developer_to_user=convert_developer_to_user)
        self._session_messages = list(session_messages)
        self._rewarm_after_s = rewarm_after_s
        self._tools = tools
        self._last_request_at = 0.0
        self._task: asyncio.Task | None = None
        self.warmups = 0
        self.failures = 0
        self.warmup_durations_s: list[float] = []

    async def warm(self) -> None:
        """Send one warm-up request now."""
        messages = [*self._session_messages, WARM_UP_USER_TURN]
        context = LLMContext(messages=messages, tools=self._tools) if self._tools else LLMContext(messages=messages)
        self._last_request_at = time.monotonic()
        took = await self._cache.warm(context, why=f"{self}: prefix")
        if took is None:
            self.failures += 1
            return
        self.warmups += 1
        self.warmup_durations_s.append(took)

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Start/stop warming with the pipeline; note real requests; pass every frame on."""
        await super().process_frame(frame, direction)
        if isinstance(frame, StartFrame):
            self._task = self.create_task(self._warm_loop(), name=f"{self}::warm")
        elif isinstance(frame, (EndFrame, CancelFrame)):
            await self._stop()
        elif isinstance(frame, LLMContextFrame) and direction == FrameDirection.DOWNSTREAM:
            self._last_request_at = time.monotonic()
        await self.push_frame(frame, direction)

    async def cleanup(self):
        """Stop the warm-up task if the pipeline ends without an End/CancelFrame."""
        await super().cleanup()
        await self._stop()

    async def _stop(self):
        if self._task is not None:
            task, self._task = self._task, None
            await self.cancel_task(task)

    async def _warm_loop(self):
        await self.warm()
        if self._rewarm_after_s is None:
            return
        while True:
            due = self._last_request_at + self._rewarm_after_s
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            await self.warm()
