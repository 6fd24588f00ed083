"""Knows what of each bot turn went out; writes only that into the context when a turn is cut.

Consumes (right after the output transport, in direct mode): what the transport actually sent —
it pushes each audio chunk on once the peer took it, and text after its audio — plus
``BotTurnStartFrame``, ``BotTurnsCutFrame``, ``InterruptionFrame``, ``BotStartedSpeakingFrame``
and the gate's ``StaleSpeechEndFrame``.
At an interruption it works out what the user heard of the cut turn (whole sentences whose text
went out, plus the words of the sentence being played whose audio went out, placed by character
share of that sentence's audio since the voice gives no word timestamps), makes the assistant
message in the context exactly that, and stops the turn's text reaching the assistant
aggregator from then on.
Emits: the frames it is given, less the barge-in bookkeeping frames (``StaleSpeechEndFrame``
included) and cut turns' frames.
Measures: every bot turn as it went out (``turns``), every cut (``interruptions``: when its
last audio went out, what was heard), and ``stale_frames``: frames of a cut turn that went out
after the interruption reached the transport (beyond the one chunk it may be writing then,
and what it flushes of that chunk when the gate ends the speech it restarted; must stay 0).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Literal

from loguru import logger
from pipecat.frames.frames import (
    AggregatedTextFrame,
    BotStartedSpeakingFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    OutputAudioRawFrame,
    SystemFrame,
    TextFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.processors.aggregators.llm_response_universal import (
    AssistantTurnStoppedMessage,
    LLMAssistantAggregator,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.utils.string import TextPartForConcatenation, concatenate_aggregated_text

from frames.turn import (
    TURN_ID,
    BargeInDecisionFrame,
    BotTurnsCutFrame,
    BotTurnStartFrame,
    StaleSpeechEndFrame,
    audio_seconds,
    is_bot_turn_frame,
)

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
        first_audio_out_at: ``time.monotonic()`` when its first audio left the output transport.
        last_audio_out_at: When its latest audio left the output transport.
        finished: It went out in full, or was cut.
    """

    turn_id: int
    kind: Literal["answer", "utterance"]
    first_audio_out_at: float | None = None
    last_audio_out_at: float | None = None
    finished: bool = False


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

    def __init__(
        self,
        assistant: LLMAssistantAggregator | None = None,
        *,
        chars_per_second: float = 15.0,
        **kwargs,
    ):
        """Create the tracker.

        Args:
            assistant: The assistant context aggregator right after this processor, whose
                message for a cut turn is rewritten to what was actually played. None: the
                context is left alone (what was played is still recorded).
            chars_per_second: Speaking rate assumed for a sentence whose audio is not all
                synthesised yet when it is cut (hibari speaks ~17).
            **kwargs: Passed to ``FrameProcessor``.
        """
        super().__init__(enable_direct_mode=True, **kwargs)
        self._assistant = assistant
        self.chars_per_second = chars_per_second
        self.interruptions: list[Interruption] = []
        self.stale_frames = 0
        self._turns: dict[int, BotTurn] = {}
        # Turns up to this one are cut (announced by a BotTurnsCutFrame) ...
        self._cut_through = 0
        # ... and the cut sentences' synthesis (announcement id -> seconds, complete) as the
        # gate before the transport saw it.
        self._synthesis: dict[int, tuple[float, bool]] = {}
        # Cuts whose decision frame has not come yet: pipecat's InterruptionFrame for a
        # decision can overtake the decision's own frame (see processors/barge_in/turn_tagger.py).
        self._awaiting_decision: list[Interruption] = []
        self._segment: int | None = None
        self._playback: dict[int, _Playback] = {}
        # Turns up to this one were cut before the interruption reached the transport.
        self._stale_through = 0
        self._chunk_in_flight = False
        self._stale_speech = False  # the transport is speaking that chunk again, until the gate ends it
        self._spoken_for_context: str | None = None
        if assistant is not None:
            assistant.add_event_handler("on_assistant_turn_stopped", self._on_assistant_turn_stopped)

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if direction is FrameDirection.DOWNSTREAM:
            if isinstance(frame, InterruptionFrame):
                self._interrupted()
            elif isinstance(frame, BotTurnsCutFrame):
                self._cut(frame)
                return  # nothing after this processor needs it
            elif isinstance(frame, BargeInDecisionFrame):
                self._decided(frame)
                return  # nothing after this processor needs it
            elif isinstance(frame, BotTurnStartFrame):
                # A new turn is going out: whatever the transport was writing of a cut one is
                # behind it, so its next start is that turn's own.
                self._chunk_in_flight = self._stale_speech = False
                self._segment = frame.turn_id
                self._turns.setdefault(frame.turn_id, BotTurn(frame.turn_id, frame.kind))
                self._playback[frame.turn_id] = _Playback()
                return
            elif isinstance(frame, BotStartedSpeakingFrame) and self._chunk_in_flight:
                # The transport started speaking again on the chunk it was writing when the
                # interruption came: what it sends until the gate's StaleSpeechEndFrame is that
                # chunk and what it held of it (a resampler's tail), not a stale turn going on.
                self._stale_speech = True
            elif isinstance(frame, StaleSpeechEndFrame):
                self._stale_speech = self._chunk_in_flight = False
                return  # it ended the transport's speech on a cut turn's chunk; it ends no turn
            elif not isinstance(frame, SystemFrame) and is_bot_turn_frame(frame):
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
            if isinstance(frame, OutputAudioRawFrame) and (self._chunk_in_flight or self._stale_speech):
                # The chunk the transport was writing when the interruption reached it.
                self._chunk_in_flight = self._stale_speech
                self._note_audio_out(turn_id, now)
                return True
            self.stale_frames += 1
            interruption = self._interruption_of(turn_id)
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
                playback.playing.played_s += audio_seconds(frame)
            self._note_audio_out(turn_id, now)
            # Live audio is going out: nothing of the cut turn is being written any more.
            self._chunk_in_flight = self._stale_speech = False
        if isinstance(frame, TextFrame) and frame.append_to_context and frame.text:
            # Exactly what the assistant aggregator appends to its aggregation.
            text = frame.text
            if isinstance(frame, AggregatedTextFrame) and frame.raw_text:
                text = frame.raw_text
            playback.parts.append(TextPartForConcatenation(text, frame.includes_inter_frame_spaces))
            playback.text_frames.append(frame)
        turn = self._turns.get(turn_id)
        if turn and (
            isinstance(frame, LLMFullResponseEndFrame)
            or (turn.kind == "utterance" and isinstance(frame, TTSStoppedFrame))
        ):
            turn.finished = True
        return True

    def _note_audio_out(self, turn_id: int, at: float):
        turn = self._turns.get(turn_id)
        if turn:
            turn.first_audio_out_at = turn.first_audio_out_at or at
            turn.last_audio_out_at = at
        interruption = self._interruption_of(turn_id)
        if interruption:
            interruption.last_audio_out_at = at

    @property
    def turns(self) -> list[BotTurn]:
        """Every bot turn of the call so far, oldest first."""
        return [self._turns[t] for t in sorted(self._turns)]

    def _cut(self, frame: BotTurnsCutFrame):
        """Record an interruption for each cut turn that had not gone out in full yet."""
        now = time.monotonic()
        decision = frame.decision
        recorded = []
        for turn_id, kind in sorted(frame.turns.items()):
            turn = self._turns.setdefault(turn_id, BotTurn(turn_id, kind))
            if turn.finished:
                continue
            if turn.last_audio_out_at is not None:
                phase: Phase = "playback"
            else:
                phase = "synthesis" if turn_id in frame.synthesising else "held"
            recorded.append(
                Interruption(
                    turn_id=turn_id,
                    phase=phase,
                    decided_at=decision.decided_at if decision else now,
                    speech_started_at=decision.speech_started_at if decision else None,
                    text=decision.text if decision else "",
                )
            )
            turn.finished = True
        self.interruptions += recorded
        self._cut_through = max(self._cut_through, frame.stale_through)
        self._synthesis = dict(frame.synthesis)
        self._awaiting_decision = [] if decision else recorded

    def _decided(self, decision: BargeInDecisionFrame):
        """A decision that arrives after the cut it caused: it is that cut's decision."""
        for interruption in self._awaiting_decision:
            if decision.interrupts and decision.decided_at <= interruption.decided_at:
                interruption.decided_at = decision.decided_at
                interruption.speech_started_at = decision.speech_started_at
                interruption.text = decision.text
        self._awaiting_decision = []

    def _interruption_of(self, turn_id: int) -> Interruption | None:
        return next((i for i in reversed(self.interruptions) if i.turn_id == turn_id), None)

    def _interrupted(self):
        now = time.monotonic()
        if self._cut_through > self._stale_through:
            self._stale_through = self._cut_through
            self._chunk_in_flight, self._stale_speech = True, False
        for interruption in reversed(self.interruptions):
            if interruption.reached_output_at is not None:
                break
            interruption.reached_output_at = now
        cut = self._interruption_of(self._segment) if self._segment else None
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
        total_s, done = self._synthesis.get(sentence.sentence_id, (0.0, False))
        if not done:
            total_s = max(total_s, len(text) / self.chars_per_second)
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
