"""Barge-in: the user talks over the bot, the bot stops at once, and nothing of the cut answer
is heard, shown or remembered afterwards beyond what was actually played.

One ``BargeIn`` per call holds the pieces and what they measured; wire them as

    user aggregator (start strategy: barge_in.start_strategy()) -> LLM -> barge_in.tagger()
        -> [sentence chunker] -> TTS -> barge_in.gate() -> transport.output()
        -> barge_in.playback(assistant aggregator) -> assistant aggregator

- ``BargeInUserTurnStartStrategy`` (pipecat user turn start strategy, runs in the user aggregator).
  Consumes VAD, interim/final transcription and bot-speaking frames. While the bot is mid-answer
  a user turn, and with it pipecat's ``InterruptionFrame``, starts only once the speech has lasted
  ``min_speech_secs`` (as the VAD sees it) and the transcript holds ``min_words`` words that are
  not all backchannels. A backchannel-only utterance instead becomes a ``UserBackchannelFrame``:
  the client's transcript gets it (RTVI ``user-input``), the LLM context does not, the bot keeps
  talking. While the bot is silent (idle, or an answer still being generated or synthesised) a
  turn starts at the VAD start, as pipecat's default does. Emits: pipecat's turn events,
  ``UserBackchannelFrame``. Measures: every decision's time and the VAD-estimated speech start.
- ``TurnTagger`` (right after the LLM). Consumes the LLM's output in the exact order the LLM pushes
  it (direct mode: pipecat's ``InterruptionFrame`` is a system frame and overtakes queued frames,
  so a queued processor here could see an answer's start after the interruption that cancelled
  it). Emits: a ``BotTurnStartFrame`` before each bot turn (an LLM answer, or a ``TTSSpeakFrame``
  spoken outside one) and the turn id in the metadata of every answer frame; an interruption
  makes every turn so far stale.
- ``StaleTurnGate`` (right before the output transport). Consumes the TTS output; the TTS keeps
  no metadata, so its frames take the turn of the last ``BotTurnStartFrame`` (which the TTS passes
  on in order with its audio contexts). Drops every interruptible frame of a stale turn: the
  half sentence a TTS flushes when the cancelled LLM's end frame arrives late, audio of a cut
  answer still in flight. Emits: at an interruption decision with a bot turn under way, an
  ``InterruptionFrame`` straight on to the transport, which then stops ~2 ms after the decision
  rather than once pipecat's own frame has waited for the LLM to close its stream and the TTS to
  drop its contexts (5-60 ms here); pipecat's frame for that decision then stops at the gate.
  Measures: how much audio each sentence was synthesised into.
- ``PlaybackTracker`` (right after the output transport). Consumes what the transport actually
  sent: it pushes each audio chunk on once the peer took it, and text after its audio. At an
  interruption it works out what the user heard of the cut turn (whole sentences whose text
  went out, plus the words of the sentence being played whose audio went out, placed by
  character share of that sentence's audio since the voice gives no word timestamps), makes
  the assistant message in the context exactly that, and stops the turn's text reaching the
  assistant aggregator from then on. Measures: when the cut turn's last audio went out and how
  many of its frames went out after the interruption (stale frames, must be 0).

The client is told to stop by pipecat itself once an ``InterruptionFrame`` reaches the output
transport: queued audio is dropped (WebRTC then sends silence), a Twilio serializer sends a
``clear`` event, and RTVI sends ``bot-interrupted``. The LLM service closes its HTTP stream when
the interruption cancels its task; the TTS drops its audio contexts.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from loguru import logger
from pipecat.frames.frames import (
    AggregatedTextFrame,
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    Frame,
    InterimTranscriptionFrame,
    InterruptionFrame,
    LLMAssistantPushAggregationFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    OutputAudioRawFrame,
    SystemFrame,
    TextFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
    UserBackchannelFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.processors.aggregators.llm_response_universal import (
    AssistantTurnStoppedMessage,
    LLMAssistantAggregator,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.turns.types import ProcessFrameResult
from pipecat.turns.user_start.base_user_turn_start_strategy import BaseUserTurnStartStrategy
from pipecat.utils.string import TextPartForConcatenation, concatenate_aggregated_text

from frames.turn import TURN_ID, BotTurnStartFrame

# The list, the spellings Whisper writes for them ("Mmm", "Okay"; tiny.en hears an
# espeak "uh-huh" as "Uh-uh" half the time), and fillers, which alone are no interruption either.
DEFAULT_BACKCHANNELS = (
    "uh-huh", "uh-uh", "mm-hmm", "mhm", "mm", "hmm", "uh", "um",
    "yeah", "ok", "okay", "right", "嗯", "对",
)  # fmt: skip

# Latin words, or single CJK characters (CJK text has no spaces to split words at).
_WORD = re.compile(r"[a-z0-9']+|[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
_HELD_LETTER = re.compile(r"(.)\1{2,}")


def transcript_words(text: str) -> list[str]:
    """Lower-cased words of a transcript; hyphens join, held letters shorten ("Mmmm" -> "mm")."""
    return _WORD.findall(_HELD_LETTER.sub(r"\1\1", text.lower().replace("-", "")))


def _joined(words: list[str]) -> str:
    """Words said as one ("uh" "huh" -> "uhhuh", "m" "m" "m" -> "mm")."""
    return _HELD_LETTER.sub(r"\1\1", "".join(words))


@dataclass(frozen=True)
class BargeInPolicy:
    """When user speech interrupts the bot.

    Parameters:
        min_speech_secs: Speech must last this long (VAD-measured, from its estimated true start)
            before it interrupts the bot mid-answer.
        min_words: Words the (interim) transcript must hold before it interrupts the bot mid-answer.
        backchannels: Acknowledgements that never interrupt the bot mid-answer, alone or in a row
            ("yeah yeah", "uh huh", "嗯嗯"); matched on ``transcript_words``.
        bot_quiet_secs: The bot still counts as mid-answer this long after it stopped speaking,
            which covers the gap between two sentences.
    """

    min_speech_secs: float = 0.3
    min_words: int = 1
    backchannels: tuple[str, ...] = DEFAULT_BACKCHANNELS
    bot_quiet_secs: float = 0.5

    def __post_init__(self):
        if self.min_speech_secs < 0 or self.bot_quiet_secs < 0:
            raise ValueError("min_speech_secs and bot_quiet_secs must not be negative")
        if self.min_words < 1:
            raise ValueError("min_words must be at least 1")

    def is_backchannel(self, text: str) -> bool:
        """True when ``text`` is nothing but backchannels ("Uh huh, yeah." is)."""
        words = transcript_words(text)
        return bool(words) and self._backchannel_prefix_ends(words)[-1]

    def may_become_backchannel(self, text: str) -> bool:
        """True when ``text`` is a backchannel, or one still being said ("Ri" of "Right")."""
        words = transcript_words(text)
        if not words:
            return False
        vocabulary = self._vocabulary()
        reachable = self._backchannel_prefix_ends(words)
        return any(
            reachable[i] and any(v.startswith(_joined(words[i:])) for v in vocabulary)
            for i in range(len(words))
        ) or reachable[-1]

    def _vocabulary(self) -> set[str]:
        return {"".join(transcript_words(b)) for b in self.backchannels}

    def _backchannel_prefix_ends(self, words: list[str]) -> list[bool]:
        """reachable[j]: words[:j] splits into whole backchannels ("uh" + "huh" -> "uhhuh")."""
        vocabulary = self._vocabulary()
        reachable = [True] + [False] * len(words)
        for j in range(1, len(words) + 1):
            reachable[j] = any(reachable[i] and _joined(words[i:j]) in vocabulary for i in range(j))
        return reachable


@dataclass(frozen=True)
class BargeInDecision:
    """A user turn start decided by the strategy (an interruption when the bot was busy).

    Parameters:
        decided_at: ``time.monotonic()`` of the decision.
        speech_started_at: Estimated true start of the speech (VAD start minus its start_secs).
        text: The transcript the decision was made on ("" when made at the VAD start).
        bot_mid_answer: Whether the bot was speaking (or had just stopped) when the speech began.
        interrupts: Whether the turn start broadcasts pipecat's ``InterruptionFrame``.
    """

    decided_at: float
    speech_started_at: float
    text: str
    bot_mid_answer: bool
    interrupts: bool = True


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
        on_decision: Callable[[BargeInDecision], Awaitable[None]] | None = None,
        on_backchannel: Callable[[Backchannel], None] | None = None,
        **kwargs,
    ):
        """Create the strategy.

        Args:
            policy: When speech interrupts the bot; ``BargeInPolicy()`` by default.
            on_decision: Awaited with every turn start this strategy decides, before it is triggered.
            on_backchannel: Called with every backchannel that let the bot keep talking.
            **kwargs: Passed to ``BaseUserTurnStartStrategy`` (e.g. ``enable_interruptions``).
        """
        super().__init__(**kwargs)
        self.policy = policy or BargeInPolicy()
        self._on_decision = on_decision
        self._on_backchannel = on_backchannel
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
            if self._on_backchannel:
                self._on_backchannel(Backchannel(at=time.monotonic(), text=frame.text))
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
        if self._on_decision:
            await self._on_decision(
                BargeInDecision(
                    decided_at=time.monotonic(),
                    speech_started_at=utterance.started_at,
                    text=utterance.text,
                    bot_mid_answer=utterance.bot_mid_answer,
                    interrupts=self._enable_interruptions,
                )
            )
        await self.trigger_user_turn_started()
        return ProcessFrameResult.STOP


# Frames that make up a bot turn's output (and so can be stale); everything else passes untouched.
_ANSWER_FRAMES = (
    BotTurnStartFrame,
    LLMFullResponseStartFrame,
    LLMFullResponseEndFrame,
    TextFrame,
    TTSSpeakFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    OutputAudioRawFrame,
    LLMAssistantPushAggregationFrame,
)


def _is_answer_frame(frame: Frame) -> bool:
    return isinstance(frame, _ANSWER_FRAMES) and not isinstance(
        frame, (TranscriptionFrame, InterimTranscriptionFrame)
    )


def _audio_seconds(frame: OutputAudioRawFrame) -> float:
    return len(frame.audio) / (2 * frame.num_channels * frame.sample_rate)


Phase = Literal["held", "synthesis", "playback"]


@dataclass
class Interruption:
    """One bot turn cut by the user.

    Parameters:
        turn_id: The bot turn that was cut.
        phase: How far the turn had got: "held" (no audio synthesised yet: the LLM was still
            generating, or its text waited for a sentence end), "synthesis" (the TTS had started
            but no audio had gone out), "playback" (the user was hearing it).
        decided_at: ``time.monotonic()`` of the strategy's decision (of the interruption itself
            when something other than the strategy interrupted).
        speech_started_at: VAD-estimated true start of the speech that interrupted, if known.
        text: The transcript the decision was made on.
        reached_output_at: When the ``InterruptionFrame`` passed the output transport.
        last_audio_out_at: When the turn's last audio chunk left the output transport (the peer
            took it); None if none ever did.
        stale_frames: The turn's frames that left the output transport after the interruption,
            beyond the one audio chunk the transport may be writing when it arrives. Must be 0.
        spoken_text: What the user heard of the turn, as now in the LLM context.
    """

    turn_id: int
    phase: Phase
    decided_at: float
    speech_started_at: float | None = None
    text: str = ""
    reached_output_at: float | None = None
    last_audio_out_at: float | None = None
    stale_frames: int = 0
    spoken_text: str = ""

    @property
    def stop_ms(self) -> float | None:
        """Decision to the cut turn's last audio out (0 when none went out after the decision)."""
        if self.last_audio_out_at is None:
            return None
        return max(0.0, (self.last_audio_out_at - self.decided_at) * 1000)


