"""The phone path's first partial: 8 kHz mu-law in against 16 kHz in, on the real VAD and STT.

    python -m agent bench --suite phone [--quick] [--turns N] [--whisper-model tiny.en|base] [--json PATH]

Each bench corpus utterance is played in real time (20 ms frames on an absolute schedule) into
Brisk's front end, pipecat's Silero VAD then the streaming Whisper STT with the configured
model, twice: as a browser sends it (16 kHz PCM) and as a phone line does (8 kHz through G.711
mu-law, what Twilio Media Streams carry). Times are on the pipeline clock, from the moment the
frame holding the first speech sample reached the STT:

- ``vad_start_ms``: until the VAD said the user started speaking.
- ``first_partial_ms``: until the first partial transcript left the STT.
- ``held_back_ms``: for every partial, the audio the STT had been given when that partial's
  transcription started minus the audio it transcribed. Buffering inside the STT shows here (a
  soxr stream resampler from 8 kHz held back 65 ms at the median, 111 ms at most); the floor is
  0, or one 20 ms frame that reached the STT while the job was starting.
- ``final_wer``: word error rate of the final transcripts against the text said (mean).

``whole_clip_wer`` then separates bandwidth from the codec: each clip transcribed once, whole, at
16 kHz, band-limited to 8 kHz PCM, and through mu-law (mean WER).
"""

from __future__ import annotations

import asyncio
import bisect
import time
import warnings

import numpy as np
import soxr
from pipecat.frames.frames import (
    EndFrame,
    InputAudioRawFrame,
    VADUserStartedSpeakingFrame,
)
from pipecat.observers.base_observer import BaseObserver, FrameProcessed, FramePushed
from pipecat.processors.audio.vad_processor import VADProcessor

from agent.audio import speech_segments
from agent.bench.corpus import Utterance, render
from agent.bench.overhead import feed_pipeline
from agent.bench.stats import fmt, percentiles, word_error_rate
from agent.config import BriskConfig, load_config
from agent.call.stages import make_vad
from frames.transcription import FinalTranscriptionFrame, PartialTranscriptionFrame
from processors.stt.streaming_whisper import StreamingWhisperSTTService
from processors.stt.whisper_engine import WhisperEngine, WhisperResult, whisper_input

with warnings.catch_warnings():
    # Standard library G.711 until Python 3.13, which this project does not run on yet.
    warnings.simplefilter("ignore", DeprecationWarning)
    import audioop

FRAME_S = 0.02
RATES = {"web_16k": 16000, "phone_8k_ulaw": 8000}
METHOD = (
    "each utterance played in real time into Silero VAD + streaming Whisper, as 16 kHz PCM and as "
    "8 kHz G.711 mu-law; times from the frame holding the first speech sample reaching the STT"
)


def narrowband(samples_16k: np.ndarray) -> np.ndarray:
    """16 kHz int16 speech band-limited to 8 kHz int16."""
    return soxr.resample(samples_16k, 16000, 8000, quality="VHQ").astype(np.int16)


def phone_line(samples_16k: np.ndarray) -> np.ndarray:
    """What a phone call delivers of 16 kHz speech: 8 kHz int16 decoded from G.711 mu-law."""
    ulaw = audioop.lin2ulaw(narrowband(samples_16k).tobytes(), 2)
    return np.frombuffer(audioop.ulaw2lin(ulaw, 2), dtype=np.int16)


def whole_clip_wer(clips: list, engine: WhisperEngine) -> dict:
    """Mean WER of one whole-clip transcription each: 16 kHz, 8 kHz PCM, 8 kHz mu-law."""
    conditions = {
        "16k_pcm": lambda s: whisper_input(s, 16000),
        "8k_pcm": lambda s: whisper_input(narrowband(s), 8000),
        "8k_ulaw": lambda s: whisper_input(phone_line(s), 8000),
    }
    return {
        name: round(float(np.mean([
            word_error_rate(clip.utterance.text, engine.transcribe(convert(clip.samples)).transcript)
            for clip in clips
        ])), 3)
        for name, convert in conditions.items()
    }


class _RecordingEngine:
    """The real engine, noting when (pipeline clock) each transcription began."""

    def __init__(self, engine: WhisperEngine, clock):
        self._engine = engine
        self._clock = clock
        self.name, self.language = engine.name, engine.language
        # id(result) -> (start, result); holding the result keeps its id unique for the run.
        self._calls: dict[int, tuple[float, WhisperResult]] = {}

    async def transcribe_async(self, audio: np.ndarray, should_stop=None) -> WhisperResult:
        started = self._clock()
        result = await self._engine.transcribe_async(audio, should_stop)
        self._calls[id(result)] = (started, result)
        return result

    def started_at(self, result: WhisperResult) -> float:
        """When the transcription that produced ``result`` began."""
        return self._calls[id(result)][0]


