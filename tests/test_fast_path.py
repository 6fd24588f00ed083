"""The fast path: frequent questions answered from the business's facts, never a misfire.

Table tests for the matcher and the hours answers (a fixed clock in the shop's time zone), the
processor on pipecat's ``run_test`` (held while speculative, spoken on confirmation, dropped on
withdrawal), and a real WebRTC call where the scripted LLM is never asked.
"""

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from pipecat.frames.frames import (
    EagerEndOfTurnCancelFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.tests.utils import SleepFrame, run_test

from agent.business.intents import IntentMatcher
from agent.business.model import load_business
from processors.fast_path import FastAnswer, FastPathResponder
from processors.speculation.speculative_tts import SpeculativeAudioCache

LONDON = ZoneInfo("Europe/London")
TUESDAY_MORNING = datetime(2026, 12, 1, 10, 30, tzinfo=LONDON)
SATURDAY_EVENING = datetime(2026, 12, 5, 19, 0, tzinfo=LONDON)


def matcher(at: datetime = TUESDAY_MORNING) -> IntentMatcher:
    return IntentMatcher(load_business(), clock=lambda: at)


ANSWERED = [
    ("What are your opening hours?", "hours", "Monday to Friday 9 in the morning to 6 in the evening"),
    ("Are you open on Sunday?", "hours", "We're closed on Sunday."),
    ("What time does the shop open on Saturday?", "hours", "On Saturday we're open from 10 in the morning to 4 in the afternoon."),
    ("What time do you close today?", "hours", "Today, Tuesday, we're open from 9 in the morning to 6 in the evening."),
    ("Are you open tomorrow?", "hours", "Tomorrow, Wednesday, we're open"),
    ("Are you open right now?", "hours", "Yes, we're open now, until 6 in the evening."),
    ("What's your phone number?", "phone", "Our phone number is 555 0142."),
    ("Where is your shop?", "address", "We're at 42 Harbor Lane, Portsmouth, next to the ferry terminal."),
    ("Is shipping free?", "shipping", "shipping is free over 75 dollars."),
    ("Can I get a refund on my bike?", "returns", "Unused items can be returned within 30 days"),
    ("How much is a basic tune-up?", "prices", "A basic tune-up is 45 dollars, ready in one day."),
    ("How much to fix a flat tire?", "prices", "A flat tyre repair is 12 dollars, while you wait."),
    ("How much is it to rent a bike?", "prices", "A city bike rental is 20 dollars a day, and an electric bike rental is 45 dollars a day."),
]
# Questions the intents do not cover, several sharing a keyword with one: all for the LLM.
NOT_COVERED = [
    "Do you sell helmets for children?",
    "What is the phone number of the ferry terminal?",
    "Can you open the door for me?",
    "Where can I park my car?",
    "Do you ship to France?",
    "How do I find the best trails?",
    "Is the cafe next door open on Sunday?",
    "What is the closing date for the bike race?",
    "How much does it cost to ship a bike?",
    "How much is a helmet?",
]


@pytest.mark.parametrize("question, intent, answer", ANSWERED, ids=[q for q, _, _ in ANSWERED])
def test_a_frequent_question_is_answered_from_the_facts(question, intent, answer):
    result = matcher()(question)
    assert result is not None and result.intent == intent
    assert answer in result.text


@pytest.mark.parametrize("question", NOT_COVERED)
def test_a_question_the_intents_do_not_cover_goes_to_the_llm(question):
    assert matcher()(question) is None


def test_now_and_today_are_the_callers_moment_in_the_shops_time_zone():
    evening = matcher(SATURDAY_EVENING)
    assert evening("Are you open now?").text == "We're closed right now; we open on Monday at 9 in the morning."
    assert evening("Are you open today?").text == "Today, Saturday, we're open from 10 in the morning to 4 in the afternoon."
    assert evening("Are you open tomorrow?").text == "We're closed tomorrow, Sunday."
    # The same instant seen from New York is still the shop's Saturday evening.
    new_york = IntentMatcher(load_business(), clock=lambda: SATURDAY_EVENING.astimezone(ZoneInfo("America/New_York")))
    assert new_york("Are you open today?").text == evening("Are you open today?").text


def context_frame(text: str, speculation: bool = False) -> LLMContextFrame:
    return LLMContextFrame(context=LLMContext(messages=[{"role": "user", "content": text}]), speculation=speculation)


ANSWER_FRAMES = [LLMFullResponseStartFrame, LLMTextFrame, LLMFullResponseEndFrame]


async def test_an_answered_turn_never_reaches_the_llm_and_is_spoken_like_an_answer():
    responder = FastPathResponder(matcher())
    down, _ = await run_test(responder, frames_to_send=[context_frame("What's your phone number?")],
                             expected_down_frames=ANSWER_FRAMES)
    assert down[1].text == "Our phone number is 555 0142."
    assert [hit.intent for hit in responder.hits] == ["phone"]


async def test_a_question_for_the_llm_passes_on_untouched():
    responder = FastPathResponder(matcher())
    await run_test(responder, frames_to_send=[context_frame("Do you sell helmets for children?")],
                   expected_down_frames=[LLMContextFrame])
    assert responder.hits == []


async def test_a_speculative_answer_is_held_until_the_turn_is_confirmed():
    responder = FastPathResponder(matcher())
    down, _ = await run_test(
        responder,
        frames_to_send=[
            UserStartedSpeakingFrame(), context_frame("Where is your shop", speculation=True),
            SleepFrame(sleep=0.2), UserStoppedSpeakingFrame(),
        ],
        expected_down_frames=[UserStartedSpeakingFrame, UserStoppedSpeakingFrame, *ANSWER_FRAMES],
    )
    assert "42 Harbor Lane" in down[3].text


async def test_a_draft_arriving_after_its_turn_was_confirmed_is_spoken_at_once():
    # The confirmation is a system frame: it can overtake the draft's context on the way here.
    responder = FastPathResponder(matcher())
    await run_test(
        responder,
        frames_to_send=[UserStoppedSpeakingFrame(), SleepFrame(sleep=0.1), context_frame("Where is your shop", speculation=True)],
        expected_down_frames=[UserStoppedSpeakingFrame, *ANSWER_FRAMES],
    )


async def test_a_withdrawn_speculative_answer_is_never_spoken_and_the_final_is_asked_again():
    responder = FastPathResponder(matcher())
    await run_test(
        responder,
        frames_to_send=[
            context_frame("Where is your shop", speculation=True),
            SleepFrame(sleep=0.1),
            EagerEndOfTurnCancelFrame(),
            SleepFrame(sleep=0.1),
            context_frame("Where is your shop's car park?"),
            SleepFrame(sleep=0.1),
            UserStoppedSpeakingFrame(),
        ],
        expected_down_frames=[EagerEndOfTurnCancelFrame, LLMContextFrame, UserStoppedSpeakingFrame],
    )
    assert responder.hits == []


async def test_a_broken_answer_template_costs_the_fast_path_not_the_call():
    def broken(_text: str, **_) -> FastAnswer:
        raise KeyError("answer templates know ['phone'], not 'fax'")

    await run_test(FastPathResponder(broken), frames_to_send=[context_frame("What's your fax?")],
                   expected_down_frames=[LLMContextFrame])


def test_an_unknown_template_field_is_named():
    business = load_business()
    intents = {**business.intents, "phone": business.intents["phone"].model_copy(update={"answer": "Fax {fax}."})}
    broken = IntentMatcher(business.model_copy(update={"intents": intents}))
    with pytest.raises(KeyError, match="not 'fax'"):
        broken("What's your phone number?")


class RecordingSynthesizer:
    """Stands in for the TTS's synthesiser: records what was asked, returns one PCM piece."""

    def __init__(self):
        self.texts: list[str] = []

    async def __call__(self, text: str) -> list[bytes]:
        self.texts.append(text)
        return [b"\x00\x01" * 160]


async def test_a_held_answers_first_chunk_is_synthesised_before_the_turn_ends_and_used_after():
    audio, synth = SpeculativeAudioCache(), RecordingSynthesizer()
    audio.bind(synth)
    responder = FastPathResponder(matcher(), speculative_audio=audio)
    down, _ = await run_test(
        responder,
        frames_to_send=[
            UserStartedSpeakingFrame(), context_frame("Where is your shop", speculation=True),
            SleepFrame(sleep=0.2),
        ],
        expected_down_frames=[UserStartedSpeakingFrame],
    )
    # Still speaking: the answer is held, its first chunk (as the SentenceChunker will cut it) is made.
    assert synth.texts == ["We're at 42 Harbor Lane,"]
    assert audio.take("We're at 42 Harbor Lane,") is None  # not before the turn is confirmed
    down, _ = await run_test(responder, frames_to_send=[UserStoppedSpeakingFrame()],
                             expected_down_frames=[UserStoppedSpeakingFrame, *ANSWER_FRAMES])
    assert down[2].text.startswith("We're at 42 Harbor Lane,")
    prefetched = audio.take("We're at 42 Harbor Lane,")
    assert prefetched is not None and await prefetched == [b"\x00\x01" * 160]
    assert audio.stats.started == 1 and audio.stats.used == 1


async def test_a_withdrawn_held_answers_audio_is_discarded():
    audio, synth = SpeculativeAudioCache(), RecordingSynthesizer()
    audio.bind(synth)
    responder = FastPathResponder(matcher(), speculative_audio=audio)
    await run_test(
        responder,
        frames_to_send=[context_frame("Where is your shop", speculation=True), SleepFrame(sleep=0.1),
                        EagerEndOfTurnCancelFrame(), SleepFrame(sleep=0.1), UserStoppedSpeakingFrame()],
        expected_down_frames=[EagerEndOfTurnCancelFrame, UserStoppedSpeakingFrame],
    )
    assert audio.stats.discarded == 1 and audio.pending_text is None


def test_a_misheard_word_that_sounds_the_same_still_finds_its_intent():
    # tiny.en writes what it hears: "chipping" for "shipping" keeps the intent by its sound.
    assert matcher()("Is chipping free?").intent == "shipping"
    assert matcher()("Is shipping free?").intent == "shipping"
    # A word that only looks alike is not heard alike: no misfire.
    assert matcher()("What is your fault?") is None
    strict = IntentMatcher(load_business(), clock=lambda: TUESDAY_MORNING, sounds_alike=False)
    assert strict("Is chipping free?") is None


def test_may_asks_it_does_not_date():
    assert matcher()("May I ask what time you open on Saturday?").intent == "hours"
