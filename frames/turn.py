"""Bot turn boundaries in the downstream frame stream, and the barge-in facts that cut them.

A TTS service builds new frames (audio, ``TTSTextFrame``, ``TTSStartedFrame``...) from the text it
is given and keeps none of that text's metadata, so a processor after the TTS cannot read which
answer a frame belongs to. pipecat has no frame that marks "a new bot turn starts here" (an
``LLMFullResponseStartFrame`` opens an assistant turn in the context aggregator, and a standalone
``TTSSpeakFrame`` has no start frame at all), hence ``BotTurnStartFrame``.

Barge-in's processors sit on both sides of the TTS and the output transport and must learn of
an interruption before the audio queued between them; pipecat's ``InterruptionFrame`` says
that one happened, not which turns it cut or what had been synthesised of them, hence
``BargeInDecisionFrame`` and ``BotTurnsCutFrame``; nor has it one that ends the speech the
output transport restarts on a cut turn's last chunk, hence ``StaleSpeechEndFrame``.
"""

from dataclasses import dataclass, field

from pipecat.frames.frames import (
    DataFrame,
    Frame,
    InterimTranscriptionFrame,
    LLMAssistantPushAggregationFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    OutputAudioRawFrame,
    SystemFrame,
    TextFrame,
    TranscriptionFrame,
    TTSSpeakFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
)

# Key of the bot turn id in ``Frame.metadata``.
TURN_ID = "brisk.turn_id"
# Key, in ``Frame.metadata`` of a fast-path answer's frames, of the intent it answers: such an
# answer passes through the LLM service without a request, and is still the turn's answer.
FAST_PATH = "brisk.fast_path"

# Frames that make up a bot turn's output (and so can be stale); everything else passes untouched.
_ANSWER_FRAMES = (
    LLMFullResponseStartFrame,
    LLMFullResponseEndFrame,
    TextFrame,
    TTSSpeakFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    OutputAudioRawFrame,
    LLMAssistantPushAggregationFrame,
)


def is_bot_turn_frame(frame: Frame) -> bool:
    """Whether ``frame`` is part of a bot turn's output (transcripts are text frames too: not)."""
    return isinstance(frame, (BotTurnStartFrame, *_ANSWER_FRAMES)) and not isinstance(
        frame, (TranscriptionFrame, InterimTranscriptionFrame)
    )


def audio_seconds(frame: OutputAudioRawFrame) -> float:
    """How long ``frame``'s 16-bit PCM plays."""
    return len(frame.audio) / (2 * frame.num_channels * frame.sample_rate)


@dataclass
class BotTurnStartFrame(DataFrame):
    """Every frame after this one, up to the next one, belongs to bot turn ``turn_id``.

    A data frame, so every processor (the TTS included) passes it on in order with the frames
    around it, and pipecat's interruption handling drops it like the turn's other frames.

    Parameters:
        turn_id: The bot turn (an LLM answer or a standalone spoken utterance) that starts here.
        kind: "answer" (an LLM answer) or "utterance" (a ``TTSSpeakFrame`` spoken outside one).
    """

    turn_id: int
    kind: str = "answer"

    def __str__(self):
        return f"{self.name}(turn: {self.turn_id}, {self.kind})"


@dataclass
class BargeInDecisionFrame(SystemFrame):
    """A user turn start decided by Brisk's barge-in strategy (an interruption when the bot was busy).

    Pushed downstream by the strategy just before pipecat starts the user turn, as a system
    frame so it reaches the processors after the LLM ahead of pipecat's ``InterruptionFrame``,
    which waits for the LLM to close its stream and the TTS to drop its contexts.

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

    def __str__(self):
        return f"{self.name}(interrupts: {self.interrupts}, text: [{self.text}])"


@dataclass
class BotTurnsCutFrame(SystemFrame):
    """Every bot turn up to ``stale_through`` is stale: none of its output may go out any more.

    Pushed downstream by the turn tagger after the LLM when an interruption is decided (or
    reaches it), so the processors before and after the output transport learn it at once,
    ahead of the audio still queued. The stale-turn gate before the transport fills in what
    it knows of the turns' synthesis as the frame passes it; the playback tracker after the
    transport turns it into the call's interruption records.

    Parameters:
        stale_through: The newest bot turn that is stale now.
        turns: Every bot turn started since the previous cut, by id: "answer" or "utterance".
        decision: The barge-in decision behind the cut; None for an interruption from
            elsewhere.
        synthesising: Turns the TTS had started on (filled in by the gate).
        synthesis: Per sentence of those turns (its announcement's id), the seconds of
            audio synthesised so far and whether its synthesis was complete (filled in by
            the gate).
    """

    stale_through: int
    turns: dict[int, str]
    decision: BargeInDecisionFrame | None = None
    synthesising: set[int] = field(default_factory=set)
    synthesis: dict[int, tuple[float, bool]] = field(default_factory=dict)

    def __str__(self):
        return f"{self.name}(stale through: {self.stale_through}, turns: {sorted(self.turns)})"


@dataclass
class UserTurnContinuedFrame(SystemFrame):
    """The caller went on after their turn had ended, before the bot's answer was heard: the two
    turns are one, and the LLM is asked the whole of it once.

    pipecat ends a user turn and starts the next; it has no frame for "this turn continues the
    last one". Pushed downstream by ``processors/turns/turn_continuation.py`` with the context frame of
    the merged turn; the latency observer marks that turn ``merged``.

    Parameters:
        text: The one user message the two turns became.
    """

    text: str = ""


@dataclass
class StaleSpeechEndFrame(TTSStoppedFrame):
    """The output transport's speech on a cut turn's last chunk ends here.

    pipecat's output transport writes the chunk it had already taken off its queue when an
    interruption reached it, after it has said the bot stopped; that chunk makes it say the
    bot started again, with nothing queued to end it. Until its 3 s fallback, the next answer
    then goes out with no ``BotStartedSpeakingFrame``, and everything that follows the bot's
    speech (the turn record, barge-in, the turn continuation) takes the silent bot for a
    speaking one. pipecat has no frame that ends that; a ``TTSStoppedFrame`` does it in every
    output transport, hence this subclass: pushed into the transport by the stale-turn gate,
    and dropped by the playback tracker right after the transport, so it ends no turn.
    """