class _Timeline(BaseObserver):
    """Audio arrivals at the STT and what it pushed, on the pipeline clock (seconds)."""

    def __init__(self, stt: StreamingWhisperSTTService):
        super().__init__()
        self._stt = stt
        self.arrival_times: list[float] = []
        self.arrival_seconds: list[float] = []  # stream seconds received, after each arrival
        self.vad_starts: list[float] = []
        self.partials: list[tuple[float, PartialTranscriptionFrame]] = []
        self.finals: list[FinalTranscriptionFrame] = []

    async def on_process_frame(self, data: FrameProcessed):
        if data.processor is not self._stt:
            return
        frame = data.frame
        if isinstance(frame, InputAudioRawFrame):
            received = self.arrival_seconds[-1] if self.arrival_seconds else 0.0
            self.arrival_times.append(data.timestamp / 1e9)
            self.arrival_seconds.append(received + frame.num_frames / frame.sample_rate)
        elif isinstance(frame, VADUserStartedSpeakingFrame):
            self.vad_starts.append(data.timestamp / 1e9)

    async def on_push_frame(self, data: FramePushed):
        if data.source is not self._stt:
            return
        if isinstance(data.frame, PartialTranscriptionFrame):
            self.partials.append((data.timestamp / 1e9, data.frame))
        elif isinstance(data.frame, FinalTranscriptionFrame):
            self.finals.append(data.frame)

    def received_by(self, moment: float) -> float:
        i = bisect.bisect_right(self.arrival_times, moment)
        return self.arrival_seconds[i - 1] if i else 0.0

    def reached(self, stream_s: float) -> float:
        """When the frame holding stream second ``stream_s`` reached the STT."""
        return self.arrival_times[bisect.bisect_right(self.arrival_seconds, stream_s)]


async def _play(
    samples: np.ndarray, rate: int, engine: WhisperEngine, config: BriskConfig
) -> tuple[_Timeline, _RecordingEngine]:
    recording = _RecordingEngine(engine, lambda: stt.get_clock().get_time() / 1e9)
    stt = StreamingWhisperSTTService(
        engine=recording, partial_interval_s=config.stt_partial_interval_secs
    )
    timeline = _Timeline(stt)

    async def feed(worker):
        step = round(FRAME_S * rate)
        t0 = time.monotonic()
        for i, offset in enumerate(range(0, len(samples), step)):
            await asyncio.sleep(max(0.0, t0 + i * FRAME_S - time.monotonic()))
            chunk = samples[offset : offset + step].tobytes()
            await worker.queue_frame(
                InputAudioRawFrame(audio=chunk, sample_rate=rate, num_channels=1)
            )
        await worker.queue_frame(EndFrame())

    vad = VADProcessor(vad_analyzer=make_vad(config))
    await feed_pipeline([vad, stt], feed, sample_rate=rate, observers=[timeline])
    return timeline, recording


def _turn(utterance: Utterance, onset_s: float, timeline: _Timeline, recording) -> dict:
    onset_at = timeline.reached(onset_s)
    held_back = [
        round(1000 * (timeline.received_by(recording.started_at(p.result)) - p.audio_end_s), 1)
        + 0.0  # no "-0.0"
        for _, p in timeline.partials
    ]
    final = " ".join(f.text for f in timeline.finals)
    return {
        "id": utterance.id,
        "vad_start_ms": round(1000 * (timeline.vad_starts[0] - onset_at))
        if timeline.vad_starts
        else None,
        "first_partial_ms": round(1000 * (timeline.partials[0][0] - onset_at))
        if timeline.partials
        else None,
        "held_back_ms": held_back,
        "final": final,
        "wer": round(word_error_rate(utterance.text, final), 3),
    }


async def measure(utterances: list[Utterance], config: BriskConfig | None = None) -> dict:
    """Play every utterance at each rate (alternating, so load drifts hit both) and summarise."""
    from agent.runtime.models import whisper_model_path

    config = config or load_config()
    engine = WhisperEngine.load(whisper_model_path(config.whisper_model),
                                cpu_threads=config.whisper_threads)
    turns: dict[str, list[dict]] = {name: [] for name in RATES}
    clips = [render(utterance) for utterance in utterances]
    for utterance, clip in zip(utterances, clips):
        onset_s = speech_segments(clip.samples, clip.sample_rate)[0][0]
        for name, rate in RATES.items():
            samples = clip.samples if rate == clip.sample_rate else phone_line(clip.samples)
            timeline, recording = await _play(samples, rate, engine, config)
            turns[name].append(_turn(utterance, onset_s, timeline, recording))
    summary = {}
    for name, rows in turns.items():
        held_back = [v for r in rows for v in r["held_back_ms"]]
        summary[name] = {
            "sample_rate": RATES[name],
            "vad_start_ms": percentiles([r["vad_start_ms"] for r in rows]),
            "first_partial_ms": percentiles([r["first_partial_ms"] for r in rows]),
            "held_back_ms": {**percentiles(held_back), "max": max(held_back, default=None)},
            "final_wer": round(sum(r["wer"] for r in rows) / len(rows), 3),
            "turns": rows,
        }
    whole = await asyncio.to_thread(whole_clip_wer, clips, engine)
    return {"method": METHOD, "whisper_model": config.whisper_model, **summary, "whole_clip_wer": whole}


def format_phone(result: dict) -> str:
    """A small table: one row per input path."""
    lines = [
        f"Phone path: first partial, 8 kHz mu-law vs 16 kHz ({result['whisper_model']}, "
        "ms from the first speech frame)",
        f"{'input':<16}{'VAD start P50':>14}{'1st partial P50':>17}{'P95':>7}"
        f"{'held back P50/max':>19}{'final WER':>11}",
    ]
    for name in RATES:
        row = result[name]
        vad, first, held = row["vad_start_ms"], row["first_partial_ms"], row["held_back_ms"]
        lines.append(
            f"{name:<16}{fmt(vad['p50']):>14}{fmt(first['p50']):>17}{fmt(first['p95']):>7}"
            f"{fmt(held['p50']) + '/' + fmt(held['max']):>19}{row['final_wer']:>11.1%}"
        )
    whole = result["whole_clip_wer"]
    lines.append(
        f"whole clips, one transcription each: WER 16 kHz {whole['16k_pcm']:.1%}, "
        f"8 kHz PCM {whole['8k_pcm']:.1%}, 8 kHz mu-law {whole['8k_ulaw']:.1%}"
    )
    return "\n".join(lines)
