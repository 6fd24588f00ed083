"""The phrase cache: a text said again, in any call, is spoken from the audio made the first time.

The voice is the real hibari voice, counting the sentences it is asked to synthesise
(tests/fakes/hibari_voices.py); the cache's bound is checked on plain bytes.
"""

import asyncio
import threading

import pytest
from pipecat.frames.frames import InterruptionFrame, TTSAudioRawFrame, TTSSpeakFrame
from pipecat.tests.utils import SleepFrame, run_test

from processors.tts.hibari_tts import HibariTTSService, load_voice
from processors.tts.phrase_cache import PhraseCache
from tests.fakes.hibari_voices import GatedVoice

ANSWER = "I'm sorry, I don't know that. Would you like me to put you through to a person?"
LONG_TEXT = (
    "The library opens at ten in the morning. It closes at six in the evening. "
    "On Sundays it stays closed all day. Books can be returned at the front desk."
)


def counting_voice() -> GatedVoice:
    """The real voice, counting the sentences it synthesises (no sentence waits)."""
    gate = threading.Event()
    gate.set()
    return GatedVoice(hold_at=-1, gate=gate)


async def spoken(tts: HibariTTSService, text: str) -> bytes:
    down, _ = await run_test(tts, frames_to_send=[TTSSpeakFrame(text)])
    return b"".join(f.audio for f in down if isinstance(f, TTSAudioRawFrame))


async def test_a_text_said_again_in_two_calls_at_once_is_spoken_from_the_first_calls_audio():
    voice, cache = counting_voice(), PhraseCache(max_bytes=2**22)
    first = HibariTTSService(voice=voice, phrase_cache=cache)
    heard_first = await spoken(first, ANSWER)
    sentences = voice.sentences_started

    again = [HibariTTSService(voice=voice, phrase_cache=cache) for _ in range(2)]
    heard_again = await asyncio.gather(*(spoken(tts, ANSWER) for tts in again))

    assert heard_first and all(audio == heard_first for audio in heard_again)
    assert voice.sentences_started == sentences  # nothing synthesised a second time
    assert first.phrase_stats.as_dict() == {"hits": 0, "misses": 1}
    assert all(tts.phrase_stats.as_dict() == {"hits": 1, "misses": 0} for tts in again)


async def test_another_text_or_pace_is_synthesised_and_without_a_cache_every_text_is():
    voice, cache = counting_voice(), PhraseCache(max_bytes=2**22)
    await spoken(HibariTTSService(voice=voice, phrase_cache=cache), ANSWER)
    slower = HibariTTSService(voice=voice, phrase_cache=cache, settings=HibariTTSService.Settings(speed=0.8))
    uncached = HibariTTSService(voice=voice)

    await spoken(slower, ANSWER)
    await spoken(uncached, ANSWER)

    assert slower.phrase_stats.misses == 1 and len(cache) == 2
    assert uncached.phrase_stats is None and len(cache) == 2


async def test_an_interrupted_text_is_not_kept_half_said():
    sentences = len(load_voice().phonemize(LONG_TEXT))
    voice, cache = counting_voice(), PhraseCache(max_bytes=2**22)
    cut = HibariTTSService(voice=voice, phrase_cache=cache)
    # Interrupted as soon as its first sentence is out: the rest is never synthesised.
    await run_test(cut, frames_to_send=[TTSSpeakFrame(LONG_TEXT), SleepFrame(0.05), InterruptionFrame()])
    assert voice.sentences_started < sentences and len(cache) == 0

    whole = HibariTTSService(voice=voice, phrase_cache=cache)
    await spoken(whole, LONG_TEXT)
    assert whole.phrase_stats.misses == 1 and len(cache) == 1


def test_the_cache_keeps_at_most_its_bytes_and_lets_the_least_recently_used_go_first():
    cache = PhraseCache(max_bytes=1000)
    cache.put("a", [b"x" * 300, b"x" * 100])
    cache.put("b", [b"x" * 400])
    assert cache.get("a") == (b"x" * 300, b"x" * 100)  # "a" is now the most recently used
    cache.put("c", [b"x" * 400])

    assert cache.get("b") is None and cache.get("a") and cache.get("c")
    assert cache.size == 800 <= cache.max_bytes
    cache.put("huge", [b"x" * 1001])  # more than the whole cache: never kept, nothing evicted
    assert cache.get("huge") is None and len(cache) == 2
    with pytest.raises(ValueError):
        PhraseCache(max_bytes=0)
