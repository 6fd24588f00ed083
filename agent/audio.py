"""WAV reading and the true end of speech, found from the samples themselves.

The VAD fires ``stop_secs`` after speech ends, so latency is measured from the audio: the end
of the last 10 ms window whose level is within 40 dB of the clip's loudest window.
"""

from __future__ import annotations

import subprocess
import tempfile
import wave
from pathlib import Path

import numpy as np
import soxr

WINDOW_MS = 10
SPEECH_FLOOR_DB = -40.0


def read_wav(path: str | Path, target_rate: int | None = None) -> tuple[np.ndarray, int]:
    """Read a PCM WAV as int16 mono (channels averaged), optionally resampled with soxr."""
    with wave.open(str(path), "rb") as w:
        if w.getsampwidth() != 2:
            raise ValueError(f"{path}: only 16-bit PCM WAV is supported (got {8 * w.getsampwidth()}-bit)")
        rate, channels = w.getframerate(), w.getnchannels()
        samples = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
    if channels > 1:
        samples = samples.reshape(-1, channels).mean(axis=1).astype(np.int16)
    if target_rate and rate != target_rate:
        samples = soxr.resample(samples, rate, target_rate).astype(np.int16)
        rate = target_rate
    return samples, rate


def write_wav(path: str | Path, samples: np.ndarray, rate: int) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples.astype(np.int16).tobytes())


def _window_levels_db(samples: np.ndarray, rate: int) -> np.ndarray:
    n = rate * WINDOW_MS // 1000
    usable = len(samples) // n * n
    windows = samples[:usable].astype(np.float64).reshape(-1, n)
    rms = np.sqrt(np.mean(windows**2, axis=1)) + 1e-9
    return 20 * np.log10(rms)


def speech_segments(samples: np.ndarray, rate: int, min_gap_s: float = 0.25) -> list[tuple[float, float]]:
    """(start, end) seconds of speech; gaps shorter than ``min_gap_s`` are bridged."""
    levels = _window_levels_db(samples, rate)
    if len(levels) == 0:
        return []
    loud = levels >= levels.max() + SPEECH_FLOOR_DB
    loud &= levels > 20 * np.log10(50)  # near-digital-silence never counts, however quiet the clip
    segments: list[tuple[float, float]] = []
    step = WINDOW_MS / 1000
    for i in np.flatnonzero(loud):
        start, end = i * step, (i + 1) * step
        if segments and start - segments[-1][1] <= min_gap_s:
            segments[-1] = (segments[-1][0], end)
        else:
            segments.append((start, end))
    return segments


def find_speech_end(samples: np.ndarray, rate: int) -> float | None:
    """Seconds from the start of the clip to the true end of its last speech."""
    segments = speech_segments(samples, rate)
    return segments[-1][1] if segments else None


def espeak_speech(text: str, voice: str = "en-us", words_per_minute: int = 160, rate: int = 16000) -> np.ndarray:
    """espeak-ng speech as int16 at ``rate``, with espeak's own leading/trailing digital silence cut off,
    so callers know exactly where speech starts and ends once they add silence of their own."""
    with tempfile.TemporaryDirectory() as scratch:
        raw_path = Path(scratch) / "espeak.wav"
        subprocess.run(
            ["espeak-ng", "-v", voice, "-s", str(words_per_minute), "-w", str(raw_path), "--stdin"],
            input=text.encode(),
            check=True,
            capture_output=True,
        )
        with wave.open(str(raw_path)) as raw:
            espeak_rate = raw.getframerate()
            spoken = np.frombuffer(raw.readframes(raw.getnframes()), dtype=np.int16)
    spoken = without_digital_silence(spoken)
    if spoken.size == 0:
        raise ValueError(f"espeak-ng produced no speech for {text!r} ({voice})")
    return soxr.resample(spoken, espeak_rate, rate, quality="VHQ").astype(np.int16)


def without_digital_silence(samples: np.ndarray) -> np.ndarray:
    """``samples`` from their first non-zero sample to their last: a synthesiser's own padding
    cut off, so silence added after it is all the silence there is."""
    voiced = np.flatnonzero(samples)
    return samples[voiced[0] : voiced[-1] + 1] if voiced.size else samples[:0]
