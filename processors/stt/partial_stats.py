"""What a call's partial transcriptions cost, and how often a final could reuse one.

Filled by ``StreamingWhisperSTTService`` (its ``partial_stats``); read by the bench and tests.
Consumes and emits no frames; holds the last 10 000 jobs at most, so it never grows for the life
of a call.
"""

from collections import deque
from dataclasses import dataclass, field


@dataclass(frozen=True)
class PartialJob:
    """One completed partial transcription.

    Parameters:
        utterance_id: The utterance it transcribed.
        audio_start_s: Start of its audio, in input-stream seconds.
        audio_end_s: End of its audio, in input-stream seconds.
        duration_s: Wall time of the transcription.
        text: What it produced (empty for non-speech).
    """

    utterance_id: int
    audio_start_s: float
    audio_end_s: float
    duration_s: float
    text: str


@dataclass
class PartialStats:
    """What the partial transcriptions cost and how often a final could reuse one.

    Parameters:
        jobs: Completed partial jobs, oldest first (the last 10 000).
        skipped_ticks: Partial ticks that fell while a job was still running.
        cancelled_jobs: Jobs abandoned at a VAD stop because their audio ended before the speech.
        reused_finals: Finals promoted from a partial that covered the end of speech.
        transcribed_finals: Finals that needed a transcription of their own.
    """

    jobs: deque[PartialJob] = field(default_factory=lambda: deque(maxlen=10_000))
    skipped_ticks: int = 0
    cancelled_jobs: int = 0
    reused_finals: int = 0
    transcribed_finals: int = 0

    def durations(self) -> list[float]:
        """Durations of the recorded jobs, in seconds."""
        return [job.duration_s for job in self.jobs]
