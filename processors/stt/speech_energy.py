"""Where the sound starts in a clip, and how loud a frame is, by frame energy.

Consumes int16 PCM; returns the clip cut to its first sound (``from_onset``) or one frame's RMS
(``energy``). Measures nothing.

A frame energy threshold, not a second VAD: the VAD already said speech started, and these only
ask where in the preroll the sound begins, or whether the caller is quiet for now (a frame under
``PEAK_SHARE`` of the utterance's loudest). Pure numpy, microseconds a frame.
"""

import numpy as np

_FRAME_S = 0.02
PEAK_SHARE = 0.05  # a frame this loud against the loudest is sound, not the line's hiss


def energy(pcm: bytes) -> float:
    """RMS of int16 ``pcm`` (0.0 when empty)."""
    samples = np.frombuffer(pcm, dtype=np.int16).astype(np.float32)
    return float(np.sqrt(np.mean(samples ** 2))) if samples.size else 0.0


def from_onset(pcm: bytes, rate: int, lead_s: float) -> bytes:
    """``pcm`` from ``lead_s`` before its first sound; all of it when it holds none."""
    samples = np.frombuffer(pcm, dtype=np.int16).astype(np.float32)
    frame = max(1, round(_FRAME_S * rate))
    count = len(samples) // frame
    if count == 0:
        return pcm
    frames = np.sqrt(np.mean(samples[: count * frame].reshape(count, frame) ** 2, axis=1))
    if frames.max() == 0:
        return pcm
    first_loud = int(np.argmax(frames >= PEAK_SHARE * frames.max()))
    start = max(0, first_loud * frame - round(lead_s * rate))
    return pcm[start * 2:]