@dataclass
class BotTurn:
    """One bot turn (an LLM answer, or an utterance spoken outside one) as it went out.

    Parameters:
        turn_id: Its id, in ``Frame.metadata[frames.turn.TURN_ID]`` of its frames.
        kind: "answer" or "utterance".
        synthesising: The TTS had started on it.
        first_audio_out_at: ``time.monotonic()`` when its first audio left the output transport.
        last_audio_out_at: When its latest audio left the output transport.
        finished: It went out in full, or was cut.
    """

    turn_id: int
    kind: Literal["answer", "utterance"]
    synthesising: bool = False
    first_audio_out_at: float | None = None
    last_audio_out_at: float | None = None
    finished: bool = False


@dataclass
class _Synthesis:
    seconds: float = 0.0
    done: bool = False


class BargeIn:
    """One call's barge-in handling: makes its processors and keeps what they measured.

    ``interruptions`` lists every bot turn the user cut, ``backchannels`` every acknowledgement
    that let the bot go on, ``decisions`` every user turn start the strategy decided, and
    ``stale_frames`` counts frames of cut turns that left the output transport after the
    interruption reached it (beyond the one chunk it may be writing then; must stay 0).
    """

    def __init__(self, policy: BargeInPolicy | None = None, *, chars_per_second: float = 15.0):
        """Create the call's barge-in state.

        Args:
            policy: When speech interrupts the bot.
            chars_per_second: Speaking rate assumed for a sentence whose audio is not all
                synthesised yet when it is cut (hibari speaks ~17).
        """
        self.policy = policy or BargeInPolicy()
        self.chars_per_second = chars_per_second
        self.interruptions: list[Interruption] = []
        self.backchannels: list[Backchannel] = []
        self.decisions: list[BargeInDecision] = []
        self.stale_frames = 0
        self._pending_decision: BargeInDecision | None = None
        self._gate: StaleTurnGate | None = None
        self._turns: dict[int, BotTurn] = {}
        self._current: int | None = None
        self._stale_through = 0
        self._synthesis: dict[int, _Synthesis] = {}  # by the id of the sentence's announcement

    # -- processors ---------------------------------------------------------------------------

    def start_strategy(self, **kwargs) -> BargeInUserTurnStartStrategy:
        """The user turn start strategy, reporting to this object."""
        return BargeInUserTurnStartStrategy(
            policy=self.policy,
            on_decision=self._decided,
            on_backchannel=self.backchannels.append,
            **kwargs,
        )

    def tagger(self) -> TurnTagger:
        """The processor to put right after the LLM."""
        return TurnTagger(self)

    def gate(self) -> StaleTurnGate:
        """The processor to put right before the output transport."""
        self._gate = StaleTurnGate(self)
        return self._gate

    def playback(self, assistant: LLMAssistantAggregator | None = None) -> PlaybackTracker:
        """The processor to put right after the output transport, before ``assistant``."""
        return PlaybackTracker(self, assistant)

    # -- bot turns ----------------------------------------------------------------------------

    @property
    def current_turn(self) -> int | None:
        """The newest bot turn, if any."""
        return self._current

    @property
    def turns(self) -> list[BotTurn]:
        """Every bot turn of the call so far, oldest first."""
        return list(self._turns.values())

    def is_stale(self, turn_id: int) -> bool:
        """Whether ``turn_id`` was interrupted (or is older than a turn that was)."""
        return turn_id <= self._stale_through

    async def _decided(self, decision: BargeInDecision):
        self.decisions.append(decision)
        self._pending_decision = decision
        if decision.interrupts and self._gate and any(not t.finished for t in self._turns.values()):
            # pipecat's InterruptionFrame reaches the output transport only after the LLM has
            # closed its stream and the TTS has dropped its contexts (~5-60 ms here). The turn
            # is stale from now on, and the gate tells the transport to stop right away.
            self._interrupted()
            await self._gate.interrupt_output()

    def _start_turn(self, kind: Literal["answer", "utterance"]) -> int:
        turn_id = (self._current or 0) + 1
        self._current = turn_id
        self._turns[turn_id] = BotTurn(turn_id, kind)
        return turn_id

    def _interrupted(self):
        """An interruption was decided or left the LLM: every bot turn so far is stale."""
        decision, self._pending_decision = self._pending_decision, None
        if self._current is None:
            return
        cut = [t for t in self._turns.values() if not t.finished and t.turn_id > self._stale_through]
        self._stale_through = self._current
        now = time.monotonic()
        for turn in cut:
            if turn.last_audio_out_at is not None:
                phase: Phase = "playback"
            else:
                phase = "synthesis" if turn.synthesising else "held"
            self.interruptions.append(
                Interruption(
                    turn_id=turn.turn_id,
                    phase=phase,
                    decided_at=decision.decided_at if decision else now,
                    speech_started_at=decision.speech_started_at if decision else None,
                    text=decision.text if decision else "",
                )
            )
            turn.finished = True

    def _interruption_of(self, turn_id: int) -> Interruption | None:
        return next((i for i in reversed(self.interruptions) if i.turn_id == turn_id), None)

    def _synthesis_of(self, sentence_id: int) -> _Synthesis:
        return self._synthesis.setdefault(sentence_id, _Synthesis())


