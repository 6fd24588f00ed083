"""Embedded hibari voice (in-process, 24 kHz) as a pipecat TTS service.

Consumes: text from pipecat's TTS machinery (LLM sentences, TTSSpeakFrame).
Emits: TTSStartedFrame, 40 ms TTSAudioRawFrames sentence by sentence, TTSStoppedFrame;
an ErrorFrame upstream when synthesis fails. A text that ends at a clause mark (a first chunk
cut at a comma) ends with a comma's pause, not a sentence's; an answer's first sentence starts
10 ms before its first sound, the later ones 50 ms.
Measures: pipecat's TTS metrics (TTFB, TTFA, processing time, usage).

With a ``SpeculativeAudioCache`` (processors/speculation/speculative_tts.py) it also synthesises a held
speculative answer's first chunk ahead of time, and speaks that audio when the confirmed answer
asks for the same text. With a ``PhraseCache`` (processors/tts/phrase_cache.py), a text said before
in the same voice and pace is spoken from the audio made then; ``phrase_stats`` counts the call's
hits and misses (None without a cache).
"""

import asyncio
import functools
import threading
from collections.abc import AsyncGenerator, AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hibari import SAMPLE_RATE, Hibari

from pipecat.audio.utils import detect_speech_onset
from pipecat.frames.frames import Frame
from pipecat.services.settings import TTSSettings
from pipecat.services.tts_service import TTSService
from pipecat.utils.tracing.service_decorators import traced_tts
from pipecat.utils.types import NOT_GIVEN, NotGiven, assert_given

from processors.tts.phrase_cache import PhraseCache, PhraseStats
from processors.speculation.speculative_tts import SpeculativeAudioCache, spoken_pcm

DEFAULT_VOICE = "heart"
FRAME_SECONDS = 0.04
# hibari's pre-speech silence is below -70 dBFS; -60 dBFS still catches soft onsets (/h/, /f/),
# which start up to ~80 ms before the -40 dBFS default gate opens.
_ONSET_THRESHOLD_DB = -60.0
_ONSET_SEARCH_BYTES = SAMPLE_RATE * 2  # the first second
# hibari ends every text with ~0.41 s of silence: a sentence's pause. A chunk cut at a comma
# (the sentence-first chunker's first clause) then had 0.46-0.49 s of silence before the next
# chunk's words, where the same text said whole pauses 0.06-0.14 s at that comma: the answer
# sounded halting. Such a chunk keeps this much of its trailing silence, so with the next
# chunk's 50 ms lead-in the pause at the join is 0.12-0.15 s: a comma's.
CLAUSE_PAUSE_S = 0.07
# An answer's first sentence follows the caller's silence, not the bot's own words, so its lead-in
# only delays the first word: it keeps 10 ms, the ramp into the onset, where later sentences keep
# ``leading_silence_s`` (the spacing the comma's pause above is tuned with).
ANSWER_LEAD_IN_S = 0.01
_CLAUSE_ENDS = (",", ";", ":", "—", "–", "-")
_SILENCE_RMS = 300  # int16 RMS of a 10 ms window below which it counts as silence

_load_lock = threading.Lock()
# Synthesis runs on threads of its own, shared by every call's voice: it never queues behind
# Whisper or other work in the default pool. Two: one sentence per call in flight on 2 cores.
_SYNTHESIS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="hibari")


@functools.cache
def _load(name: str) -> Hibari:
    voice = Hibari(voice=name)
    # The G2P tables and the OOV net load lazily; pay for them (and onnxruntime's first run)
    # here, not on the first sentence of the first call.
    _ = voice.g2p.oov
    voice("Warm up.")
    return voice


def load_voice(name: str = DEFAULT_VOICE) -> Hibari:
    """Return the process-wide hibari voice `name`, loading and warming it on first use.

    Only "heart" ships in the package; other voices are fetched by hibari on first use.
    """
    with _load_lock:
        return _load(name)


