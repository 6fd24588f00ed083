"""A caller's turn that cut the bot off and ended with no words (a cough, a door, a breath that
Whisper heard a word in at first): the bot goes on with its answer from the sentence it was cut in.

Consumes (right after the turn tagger, in direct mode, so in the LLM's push order: a queued
processor would lose the cut answer's last text to the interruption): each bot turn's tagged
text (``LLMTextFrame``, ``TTSSpeakFrame``), its ``LLMFullResponseEndFrame``, ``BotTurnStartFrame``
and ``BotTurnsCutFrame``; and the user aggregator's ``on_user_turn_stopped`` event, which says
what the caller's turn held.
Emits: the frames it is given; after such a turn, through the user aggregator (as pipecat's idle
prompts are spoken), one ``TTSSpeakFrame`` with the rest of the cut answer: the sentence that was
playing, whole, and every sentence after it. The assistant aggregator adds it to the context
after what was heard of the cut turn (``playback_tracker.py``), so the context keeps what was said.
Measures: ``resumed``, the texts said again, and ``resumed_at``, when each was sent on (``time.monotonic()``).

pipecat's own answer to a turn with no transcript (``EmptyUserTurnConfig``) runs the LLM with a
prompt to have the caller repeat themselves. Here a finished answer is said on instead, with no
LLM; an answer the LLM had not finished when it was cut still gets pipecat's prompt. The user
aggregator must be built with ``EmptyUserTurnConfig(interrupted_prompt=None)``, or both happen.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from loguru import logger
from pipecat.frames.frames import Frame, LLMFullResponseEndFrame, LLMTextFrame, TTSSpeakFrame
from pipecat.processors.aggregators.llm_response_universal import LLMUserAggregator, UserTurnStoppedMessage
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.turns.empty_user_turn import DEFAULT_EMPTY_USER_TURN_INTERRUPTED_PROMPT

from frames.turn import TURN_ID, BotTurnsCutFrame, BotTurnStartFrame

# Bot turns whose text is kept: a cut names the newest; older ones are long said.
_TURNS_KEPT = 4
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def unheard_rest(text: str, heard: str) -> str:
    """The sentences of ``text`` from the first one ``heard`` does not hold whole."""
    sentences = [s for s in _SENTENCE_END.split(" ".join(text.split())) if s]
    heard_words = heard.split()
    said: list[str] = []
    for i, sentence in enumerate(sentences):
        said += sentence.split()
        if heard_words[: len(said)] != said:
            return " ".join(sentences[i:])
    return ""


class FalseInterruptionResume(FrameProcessor):
    """Says the rest of an answer a wordless turn cut; see the module docstring."""

    def __init__(self, user: LLMUserAggregator, heard: Callable[[int], str | None], **kwargs):
        """Create the processor.

        Args:
            user: The call's user aggregator: its turns are watched, and the rest is spoken through it.
            heard: What the caller heard of a bot turn that was cut (``Interruption.spoken_text``),
                None for a turn that went out whole before the cut.
            **kwargs: Passed to ``FrameProcessor``.
        """
        super().__init__(enable_direct_mode=True, **kwargs)
        self._user = user
        self._heard = heard
        self._texts: dict[int, list[str]] = {}
        self._finished: set[int] = set()
        self._cut: int | None = None  # the newest cut turn the caller has not said anything after
        self.resumed: list[str] = []
        self.resumed_at: list[float] = []
        user.add_event_handler("on_user_turn_stopped", self._on_user_turn_stopped)

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if direction is FrameDirection.DOWNSTREAM:
            turn_id = frame.metadata.get(TURN_ID)
            if isinstance(frame, BotTurnStartFrame):
                self._cut = None  # the bot has moved on
                self._texts[frame.turn_id] = []
                for old in [t for t in self._texts if t <= frame.turn_id - _TURNS_KEPT]:
                    del self._texts[old]
                    self._finished.discard(old)
            elif isinstance(frame, BotTurnsCutFrame):
                self._cut = frame.stale_through
            elif turn_id in self._texts and isinstance(frame, (LLMTextFrame, TTSSpeakFrame)):
                spoken_alone = isinstance(frame, TTSSpeakFrame)
                # An LLM's tokens carry their own spaces; a text spoken alone is a whole piece.
                self._texts[turn_id].append(f" {frame.text} " if spoken_alone else frame.text)
                if spoken_alone:
                    self._finished.add(turn_id)
            elif turn_id in self._texts and isinstance(frame, LLMFullResponseEndFrame):
                self._finished.add(turn_id)
        await self.push_frame(frame, direction)

    async def _on_user_turn_stopped(self, _aggregator, _strategy, message: UserTurnStoppedMessage):
        cut, self._cut = self._cut, None
        if cut is None or message.content.strip():
            return  # nothing cut, or the caller said something: that is what gets answered
        heard = self._heard(cut)
        if heard is None or cut not in self._texts:
            return
        if cut not in self._finished:
            # The LLM was still writing it: pipecat's own recovery, which the aggregator leaves to us.
            logger.debug(f"{self}: a wordless turn cut bot turn {cut} before it was written: the LLM is asked")
            self._user.context.add_message({"role": "developer", "content": DEFAULT_EMPTY_USER_TURN_INTERRUPTED_PROMPT})
            await self._user.push_context_frame()
            return
        rest = unheard_rest("".join(self._texts[cut]), heard)
        if not rest:
            return
        logger.info(f"{self}: a turn with no words cut bot turn {cut}: going on with [{rest}]")
        self.resumed.append(rest)
        self.resumed_at.append(time.monotonic())
        await self._user.push_frame(TTSSpeakFrame(rest))
