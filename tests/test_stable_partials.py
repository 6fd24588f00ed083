"""When a partial transcript is stable enough to start a speculative draft: each rule, as a table."""

import pytest

from processors.speculation.stable_partials import StabilityConfig, StablePartialDetector

# (config overrides, partials as (text, silence_s), index of the first stable one, its reason)
STABILITY_TABLE = [
    pytest.param(
        {},
        [("what", 0), ("what time do", 0), ("what time do you open", 0), ("what time do you open", 0)],
        3, "repeated_tail", id="two-partials-same-tail",
    ),
    pytest.param(
        {},
        [("what time do you open", 0), ("What time do you open?", 0)],
        1, "repeated_tail", id="case-and-punctuation-ignored",
    ),
    pytest.param(
        {},
        [("what time do you open", 0), ("what time do you open, um", 0)],
        1, "repeated_tail", id="trailing-filler-ignored",
    ),
    pytest.param(
        {},
        [("uh what time do you open you know", 0), ("what time do you open", 0)],
        1, "repeated_tail", id="fillers-anywhere-ignored",
    ),
    pytest.param(
        {},
        [("嗯，你们几点开门", 0), ("那个你们几点开门", 0)],
        1, "repeated_tail", id="chinese-fillers-ignored",
    ),
    pytest.param(
        {},
        [("when do you open on saturday", 0), ("so when do you open on saturday", 0)],
        1, "repeated_tail", id="only-the-last-8-characters-count",
    ),
    pytest.param(
        {},
        [("what time", 0), ("what time do you", 0), ("what time do you open", 0)],
        None, None, id="growing-text-is-not-stable",
    ),
    pytest.param({}, [("hi", 0), ("hi", 0), ("hi um", 0)], None, None, id="shorter-than-6-chars"),
    pytest.param(
        {"consecutive": 3},
        [("what time do you open", 0), ("what time do you open", 0), ("what time do you open", 0)],
        2, "repeated_tail", id="k-3-needs-three",
    ),
    pytest.param(
        {},
        [("what time do you open", 0), ("what time do you open on", 0), ("what time do you open", 0)],
        None, None, id="k-consecutive-not-k-in-total",
    ),
    pytest.param({}, [("a basic tune up please", 0)], 0, "end_word", id="end-word-please"),
    pytest.param({}, [("that's it", 0)], 0, "end_word", id="end-word-thats-it"),
    pytest.param({}, [("you close at six, right?", 0)], 0, "end_word", id="end-word-right-question"),
    pytest.param({}, [("then turn right", 0)], None, None, id="right-without-question-mark"),
    pytest.param({}, [("i am pleased", 0)], None, None, id="end-word-is-a-whole-word"),
    pytest.param({"end_words": None}, [("a basic tune up please", 0)], None, None, id="end-words-off"),
    pytest.param(
        {},
        [("can you tell me when you open on saturday?", 0)],
        0, "question", id="question-of-30-chars",
    ),
    pytest.param({}, [("open on saturday?", 0)], None, None, id="short-question"),
    pytest.param(
        {"question_min_chars": None},
        [("can you tell me when you open on saturday?", 0)],
        None, None, id="question-trigger-off",
    ),
    pytest.param({}, [("what time do you open", 0.25)], 0, "silence", id="silence-250ms"),
    pytest.param({}, [("what time do you open", 0.24)], None, None, id="silence-too-short"),
    pytest.param({"silence_s": None}, [("what time do you open", 1.0)], None, None, id="silence-off"),
    pytest.param(
        {"min_silence_s": 0.1},
        [("what did your phone", 0), ("what did your phone", 0), ("what is your phone number?", 0)],
        None, None, id="silence-gate-holds-mid-speech-repeats",
    ),
    pytest.param(
        {"min_silence_s": 0.1},
        [("what is your phone number", 0.05), ("what is your phone number", 0.12)],
        1, "repeated_tail", id="silence-gate-passes-after-100ms",
    ),
]


@pytest.mark.parametrize("overrides, partials, stable_at, reason", STABILITY_TABLE)
def test_a_partial_is_stable_exactly_when_a_rule_says_so(overrides, partials, stable_at, reason):
    detector = StablePartialDetector(StabilityConfig(**overrides))
    results = [detector.feed(text, silence_s=silence) for text, silence in partials]
    first = next((i for i, r in enumerate(results) if r is not None), None)
    assert first == stable_at, results
    if stable_at is not None:
        assert results[stable_at].reason == reason
        assert results[stable_at].text == partials[stable_at][0]


def test_silence_after_the_latest_partial_makes_it_stable_without_a_new_partial():
    detector = StablePartialDetector()
    assert detector.feed("what time do you open") is None
    assert detector.on_silence(0.1) is None
    stable = detector.on_silence(0.3)
    assert stable is not None and (stable.text, stable.reason) == ("what time do you open", "silence")
    detector.reset()
    assert detector.on_silence(1.0) is None  # nothing heard this turn


def test_a_repeat_held_by_the_silence_gate_becomes_stable_once_the_user_is_silent():
    detector = StablePartialDetector(StabilityConfig(min_silence_s=0.1))
    assert detector.feed("what is your phone number") is None
    assert detector.feed("what is your phone number") is None
    assert detector.on_silence(0.05) is None
    stable = detector.on_silence(0.1)
    assert stable is not None and stable.reason == "repeated_tail"