def _to_pcm16(audio: np.ndarray) -> bytes:
    return (np.clip(audio, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()


def _with_trailing_silence(pcm: bytes, seconds: float) -> bytes:
    """``pcm`` cut to keep ``seconds`` of silence after its last voiced 10 ms."""
    samples = np.frombuffer(pcm, "<i2")
    window = SAMPLE_RATE // 100
    whole = len(samples) // window * window
    rms = np.sqrt(np.mean(samples[:whole].astype(np.float32).reshape(-1, window) ** 2, axis=1))
    voiced = np.flatnonzero(rms >= _SILENCE_RMS)
    if voiced.size == 0:
        return pcm
    end = (voiced[-1] + 1) * window + round(seconds * SAMPLE_RATE)
    return pcm[: min(len(samples), end) * 2]


async def _drop_text_without_words(text: str, text_type: str) -> str:
    # hibari reads nothing out of text without letters or digits ("🙂", "*"). Passed on, such a
    # context would end with no audio, which pipecat reports as a failing provider and waits
    # stop_frame_timeout_s on; an empty result makes the base class skip the text instead.
    return text if any(ch.isalnum() for ch in text) else ""


@dataclass
class HibariTTSSettings(TTSSettings):
    """Settings for HibariTTSService.

    Parameters:
        speed: hibari's pace multiplier (0.5 slow .. 2.0 fast).
    """

    speed: float | NotGiven = field(default_factory=lambda: NOT_GIVEN)


class HibariTTSService(TTSService):
    """Speaks text with a shared in-process hibari voice, sentence by sentence, off the event loop."""

    Settings = HibariTTSSettings
    _settings: Settings

    def __init__(
        self,
        *,
        voice: Hibari | None = None,
        leading_silence_s: float | None = 0.05,
        settings: Settings | None = None,
        speculative_audio: SpeculativeAudioCache | None = None,
        phrase_cache: PhraseCache | None = None,
        **kwargs,
    ):
        """Create the service.

        Args:
            voice: A loaded hibari voice to share; defaults to `load_voice(settings.voice)`.
            leading_silence_s: Silence kept before each sentence's speech (an answer's first
                keeps ``ANSWER_LEAD_IN_S`` at most); None keeps all of it.
            settings: Voice name and speed (defaults: "heart", 1.0).
            speculative_audio: The call's cache of a held draft's first chunk, shared with the
                LLM service; this service synthesises into it and speaks from it.
            phrase_cache: Speech synthesised before, shared by every call's voice: a text said
                again (a fixed answer, the greeting) is spoken from it; None synthesises every time.
            **kwargs: Passed to `TTSService`. `sample_rate` defaults to hibari's 24 kHz, so the
                output transport resamples if it runs at another rate.
        """
        default_settings = self.Settings(model=None, voice=DEFAULT_VOICE, language=None, speed=1.0)
        if settings is not None:
            default_settings.apply_update(settings)

        kwargs.setdefault("sample_rate", SAMPLE_RATE)
        kwargs["text_transforms"] = [
            *(kwargs.get("text_transforms") or []),
            ("*", _drop_text_without_words),
        ]
        super().__init__(
            push_start_frame=True,
            push_stop_frames=True,
            settings=default_settings,
            **kwargs,
        )
        self._voice = voice or load_voice(assert_given(self._settings.voice))
        self._leading_silence_s = leading_silence_s
        self._speculative_audio = speculative_audio
        self._answer_context: str | None = None  # the context of the answer being spoken
        self._phrases = phrase_cache
        self.phrase_stats = PhraseStats() if phrase_cache is not None else None
        if speculative_audio is not None:
            speculative_audio.bind(self._prefetch_pcm)

    def can_generate_metrics(self) -> bool:
        """TTFB, processing and usage metrics are supported."""
        return True

    async def _update_settings(self, delta: Settings) -> dict[str, Any]:
        changed = await super()._update_settings(delta)
        # speed is read on every call; the voice model was chosen when the service was built.
        self._warn_unhandled_updated_settings(changed.keys() & {"voice", "model"})
        return changed

    @traced_tts
    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame, None]:
        """Synthesise `text` one sentence at a time and yield its audio in 40 ms frames."""
        try:
            await self.start_tts_usage_metrics(text)
            # pipecat keeps one context id for a turn's whole answer: a new one is a new answer.
            answer_start, self._answer_context = context_id != self._answer_context, context_id
            audio = spoken_pcm(self._speculative_audio, text,
                               functools.partial(self._pcm_chunks, answer_start=answer_start))
            async for frame in self._stream_audio_frames_from_iterator(
                audio, in_sample_rate=SAMPLE_RATE, context_id=context_id
            ):
                await self.stop_ttfb_metrics()
                yield frame
        except Exception as e:
            await self.push_error(error_msg=f"hibari could not synthesise [{text}]: {e}", exception=e)
        finally:
            await self.stop_ttfb_metrics()

    async def cleanup(self):
        """Drop audio prefetched for a draft the call ended before."""
        await super().cleanup()
        if self._speculative_audio is not None:
            self._speculative_audio.discard("the call ended")

    async def _prefetch_pcm(self, text: str) -> list[bytes]:
        # What is prefetched is always an answer's first chunk (a held draft's or the fast path's).
        return [chunk async for chunk in self._pcm_chunks(text, answer_start=True)]

    async def _pcm_chunks(self, text: str, *, answer_start: bool = False) -> AsyncIterator[bytes]:
        frame_bytes = int(SAMPLE_RATE * FRAME_SECONDS) * 2
        async for pcm in self._sentences_pcm(text, answer_start):
            for start in range(0, len(pcm), frame_bytes):
                yield pcm[start : start + frame_bytes]

    async def _sentences_pcm(self, text: str, answer_start: bool) -> AsyncIterator[bytes]:
        """Each sentence's PCM: from the phrase cache, or synthesised (and kept there when whole)."""
        speed = assert_given(self._settings.speed)
        key = None
        if self._phrases is not None:
            key = (self._voice, speed, self._leading_silence_s, answer_start, " ".join(text.split()))
            kept = self._phrases.get(key)
            if kept is not None:
                self.phrase_stats.hits += 1
                for pcm in kept:
                    yield pcm
                return
            self.phrase_stats.misses += 1
        # One sentence (hibari splits overlong ones at clauses) per thread hop: audio of the
        # first goes out while the next is synthesised, and a cancelled call stops here,
        # before asking for the next sentence.
        loop = asyncio.get_running_loop()
        sentences = await loop.run_in_executor(_SYNTHESIS, self._voice.phonemize, text)
        lead_in_s = self._leading_silence_s
        if answer_start and lead_in_s is not None:
            lead_in_s = min(lead_in_s, ANSWER_LEAD_IN_S)
        said = []
        for i, phonemes in enumerate(sentences):
            pcm = await loop.run_in_executor(_SYNTHESIS, self._synthesise, phonemes, speed,
                                             lead_in_s if i == 0 else self._leading_silence_s)
            if i == len(sentences) - 1 and text.rstrip().endswith(_CLAUSE_ENDS):
                pcm = _with_trailing_silence(pcm, CLAUSE_PAUSE_S)
            said.append(pcm)
            yield pcm
        if self._phrases is not None:
            self._phrases.put(key, said)

    def _synthesise(self, phonemes: str, speed: float, lead_in_s: float | None) -> bytes:
        # hibari opens every sentence with 0.2-0.35 s of silence: before a reply's first
        # sentence that is pure latency, and its trailing silence already spaces sentences.
        pcm = _to_pcm16(self._voice.from_phonemes(phonemes, speed))
        if lead_in_s is None:  # keep all of it
            return pcm
        onset = detect_speech_onset(
            pcm[:_ONSET_SEARCH_BYTES], SAMPLE_RATE, threshold_db=_ONSET_THRESHOLD_DB
        )
        if onset is None:
            return pcm
        return pcm[max(0, onset - int(lead_in_s * SAMPLE_RATE)) * 2 :]
