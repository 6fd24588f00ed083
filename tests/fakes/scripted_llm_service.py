"""An in-process pipecat LLM service that streams scripted answers word by word.

No HTTP: each ``LLMContextFrame`` is answered with the next of ``answers`` between
``LLMFullResponseStartFrame`` and ``LLMFullResponseEndFrame``, through ``LLMService.push_frame``
and so through pipecat's speculation gate, as a real service's tokens go.
"""

from __future__ import annotations

import asyncio
import re

from pipecat.frames.frames import (
    Frame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
)
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.llm_service import LLMService
from pipecat.services.settings import LLMSettings

_TOKEN = re.compile(r"\S+\s*")


class ScriptedLLMService(LLMService):
    """Answers the n-th inference with ``answers[n]``, one word-token every ``token_gap_s``."""

    def __init__(self, answers: list[str], *, token_gap_s: float = 0.0, **kwargs):
        # Every field given (None: unsupported), as pipecat asks of a service.
        fields = ("model", "system_instruction", "temperature", "max_tokens", "top_p", "top_k",
                  "frequency_penalty", "presence_penalty", "seed", "filter_incomplete_user_turns",
                  "user_turn_completion_config")
        kwargs.setdefault("settings", LLMSettings(**dict.fromkeys(fields)))
        super().__init__(**kwargs)
        self._answers = list(answers)
        self._token_gap_s = token_gap_s

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if not isinstance(frame, LLMContextFrame):
            await self.push_frame(frame, direction)
            return
        answer = self._answers.pop(0)
        await self.push_frame(LLMFullResponseStartFrame())
        for token in _TOKEN.findall(answer):
            await self._push_llm_text(token)
            await asyncio.sleep(self._token_gap_s)
        await self.push_frame(LLMFullResponseEndFrame())
