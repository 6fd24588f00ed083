"""Transcription frames that say which stretch of the input audio they cover.

pipecat's interim and final transcription frames carry only text. Brisk's streaming STT also
records the utterance and the span of input-stream audio (seconds since the STT's first audio
frame) each transcript was made from, so downstream code can tell whether a partial already
covered the end of speech and latency reports can line transcripts up with the audio.
"""

from dataclasses import dataclass

from pipecat.frames.frames import DataFrame, InterimTranscriptionFrame, TranscriptionFrame


@dataclass
class PartialTranscriptionFrame(InterimTranscriptionFrame):
    """A transcript of the utterance so far, made while the user is still speaking, or, while
    the utterance's final is being heard again, the words as first heard (a draft may start on it).

    Parameters:
        utterance_id: Which utterance (VAD start..stop) this transcript belongs to.
        audio_start_s: Start of the transcribed audio, in input-stream seconds.
        audio_end_s: End of the transcribed audio, in input-stream seconds.
    """

    utterance_id: int = 0
    audio_start_s: float = 0.0
    audio_end_s: float = 0.0

    def __str__(self):
        return (
            f"{self.name}(utterance: {self.utterance_id}, text: [{self.text}], "
            f"audio: {self.audio_start_s:.2f}-{self.audio_end_s:.2f} s)"
        )


@dataclass
class FinalTranscriptionFrame(TranscriptionFrame):
    """The final transcript of one utterance.

    ``finalized`` defaults to True: there is exactly one per utterance, so pipecat's turn-stop
    strategies can stop waiting for STT as soon as it arrives.

    Parameters:
        utterance_id: Which utterance (VAD start..stop) this transcript belongs to.
        audio_start_s: Start of the transcribed audio, in input-stream seconds.
        audio_end_s: End of the transcribed audio, in input-stream seconds.
        reused_partial: True when a partial that already covered the end of speech was
            promoted to the final instead of transcribing the utterance again.
        revised: True when a second hearing replaced the first transcript: the words first
            heard (and any draft made on them) were judged wrong.
    """

    finalized: bool = True
    utterance_id: int = 0
    audio_start_s: float = 0.0
    audio_end_s: float = 0.0
    reused_partial: bool = False
    revised: bool = False

    def __str__(self):
        return (
            f"{self.name}(utterance: {self.utterance_id}, text: [{self.text}], "
            f"audio: {self.audio_start_s:.2f}-{self.audio_end_s:.2f} s, "
            f"reused_partial: {self.reused_partial})"
        )


@dataclass
class NoWordsHeardFrame(DataFrame):
    """The STT's final for an utterance holds no words (a cough, a door, a breath): no transcript
    of it will come. pipecat has no frame for this: its STT services push nothing, and a turn
    that began on such a sound waits out the user aggregator's ``user_turn_stop_timeout``.

    Parameters:
        utterance_id: The utterance (VAD start..stop) it closes.
    """

    utterance_id: int = 0
