"""Frames for feeding ``StreamingWhisperSTTService`` in tests: scripted VAD events, silence and tone,
the STT on a slow fake Whisper, and a scheduler whose second opinion hears doubted words again."""

import numpy as np
from pipecat.frames.frames import VADUserStartedSpeakingFrame, VADUserStoppedSpeakingFrame

from frames.transcription import FinalTranscriptionFrame, PartialTranscriptionFrame
from processors.stt.streaming_whisper import StreamingWhisperSTTService
from processors.stt.whisper_engine import SAMPLE_RATE
from processors.stt.whisper_scheduler import WhisperScheduler
from tests.fakes.slow_whisper_engine import SlowWhisperEngine

START_SECS = 0.2
STOP_SECS = 0.2
PREROLL_S = 0.5
FRAME_S = 0.02
# tiny.en gets this espeak sentence right at 16 kHz and 8 kHz whatever the cut points.
SENTENCE = "What time does the store open tomorrow morning?"


def vad_events(speech_start_s: float, speech_end_s: float, stop_secs: float = STOP_SECS) -> list:
    return [
        (speech_start_s + START_SECS, VADUserStartedSpeakingFrame(start_secs=START_SECS)),
        (speech_end_s + stop_secs, VADUserStoppedSpeakingFrame(stop_secs=stop_secs)),
    ]


def silence(seconds: float, sample_rate: int = SAMPLE_RATE) -> bytes:
    return bytes(round(seconds * sample_rate) * 2)


def of_type(frames, frame_type) -> list:
    return [frame for frame in frames if isinstance(frame, frame_type)]


def transcripts_in(frames) -> list:
    return of_type(frames, (PartialTranscriptionFrame, FinalTranscriptionFrame))


def fake_stt(fake: SlowWhisperEngine, **kwargs) -> StreamingWhisperSTTService:
    return StreamingWhisperSTTService(engine=fake, preroll_s=PREROLL_S, **kwargs)


def doubted_and_reviewed(said, review_delay_s=0.01, delay_s=0.01):
    """A scheduler whose first Whisper is unsure of ``said(samples)`` and whose second opinion is
    sure; each takes its delay per call."""
    unsure = SlowWhisperEngine(delay_s=delay_s, avg_logprob=-0.9, text_of=said)
    second = SlowWhisperEngine(delay_s=review_delay_s, avg_logprob=-0.2, text_of=lambda n: f"reviewed {n}")
    return unsure, second, WhisperScheduler(unsure, second_opinion=second)


def review_heard(text: str) -> int:
    return int(text.removeprefix("reviewed "))


def after_the_vad_stop(down) -> list:
    stop = next(i for i, f in enumerate(down) if isinstance(f, VADUserStoppedSpeakingFrame))
    return down[stop + 1:]


def tone(seconds: float, amplitude: int = 4000) -> bytes:
    """A steady sound, as loud from its first frame to its last (speech, to the energy rule)."""
    t = np.arange(round(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return (amplitude * np.sin(2 * np.pi * 220 * t)).astype(np.int16).tobytes()
