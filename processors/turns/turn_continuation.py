"""The caller who goes on after a pause gets one answer to the whole question, not two halves.

Consumes (right after the user aggregator): ``UserStoppedSpeakingFrame`` / ``UserStartedSpeakingFrame``
(downstream, from the aggregator), ``VADUserStartedSpeakingFrame`` (when the caller actually
started again: over the bot, the turn itself starts only once barge-in has heard enough),
``BotStartedSpeakingFrame`` / ``BotStoppedSpeakingFrame`` (upstream, from the output transport)
the ``LLMContextUserTurnFrame`` the aggregator sends each time it writes a user message to the
call's context, and speculative drafts' ``LLMContextFrame``s.
Emits: every frame it is given, the call's context rewritten where two user turns are one (before
the turn's request, or its committed draft, is answered from it), the drafts' provisional
contexts likewise, and a ``UserTurnContinuedFrame`` (frames/turn.py) for a merged turn.
Measures: ``merged``, the turns that continued the one before.

A turn continues the last one when the caller started speaking again within ``window_s`` of its
end and before its answer had been heard: the bot had not started speaking, or had started less
than ``heard_s`` before and was still speaking (the start of the new turn interrupts that answer
the usual way, so nothing of it is spoken later). Its user message is then merged with the last
one, and any assistant text between them (what was said of the cut answer) is dropped, so the
LLM, the fast path and the tool router see the whole question once. A call of one of the
``redo_calls`` (a lookup, the opening of a booking: nothing lasting is done yet) that the first
half started is taken back the same way, its call, result and the instructions that came with it
dropped: the whole question is routed again, and its words choose the call. Independently of timing,
two user messages in a row (an answer that never came) are always merged: consecutive user
messages never reach the LLM separately. A speculative draft's context is merged the same way,
so a draft started on the second half answers the whole.
"""

from __future__ import annotations

import time
from collections.abc import Collection

from loguru import logger
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    Frame,
    LLMContextFrame,
    LLMContextUserTurnFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from frames.turn import UserTurnContinuedFrame


class TurnContinuation(FrameProcessor):
    """Merges a turn with the one before it when the caller went on before the answer was heard."""

    def __init__(self, context: LLMContext, *, window_s: float = 2.0, heard_s: float = 1.0,
                 redo_calls: Collection[str] = (), **kwargs):
        """Create the processor.

        Args:
            context: The call's context, the one the user aggregator writes.
            window_s: The caller starting again this soon after a turn ended may be going on.
            heard_s: An answer heard for less than this (and not finished) was not yet heard.
            redo_calls: Functions whose call a continued turn takes back, to be made again from
                the whole question: only those that change nothing the caller was told of.
            **kwargs: Passed to ``FrameProcessor``.
        """
        super().__init__(**kwargs)
        self.context = context
        self.redo_calls = frozenset(redo_calls)
        self.window_s = window_s
        self.heard_s = heard_s
        self.merged = 0
        self._turn_ended_at: float | None = None
        self._bot_started_at: float | None = None
        self._bot_speaking = False
        self._resumed_at: float | None = None  # the caller's first speech after the turn ended
        self._continuing = False

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        now = time.monotonic()
        if isinstance(frame, BotStartedSpeakingFrame):
            self._bot_speaking, self._bot_started_at = True, now
        elif isinstance(frame, BotStoppedSpeakingFrame):
            self._bot_speaking = False
            self._turn_ended_at = None  # the answer was heard to its end: what comes next is new
        elif direction is FrameDirection.DOWNSTREAM:
            if isinstance(frame, UserStoppedSpeakingFrame):
                self._turn_ended_at, self._bot_started_at, self._resumed_at = now, None, None
            elif isinstance(frame, VADUserStartedSpeakingFrame) and self._resumed_at is None:
                self._resumed_at = now
            elif isinstance(frame, UserStartedSpeakingFrame):
                self._continuing = self._goes_on(self._resumed_at or now)
            elif isinstance(frame, LLMContextUserTurnFrame):
                # The aggregator has just written the user message, and its request (or the draft
                # it commits) is answered from this context after this frame: merge it now.
                merged = self._merge(self.context, log=True)
                self._continuing = False
                await self.push_frame(frame, direction)
                if merged is not None:
                    self.merged += 1
                    await self.push_frame(UserTurnContinuedFrame(text=merged), direction)
                return
            elif isinstance(frame, LLMContextFrame) and frame.speculation:
                self._merge(frame.context)  # a draft's own copy, with the turn's text so far
        await self.push_frame(frame, direction)

    def _goes_on(self, resumed_at: float) -> bool:
        if self._turn_ended_at is None or resumed_at - self._turn_ended_at > self.window_s:
            return False
        if self._bot_started_at is None or self._bot_started_at > resumed_at:
            return True  # nothing of the answer had been heard when the caller went on
        return self._bot_speaking and resumed_at - self._bot_started_at < self.heard_s

    def _merge(self, context: LLMContext, *, log: bool = False) -> str | None:
        """Rewrite ``context`` where its last user message continues the one before; the merged text."""
        messages = list(context.get_messages())
        last = len(messages) - 1
        if last < 1 or messages[last].get("role") != "user" or not isinstance(messages[last].get("content"), str):
            return None  # not a user turn's request
        before = _last_user(messages, last)
        if before is None:
            return None
        between = messages[before + 1:last]
        if between and not (self._continuing and _taken_back(between, self.redo_calls)):
            return None
        text = f"{messages[before]['content'].strip()} {messages[last]['content'].strip()}".strip()
        context.set_messages([*messages[:before], {"role": "user", "content": text}])
        if log:
            logger.debug(f"{self}: the caller went on after a pause: one turn [{text}]")
        return text


def _last_user(messages: list, end: int) -> int | None:
    """Index of the last plain user message before ``end``."""
    for i in range(end - 1, -1, -1):
        message = messages[i]
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return i
    return None


def _taken_back(between: list, redo_calls: frozenset) -> bool:
    """Whether the messages between two halves of a question are all undone by joining them:
    what was said of the cut answer, and calls of ``redo_calls`` with their results and the
    instructions they brought (a flow's step). Anything else (a booking confirmed, a tool
    result the LLM answered from) keeps the halves apart."""
    calls = {call.get("id") for m in between if m.get("role") == "assistant"
             for call in m.get("tool_calls") or () if call.get("function", {}).get("name") in redo_calls}
    for message in between:
        role = message.get("role")
        if _said_text(message):
            continue
        if role == "assistant" and message.get("tool_calls") \
                and all(call.get("id") in calls for call in message["tool_calls"]):
            continue
        if role == "tool" and message.get("tool_call_id") in calls:
            continue
        if role in ("system", "developer") and calls:
            continue
        return False
    return True


def _said_text(message: dict) -> bool:
    return message.get("role") == "assistant" and isinstance(message.get("content"), str) and not message.get("tool_calls")
