"""Grounded LLM answers: each question reaches the LLM with the business facts it is about.

Consumes (between the fast path and the LLM): ``LLMContextFrame``s, speculative drafts
included. Emits: in its place a new ``LLMContextFrame`` (same ``speculation``, marked as standing
in for the original: frames/drafts.py) whose context is the original's messages with one
system message right before the caller's last words, holding
what ``grounding_for`` returns for them (agent/business/facts.py: the relevant fact lines, or
"no fact answers this: say you don't know and offer a person"). Every other frame passes on.
Measures: ``grounded``, how many contexts were given facts.

The conversation's own context is never changed, so the history (and the prompt prefix the
LLM server has cached) holds only what was said; the facts sit at the end of the prompt, just
before the question, where a small model reads them best and where they cost no cached prefix.
(After the question, a 0.5B model reads them back to the caller.)
"""

from __future__ import annotations

from collections.abc import Callable

from loguru import logger
from pipecat.frames.frames import Frame, LLMContextFrame
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from frames.drafts import stand_in
from processors.fast_path import last_user_text

GroundingFor = Callable[[str], str]


class FactGrounding(FrameProcessor):
    """Adds the facts a question is about to the context the LLM answers from."""

    def __init__(self, grounding_for: GroundingFor, **kwargs):
        """Args: grounding_for: the caller's words -> the message the LLM reads after them."""
        super().__init__(**kwargs)
        self._grounding_for = grounding_for
        self.grounded = 0

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if direction is FrameDirection.DOWNSTREAM and isinstance(frame, LLMContextFrame):
            text = last_user_text(frame)
            if text.strip():
                grounded = LLMContextFrame(context=self.grounded_context(frame.context, text), speculation=frame.speculation)
                frame = stand_in(grounded, frame)
                self.grounded += 1
        await self.push_frame(frame, direction)

    def grounded_context(self, context: LLMContext, text: str) -> LLMContext:
        """A copy of ``context`` with the facts for ``text`` before its last user message."""
        try:
            facts = self._grounding_for(text)
        except Exception as error:  # a retrieval bug must cost the grounding, not the answer
            logger.exception(f"{self}: no facts for [{text}]: {error}")
            return context
        return with_facts(context, facts)


def with_facts(context: LLMContext, facts: str) -> LLMContext:
    """A copy of ``context`` with a system message of ``facts`` right before its last user message."""
    messages = list(context.get_messages())
    last_user = max((i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"), default=len(messages))
    messages.insert(last_user, {"role": "system", "content": facts})
    return LLMContext(messages=messages, tools=context.tools, tool_choice=context.tool_choice)
