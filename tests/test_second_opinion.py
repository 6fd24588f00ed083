"""A final Whisper is unsure of, or the business does not recognise, is heard again by a bigger
model; the words the business recognises, else the surer ones, are kept.

The real tiny.en (the default, with the business's vocabulary) and base (beam search) on espeak
speech. What the second opinion buys over the FAQ suite, and what it costs the turns it hears
again, is measured by ``python -m agent bench --suite faq`` (docs/benchmarks.md).
"""

import numpy as np
import pytest

from agent.audio import espeak_speech
from agent.business.facts import FactIndex, vocabulary_of
from agent.business.intents import IntentMatcher
from agent.business.model import load_business
from agent.config import load_config
from agent.runtime.models import ModelError, whisper_model_path
from processors.stt.whisper_engine import WhisperEngine
from processors.stt.whisper_scheduler import WhisperScheduler
from tests.speech import over_opus

BUSINESS = load_business()
VOCABULARY = vocabulary_of(BUSINESS)


@pytest.fixture(scope="module")
def scheduler():
    config = load_config()
    try:
        base = whisper_model_path("base", config.models_dir)
    except ModelError as error:
        pytest.skip(f"the base model is not installed: {error}")
    tiny = WhisperEngine.load(str(whisper_model_path("tiny.en")), vocabulary=VOCABULARY)
    second = WhisperEngine.load(str(base), vocabulary=VOCABULARY, beam_size=config.stt_second_opinion_beam,
                                min_window_s=config.stt_second_opinion_window_secs)
    # As the runtime builds it (agent/runtime/runtime.py): the business's intents say what it recognises,
    # its facts what it is about.
    matcher = IntentMatcher(BUSINESS, facts=FactIndex(BUSINESS))
    return WhisperScheduler(tiny, second_opinion=second, doubt_below=config.stt_doubt_below,
                            recognised=matcher.recognises, about_the_business=matcher.about_the_file)


def spoken(text: str, voice: str, wpm: int, *, codec: bool = False) -> np.ndarray:
    lead, tail = (8000, 16000) if codec else (4000, 8000)
    pcm = np.concatenate([np.zeros(lead, np.int16), espeak_speech(text, voice, wpm), np.zeros(tail, np.int16)])
    if codec:
        pcm = over_opus(pcm, 16000)
    return pcm.astype(np.float32) / 32768.0


async def test_a_question_tiny_en_mishears_unsure_is_heard_right_by_the_second_opinion(scheduler):
    audio = spoken("Can I pay with cash?", "en-029", 155)
    first = await scheduler.transcribe(audio, owner=object(), final=True)
    assert "pay" not in first.transcript.lower()  # tiny.en: "Car, I bet we'd cash."
    assert scheduler.doubts(first)

    reviewed = await scheduler.review(audio, first, owner=object())
    assert reviewed.transcript == "Can I pay with cash?"


async def test_a_question_heard_surely_is_not_heard_again(scheduler):
    first = await scheduler.transcribe(spoken("Can I have your phone number, please?", "en-us", 170),
                                       owner=object(), final=True)
    assert first.transcript == "Can I have your phone number, please?"
    assert not scheduler.doubts(first)


async def test_a_sure_mishearing_the_business_does_not_recognise_is_heard_again_and_the_recognised_words_win(scheduler):
    audio = spoken("Are you guys open on Sundays?", "en-us", 165, codec=True)
    first = await scheduler.transcribe(audio, owner=object(), final=True)
    assert first.transcript == "Are you guys open on certain days?"  # tiny.en after Opus, and sure of it
    assert first.avg_logprob > scheduler.doubt_below
    assert scheduler.doubts(first)  # no intent of the shop asks about "certain days"

    reviewed = await scheduler.review(audio, first, owner=object())
    assert "sunday" in reviewed.transcript.lower()  # base, beam 5; the hours intent recognises it
    assert first.window_frames == 1000 and reviewed.window_frames == 600  # base's 6 s window heard it


async def test_a_sure_question_about_nothing_the_shop_holds_is_not_heard_again(scheduler):
    audio = spoken("Do you have this sofa in blue?", "en-us", 165, codec=True)
    first = await scheduler.transcribe(audio, owner=object(), final=True)
    assert "sofa" in first.transcript.lower() and first.avg_logprob > scheduler.doubt_below
    assert not scheduler.recognised(first.transcript)
    assert not scheduler.doubts(first)  # no fact of a bike shop shares a word with it: base would not help


async def test_a_question_no_intent_covers_keeps_the_surer_of_the_two_transcripts(scheduler):
    audio = spoken("Can I pay with cash?", "en-029", 155, codec=True)
    first = await scheduler.transcribe(audio, owner=object(), final=True)
    assert scheduler.doubts(first)

    reviewed = await scheduler.review(audio, first, owner=object())
    assert not scheduler.recognised(reviewed.transcript)  # the shop's file says nothing about cash
    assert reviewed.transcript == "Can I pay with cash?"
    assert reviewed.avg_logprob > first.avg_logprob
