"""What the bot would say, as text: for a call that is read, not heard (an eval in text modality).

Consumes ``TTSSpeakFrame`` (a flow step's question, a greeting, a quiet caller's prompt: words
said without the LLM) and emits, in its place, the same words as an LLM response
(``LLMFullResponseStartFrame``, one ``LLMTextFrame`` marked ``skip_tts``,
``LLMFullResponseEndFrame``): an observer that reports the bot's text (pipecat's RTVI observer,
which an eval harness reads) reports them like any answer, and the context keeps them as the
bot's turn. Nothing is synthesised. Everything else passes through. Measures nothing.
"""

from __future__ import annotations

from pipecat.frames.frames import Frame, LLMFullResponseEndFrame, LLMFullResponseStartFrame, LLMTextFrame, TTSSpeakFrame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor


class SaidAsText(FrameProcessor):
    """Words to be said go on as the bot's text (see the module docstring)."""

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if not (isinstance(frame, TTSSpeakFrame) and direction == FrameDirection.DOWNSTREAM):
            await self.push_frame(frame, direction)
            return
        text = LLMTextFrame(frame.text)
        text.skip_tts = True
        await self.push_frame(LLMFullResponseStartFrame())
        await self.push_frame(text)
        await self.push_frame(LLMFullResponseEndFrame())
