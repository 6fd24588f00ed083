"""Drops the output of stale bot turns before the output transport, and stops the transport early.

Consumes (right before the output transport, in direct mode): the TTS output, whose frames take
the turn of the last ``BotTurnStartFrame`` (the TTS keeps no metadata, but passes that frame on
in order with its audio contexts), ``BotTurnsCutFrame``, and the call's ``StaleTurns``.
Emits: nothing of a stale turn that can be interrupted — the half sentence a TTS flushes when
the cancelled LLM's end frame arrives late, audio of a cut answer still in flight. On a cut
from a barge-in decision, an ``InterruptionFrame`` straight on to the transport, which then
stops ~2 ms after the decision rather than once pipecat's own frame has waited for the LLM to
close its stream and the TTS to drop its contexts (5-60 ms here); pipecat's frame for that
decision then stops here. It writes into each cut frame what it saw of the cut turns'
synthesis, for the playback tracker after the transport. When the transport says the bot
started speaking (upstream ``BotStartedSpeakingFrame``) after an interruption and before any
live audio went to it, what it is writing is the chunk of a cut turn it had taken before the
interruption: a ``StaleSpeechEndFrame`` then ends that speech (frames/turn.py says why).
Measures: ``dropped``, the stale frames stopped here; ``stale_speech_ended``, the stretches of
a cut turn's last chunk ended.
"""

from __future__ import annotations

from loguru import logger
from pipecat.frames.frames import (
    AggregatedTextFrame,
    BotStartedSpeakingFrame,
    Frame,
    InterruptionFrame,
    OutputAudioRawFrame,
    SystemFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSTextFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from frames.turn import (
    TURN_ID,
    BotTurnsCutFrame,
    BotTurnStartFrame,
    StaleSpeechEndFrame,
    audio_seconds,
    is_bot_turn_frame,
)
from processors.barge_in.stale_turns import StaleTurns


class StaleTurnGate(FrameProcessor):
    """Drops stale bot turns' output before the transport; see the module docstring."""

    def __init__(self, stale: StaleTurns, **kwargs):
        """Args: stale: the call's stale-turn register, which the turn tagger writes."""
        super().__init__(enable_direct_mode=True, **kwargs)
        self._stale = stale
        self._segment: int | None = None
        self._sentence: int | None = None  # the sentence being synthesised (its announcement's id)
        self._synthesising: set[int] = set()  # turns the TTS has started on
        # turn -> sentence (announcement id) -> [seconds synthesised, synthesis complete]
        self._synthesis: dict[int, dict[int, list]] = {}
        self._sent_ahead = 0  # interruptions sent on to the transport before pipecat's own came
        self._live_audio_since_interruption = True  # nothing interrupted yet: any start is a real one
        self.dropped = 0
        self.stale_speech_ended = 0

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if direction is FrameDirection.UPSTREAM:
            await self.push_frame(frame, direction)
            if isinstance(frame, BotStartedSpeakingFrame) and not self._live_audio_since_interruption:
                self._live_audio_since_interruption = True  # one end per stretch
                self.stale_speech_ended += 1
                logger.debug(f"{self}: the transport spoke a cut turn's last chunk; ending that speech")
                await self.push_frame(StaleSpeechEndFrame())
            return
        if isinstance(frame, InterruptionFrame):
            if self._sent_ahead:
                # pipecat's own interruption for a decision already sent ahead: passed on, it
                # would clear the transport again and send a phone a second Twilio `clear`.
                self._sent_ahead -= 1
                return
            self._live_audio_since_interruption = False
        elif isinstance(frame, BotTurnsCutFrame):
            self._cut(frame)
            await self.push_frame(frame, direction)
            if frame.decision is not None:
                self._sent_ahead += 1
                self._live_audio_since_interruption = False
                await self.push_frame(InterruptionFrame())
            return
        elif not isinstance(frame, SystemFrame) and is_bot_turn_frame(frame):
            if not self._admit(frame):
                return
            if isinstance(frame, OutputAudioRawFrame):
                self._live_audio_since_interruption = True
        await self.push_frame(frame, direction)

    def _cut(self, frame: BotTurnsCutFrame):
        frame.synthesising = self._synthesising & set(frame.turns)
        self._synthesising -= set(frame.turns)
        for turn_id in frame.turns:
            for sentence_id, (seconds, done) in self._synthesis.pop(turn_id, {}).items():
                frame.synthesis[sentence_id] = (seconds, done)

    def _admit(self, frame: Frame) -> bool:
        if isinstance(frame, BotTurnStartFrame):
            self._segment = frame.turn_id
        turn_id = frame.metadata.get(TURN_ID, self._segment)
        if turn_id is None:
            return True
        frame.metadata[TURN_ID] = turn_id
        if frame.interruptible and self._stale.is_stale(turn_id):
            self.dropped += 1
            logger.debug(f"{self}: dropped {frame} of interrupted bot turn {turn_id}")
            return False
        if isinstance(frame, BotTurnStartFrame):
            # Only a turn still going out can be cut; the one before it may still be playing.
            for old in [t for t in self._synthesis if t < turn_id - 1]:
                del self._synthesis[old]
            self._synthesising = {t for t in self._synthesising if t >= turn_id - 1}
        if isinstance(frame, (TTSStartedFrame, TTSAudioRawFrame)):
            self._synthesising.add(turn_id)
        # The TTS pushes a sentence's announcement, then its audio, then its TTSTextFrame.
        if isinstance(frame, TTSTextFrame):
            if frame.segment_id is not None:
                self._sentence_synthesis(turn_id, frame.segment_id)[1] = True
        elif isinstance(frame, AggregatedTextFrame) and frame.will_be_spoken:
            self._sentence = frame.id
        elif isinstance(frame, TTSAudioRawFrame) and self._sentence is not None:
            self._sentence_synthesis(turn_id, self._sentence)[0] += audio_seconds(frame)
        return True

    def _sentence_synthesis(self, turn_id: int, sentence_id: int) -> list:
        return self._synthesis.setdefault(turn_id, {}).setdefault(sentence_id, [0.0, False])
