"""One short filler when a tool turn is slow: "Let me check that." — never two, never over the answer.

Sits right after the LLM. Consumes pipecat's ``FunctionCallsStartedFrame`` (a tool call began:
the LLM's or one routed by intent) and starts a clock of ``after_s``; whatever comes downstream
first that will be heard — answer text, a ``TTSSpeakFrame`` — stops it, as do an interruption and
the caller speaking. When the clock runs out first, emits one ``TTSSpeakFrame(filler)`` (kept
out of the context). After a filler there is none again until an answer has passed, so a slow
chain of calls gets one filler, not one per call.
Measures: ``fillers`` (how many were said) and ``calls`` (tool calls seen).
"""

from __future__ import annotations

import asyncio

from pipecat.frames.frames import (
    Frame,
    FunctionCallsStartedFrame,
    InterruptionFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSSpeakFrame,
    UserStartedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor


class ToolFiller(FrameProcessor):
    """See the module docstring."""

    def __init__(self, filler: str, *, after_s: float = 0.7, **kwargs):
        super().__init__(**kwargs)
        self._filler = filler
        self._after_s = after_s
        self._timer: asyncio.Task | None = None
        self._filled = False  # a filler was said and no answer has come since
        self.fillers = 0
        self.calls = 0

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if isinstance(frame, FunctionCallsStartedFrame):
            if direction is FrameDirection.DOWNSTREAM:
                self.calls += len(frame.function_calls)
                if not self._filled and self._timer is None and self._after_s > 0:
                    self._timer = self.create_task(self._fill_later())
        elif isinstance(frame, (LLMFullResponseStartFrame, LLMTextFrame, TTSSpeakFrame)):
            await self._stop_clock()
            self._filled = False
        elif isinstance(frame, (InterruptionFrame, UserStartedSpeakingFrame)):
            await self._stop_clock()
        await self.push_frame(frame, direction)

    async def _fill_later(self):
        await asyncio.sleep(self._after_s)
        self._timer = None
        self._filled = True
        self.fillers += 1
        await self.push_frame(TTSSpeakFrame(self._filler, append_to_context=False))

    async def _stop_clock(self):
        if self._timer is not None:
            timer, self._timer = self._timer, None
            await self.cancel_task(timer)

    async def cleanup(self):
        await self._stop_clock()
        await super().cleanup()
