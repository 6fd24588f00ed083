"""One utterance's audio for the streaming Whisper STT, and what was heard of it so far.

Consumes int16 PCM frames of one VAD start..stop (``Utterance.append``); keeps the audio at its
input rate, where its last sound ended and whether the caller is in a pause (``PAUSE_S`` of quiet
after sound, by frame energy: processors/stt/speech_energy.py), the latest partial (``Partial``), an
early review of its words (``EarlyReview``) and a pause's hearing by the second opinion. Emits
nothing; processors/stt/streaming_whisper.py drives it. Measures nothing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np

from processors.stt.speech_energy import PEAK_SHARE, energy
from processors.turns.turn_completeness import unfinished
from processors.stt.whisper_engine import WhisperResult, whisper_input


@dataclass
class Partial:
    """A transcript of the utterance up to ``end_sample`` (a partial, or the final's source)."""

    end_sample: int
    result: WhisperResult
    reviewed: bool = False  # the second opinion's word on these words: not to be heard again
    after_pause: bool = False  # its audio ended in the caller's pause (PAUSE_S of quiet)


@dataclass
class EarlyReview:
    """The second opinion hearing words again before the VAD stop, for the final to reuse."""

    words: str  # the first transcript's words (comparison form) it is hearing again
    task: asyncio.Task  # -> the transcript to keep (WhisperScheduler.review)
    first: WhisperResult  # that first transcript: kept, if the review says so
    hearing: asyncio.Task | None = None  # the second opinion's transcript it settles with, when begun at a pause

    def result(self) -> WhisperResult | None:
        done = self.task.done() and not self.task.cancelled() and self.task.exception() is None
        return self.task.result() if done else None


# Quiet this long after sound, the caller has stopped, for now: a partial runs at once instead of
# at the next tick, and a doubted one with finished words is reviewed without waiting for a
# repeat. At 0.12 s, over Opus, both tiny.en and base heard "Are you guys open on Sundays?" as
# "...on certain days?" in 2 of 4 calls (too little silence after the last word); at 0.2 s in none.
PAUSE_S = 0.2


class Utterance:
    """Audio of one VAD start..stop at the input rate, positioned on the input stream."""

    def __init__(self, utterance_id: int, start_sample: int, preroll: bytes, sample_rate: int):
        self.id = utterance_id
        self.sample_rate = sample_rate
        self.start_sample = start_sample
        self.audio = bytearray(preroll)
        self.ended = False
        self.last_partial: Partial | None = None
        self.early: EarlyReview | None = None
        # The second opinion's hearing of a pause heard while a partial was running, for the
        # pause's own partial (or the final) to settle with; dropped when the caller goes on.
        self.hearing: asyncio.Task | None = None
        self.job: asyncio.Task | None = None
        self.job_end_sample = start_sample
        self.loudest = 0.0  # RMS of its loudest frame so far
        self.sound_end_sample = start_sample  # the end of its last frame of sound
        self.pause_heard = asyncio.Event()  # set as a pause reaches PAUSE_S; a partial clears it

    def append(self, pcm: bytes):
        """Add one frame of audio, noting whether it is sound or part of a pause."""
        was_paused = self.paused
        self.audio += pcm
        level = energy(pcm)
        self.loudest = max(self.loudest, level)
        if level >= PEAK_SHARE * self.loudest:
            self.sound_end_sample = self.end_sample
            self.drop_hearing()  # of a pause the caller has ended
        elif self.paused and not was_paused:
            self.pause_heard.set()

    def heard_all(self, partial: Partial | None) -> bool:
        """Whether ``partial`` heard every sound so far: its audio ended in a pause and none came
        since (the VAD's stop, ~0.1 s after the energy's pause, may place the speech's end later)."""
        return partial is not None and partial.after_pause and self.sound_end_sample <= partial.end_sample

    def nothing_new(self) -> bool:
        """Whether a partial now would only hear more of a pause after finished words: the last
        one heard them all, and the cores are wanted by the second opinion, the LLM and the voice."""
        last = self.last_partial
        return self.heard_all(last) and unfinished(last.result.transcript) is None

    def drop_hearing(self):
        """Cancel a pause's hearing no partial took."""
        if self.hearing is not None:
            self.hearing.cancel()
            self.hearing = None

    @property
    def paused(self) -> bool:
        """Whether the audio so far ends in PAUSE_S of quiet after sound."""
        return self.loudest > 0 and self.seconds(self.end_sample - self.sound_end_sample) >= PAUSE_S

    @property
    def end_sample(self) -> int:
        return self.start_sample + len(self.audio) // 2

    def seconds(self, sample: int) -> float:
        return sample / self.sample_rate

    def samples(self) -> np.ndarray:
        """The audio so far as Whisper takes it."""
        return whisper_input(np.frombuffer(self.audio, dtype=np.int16), self.sample_rate)
