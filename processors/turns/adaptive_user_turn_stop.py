"""The end of the caller's turn, decided on what was said: soon after a finished sentence, later
after an unfinished one.

Consumes (as a pipecat user turn stop strategy, inside ``LLMUserAggregator``): VAD frames and the
STT's final ``TranscriptionFrame``s. Emits: the turn end, through pipecat's
``trigger_user_turn_stopped``. Measures: ``held`` (turns whose end waited for more words) and
``released_by_timeout`` (of those, the ones that ended at the maximum wait); one log line per hold
with the reason.

pipecat's ``SpeechTimeoutUserTurnStopStrategy`` ends the turn ``user_speech_timeout`` after the
VAD stop. This subclass keeps that for words that can end a turn; when they can't
(``turn_completeness.unfinished``: "My order number is", "two bikes for Saturday,", "um") it holds
the end until the caller speaks again (the base then discards the pending end, as it does for
any resumed speech), a later transcript of the turn is finished, or ``max_wait_s`` after the VAD
stop has passed. Subclasses that settle something at the turn end (speculative drafts) override
``end_of_turn``, which runs only once the hold is over.
"""

from __future__ import annotations

import asyncio
import time

from loguru import logger
from pipecat.frames.frames import Frame, TranscriptionFrame, VADUserStartedSpeakingFrame, VADUserStoppedSpeakingFrame
from pipecat.turns.types import ProcessFrameResult
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy

from processors.turns.turn_completeness import CompletenessRules, unfinished


class AdaptiveUserTurnStopStrategy(SpeechTimeoutUserTurnStopStrategy):
    """Speech-timeout end of turn that waits up to ``max_wait_s`` after the VAD stop for unfinished words."""

    def __init__(self, *, max_wait_s: float = 1.0, rules: CompletenessRules | None = None, **kwargs):
        """Create the strategy.

        Args:
            max_wait_s: Longest wait after the VAD stop for a turn whose words are unfinished;
                0 = never wait (the base's fixed timeout).
            rules: What counts as unfinished; ``CompletenessRules()`` when None.
            **kwargs: ``SpeechTimeoutUserTurnStopStrategy`` arguments (``user_speech_timeout``).
        """
        super().__init__(**kwargs)
        self.max_wait_s = max_wait_s
        self.rules = rules or CompletenessRules()
        self.held = 0
        self.released_by_timeout = 0
        self._finals: list[str] = []
        self._vad_stop_at: float | None = None
        self._hold_task: asyncio.Task | None = None
        self._end_args: dict = {}

    @property
    def holding(self) -> bool:
        return self._hold_task is not None

    async def handle_user_turn_started(self):
        await super().handle_user_turn_started()
        await self._cancel_hold()
        self._finals.clear()

    async def handle_user_turn_stopped(self):
        await super().handle_user_turn_stopped()
        await self._cancel_hold()
        self._finals.clear()

    async def cleanup(self):
        await super().cleanup()
        await self._cancel_hold()

    async def process_frame(self, frame: Frame) -> ProcessFrameResult:
        if isinstance(frame, VADUserStartedSpeakingFrame):
            await self._cancel_hold()  # the caller went on: the turn is still theirs
        elif isinstance(frame, VADUserStoppedSpeakingFrame):
            self._vad_stop_at = time.monotonic()
        elif isinstance(frame, TranscriptionFrame) and frame.text.strip():
            self._finals.append(frame.text.strip())
        result = await super().process_frame(frame)
        if isinstance(frame, TranscriptionFrame) and self.holding and unfinished(self.turn_text, self.rules) is None:
            await self._release("the words are finished now")
        return result

    @property
    def turn_text(self) -> str:
        """The turn's final transcripts so far, joined."""
        return " ".join(self._finals)

    async def trigger_user_turn_stopped(self, *, enable_user_speaking_frames: bool | None = None):
        """End the turn now, unless its words are unfinished and the caller may still go on."""
        if self.holding:
            return
        reason = unfinished(self.turn_text, self.rules) if self.max_wait_s > 0 else None
        waited = time.monotonic() - self._vad_stop_at if self._vad_stop_at is not None else 0.0
        if reason is not None and waited < self.max_wait_s:
            self.held += 1
            self._end_args = {"enable_user_speaking_frames": enable_user_speaking_frames}
            logger.info(f"{self}: holding the turn end up to {self.max_wait_s - waited:.2f} s: {reason}: [{self.turn_text}]")
            self._hold_task = self.task_manager.create_task(
                self._hold(self.max_wait_s - waited), f"{self}::hold")
            return
        await self.end_of_turn(enable_user_speaking_frames=enable_user_speaking_frames)

    async def end_of_turn(self, *, enable_user_speaking_frames: bool | None = None):
        """The turn ends (overridden by strategies that settle something then)."""
        await super().trigger_user_turn_stopped(enable_user_speaking_frames=enable_user_speaking_frames)

    async def _hold(self, wait_s: float):
        try:
            await asyncio.sleep(wait_s)
        except asyncio.CancelledError:
            return
        self._hold_task = None
        self.released_by_timeout += 1
        logger.info(f"{self}: no more words after the longest wait: the turn ends: [{self.turn_text}]")
        await self.end_of_turn(**self._end_args)

    async def _release(self, why: str):
        await self._cancel_hold()
        logger.info(f"{self}: {why}: the turn ends: [{self.turn_text}]")
        await self.end_of_turn(**self._end_args)

    async def _cancel_hold(self):
        task, self._hold_task = self._hold_task, None
        if task is not None:
            await self.task_manager.cancel_task(task)
