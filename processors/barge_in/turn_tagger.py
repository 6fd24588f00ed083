"""Numbers bot turns and tags the LLM's output with them; tells the rest which turns a cut ends.

Consumes (right after the LLM, in direct mode, so in the exact order the LLM pushes: pipecat's
``InterruptionFrame`` is a system frame and overtakes queued frames, so a queued processor here
could see an answer's start after the interruption that cancelled it): the LLM's answer frames,
``TTSSpeakFrame``s, ``BargeInDecisionFrame`` and ``InterruptionFrame``.
Emits: a ``BotTurnStartFrame`` before each bot turn (an LLM answer, or a ``TTSSpeakFrame``
spoken outside one) and the turn id in the metadata of every answer frame; when a barge-in
decision interrupts (or an interruption from elsewhere reaches it) a ``BotTurnsCutFrame``:
every turn so far is stale, in that frame and, at once, in the call's ``StaleTurns``.
"""

from __future__ import annotations

from pipecat.frames.frames import (
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    SystemFrame,
    TTSSpeakFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from frames.turn import TURN_ID, BargeInDecisionFrame, BotTurnsCutFrame, BotTurnStartFrame, is_bot_turn_frame
from processors.barge_in.stale_turns import StaleTurns

# Turns started since the last cut that a cut still names. A turn this many turns old has long
# gone out, so the list stays short over a long call with no interruption.
_UNCUT_TURNS_KEPT = 8


class TurnTagger(FrameProcessor):
    """Numbers bot turns, tags their frames, and announces cuts; see the module docstring."""

    def __init__(self, stale: StaleTurns, **kwargs):
        """Args: stale: the call's stale-turn register, shared with the gate before the transport."""
        super().__init__(enable_direct_mode=True, **kwargs)
        self._stale = stale
        self._current: int | None = None
        self._in_answer = False
        self._uncut: dict[int, str] = {}  # turns started since the last cut, by id: their kind
        self._pending_decision: BargeInDecisionFrame | None = None

    @property
    def current_turn(self) -> int | None:
        """The newest bot turn, if any."""
        return self._current

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if direction is FrameDirection.DOWNSTREAM:
            if isinstance(frame, BargeInDecisionFrame):
                await self.push_frame(frame, direction)
                if frame.interrupts:
                    self._pending_decision = frame
                    await self._cut()
                return
            if isinstance(frame, InterruptionFrame):
                self._in_answer = False
                await self._cut()
            elif not isinstance(frame, SystemFrame) and is_bot_turn_frame(frame):
                await self._tag(frame)
        await self.push_frame(frame, direction)

    async def _cut(self):
        """Every turn so far is stale; announced once per turn, with the decision behind it.

        pipecat's InterruptionFrame for a decision can arrive here before the decision's own
        frame (the aggregator queues what a strategy pushes, and broadcasts the interruption
        directly); whichever comes first cuts, and a decision that comes after a cut has
        nothing left to cut.
        """
        if self._current is not None:
            self._stale.cut_through(self._current)
        if not self._uncut:
            self._pending_decision = None
            return
        turns, self._uncut = self._uncut, {}
        decision, self._pending_decision = self._pending_decision, None
        await self.push_frame(BotTurnsCutFrame(stale_through=self._current, turns=turns, decision=decision))

    async def _tag(self, frame: Frame):
        standalone_speech = isinstance(frame, TTSSpeakFrame) and not self._in_answer
        if isinstance(frame, LLMFullResponseStartFrame) or standalone_speech:
            kind = "utterance" if standalone_speech else "answer"
            turn_id = (self._current or 0) + 1
            self._current = turn_id
            self._uncut[turn_id] = kind
            for old in [t for t in self._uncut if t <= turn_id - _UNCUT_TURNS_KEPT]:
                del self._uncut[old]
            marker = BotTurnStartFrame(turn_id, kind)
            marker.metadata[TURN_ID] = turn_id
            await self.push_frame(marker)
            self._in_answer = not standalone_speech
        elif isinstance(frame, LLMFullResponseEndFrame):
            self._in_answer = False
        if self._current is not None:
            frame.metadata[TURN_ID] = self._current
