"""Bot turn boundaries in the downstream frame stream.

A TTS service builds new frames (audio, ``TTSTextFrame``, ``TTSStartedFrame``...) from the text it
is given and keeps none of that text's metadata, so a processor after the TTS cannot read which
answer a frame belongs to. pipecat has no frame that marks "a new bot turn starts here" (an
``LLMFullResponseStartFrame`` opens an assistant turn in the context aggregator, and a standalone
``TTSSpeakFrame`` has no start frame at all), hence this one.
"""

from dataclasses import dataclass

from pipecat.frames.frames import DataFrame

# Key of the bot turn id in ``Frame.metadata``.
TURN_ID = "brisk.turn_id"


@dataclass
class BotTurnStartFrame(DataFrame):
    """Every frame after this one, up to the next one, belongs to bot turn ``turn_id``.

    A data frame, so every processor (the TTS included) passes it on in order with the frames
    around it, and pipecat's interruption handling drops it like the turn's other frames.

    Parameters:
        turn_id: The bot turn (an LLM answer or a standalone spoken utterance) that starts here.
    """

    turn_id: int

    def __str__(self):
        return f"{self.name}(turn: {self.turn_id})"
