"""The Whisper engine: one faster-whisper model, shared by every call, with a short encoder window.

Consumes 16 kHz float32 clips (``whisper_input`` converts PCM at any rate in one shot, soxr
VHQ); returns a ``WhisperResult`` (text, no-speech probability, log probability, the window
used). Measures nothing itself; the STT service times each job.

Every faster-whisper call pads audio to a 30 s window; this one computes log-mel for the clip
only and pads it to ``MIN_WINDOW_FRAMES`` (architecture.md, "Cheaper partials with a shorter
encoder window"), so a partial costs about a third of the encoder work.
"""

import asyncio
import math
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soxr
from faster_whisper import WhisperModel
from faster_whisper.tokenizer import Tokenizer
from faster_whisper.transcribe import get_suppressed_tokens

SAMPLE_RATE = 16000

# Whisper's own silence rule: a window is non-speech only when the model both thinks so and is
# unsure of what it decoded. no_speech_prob alone is not enough: stock pipecat dropped a real
# question at 0.44.
NO_SPEECH_THRESHOLD = 0.6
LOG_PROB_THRESHOLD = -1.0

# Below ~8 s of window tiny.en loops on its own output; 10 s keeps stock accuracy at ~1/3 of
# the encoder cost (architecture.md, "Cheaper partials with a shorter encoder window").
MIN_WINDOW_FRAMES = 1000


def whisper_input(pcm: np.ndarray, sample_rate: int) -> np.ndarray:
    """int16 PCM at any rate as Whisper takes it: float32 in [-1, 1] at 16 kHz.

    One shot over the whole clip: nothing held back (a stream resampler keeps a tail), and soxr's
    best quality costs ~1 ms for 15 s of 8 kHz audio (docs/benchmarks.md, "Phone path").
    """
    audio = pcm.astype(np.float32) / 32768.0
    if sample_rate == SAMPLE_RATE:
        return audio
    return soxr.resample(audio, sample_rate, SAMPLE_RATE, quality="VHQ")


_SENTENCE_BREAK = re.compile(r"(?<=[.?!])\s+")


def without_repeated_sentences(text: str) -> str:
    """``text`` with a sentence that repeats the one just before it dropped.

    Whisper's known repetition loop: on a window with silence after the speech, tiny.en writes
    the whole utterance twice ("Can I talk to a person, please? Can I talk to a person,
    please?"), which the LLM then reads as two requests. A caller who really says a sentence
    twice loses nothing by hearing it answered once.
    """
    kept: list[str] = []
    for sentence in _SENTENCE_BREAK.split(text):
        if not kept or sentence.strip().lower() != kept[-1].strip().lower():
            kept.append(sentence)
    return " ".join(kept)


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


class _Stopped(Exception):
    """A transcription left between encoding and decoding (``should_stop``)."""


