"""Test speech: espeak-ng sentences as 16 kHz mono WAVs whose speech boundaries are exact.

espeak-ng's own leading and trailing silence is trimmed (it writes exact zeros there) and
replaced by silence of a known length, so the speech start and end are known by construction,
not guessed by a VAD.
"""

import re
import tempfile
import wave
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soxr
from pipecat.frames.frames import Frame, InputAudioRawFrame

from agent.audio import espeak_speech
from pipecat.tests.utils import SleepFrame

SAMPLE_RATE = 16000

# Browsers and VADs need a moment of silence before the first word (architecture.md).
MIN_LEADING_SILENCE_S = 1.0


@dataclass(frozen=True)
class SynthesizedSpeech:
    """A spoken sentence on disk and in memory.

    Parameters:
        path: The 16 kHz mono int16 WAV file.
        samples: The same audio as int16 samples.
        sample_rate: Always 16000.
        text: The sentence that was spoken.
        speech_start_s: Where the first speech sample is, in seconds from the start.
        speech_end_s: Where the speech ends, in seconds from the start.
    """

    path: Path
    samples: np.ndarray
    sample_rate: int
    text: str
    speech_start_s: float
    speech_end_s: float

    @property
    def duration_s(self) -> float:
        """Length of the whole clip, silence included."""
        return len(self.samples) / self.sample_rate

    def pcm(self, sample_rate: int = SAMPLE_RATE) -> bytes:
        """The clip as 16-bit mono PCM bytes at ``sample_rate`` (e.g. 8000 for telephony)."""
        if sample_rate == self.sample_rate:
            return self.samples.tobytes()
        return soxr.resample(self.samples, self.sample_rate, sample_rate, quality="VHQ").tobytes()


def synthesize_speech(
    text: str,
    path: Path | str | None = None,
    *,
    voice: str = "en-us",
    words_per_minute: int = 160,
    lead_silence: float = 1.0,
    tail_silence: float = 1.0,
) -> SynthesizedSpeech:
    """Speak ``text`` with espeak-ng and write it as a 16 kHz mono int16 WAV.

    Args:
        text: The sentence to speak.
        path: Where to write the WAV; a new temporary file when None.
        voice: An espeak-ng voice, e.g. "en-us", "en-gb", "en-us+f3".
        words_per_minute: Speaking speed.
        lead_silence: Seconds of silence before the speech; at least 1.
        tail_silence: Seconds of silence after the speech.

    Returns:
        The clip, with its exact speech start and end.
    """
    if lead_silence < MIN_LEADING_SILENCE_S:
        raise ValueError(f"keep at least {MIN_LEADING_SILENCE_S} s of silence before the speech")
    if tail_silence < 0:
        raise ValueError("tail silence cannot be negative")

    speech = espeak_speech(text, voice, words_per_minute, SAMPLE_RATE)

    lead = np.zeros(round(lead_silence * SAMPLE_RATE), dtype=np.int16)
    tail = np.zeros(round(tail_silence * SAMPLE_RATE), dtype=np.int16)
    samples = np.concatenate([lead, speech, tail])

    if path is None:
        with tempfile.NamedTemporaryFile(prefix="brisk-speech-", suffix=".wav", delete=False) as f:
            path = f.name
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(SAMPLE_RATE)
        out.writeframes(samples.tobytes())

    return SynthesizedSpeech(
        path=path,
        samples=samples,
        sample_rate=SAMPLE_RATE,
        text=text,
        speech_start_s=len(lead) / SAMPLE_RATE,
        speech_end_s=(len(lead) + len(speech)) / SAMPLE_RATE,
    )


def normalize_text(text: str) -> str:
    """Lower case, punctuation dropped, single spaces: for comparing transcripts."""
    return " ".join(re.sub(r"[^\w\s']", " ", text.lower()).split())


def paced_frames(
    pcm: bytes,
    sample_rate: int,
    *,
    speed: float = 1.0,
    frame_s: float = 0.02,
    events: Sequence[tuple[float, Frame]] = (),
) -> list[Frame]:
    """Frames for ``pipecat.tests.utils.run_test`` that play ``pcm`` like a live microphone.

    Args:
        pcm: 16-bit mono PCM.
        sample_rate: Its sample rate.
        speed: How many times faster than real time the audio arrives.
        frame_s: Length of each ``InputAudioRawFrame``.
        events: ``(seconds, frame)`` pairs; each frame (e.g. a VAD frame) is sent right after
            the audio frame that reaches ``seconds`` of the clip.

    Returns:
        Audio frames, each followed by a ``SleepFrame`` of ``frame_s / speed``, with the
        events in place.
    """
    step = round(frame_s * sample_rate) * 2
    pending = sorted(events, key=lambda event: event[0])
    frames: list[Frame] = []
    for offset in range(0, len(pcm), step):
        chunk = pcm[offset : offset + step]
        frames.append(InputAudioRawFrame(audio=chunk, sample_rate=sample_rate, num_channels=1))
        frames.append(SleepFrame(sleep=frame_s / speed))
        reached = (offset + len(chunk)) / 2 / sample_rate
        while pending and pending[0][0] <= reached + 1e-9:
            frames.append(pending.pop(0)[1])
    frames.extend(frame for _, frame in pending)
    return frames


def over_opus(samples: np.ndarray, sample_rate: int) -> np.ndarray:
    """``samples`` (int16 mono) as the server hears them after a WebRTC call's codec: through
    aiortc's own Opus encoder and decoder (96 kb/s, voip), back at ``sample_rate``, int16.

    The codec changes what Whisper hears: tiny.en gets "Sundays" right from the clip alone and
    hears "certain days" after Opus, as it did over the FAQ suite's calls."""
    from av import AudioFrame
    from aiortc.codecs.opus import SAMPLE_RATE as OPUS_RATE, SAMPLES_PER_FRAME, OpusDecoder, OpusEncoder
    from aiortc.jitterbuffer import JitterFrame

    encoder, decoder = OpusEncoder(), OpusDecoder()
    pcm = soxr.resample(samples, sample_rate, OPUS_RATE, quality="VHQ")
    pcm = np.concatenate([pcm, np.zeros(-len(pcm) % SAMPLES_PER_FRAME, dtype=np.int16)])
    decoded = []
    for pts, start in enumerate(range(0, len(pcm), SAMPLES_PER_FRAME)):
        frame = AudioFrame.from_ndarray(pcm[start:start + SAMPLES_PER_FRAME].reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate, frame.pts = OPUS_RATE, pts * SAMPLES_PER_FRAME
        payloads, timestamp = encoder.encode(frame)
        for payload in payloads:
            for out in decoder.decode(JitterFrame(data=payload, timestamp=timestamp)):
                decoded.append(out.to_ndarray().reshape(-1, 2)[:, 0])  # packed stereo: keep one channel
    return soxr.resample(np.concatenate(decoded), OPUS_RATE, sample_rate, quality="VHQ")
