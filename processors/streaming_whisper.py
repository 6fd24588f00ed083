"""Streaming Whisper STT: partial transcripts while the user speaks, one final per utterance.

Consumes ``InputAudioRawFrame`` at any sample rate and the ``VADUserStartedSpeakingFrame`` /
``VADUserStoppedSpeakingFrame`` pushed by pipecat's ``VADProcessor`` upstream. All input frames
pass through. Audio is kept at its input rate and each transcription's clip is resampled to
Whisper's 16 kHz in one shot (soxr), so telephony audio at 8 kHz reaches a partial the moment it
arrives: a stream resampler held back 65 ms of it at the median, 111 ms at most
(``python -m agent.bench_phone``).

Emits ``PartialTranscriptionFrame`` every ``partial_interval_s`` while the user speaks (at most
one transcription in flight, always of the newest audio of the current utterance only), and one
``FinalTranscriptionFrame`` (``finalized=True``) per utterance after the VAD stop: a partial that
already covered the end of speech is promoted as is, otherwise the utterance is transcribed once.

Measures: pipecat STT TTFB (speech end -> final transcript, the ``STTService`` way) and, in
``partial_stats``, each partial job's duration and audio span plus how often finals were reused.
"""

import asyncio
import math
import threading
import time
from collections import deque
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soxr
from faster_whisper import WhisperModel
from faster_whisper.tokenizer import Tokenizer
from faster_whisper.transcribe import get_suppressed_tokens
from loguru import logger
from pipecat.frames.frames import (
    CancelFrame,
    EndFrame,
    Frame,
    InputAudioRawFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.settings import STTSettings
from pipecat.services.stt_latency import DEFAULT_TTFS_P99
from pipecat.services.stt_service import STTService
from pipecat.transcriptions.language import Language
from pipecat.utils.time import time_now_iso8601

from frames.transcription import FinalTranscriptionFrame, PartialTranscriptionFrame

SAMPLE_RATE = 16000

# Whisper's own silence rule: a window is non-speech only when the model both thinks so and is
# unsure of what it decoded. no_speech_prob alone is not enough: stock pipecat dropped a real
# question at 0.44.
NO_SPEECH_THRESHOLD = 0.6
LOG_PROB_THRESHOLD = -1.0

# Below ~8 s of window Whisper loops on its own output; 10 s keeps stock accuracy at ~1/3 of
# the encoder cost (architecture.md, "Cheaper partials with a shorter encoder window").
MIN_WINDOW_FRAMES = 1000


def whisper_input(pcm: np.ndarray, sample_rate: int) -> np.ndarray:
    """int16 PCM at any rate as Whisper takes it: float32 in [-1, 1] at 16 kHz.

    One shot over the whole clip: nothing held back (a stream resampler keeps a tail), and soxr's
    best quality costs ~1 ms for 15 s of 8 kHz audio (README, "Phone path").
    """
    audio = pcm.astype(np.float32) / 32768.0
    if sample_rate == SAMPLE_RATE:
        return audio
    return soxr.resample(audio, sample_rate, SAMPLE_RATE, quality="VHQ")


@dataclass(frozen=True)
class WhisperResult:
    """One transcription.

    Parameters:
        text: The decoded text, stripped.
        no_speech_prob: Whisper's probability that the audio holds no speech.
        avg_logprob: Average log probability of the decoded tokens.
        window_frames: Log-mel frames the encoder saw (3000 is Whisper's stock 30 s window).
    """

    text: str
    no_speech_prob: float
    avg_logprob: float
    window_frames: int

    @property
    def is_clear_non_speech(self) -> bool:
        """Whisper's rule: likely silence *and* a low-confidence decode."""
        return self.no_speech_prob > NO_SPEECH_THRESHOLD and self.avg_logprob < LOG_PROB_THRESHOLD

    @property
    def transcript(self) -> str:
        """The text to pass on: empty for clear non-speech and for punctuation-only output."""
        if self.is_clear_non_speech or not any(c.isalnum() for c in self.text):
            return ""
        return self.text


class WhisperEngine:
    """One loaded faster-whisper model, shared by every STT service in the process.

    Transcribes with a log-mel window only as long as the clip needs (at least 10 s) instead of
    Whisper's fixed 30 s, which makes each call roughly half as expensive. Calls are serialised:
    CTranslate2 runs one transcription at a time per engine.
    """

    def __init__(self, model: WhisperModel, *, language: str = "en", name: str = "whisper"):
        """Wrap an already loaded model.

        Args:
            model: The faster-whisper model.
            language: Language to transcribe (English-only models accept only "en").
            name: Model name reported in pipecat metrics.
        """
        self._model = model
        self.language = language
        self.name = name
        self._tokenizer = Tokenizer(
            model.hf_tokenizer, model.model.is_multilingual, task="transcribe", language=language
        )
        self._prompt = [*self._tokenizer.sot_sequence, self._tokenizer.no_timestamps]
        self._suppress_tokens = list(get_suppressed_tokens(self._tokenizer, [-1]))
        self._lock = threading.Lock()

    @classmethod
    def load(
        cls,
        model_path: str | Path,
        cpu_threads: int = 1,
        compute_type: str = "int8",
        *,
        device: str = "cpu",
        language: str = "en",
        name: str | None = None,
        warm_up: bool = True,
    ) -> "WhisperEngine":
        """Load a CTranslate2 Whisper model directory.

        Args:
            model_path: Directory holding model.bin, config.json and the tokenizer.
            cpu_threads: Threads per transcription (1 is as fast as 2 with the short window).
            compute_type: CTranslate2 compute type.
            device: "cpu" or "cuda".
            language: Language to transcribe.
            name: Model name for metrics; defaults to the directory name.
            warm_up: Run one dummy transcription now, so the first real one is not cold.
        """
        model = WhisperModel(
            str(model_path), device=device, compute_type=compute_type, cpu_threads=cpu_threads
        )
        engine = cls(model, language=language, name=name or Path(model_path).name)
        if warm_up:
            engine.transcribe(np.zeros(SAMPLE_RATE, dtype=np.float32))
        return engine

    async def transcribe_async(self, audio: np.ndarray) -> WhisperResult:
        """Transcribe in a worker thread so the event loop (and audio) keeps moving."""
        return await asyncio.to_thread(self.transcribe, audio)

    def transcribe(self, audio: np.ndarray) -> WhisperResult:
        """Transcribe mono float32 audio at 16 kHz in [-1, 1]. Blocks; one call at a time."""
        audio = np.asarray(audio, dtype=np.float32)
        with self._lock:
            extractor = self._model.feature_extractor
            # The extractor appends one frame past the audio; faster-whisper drops it too.
            features = extractor(audio)[..., :-1]
            if features.shape[-1] > extractor.nb_max_frames:
                return self._transcribe_long(audio)
            seconds = audio.size / SAMPLE_RATE
            max_new_tokens = math.ceil(6 * seconds) + 10
            window = min(
                extractor.nb_max_frames,
                max(MIN_WINDOW_FRAMES, math.ceil(seconds + 1) * self._model.frames_per_second),
            )
            result, capped = self._decode(features, window, max_new_tokens)
            if capped and window < extractor.nb_max_frames:
                # Hitting the token cap means a repetition loop, which short windows can fall
                # into; the stock window does not.
                result, _ = self._decode(features, extractor.nb_max_frames, max_new_tokens)
            return result

    def _decode(
        self, features: np.ndarray, window: int, max_new_tokens: int
    ) -> tuple[WhisperResult, bool]:
        # Pad the log-mel, not the waveform: a waveform padded to the window decodes badly.
        padded = np.zeros((features.shape[0], window), dtype=np.float32)
        padded[:, : features.shape[-1]] = features
        encoder_output = self._model.encode(padded)
        max_length = min(len(self._prompt) + max_new_tokens, self._model.max_length)
        result = self._model.model.generate(
            encoder_output,
            [self._prompt],
            beam_size=1,
            max_length=max_length,
            return_scores=True,
            return_no_speech_prob=True,
            suppress_blank=True,
            suppress_tokens=self._suppress_tokens,
        )[0]
        tokens = result.sequences_ids[0]
        # Same recovery of the average log prob as faster-whisper (length_penalty 1).
        avg_logprob = result.scores[0] * len(tokens) / (len(tokens) + 1)
        capped = len(self._prompt) + len(tokens) >= max_length
        text = self._tokenizer.decode(tokens).strip()
        return WhisperResult(text, result.no_speech_prob, avg_logprob, window), capped

    def _transcribe_long(self, audio: np.ndarray) -> WhisperResult:
        # Past 30 s a single window cannot hold the clip: let faster-whisper seek through it.
        # It drops non-speech segments with the same rule, so report the most speech-like one.
        segments, _ = self._model.transcribe(
            audio, language=self.language, beam_size=1, condition_on_previous_text=False
        )
        segments = list(segments)
        window = self._model.feature_extractor.nb_max_frames
        if not segments:
            return WhisperResult("", 1.0, -math.inf, window)
        return WhisperResult(
            " ".join(s.text.strip() for s in segments).strip(),
            min(s.no_speech_prob for s in segments),
            max(s.avg_logprob for s in segments),
            window,
        )


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


@dataclass
class _Partial:
    end_sample: int
    result: WhisperResult


class _Utterance:
    """Audio of one VAD start..stop at the input rate, positioned on the input stream."""

    def __init__(self, utterance_id: int, start_sample: int, preroll: bytes, sample_rate: int):
        self.id = utterance_id
        self.sample_rate = sample_rate
        self.start_sample = start_sample
        self.audio = bytearray(preroll)
        self.ended = False
        self.last_partial: _Partial | None = None
        self.job: asyncio.Task | None = None
        self.job_end_sample = start_sample

    @property
    def end_sample(self) -> int:
        return self.start_sample + len(self.audio) // 2

    def seconds(self, sample: int) -> float:
        return sample / self.sample_rate

    def samples(self) -> np.ndarray:
        """The audio so far as Whisper takes it."""
        return whisper_input(np.frombuffer(self.audio, dtype=np.int16), self.sample_rate)


class StreamingWhisperSTTService(STTService):
    """Whisper STT with partial transcripts while the user speaks (see the module docstring)."""

    def __init__(
        self,
        *,
        engine: WhisperEngine,
        partial_interval_s: float = 0.2,
        preroll_s: float = 0.5,
        reuse_covering_partial: bool = True,
        **kwargs,
    ):
        """Initialize the service.

        Args:
            engine: The loaded model, shareable between services.
            partial_interval_s: Time between partial transcriptions; a job that takes longer
                just delays the next one, which then takes the newest audio.
            preroll_s: Audio kept from before the VAD start, which fires only after
                ``start_secs`` of speech.
            reuse_covering_partial: Promote a partial that already covers the end of speech
                to the final instead of transcribing the utterance again.
            **kwargs: Passed to ``STTService``.
        """
        kwargs.setdefault(
            "settings", STTSettings(model=engine.name, language=Language(engine.language))
        )
        # Finals arrive finalized, so turn strategies only fall back to this wait when an
        # utterance produced no text at all.
        kwargs.setdefault("ttfs_p99_latency", DEFAULT_TTFS_P99)
        super().__init__(**kwargs)
        self._engine = engine
        self._partial_interval_s = partial_interval_s
        self._preroll_s = preroll_s
        self._preroll_bytes = 0  # set with the stream's rate, by the first frame
        self._reuse_covering_partial = reuse_covering_partial
        self.partial_stats = PartialStats()

        # The stream's rate is the first frame's; _frame_rate is the frame being processed.
        self._stream_rate: int | None = None
        self._frame_rate = SAMPLE_RATE
        self._stream_samples = 0
        self._preroll = bytearray()
        self._utterance: _Utterance | None = None
        self._utterance_count = 0
        self._partial_loop_task: asyncio.Task | None = None
        self._final_task: asyncio.Task | None = None

    def can_generate_metrics(self) -> bool:
        """STT TTFB is reported (speech end -> final transcript)."""
        return True

    async def stop(self, frame: EndFrame):
        """Let a final that is being transcribed reach the pipeline, then stop."""
        await self._abandon_open_utterance()
        if self._final_task is not None:
            await self._final_task
            self._final_task = None
        await super().stop(frame)

    async def cancel(self, frame: CancelFrame):
        """Stop at once, dropping any transcription in progress."""
        await self._abandon_open_utterance()
        if self._final_task is not None:
            await self.cancel_task(self._final_task)
            self._final_task = None
        await super().cancel(frame)

    async def process_audio_frame(self, frame: InputAudioRawFrame, direction: FrameDirection):
        """Note the frame's own sample rate: telephony audio may arrive at 8 kHz."""
        self._frame_rate = frame.sample_rate
        await super().process_audio_frame(frame, direction)

    async def run_stt(self, audio: bytes) -> AsyncGenerator[Frame | None, None]:
        """Append input audio to the stream; transcripts are pushed by background tasks."""
        rate = self._frame_rate
        if self._stream_rate is None:
            self._stream_rate = rate
            self._preroll_bytes = round(self._preroll_s * rate) * 2
        elif rate != self._stream_rate:
            # Transports send one rate per call; a stray frame at another one is converted
            # rather than dropped, so the stream clock stays whole.
            logger.warning(
                f"{self}: {rate} Hz audio in a {self._stream_rate} Hz stream; resampling it"
            )
            samples = np.frombuffer(audio, dtype=np.int16)
            audio = soxr.resample(samples, rate, self._stream_rate, quality="VHQ").tobytes()
        self._stream_samples += len(audio) // 2
        self._preroll += audio
        del self._preroll[: max(0, len(self._preroll) - self._preroll_bytes)]
        if self._utterance is not None:
            self._utterance.audio += audio
        yield None

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Start and end utterances on the VAD frames (after the base class handles them)."""
        await super().process_frame(frame, direction)
        if isinstance(frame, VADUserStartedSpeakingFrame):
            self._begin_utterance()
        elif isinstance(frame, VADUserStoppedSpeakingFrame):
            await self._end_utterance(frame.stop_secs)

    def _begin_utterance(self):
        if self._utterance is not None:
            return
        self._utterance_count += 1
        start_sample = self._stream_samples - len(self._preroll) // 2
        utterance = _Utterance(
            self._utterance_count,
            start_sample,
            bytes(self._preroll),
            self._stream_rate or self._frame_rate,
        )
        self._utterance = utterance
        self._partial_loop_task = self.create_task(
            self._partial_loop(utterance), name=f"partials-{utterance.id}"
        )

    async def _end_utterance(self, stop_secs: float):
        utterance = self._utterance
        if utterance is None:
            return
        self._utterance = None
        utterance.ended = True
        await self._stop_partials()
        # The VAD fires stop_secs after the speech ended.
        speech_end = max(
            utterance.start_sample,
            self._stream_samples - round(stop_secs * utterance.sample_rate),
        )
        if utterance.job is None and self._covers(utterance.last_partial, speech_end):
            await self._push_final(utterance, utterance.last_partial, reused=True)
            return
        self._final_task = self.create_task(
            self._finalize(utterance, speech_end, self._final_task), name=f"final-{utterance.id}"
        )

    def _covers(self, partial: _Partial | None, speech_end: int) -> bool:
        if not self._reuse_covering_partial or partial is None:
            return False
        return partial.end_sample >= speech_end

    async def _stop_partials(self):
        if self._partial_loop_task is not None:
            # The loop only waits on the job; the job itself is left to _finalize.
            await self.cancel_task(self._partial_loop_task)
            self._partial_loop_task = None

    async def _abandon_open_utterance(self):
        # Without a VAD stop there is no end of speech to finalize at.
        await self._stop_partials()
        if self._utterance is not None and self._utterance.job is not None:
            await self.cancel_task(self._utterance.job)
        self._utterance = None

    async def _partial_loop(self, utterance: _Utterance):
        # The previous utterance's final must reach the pipeline before this one's partials.
        if self._final_task is not None:
            await asyncio.wait({self._final_task})
        next_tick = time.monotonic() + self._partial_interval_s
        while True:
            await asyncio.sleep(max(0.0, next_tick - time.monotonic()))
            if utterance.end_sample == utterance.job_end_sample:
                next_tick += self._partial_interval_s
                continue
            started = time.monotonic()
            utterance.job_end_sample = utterance.end_sample
            utterance.job = self.create_task(
                self._run_partial(utterance, utterance.samples(), utterance.job_end_sample),
                name=f"partial-{utterance.id}",
            )
            # wait() rather than await: cancelling this loop must not cancel the job.
            await asyncio.wait({utterance.job})
            elapsed = time.monotonic() - started
            # Ticks that fell during the job are dropped, never queued: the next job starts
            # now, on the newest audio.
            self.partial_stats.skipped_ticks += int(elapsed / self._partial_interval_s)
            next_tick = max(started + self._partial_interval_s, time.monotonic())

    async def _run_partial(self, utterance: _Utterance, audio: np.ndarray, end_sample: int):
        started = time.monotonic()
        try:
            result = await self._engine.transcribe_async(audio)
        except Exception as e:
            await self.push_error(f"{self}: partial transcription failed: {e}", exception=e)
            return
        finally:
            utterance.job = None
        text = result.transcript
        self.partial_stats.jobs.append(
            PartialJob(
                utterance_id=utterance.id,
                audio_start_s=utterance.seconds(utterance.start_sample),
                audio_end_s=utterance.seconds(end_sample),
                duration_s=time.monotonic() - started,
                text=text,
            )
        )
        utterance.last_partial = _Partial(end_sample, result)
        # After the VAD stop the final follows at once; a partial would only repeat it.
        if text and not utterance.ended:
            await self.push_frame(
                PartialTranscriptionFrame(
                    text=text,
                    user_id=self._user_id,
                    timestamp=time_now_iso8601(),
                    language=Language(self._engine.language),
                    result=result,
                    utterance_id=utterance.id,
                    audio_start_s=utterance.seconds(utterance.start_sample),
                    audio_end_s=utterance.seconds(end_sample),
                )
            )

    async def _finalize(
        self, utterance: _Utterance, speech_end: int, previous_final: asyncio.Task | None
    ):
        if previous_final is not None:
            await asyncio.wait({previous_final})
        job = utterance.job
        if job is not None:
            if self._reuse_covering_partial and utterance.job_end_sample >= speech_end:
                await asyncio.wait({job})
            else:
                # Its audio ends before the speech did, so it cannot become the final.
                await self.cancel_task(job)
                self.partial_stats.cancelled_jobs += 1
        if self._covers(utterance.last_partial, speech_end):
            await self._push_final(utterance, utterance.last_partial, reused=True)
            return
        end_sample = utterance.end_sample
        try:
            result = await self._engine.transcribe_async(utterance.samples())
        except Exception as e:
            await self.push_error(f"{self}: final transcription failed: {e}", exception=e)
            return
        await self._push_final(utterance, _Partial(end_sample, result), reused=False)

    async def _push_final(self, utterance: _Utterance, source: _Partial, *, reused: bool):
        if reused:
            self.partial_stats.reused_finals += 1
        else:
            self.partial_stats.transcribed_finals += 1
        text = source.result.transcript
        logger.debug(f"{self}: final [{text}] (utterance {utterance.id}, reused partial: {reused})")
        if not text:
            return
        await self.emit_stt_usage_metrics()
        await self.push_frame(
            FinalTranscriptionFrame(
                text=text,
                user_id=self._user_id,
                timestamp=time_now_iso8601(),
                language=Language(self._engine.language),
                result=source.result,
                finalized=True,
                utterance_id=utterance.id,
                audio_start_s=utterance.seconds(utterance.start_sample),
                audio_end_s=utterance.seconds(source.end_sample),
                reused_partial=reused,
            )
        )