class TurnTagger(FrameProcessor):
    """Numbers bot turns and tags the LLM's output with them; see the module docstring."""

    def __init__(self, barge_in: BargeIn, **kwargs):
        super().__init__(enable_direct_mode=True, **kwargs)
        self._barge_in = barge_in
        self._in_answer = False

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if direction is FrameDirection.DOWNSTREAM:
            if isinstance(frame, InterruptionFrame):
                self._in_answer = False
                self._barge_in._interrupted()
            elif not isinstance(frame, SystemFrame) and _is_answer_frame(frame):
                await self._tag(frame)
        await self.push_frame(frame, direction)

    async def _tag(self, frame: Frame):
        standalone_speech = isinstance(frame, TTSSpeakFrame) and not self._in_answer
        if isinstance(frame, LLMFullResponseStartFrame) or standalone_speech:
            turn_id = self._barge_in._start_turn("utterance" if standalone_speech else "answer")
            marker = BotTurnStartFrame(turn_id)
            marker.metadata[TURN_ID] = turn_id
            await self.push_frame(marker)
            self._in_answer = not standalone_speech
        elif isinstance(frame, LLMFullResponseEndFrame):
            self._in_answer = False
        if self._barge_in.current_turn is not None:
            frame.metadata[TURN_ID] = self._barge_in.current_turn


