"""Barge-in as a pipecat user turn start strategy: who gets to cut the bot off, and when.

Consumes (inside the user aggregator): VAD, interim and final transcription and bot-speaking
frames. While the bot is mid-answer a user turn, and with it pipecat's ``InterruptionFrame``,
starts only once the speech has lasted ``min_speech_secs`` (as the VAD sees it) and the
transcript holds ``min_words`` words that are not all backchannels (``BargeInPolicy``). A
backchannel-only utterance instead becomes a ``UserBackchannelFrame``: the client's transcript
gets it (RTVI ``user-input``), the LLM context does not, the bot keeps talking. While the bot is
silent (idle, or an answer still being generated or synthesised) a turn starts at the VAD start,
as pipecat's default does.
A keypad entry (pipecat's ``DTMFAggregator`` transcript, "DTMF: 4572#") starts a turn of its own.
Emits: pipecat's turn events, ``UserBackchannelFrame``, and a ``BargeInDecisionFrame`` just
before each turn start it decides.
Measures: ``decisions`` (each with its time and the VAD-estimated speech start) and
``backchannels``.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    Frame,
    InterimTranscriptionFrame,
    TranscriptionFrame,
    UserBackchannelFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.turns.types import ProcessFrameResult
from pipecat.turns.user_start.base_user_turn_start_strategy import BaseUserTurnStartStrategy

from frames.turn import BargeInDecisionFrame
from processors.barge_in.barge_in_policy import BargeInPolicy, transcript_words

# What pipecat's DTMFAggregator puts before a keypad entry it turns into a transcript.
KEYPAD_PREFIX = "DTMF: "


@dataclass(frozen=True)
class Backchannel:
    """A backchannel the user said while the bot kept talking."""

    at: float  # time.monotonic() of its final transcript
    text: str


@dataclass
class _Utterance:
    started_at: float
    bot_mid_answer: bool
    duration_met: bool = False
    text: str = ""
    settled: bool = False  # started a turn, or was judged a backchannel / noise


class BargeInUserTurnStartStrategy(BaseUserTurnStartStrategy):
    """Starts user turns (and so interruptions) by ``BargeInPolicy``; see the module docstring."""

    def __init__(
        self,
        *,
        policy: BargeInPolicy | None = None,
        **kwargs,
    ):
        """Create the strategy.

        Args:
            policy: When speech interrupts the bot; ``BargeInPolicy()`` by default.
            **kwargs: Passed to ``BaseUserTurnStartStrategy`` (e.g. ``enable_interruptions``).
        """
        super().__init__(**kwargs)
        self.policy = policy or BargeInPolicy()
        self.decisions: list[BargeInDecisionFrame] = []  # every turn start this strategy decided
        self.backchannels: list[Backchannel] = []  # every acknowledgement that let the bot go on
        self._bot_speaking = False
        self._bot_stopped_at = -math.inf
        self._user_turn = False
        self._utterance: _Utterance | None = None
        self._duration_task = None

    @property
    def bot_mid_answer(self) -> bool:
        """Whether the bot is speaking, or stopped less than ``bot_quiet_secs`` ago."""
        return self._bot_speaking or time.monotonic() - self._bot_stopped_at < self.policy.bot_quiet_secs

    async def handle_user_turn_started(self):
        """A turn started (by this or another strategy): nothing more to decide for this speech."""
        self._user_turn = True
        await self._cancel_duration_timer()

    async def handle_user_turn_stopped(self):
        """The next speech needs a decision again."""
        self._user_turn = False

    async def cleanup(self):
        """Stop the duration timer."""
        await self._cancel_duration_timer()
        await super().cleanup()

    async def process_frame(self, frame: Frame) -> ProcessFrameResult:
        """Track the bot and the user's speech; start a turn when the policy says so."""
        if isinstance(frame, BotStartedSpeakingFrame):
            self._bot_speaking = True
        elif isinstance(frame, BotStoppedSpeakingFrame):
            self._bot_speaking = False
            self._bot_stopped_at = time.monotonic()
        elif isinstance(frame, VADUserStartedSpeakingFrame):
            return await self._speech_started(frame)
        elif isinstance(frame, VADUserStoppedSpeakingFrame):
            await self._speech_stopped(frame)
        elif isinstance(frame, TranscriptionFrame):
            return await self._final_transcript(frame)
        elif isinstance(frame, InterimTranscriptionFrame):
            if self._utterance and not self._utterance.settled:
                self._utterance.text = frame.text
                return await self._evaluate(self._utterance)
        return ProcessFrameResult.CONTINUE

    async def _speech_started(self, frame: VADUserStartedSpeakingFrame) -> ProcessFrameResult:
        now = time.monotonic()
        utterance = _Utterance(started_at=now - frame.start_secs, bot_mid_answer=self.bot_mid_answer)
        self._utterance = utterance
        if self._user_turn:
            # A pause inside the user's own turn: that turn goes on.
            utterance.settled = True
            return ProcessFrameResult.CONTINUE
        if not utterance.bot_mid_answer:
            return await self._decide(utterance)
        await self._cancel_duration_timer()
        delay = max(0.0, utterance.started_at + self.policy.min_speech_secs - now)
        self._duration_task = self.create_task(self._duration_elapsed(utterance, delay))
        return ProcessFrameResult.CONTINUE

    async def _speech_stopped(self, frame: VADUserStoppedSpeakingFrame):
        utterance = self._utterance
        if utterance is None or utterance.settled:
            return
        await self._cancel_duration_timer()
        speech_end = time.monotonic() - frame.stop_secs
        if speech_end - utterance.started_at >= self.policy.min_speech_secs:
            utterance.duration_met = True
            await self._evaluate(utterance)

    async def _duration_elapsed(self, utterance: _Utterance, delay: float):
        await asyncio.sleep(delay)
        self._duration_task = None
        utterance.duration_met = True
        await self._evaluate(utterance)

    async def _cancel_duration_timer(self):
        if self._duration_task:
            task, self._duration_task = self._duration_task, None
            await self.cancel_task(task)

    async def _evaluate(self, utterance: _Utterance) -> ProcessFrameResult:
        if utterance.settled or self._user_turn or not utterance.duration_met:
            return ProcessFrameResult.CONTINUE
        words = transcript_words(utterance.text)
        if len(words) < self.policy.min_words or self.policy.may_become_backchannel(utterance.text):
            return ProcessFrameResult.CONTINUE
        return await self._decide(utterance)

    async def _final_transcript(self, frame: TranscriptionFrame) -> ProcessFrameResult:
        utterance = self._utterance
        if frame.text.startswith(KEYPAD_PREFIX) and not self._user_turn:
            # Keys pressed (pipecat's DTMFAggregator): the caller's own turn, never a backchannel,
            # and no speech of theirs is in progress to belong to.
            utterance = _Utterance(started_at=time.monotonic(), bot_mid_answer=self.bot_mid_answer, text=frame.text)
            self._utterance = utterance
            return await self._decide(utterance)
        if self._user_turn or (utterance and utterance.settled):
            return ProcessFrameResult.CONTINUE
        if utterance is None:
            # A transcript without VAD speech (text input, a VAD miss): judge it on its own.
            utterance = _Utterance(started_at=time.monotonic(), bot_mid_answer=self.bot_mid_answer)
            self._utterance = utterance
        utterance.text = frame.text
        if not utterance.bot_mid_answer:
            return await self._decide(utterance)
        if await self._evaluate(utterance) is ProcessFrameResult.STOP:
            return ProcessFrameResult.STOP
        if self.policy.is_backchannel(frame.text):
            utterance.settled = True
            # Kept out of the user's next message; the transcript still gets it as a backchannel.
            await self.trigger_reset_aggregation()
            await self.push_frame(UserBackchannelFrame(frame.text, frame.user_id, frame.timestamp))
            self.backchannels.append(Backchannel(at=time.monotonic(), text=frame.text))
            return ProcessFrameResult.CONTINUE
        if self.bot_mid_answer or self.policy.may_become_backchannel(frame.text):
            # Too short to be meant for the bot, or a backchannel cut off: not an interruption.
            utterance.settled = True
            await self.trigger_reset_aggregation()
            return ProcessFrameResult.CONTINUE
        # The bot finished while the user spoke: these words start the user's turn.
        return await self._decide(utterance)

    async def _decide(self, utterance: _Utterance) -> ProcessFrameResult:
        utterance.settled = True
        await self._cancel_duration_timer()
        decision = BargeInDecisionFrame(
            decided_at=time.monotonic(),
            speech_started_at=utterance.started_at,
            text=utterance.text,
            bot_mid_answer=utterance.bot_mid_answer,
            interrupts=self._enable_interruptions,
        )
        self.decisions.append(decision)
        # Ahead of the turn start, so the processors after the LLM act on the decision before
        # pipecat's InterruptionFrame has made its way through the LLM and the TTS.
        await self.push_frame(decision)
        await self.trigger_user_turn_started()
        return ProcessFrameResult.STOP
