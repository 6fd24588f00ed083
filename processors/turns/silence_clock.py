"""Input-stream time and the silence since the caller's last speech, from the audio itself.

Consumes ``InputAudioRawFrame``s (the same stream the STT counts, so a partial's
``audio_end_s`` is on the same clock); measures seconds of audio seen and of trailing silence.
"""

from __future__ import annotations

import numpy as np
from pipecat.frames.frames import InputAudioRawFrame

# A frame is speech when it is within this many dB of the loudest recent frame and above the
# floor; the reference decays so a loud cough does not mute the next minute.
_SPEECH_WITHIN_DB = 35.0
_SPEECH_FLOOR_DBFS = -60.0
_PEAK_DECAY_DB_PER_S = 6.0


class SilenceClock:
    """Input-stream time (seconds of audio seen) and where the current silence began.

    It counts the same ``InputAudioRawFrame`` stream the STT counts, so a partial's
    ``audio_end_s`` is on the same clock.
    """

    def __init__(self):
        self.now_s = 0.0
        self.onset_s: float | None = None  # None while the audio is speech
        self._peak_db = _SPEECH_FLOOR_DBFS

    def add(self, frame: InputAudioRawFrame) -> float:
        """Account one frame; returns the silence so far (0 when this frame is speech)."""
        samples = np.frombuffer(frame.audio, dtype=np.int16)
        duration = len(samples) / max(1, frame.num_channels) / frame.sample_rate
        rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64)))) if samples.size else 0.0
        level_db = 20.0 * np.log10(rms / 32768.0 + 1e-9)
        self._peak_db = max(level_db, self._peak_db - _PEAK_DECAY_DB_PER_S * duration)
        speech = level_db > max(_SPEECH_FLOOR_DBFS, self._peak_db - _SPEECH_WITHIN_DB)
        if speech:
            self.onset_s = None
        elif self.onset_s is None:
            self.onset_s = self.now_s
        self.now_s += duration
        return self.silence_s

    @property
    def silence_s(self) -> float:
        return 0.0 if self.onset_s is None else self.now_s - self.onset_s

    def silence_after(self, audio_end_s: float | None) -> float:
        """Silence following audio that ended at ``audio_end_s``: 0 unless it reached the onset."""
        if audio_end_s is None or self.onset_s is None:
            return 0.0
        # One 20 ms frame of slack: the STT's buffer and this clock round differently.
        return self.silence_s if audio_end_s >= self.onset_s - 0.02 else 0.0
