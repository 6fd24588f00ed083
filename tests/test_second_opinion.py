"""A final Whisper is unsure of is heard again by a bigger model, and the surer words are kept.

The real tiny.en (the default, with the business's vocabulary) and base (beam search) on espeak
speech. What the second opinion buys over the FAQ suite, and what it costs the turns it hears
again, is measured by ``python -m agent bench --suite faq`` (README).
"""

import numpy as np
import pytest

from agent.audio import espeak_speech
from agent.business.facts import vocabulary_of
from agent.business.model import load_business
from agent.config import load_config
from agent.models import ModelError, whisper_model_path
from processors.whisper_engine import WhisperEngine
from processors.whisper_scheduler import WhisperScheduler

VOCABULARY = vocabulary_of(load_business())


@pytest.fixture(scope="module")
def scheduler():
    config = load_config()
    try:
        base = whisper_model_path("base", config.models_dir)
    except ModelError as error:
        pytest.skip(f"the base model is not installed: {error}")
    tiny = WhisperEngine.load(str(whisper_model_path("tiny.en")), vocabulary=VOCABULARY)
    second = WhisperEngine.load(str(base), vocabulary=VOCABULARY, beam_size=config.stt_second_opinion_beam)
    return WhisperScheduler(tiny, second_opinion=second, doubt_below=config.stt_doubt_below)


def spoken(text: str, voice: str, wpm: int) -> np.ndarray:
    pcm = espeak_speech(text, voice, wpm).astype(np.float32) / 32768.0
    return np.concatenate([np.zeros(4000), pcm, np.zeros(8000)]).astype(np.float32)


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