class StaleTurnGate(FrameProcessor):
    """Drops the output of stale bot turns before the transport; see the module docstring."""

    def __init__(self, barge_in: BargeIn, **kwargs):
        super().__init__(enable_direct_mode=True, **kwargs)
        self._barge_in = barge_in
        self._segment: int | None = None
        self._sentence: int | None = None  # the sentence being synthesised (its announcement's id)
        self._sent_ahead = 0  # interruptions sent on to the transport before pipecat's own came
        self.dropped = 0  # stale frames stopped here, before they could be sent

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        sent_ahead = isinstance(frame, InterruptionFrame) and self._sent_ahead
        if direction is FrameDirection.DOWNSTREAM and sent_ahead:
            # pipecat's own interruption for a decision already sent ahead: passed on, it would
            # clear the transport again and send a phone a second Twilio `clear`.
            self._sent_ahead -= 1
            return
        if (
            direction is FrameDirection.DOWNSTREAM
            and not isinstance(frame, SystemFrame)
            and _is_answer_frame(frame)
            and not self._admit(frame)
        ):
            return
        await self.push_frame(frame, direction)

    async def interrupt_output(self):
        """Interrupt everything downstream (the transport's queued audio first) at once.

        pipecat's ``InterruptionFrame`` for the same decision, which must follow, stops here.
        """
        self._sent_ahead += 1
        await self.push_frame(InterruptionFrame())

    def _admit(self, frame: Frame) -> bool:
        if isinstance(frame, BotTurnStartFrame):
            self._segment = frame.turn_id
        turn_id = frame.metadata.get(TURN_ID, self._segment)
        if turn_id is None:
            return True
        frame.metadata[TURN_ID] = turn_id
        if frame.interruptible and self._barge_in.is_stale(turn_id):
            self.dropped += 1
            logger.debug(f"{self}: dropped {frame} of interrupted bot turn {turn_id}")
            return False
        turn = self._barge_in._turns.get(turn_id)
        if isinstance(frame, (TTSStartedFrame, TTSAudioRawFrame)) and turn:
            turn.synthesising = True
        # The TTS pushes a sentence's announcement, then its audio, then its TTSTextFrame.
        if isinstance(frame, TTSTextFrame):
            if frame.segment_id is not None:
                self._barge_in._synthesis_of(frame.segment_id).done = True
        elif isinstance(frame, AggregatedTextFrame) and frame.will_be_spoken:
            self._sentence = frame.id
        elif isinstance(frame, TTSAudioRawFrame) and self._sentence is not None:
            self._barge_in._synthesis_of(self._sentence).seconds += _audio_seconds(frame)
        return True


