"""The facts a question is about, read into the LLM server's cache while the caller still asks it.

Consumes (between the STT and the user aggregator, which keeps partials to itself):
``PartialTranscriptionFrame``s, ``VADUserStartedSpeakingFrame`` (a new utterance) and
``EndFrame`` / ``CancelFrame``. Every frame passes on unchanged.
Emits: nothing into the pipeline. On a partial of at least ``min_words`` words whose facts are
not the ones last read for this utterance, it sends the request a draft of those words would
send (the call's context laid out as the LLM sees it, the words, and their facts before them:
``fact_grounding.with_facts``) as a one-token completion (``PromptCache``). At most one is in
flight per call; when it is done, the latest partial's facts are read next if they differ.
Measures: ``prefills`` (read), ``skipped`` (facts whose partial was overtaken while another
prefill was read), ``failures`` and ``prefill_s`` (the seconds they took, all together).

Why: grounding puts the facts after the cached prefix, just before the question, so on the
embedded model every LLM answer first read 30-110 new prompt tokens at 11-16 ms each after the
turn had ended. A question usually names what it is about before its last word ("How much is
it to rent an electric bike for a day?"), so that reading can happen while the caller speaks;
the draft or the final request that follows then shares the prompt up to the question's last
words, and reads only those.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from loguru import logger
from pipecat.frames.frames import CancelFrame, EndFrame, Frame, VADUserStartedSpeakingFrame
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from frames.transcription import PartialTranscriptionFrame
from processors.llm.fact_grounding import GroundingFor, with_facts
from processors.fast_path import last_user_words
from processors.llm.prompt_cache import PromptCache

Layout = Callable[[LLMContext], object]  # rewrites a context in place as the LLM service will see it


class FactsPrefill(FrameProcessor):
    """Reads each utterance's facts into the LLM server's prompt cache as soon as a partial names them."""

    def __init__(self, *, cache: PromptCache, context: LLMContext, grounding_for: GroundingFor,
                 layout: Layout | None = None, min_words: int = 3, **kwargs):
        """Args:
            cache: Sends the prompt, rendered as the LLM service renders it.
            context: The call's conversation (the user aggregator's context), read at each partial.
            grounding_for: The caller's words -> their facts message, as fact grounding gives them.
            layout: What the prompt processors do to a context before the LLM (the context
                window's ``apply``); None = as it is.
            min_words: Fewest words in a partial worth reading facts for.
        """
        super().__init__(**kwargs)
        self._cache = cache
        self._context = context
        self._grounding_for = grounding_for
        self._layout = layout
        self._min_words = min_words
        self._wanted: str | None = None  # the facts of this utterance's latest partial
        self._wanted_text = ""  # that partial's words
        self._read: str | None = None  # the facts last read this utterance
        self._task: asyncio.Task | None = None
        self.prefills = 0
        self.skipped = 0
        self.failures = 0
        self.prefill_s = 0.0  # the server's time on them, all together

    def as_dict(self) -> dict:
        """What it measured, as JSON."""
        return {"prefills": self.prefills, "skipped": self.skipped, "failures": self.failures,
                "prefill_s": round(self.prefill_s, 3)}

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Prefill on partials; pass every frame on."""
        await super().process_frame(frame, direction)
        if isinstance(frame, VADUserStartedSpeakingFrame):
            self._read = self._wanted = None
        elif isinstance(frame, PartialTranscriptionFrame) and direction is FrameDirection.DOWNSTREAM:
            await self._on_partial(frame.text)
        elif isinstance(frame, (EndFrame, CancelFrame)):
            await self._stop()
        await self.push_frame(frame, direction)

    async def cleanup(self):
        """Stop a prefill in flight if the pipeline ends without an End/CancelFrame."""
        await super().cleanup()
        await self._stop()

    def _draft_context(self, text: str, facts: str) -> LLMContext:
        """The context a draft of ``text`` reaches the LLM with: the conversation, the words, their facts."""
        return with_facts(self._laid_out([*self._context.get_messages(), {"role": "user", "content": text}]), facts)

    def _laid_out(self, messages: list) -> LLMContext:
        context = LLMContext(messages=messages, tools=self._context.tools, tool_choice=self._context.tool_choice)
        if self._layout is not None:
            self._layout(context)
        return context

    async def _on_partial(self, text: str):
        if len(text.split()) < self._min_words:
            return
        try:
            # The words alone are laid out (fillers stripped as in the request), not the whole
            # conversation: this runs on every partial, on the audio path.
            facts = self._grounding_for(last_user_words(self._laid_out([{"role": "user", "content": text}])))
        except Exception as error:  # a retrieval bug costs the prefill, never the call
            self.failures += 1
            logger.exception(f"{self}: no prefill for [{text}]: {error}")
            return
        if facts == self._wanted:
            return
        if self._wanted is not None and self._wanted != self._read:
            self.skipped += 1  # its partial came and went while another prefill was read
        self._wanted, self._wanted_text = facts, text
        if self._task is None or self._task.done():
            self._task = self.create_task(self._prefill_latest(), name=f"{self}::prefill")

    async def _prefill_latest(self):
        # One at a time, never cancelled: the server reads a prompt in one batch whatever the
        # client does, so a cancelled prefill would still hold up the request queued behind it.
        while self._wanted is not None and self._wanted != self._read:
            facts = self._wanted
            context = self._draft_context(self._wanted_text, facts)
            took = await self._cache.warm(context, why=f"{self}: facts")
            self._read = facts
            if took is None:
                self.failures += 1
                return
            self.prefills += 1
            self.prefill_s += took

    async def _stop(self):
        if self._task is not None:
            task, self._task = self._task, None
            await self.cancel_task(task)