class WhisperEngine:
    """One loaded faster-whisper model, shared by every STT service in the process.

    Transcribes with a log-mel window only as long as the clip needs (at least 10 s, or
    ``min_window_s``) instead of Whisper's fixed 30 s, which makes each call roughly half as
    expensive. Calls are serialised: CTranslate2 runs one transcription at a time per engine.
    """

    def __init__(self, model: WhisperModel, *, language: str = "en", name: str = "whisper",
                 vocabulary: str | None = None, beam_size: int = 1, min_window_s: float | None = None):
        """Wrap an already loaded model.

        Args:
            model: The faster-whisper model.
            language: Language to transcribe (English-only models accept only "en").
            name: Model name reported in pipecat metrics.
            vocabulary: Words the callers will say (names, products), given to Whisper the
                way faster-whisper gives ``hotwords``: as previous text before the
                transcript, which makes those words likelier ("shop" over "sharp").
            beam_size: Beam search width: 1 (greedy) for the partials' speed; wider for an
                engine that gives a second opinion on a doubtful final.
            min_window_s: The shortest log-mel window, in seconds (None: ``MIN_WINDOW_FRAMES``).
                A clip that hits the token cap in it is decoded again in the full 30 s.
        """
        self._model = model
        self.min_window_frames = (MIN_WINDOW_FRAMES if min_window_s is None
                                  else min(model.feature_extractor.nb_max_frames,
                                           round(min_window_s * model.frames_per_second)))
        self.beam_size = beam_size
        self.language = language
        self.name = name
        self._tokenizer = Tokenizer(
            model.hf_tokenizer, model.model.is_multilingual, task="transcribe", language=language
        )
        self.vocabulary = vocabulary.strip() if vocabulary and vocabulary.strip() else None
        self._prompt = [*self._vocabulary_tokens(), *self._tokenizer.sot_sequence, self._tokenizer.no_timestamps]
        self._suppress_tokens = list(get_suppressed_tokens(self._tokenizer, [-1]))
        self._lock = threading.Lock()
        # Its own thread: Whisper never waits behind the TTS (or anything else) in the default
        # pool, and never holds one of its threads.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"whisper-{name}")

    def _vocabulary_tokens(self) -> list[int]:
        # The layout of faster-whisper's get_prompt(hotwords=...), which this engine's own
        # decode (a short window, see the class doc) cannot call.
        if not self.vocabulary:
            return []
        tokens = self._tokenizer.encode(" " + self.vocabulary)[: self._model.max_length // 2 - 1]
        return [self._tokenizer.sot_prev, *tokens]

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
        vocabulary: str | None = None,
        beam_size: int = 1,
        min_window_s: float | None = None,
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
            vocabulary: Words the callers will say (see ``__init__``).
            beam_size: Beam search width (see ``__init__``).
            min_window_s: The shortest encoder window (see ``__init__``).
        """
        model = WhisperModel(
            str(model_path), device=device, compute_type=compute_type, cpu_threads=cpu_threads
        )
        engine = cls(model, language=language, name=name or Path(model_path).name, vocabulary=vocabulary,
                     beam_size=beam_size, min_window_s=min_window_s)
        if warm_up:
            engine.transcribe(np.zeros(SAMPLE_RATE, dtype=np.float32))
        return engine

    async def transcribe_async(
        self, audio: np.ndarray, should_stop: Callable[[], bool] | None = None
    ) -> WhisperResult | None:
        """Transcribe on the engine's own thread so the event loop (and audio) keeps moving."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.transcribe, audio, should_stop)

    def transcribe(self, audio: np.ndarray, should_stop: Callable[[], bool] | None = None) -> WhisperResult | None:
        """Transcribe mono float32 audio at 16 kHz in [-1, 1]. Blocks; one call at a time.

        ``should_stop`` is asked between encoding and decoding, the one point where CTranslate2
        can be left: when it says yes, the rest is skipped and None is returned.
        """
        audio = np.asarray(audio, dtype=np.float32)
        with self._lock:
            try:
                return self._transcribe(audio, should_stop)
            except _Stopped:
                return None

    def _transcribe(self, audio: np.ndarray, should_stop: Callable[[], bool] | None) -> WhisperResult:
        extractor = self._model.feature_extractor
        # The extractor appends one frame past the audio; faster-whisper drops it too.
        features = extractor(audio)[..., :-1]
        if features.shape[-1] > extractor.nb_max_frames:
            return self._transcribe_long(audio)
        seconds = audio.size / SAMPLE_RATE
        max_new_tokens = math.ceil(6 * seconds) + 10
        window = min(
            extractor.nb_max_frames,
            max(self.min_window_frames, math.ceil(seconds + 1) * self._model.frames_per_second),
        )
        result, capped = self._decode(features, window, max_new_tokens, should_stop)
        if capped and window < extractor.nb_max_frames:
            # Hitting the token cap means a repetition loop, which short windows can fall
            # into; the stock window does not.
            result, _ = self._decode(features, extractor.nb_max_frames, max_new_tokens, should_stop)
        return result

    def _decode(
        self, features: np.ndarray, window: int, max_new_tokens: int, should_stop: Callable[[], bool] | None
    ) -> tuple[WhisperResult, bool]:
        # Pad the log-mel, not the waveform: a waveform padded to the window decodes badly.
        padded = np.zeros((features.shape[0], window), dtype=np.float32)
        padded[:, : features.shape[-1]] = features
        encoder_output = self._model.encode(padded)
        if should_stop is not None and should_stop():
            raise _Stopped
        max_length = min(len(self._prompt) + max_new_tokens, self._model.max_length)
        result = self._model.model.generate(
            encoder_output,
            [self._prompt],
            beam_size=self.beam_size,
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
        text = without_repeated_sentences(self._tokenizer.decode(tokens).strip())
        return WhisperResult(text, result.no_speech_prob, avg_logprob, window), capped

    def _transcribe_long(self, audio: np.ndarray) -> WhisperResult:
        # Past 30 s a single window cannot hold the clip: let faster-whisper seek through it.
        # It drops non-speech segments with the same rule, so report the most speech-like one.
        segments, _ = self._model.transcribe(
            audio, language=self.language, beam_size=self.beam_size, condition_on_previous_text=False,
            hotwords=self.vocabulary
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