@dataclass
class _Sentence:
    sentence_id: int  # the id of its AggregatedTextFrame announcement (TTSTextFrame.segment_id)
    text: str
    played_s: float = 0.0
    text_out: bool = False  # text of it went out: a whole sentence, or words as they were spoken


@dataclass
class _Playback:
    sentences: dict[int, _Sentence] = field(default_factory=dict)
    playing: _Sentence | None = None
    # What went out for the context, as the assistant aggregator concatenates it.
    parts: list[TextPartForConcatenation] = field(default_factory=list)
    text_frames: list[TextFrame] = field(default_factory=list)


class PlaybackTracker(FrameProcessor):
    """Knows what of each bot turn went out; writes only that into the context when a turn is cut.

    See the module docstring.
    """

    def __init__(self, barge_in: BargeIn, assistant: LLMAssistantAggregator | None = None, **kwargs):
        """Create the tracker.

        Args:
            barge_in: The call's barge-in state.
            assistant: The assistant context aggregator right after this processor, whose
                message for a cut turn is rewritten to what was actually played. None: the
                context is left alone (what was played is still recorded).
            **kwargs: Passed to ``FrameProcessor``.
        """
        super().__init__(enable_direct_mode=True, **kwargs)
        self._barge_in = barge_in
        self._assistant = assistant
        self._segment: int | None = None
        self._playback: dict[int, _Playback] = {}
        # Turns up to this one were interrupted before the interruption reached the transport.
        self._stale_through = 0
        self._chunk_in_flight = False
        self._spoken_for_context: str | None = None
        if assistant is not None:
            assistant.add_event_handler("on_assistant_turn_stopped", self._on_assistant_turn_stopped)

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if direction is FrameDirection.DOWNSTREAM:
            if isinstance(frame, InterruptionFrame):
                self._interrupted()
            elif isinstance(frame, BotTurnStartFrame):
                self._segment = frame.turn_id
                self._playback[frame.turn_id] = _Playback()
                return  # nothing after this processor needs it
            elif not isinstance(frame, SystemFrame) and _is_answer_frame(frame):
                if not self._went_out(frame):
                    return
        await self.push_frame(frame, direction)

    def _went_out(self, frame: Frame) -> bool:
        """Account for a frame the transport sent; False for a cut turn's frame, stopped here."""
        turn_id = frame.metadata.get(TURN_ID, self._segment)
        if turn_id is None:
            return True
        frame.metadata[TURN_ID] = turn_id
        now = time.monotonic()
        if turn_id <= self._stale_through and frame.interruptible:
            if isinstance(frame, OutputAudioRawFrame) and self._chunk_in_flight:
                # The chunk the transport was writing when the interruption reached it.
                self._chunk_in_flight = False
                self._note_audio_out(turn_id, now)
                return True
            self._barge_in.stale_frames += 1
            interruption = self._barge_in._interruption_of(turn_id)
            if interruption:
                interruption.stale_frames += 1
            logger.warning(f"{self}: {frame} of bot turn {turn_id} went out after the interruption")
            return False
        playback = self._playback.setdefault(turn_id, _Playback())
        # The transport sends a sentence's announcement, then its audio, then its TTSTextFrame
        # (for a voice with word timestamps, one TTSTextFrame per word as it is spoken).
        if isinstance(frame, TTSTextFrame):
            sentence = playback.sentences.get(frame.segment_id) or playback.playing
            if sentence:
                sentence.text_out = True
        elif isinstance(frame, AggregatedTextFrame) and frame.will_be_spoken:
            playback.playing = playback.sentences[frame.id] = _Sentence(frame.id, frame.text)
        elif isinstance(frame, OutputAudioRawFrame):
            if playback.playing:
                playback.playing.played_s += _audio_seconds(frame)
            self._note_audio_out(turn_id, now)
        if isinstance(frame, TextFrame) and frame.append_to_context and frame.text:
            # Exactly what the assistant aggregator appends to its aggregation.
            text = frame.text
            if isinstance(frame, AggregatedTextFrame) and frame.raw_text:
                text = frame.raw_text
            playback.parts.append(TextPartForConcatenation(text, frame.includes_inter_frame_spaces))
            playback.text_frames.append(frame)
        turn = self._barge_in._turns.get(turn_id)
        if turn and (
            isinstance(frame, LLMFullResponseEndFrame)
            or (turn.kind == "utterance" and isinstance(frame, TTSStoppedFrame))
        ):
            turn.finished = True
        return True

    def _note_audio_out(self, turn_id: int, at: float):
        turn = self._barge_in._turns.get(turn_id)
        if turn:
            turn.first_audio_out_at = turn.first_audio_out_at or at
            turn.last_audio_out_at = at
        interruption = self._barge_in._interruption_of(turn_id)
        if interruption:
            interruption.last_audio_out_at = at

    def _interrupted(self):
        now = time.monotonic()
        if self._barge_in._stale_through > self._stale_through:
            self._stale_through = self._barge_in._stale_through
            self._chunk_in_flight = True
        for interruption in reversed(self._barge_in.interruptions):
            if interruption.reached_output_at is not None:
                break
            interruption.reached_output_at = now
        cut = self._barge_in._interruption_of(self._segment) if self._segment else None
        if cut is None or cut.reached_output_at != now:
            return  # the turn going out was not cut by this interruption
        playback = self._playback.get(cut.turn_id, _Playback())
        cut.spoken_text = self._spoken_text(playback)
        # pipecat's InterruptionFrame can overtake text still queued in the aggregator, which would
        # then land in the next answer's message; the cut turn's entry is rewritten below instead.
        for text_frame in playback.text_frames:
            text_frame.append_to_context = False
        self._spoken_for_context = cut.spoken_text

    def _spoken_text(self, playback: _Playback) -> str:
        parts = list(playback.parts)
        playing = playback.playing
        # A voice without word timestamps sends a sentence's text only after all its audio.
        if playing and not playing.text_out and playing.played_s > 0:
            words = self._played_words(playing)
            if words:
                parts.append(TextPartForConcatenation(words, includes_inter_part_spaces=False))
        return concatenate_aggregated_text(parts).strip()

    def _played_words(self, sentence: _Sentence) -> str:
        """The words of a half-played sentence whose audio went out, placed by character share."""
        text = sentence.text.strip()
        if not text:
            return ""
        synthesis = self._barge_in._synthesis_of(sentence.sentence_id)
        total_s = synthesis.seconds
        if not synthesis.done:
            total_s = max(total_s, len(text) / self._barge_in.chars_per_second)
        last_end = 0
        for word in re.finditer(r"\S+", text):
            if total_s * word.end() / len(text) > sentence.played_s:
                break
            last_end = word.end()
        return text[:last_end].rstrip(",;:")

    async def _on_assistant_turn_stopped(self, _aggregator, message: AssistantTurnStoppedMessage):
        if not message.interrupted or self._spoken_for_context is None:
            return
        spoken, self._spoken_for_context = self._spoken_for_context, None
        committed = message.content

        def rewrite(messages: list) -> list:
            for i in range(len(messages) - 1, -1, -1):
                m = messages[i]
                if (
                    committed
                    and isinstance(m, dict)
                    and m.get("role") == "assistant"
                    and m.get("content") == committed
                ):
                    if spoken:
                        messages[i] = {**m, "content": spoken}
                    else:
                        del messages[i]
                    return messages
            if spoken:
                messages.append({"role": "assistant", "content": spoken})
            return messages

        self._assistant.context.transform_messages(rewrite)
