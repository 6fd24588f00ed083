"""The end of the caller's turn is decided on what was said: a finished sentence ends it soon
after the VAD stop, unfinished words ("my order number is", "Saturday,", "um") hold it for the
caller to go on, up to the longest wait; and a caller who goes on after a turn ended, before its
answer was heard, is asked about once, as one question."""

import asyncio
import time
from contextlib import asynccontextmanager

import numpy as np
import pytest
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    EndFrame,
    Frame,
    InputAudioRawFrame,
    LLMContextFrame,
    TranscriptionFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair, LLMUserAggregatorParams
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.turns.empty_user_turn import EmptyUserTurnConfig
from pipecat.turns.user_turn_strategies import UserTurnStrategies
from pipecat.workers.runner import WorkerRunner

from frames.transcription import FinalTranscriptionFrame, NoWordsHeardFrame, PartialTranscriptionFrame
from processors.turns.turn_continuation import TurnContinuation
from processors.turns.adaptive_user_turn_stop import AdaptiveUserTurnStopStrategy
from processors.turns.turn_completeness import CompletenessRules, unfinished
from tests.fakes.fixed_turn_check import FixedTurnCheck
from tests.waiting import started, until

TIMEOUT_S = 0.1
MAX_WAIT_S = 0.8
LOUD = (np.sin(np.arange(320) / 3) * 8000).astype(np.int16).tobytes()  # 20 ms of "speech"
SILENT = bytes(640)


@pytest.mark.parametrize("text", [
    "My order number is", "My order number is...", "I would like two bikes for Saturday,", "Um,", "uh",
    "I want a city bike and", "My order number is four five", "My phone number is 555 01",
    "My name is A N N", "What are your hours during the",
    # Whole questions by their words that ask to be told what the caller has not said yet.
    "Could you tell me?", "Can you let us know?", "Would you be able to show me?",
])
def test_unfinished_words_are_told_apart(text):
    assert unfinished(text) is not None


@pytest.mark.parametrize("text", [
    "What time do you open on Saturday?", "My order number is 4572.", "What's your phone number?",
    "I think so.", "I'd like that.", "Yes, I do.", "My phone number is 555 0142.", "Can I pay with cash?",
    "He turned sharply, and faced Gregson across the table.", "I want to know where it is.", "",
    "Can you tell me your opening hours?", "Could you tell me more?", "Can you show me how it works?",
])
def test_finished_words_can_end_the_turn(text):
    assert unfinished(text) is None


@pytest.mark.parametrize("text", ["Do you have", "I need a helmet. A lock", "I was charged twice", "It's for my son"])
def test_words_whisper_left_without_closing_punctuation_are_unfinished(text):
    assert unfinished(text, CompletenessRules(open_ending=True)) is not None
    assert unfinished(text) is None  # for an STT that may never punctuate


@pytest.mark.parametrize("text", ["Yes.", "Do you have helmets?", "That's great!", 'He said "no."'])
def test_words_whisper_closed_are_finished_as_before(text):
    assert unfinished(text, CompletenessRules(open_ending=True)) is None


class TurnEnds(FrameProcessor):
    """Notes when each turn ended and what the LLM would have been asked."""

    def __init__(self):
        super().__init__()
        self.ends: list[float] = []
        self.asked: list[str] = []

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if direction == FrameDirection.DOWNSTREAM:
            if isinstance(frame, UserStoppedSpeakingFrame):
                self.ends.append(time.monotonic())
            elif isinstance(frame, LLMContextFrame) and not frame.speculation:
                self.asked.append(frame.context.get_messages()[-1]["content"])
        await self.push_frame(frame, direction)

    async def wait_for(self, turns: int) -> None:
        """Until ``turns`` turns have ended and their questions gone on to the LLM."""
        await until(lambda: len(self.ends) >= turns and len(self.asked) >= turns, f"{turns} turn(s) to end")


@asynccontextmanager
async def turn_rig(audio_check=None, **options):
    options = {"user_speech_timeout": TIMEOUT_S, "max_wait_s": MAX_WAIT_S} | options
    strategy = AdaptiveUserTurnStopStrategy(audio_check=audio_check, **options)
    pair = LLMContextAggregatorPair(
        LLMContext(), user_params=LLMUserAggregatorParams(
            user_turn_strategies=UserTurnStrategies(stop=[strategy]),
            empty_user_turn=EmptyUserTurnConfig(interrupted_prompt=None)))  # as agent/call/pipeline.py builds it
    ends = TurnEnds()
    worker = PipelineWorker(Pipeline([pair.user(), ends]), params=PipelineParams(), cancel_on_idle_timeout=False)
    running = started(worker)
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    run = asyncio.create_task(runner.run())
    await asyncio.wait_for(running.wait(), 10)
    try:
        yield worker, strategy, ends
    finally:
        await worker.queue_frame(EndFrame())
        await asyncio.wait_for(run, 10)


async def utterance(worker, text: str, frame=FinalTranscriptionFrame) -> float:
    """The caller says ``text`` and stops: VAD start, half a second of audio and the VAD's 0.3 s of
    silence, the VAD stop, the final (Whisper's, unless ``frame`` is another STT's); when the VAD stopped."""
    await worker.queue_frame(VADUserStartedSpeakingFrame())
    for audio in [LOUD] * 25 + [SILENT] * 15:
        await worker.queue_frame(InputAudioRawFrame(audio=audio, sample_rate=16000, num_channels=1))
    await asyncio.sleep(0.05)
    stopped = time.monotonic()
    await worker.queue_frame(VADUserStoppedSpeakingFrame(stop_secs=0.3))
    if frame is FinalTranscriptionFrame:
        await worker.queue_frame(FinalTranscriptionFrame(text=text, user_id="", timestamp="", utterance_id=1))
    else:
        await worker.queue_frame(frame(text=text, user_id="", timestamp=""))
    return stopped


async def utterance_heard_late(worker, text: str, utterance_id: int, final_after_s: float | None) -> float:
    """Like :func:`utterance`, but a partial hears ``text`` while the caller speaks and the final
    comes ``final_after_s`` after the VAD stop (None: never, as when Whisper's final has no words)."""
    await worker.queue_frame(VADUserStartedSpeakingFrame())
    for audio in [LOUD] * 25:
        await worker.queue_frame(InputAudioRawFrame(audio=audio, sample_rate=16000, num_channels=1))
    await worker.queue_frame(PartialTranscriptionFrame(text=text, user_id="", timestamp="", utterance_id=utterance_id))
    for audio in [SILENT] * 15:
        await worker.queue_frame(InputAudioRawFrame(audio=audio, sample_rate=16000, num_channels=1))
    await asyncio.sleep(0.05)
    stopped = time.monotonic()
    await worker.queue_frame(VADUserStoppedSpeakingFrame(stop_secs=0.3))
    if final_after_s is not None:
        await asyncio.sleep(final_after_s)
        await worker.queue_frame(FinalTranscriptionFrame(text=text, user_id="", timestamp="", utterance_id=utterance_id))
    return stopped


async def test_a_finished_question_ends_the_turn_at_the_short_timeout():
    async with turn_rig() as (worker, strategy, ends):
        stopped = await utterance(worker, "What time do you open on Saturday?")
        await ends.wait_for(1)
    [end] = ends.ends
    assert end - stopped < MAX_WAIT_S / 2 and strategy.held == 0
    assert ends.asked == ["What time do you open on Saturday?"]


async def test_a_pause_after_unfinished_words_is_waited_out_and_the_question_is_asked_whole():
    async with turn_rig() as (worker, strategy, ends):
        await utterance(worker, "My order number is")
        await asyncio.sleep(0.6)  # a pause longer than the short timeout, shorter than the longest wait
        assert ends.ends == []
        await utterance(worker, "4572, and I want to know where it is.")
        await ends.wait_for(1)
    assert len(ends.ends) == 1 and strategy.held == 1 and strategy.released_by_timeout == 0
    assert ends.asked == ["My order number is 4572, and I want to know where it is."]


async def test_unfinished_words_and_then_silence_end_the_turn_at_the_longest_wait():
    async with turn_rig() as (worker, strategy, ends):
        stopped = await utterance(worker, "I would like two bikes for Saturday,")
        await ends.wait_for(1)
    [end] = ends.ends
    assert MAX_WAIT_S - 0.05 <= end - stopped < MAX_WAIT_S + 0.3
    assert strategy.released_by_timeout == 1


async def test_a_statement_smart_turn_calls_unfinished_waits_and_a_question_does_not_ask_it():
    check = FixedTurnCheck(verdict=0.1)
    async with turn_rig(check) as (worker, strategy, ends):
        stopped = await utterance(worker, "I would like to rent two bikes for Saturday.")
        await asyncio.sleep(0.5)
        assert ends.ends == []  # held on the audio's word, though the words look finished
        await utterance(worker, "And a child seat.")
        await ends.wait_for(1)
        question = await utterance(worker, "Do you have child seats?")
        await ends.wait_for(2)
    first, second = ends.ends
    assert first - stopped > 0.5 and strategy.held_by_audio == 2  # the second statement waited too
    assert ends.asked[0] == "I would like to rent two bikes for Saturday. And a child seat."
    assert second - question < 0.3 and ends.asked[1] == "Do you have child seats?"
    assert len(check.asked) == 3 and all(0.4 < seconds < 9 for seconds in check.asked)


async def test_a_statement_smart_turn_calls_finished_ends_at_the_short_timeout():
    async with turn_rig(FixedTurnCheck(verdict=0.9)) as (worker, strategy, ends):
        stopped = await utterance(worker, "My order number is 4572.")
        await ends.wait_for(1)
    [end] = ends.ends
    assert end - stopped < 0.3 and strategy.held == 0


async def test_a_turn_whose_sound_held_no_words_ends_at_that_final_and_asks_nothing():
    async with turn_rig() as (worker, strategy, ends):
        await worker.queue_frame(VADUserStartedSpeakingFrame())
        for audio in [LOUD] * 15 + [SILENT] * 15:
            await worker.queue_frame(InputAudioRawFrame(audio=audio, sample_rate=16000, num_channels=1))
        await worker.queue_frame(VADUserStoppedSpeakingFrame(stop_secs=0.3))
        await worker.queue_frame(NoWordsHeardFrame(utterance_id=1))
        await until(lambda: ends.ends, "the turn to end", timeout=2)  # not the aggregator's 5 s
        await asyncio.sleep(0.2)
    assert strategy.ended_without_words == 1 and ends.asked == []


async def test_a_sound_with_no_words_inside_a_turn_with_words_does_not_end_it_early():
    async with turn_rig() as (worker, strategy, ends):
        await utterance(worker, "My order number is")
        await worker.queue_frame(VADUserStartedSpeakingFrame())
        await worker.queue_frame(VADUserStoppedSpeakingFrame(stop_secs=0.3))
        await worker.queue_frame(NoWordsHeardFrame(utterance_id=2))  # a cough while they look it up
        await asyncio.sleep(0.3)
        assert ends.ends == []
        await utterance(worker, "4572.")
        await ends.wait_for(1)
    assert strategy.ended_without_words == 0 and ends.asked == ["My order number is 4572."]


async def test_a_slow_final_of_the_words_after_a_pause_is_waited_for_and_the_question_is_asked_whole():
    # pipecat's wait for the STT is over 0.7 s after the VAD stop, and the first half's final is in:
    # on a slow machine the turn ended there, on "My order number is" alone.
    async with turn_rig() as (worker, strategy, ends):
        await utterance(worker, "My order number is")
        await asyncio.sleep(0.3)
        stopped = await utterance_heard_late(worker, "4572.", utterance_id=2, final_after_s=1.5)
        await ends.wait_for(1)
    [end] = ends.ends
    assert end - stopped >= 1.5 and strategy.waited_for_final == 1
    assert ends.asked == ["My order number is 4572."]


async def test_a_final_that_never_comes_ends_the_turn_on_what_was_heard_at_the_longest_wait_for_it():
    async with turn_rig() as (worker, strategy, ends):
        strategy.final_wait_s = 1.2
        await utterance(worker, "What time do you open on Saturday?")
        # The caller goes on before the short timeout is over, and Whisper's final of it is empty.
        await utterance_heard_late(worker, "um", utterance_id=2, final_after_s=None)
        stopped = time.monotonic()
        await ends.wait_for(1)
        [end] = ends.ends
        # A new utterance is heard as its own, numbered on from the one given up on.
        await utterance_heard_late(worker, "And on Sunday?", utterance_id=3, final_after_s=0.0)
        await ends.wait_for(2)
    assert 1.1 <= end - stopped < 1.5 and strategy.waited_for_final == 1
    assert ends.asked == ["What time do you open on Saturday?", "And on Sunday?"]


async def test_two_calls_wait_for_their_own_finals():
    async with turn_rig() as (worker_a, strategy_a, ends_a), turn_rig() as (worker_b, strategy_b, ends_b):
        await utterance(worker_a, "My order number is")
        await utterance(worker_b, "Where is the shop and")
        late = asyncio.create_task(utterance_heard_late(worker_a, "4572.", utterance_id=2, final_after_s=1.5))
        await asyncio.sleep(0.2)
        stopped_b = await utterance_heard_late(worker_b, "when do you open?", utterance_id=2, final_after_s=0.0)
        await late
        await ends_a.wait_for(1)
        await ends_b.wait_for(1)
    assert ends_a.asked == ["My order number is 4572."] and strategy_a.waited_for_final == 1
    assert ends_b.asked == ["Where is the shop and when do you open?"] and strategy_b.waited_for_final == 0
    assert ends_b.ends[0] - stopped_b < 0.5 < ends_a.ends[0] - ends_b.ends[0]


async def test_two_calls_hold_their_own_turns():
    async with turn_rig() as (worker_a, strategy_a, ends_a), turn_rig() as (worker_b, strategy_b, ends_b):
        await utterance(worker_a, "My order number is")
        stopped_b = await utterance(worker_b, "Where is the shop?")
        await asyncio.sleep(0.4)
        await utterance(worker_a, "4572.")
        await ends_a.wait_for(1)
        await ends_b.wait_for(1)
    assert ends_a.asked == ["My order number is 4572."] and ends_b.asked == ["Where is the shop?"]
    assert ends_b.ends[0] - stopped_b < MAX_WAIT_S / 2 and strategy_b.held == 0 and strategy_a.held == 1


async def test_words_whisper_left_open_wait_for_the_rest_and_another_stts_do_not():
    # Two calls at once: Whisper wrote no full stop after "Do you have" because the caller broke
    # off; a plain TranscriptionFrame (another STT, the keypad) may never carry punctuation.
    async with turn_rig() as (whisper, held, whisper_ends), turn_rig() as (other, not_held, other_ends):
        await utterance(whisper, "Do you have")
        other_stopped = await utterance(other, "do you have helmets", frame=TranscriptionFrame)
        await asyncio.sleep(0.4)
        assert whisper_ends.ends == []
        await utterance(whisper, "helmets for kids?")
        await whisper_ends.wait_for(1)
        await other_ends.wait_for(1)
    assert whisper_ends.asked == ["Do you have helmets for kids?"] and held.held == 1
    assert other_ends.asked == ["do you have helmets"] and not_held.held == 0
    assert other_ends.ends[0] - other_stopped < MAX_WAIT_S / 2


# Long enough that a turn ending before it ended at its final, not at the pause tolerance.
LONG_TIMEOUT_S = 1.0


async def test_a_whole_question_that_ends_on_a_preposition_ends_at_its_final_without_the_audio_model():
    # Put to LiveKit's model, "Where are you guys at?" in espeak voices waited the full second, and
    # "Can I bring it in on ...?" in a person's voice was called finished anyway (docs/benchmarks.md).
    options = {"user_speech_timeout": LONG_TIMEOUT_S, "question_ends_at_final": True}
    async with turn_rig(FixedTurnCheck(verdict=0.1), **options) as (worker, strategy, ends):
        stopped = await utterance_heard_late(worker, "Where are you guys at?", utterance_id=1, final_after_s=0.05)
        await ends.wait_for(1)
    assert ends.asked == ["Where are you guys at?"] and strategy.held == 0 and strategy.ended_at_final == 1
    assert ends.ends[0] - stopped < LONG_TIMEOUT_S / 2


async def test_with_question_ends_at_final_a_question_ends_when_its_final_comes_and_a_statement_waits():
    # Two calls at once: each is decided on its own words.
    options = {"user_speech_timeout": LONG_TIMEOUT_S, "question_ends_at_final": True}
    async with turn_rig(**options) as (asking, asker, asked), turn_rig(**options) as (telling, teller, told):
        question_stopped = await utterance_heard_late(
            asking, "What time do you open on Saturday?", utterance_id=1, final_after_s=0.05)
        statement_stopped = await utterance_heard_late(telling, "My order number is 4572.", utterance_id=1,
                                                       final_after_s=0.05)
        await asked.wait_for(1)
        await told.wait_for(1)
    assert asked.asked == ["What time do you open on Saturday?"] and told.asked == ["My order number is 4572."]
    assert asked.ends[0] - question_stopped < LONG_TIMEOUT_S / 2 and asker.ended_at_final == 1
    assert told.ends[0] - statement_stopped >= LONG_TIMEOUT_S and teller.ended_at_final == 0


async def test_without_question_ends_at_final_a_question_waits_out_the_pause_tolerance():
    async with turn_rig(user_speech_timeout=LONG_TIMEOUT_S) as (worker, strategy, ends):
        stopped = await utterance_heard_late(worker, "What time do you open on Saturday?", utterance_id=1,
                                             final_after_s=0.05)
        await ends.wait_for(1)
    assert ends.ends[0] - stopped >= LONG_TIMEOUT_S and strategy.ended_at_final == 0


async def test_a_question_whose_caller_has_gone_on_does_not_end_at_its_final():
    async with turn_rig(user_speech_timeout=LONG_TIMEOUT_S, question_ends_at_final=True) as (worker, strategy, ends):
        await utterance_heard_late(worker, "What time do you open?", utterance_id=1, final_after_s=None)
        # The caller goes on ("...on Saturday") before Whisper's final of the first words is in.
        await worker.queue_frame(VADUserStartedSpeakingFrame())
        await worker.queue_frame(FinalTranscriptionFrame(text="What time do you open?", user_id="", timestamp="",
                                                         utterance_id=1))
        await asyncio.sleep(0.3)
        assert ends.ends == []
        stopped = await utterance_heard_late(worker, "On Saturday?", utterance_id=2, final_after_s=0.05)
        await ends.wait_for(1)
    assert ends.asked == ["What time do you open? On Saturday?"] and ends.ends[0] - stopped < LONG_TIMEOUT_S / 2


async def test_a_question_ends_at_its_final_only_once_the_final_of_later_words_is_in():
    async with turn_rig(user_speech_timeout=LONG_TIMEOUT_S, question_ends_at_final=True) as (worker, strategy, ends):
        await worker.queue_frame(VADUserStartedSpeakingFrame())
        await worker.queue_frame(PartialTranscriptionFrame(text="Where is the shop?", user_id="", timestamp="",
                                                           utterance_id=1))
        await worker.queue_frame(PartialTranscriptionFrame(text="and", user_id="", timestamp="", utterance_id=2))
        stopped = time.monotonic()
        await worker.queue_frame(VADUserStoppedSpeakingFrame(stop_secs=0.3))
        await worker.queue_frame(FinalTranscriptionFrame(text="Where is the shop?", user_id="", timestamp="",
                                                         utterance_id=1))
        await asyncio.sleep(0.3)
        assert ends.ends == []  # utterance 2's words are still being heard
        await worker.queue_frame(FinalTranscriptionFrame(text="and when do you open?", user_id="", timestamp="",
                                                         utterance_id=2))
        await ends.wait_for(1)
    assert ends.asked == ["Where is the shop? and when do you open?"]
    assert ends.ends[0] - stopped < LONG_TIMEOUT_S and strategy.ended_at_final == 1


class BotVoice(FrameProcessor):
    """Stands where the output transport is: says upstream when the bot starts and stops speaking."""

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)

    async def speak(self, started: bool):
        frame = BotStartedSpeakingFrame() if started else BotStoppedSpeakingFrame()
        await self.push_frame(frame, FrameDirection.UPSTREAM)


@asynccontextmanager
async def continuation_rig():
    # A fixed short end of turn, so the pause always ends the first turn: continuation is under test.
    strategy = AdaptiveUserTurnStopStrategy(user_speech_timeout=TIMEOUT_S, max_wait_s=0)
    context = LLMContext()
    pair = LLMContextAggregatorPair(
        context, user_params=LLMUserAggregatorParams(user_turn_strategies=UserTurnStrategies(stop=[strategy])))
    continuation = TurnContinuation(context, window_s=2.0, heard_s=1.0, redo_calls={"book_rental"})
    ends, voice = TurnEnds(), BotVoice()
    worker = PipelineWorker(Pipeline([pair.user(), continuation, ends, voice]), params=PipelineParams(),
                            cancel_on_idle_timeout=False)
    running = started(worker)
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    run = asyncio.create_task(runner.run())
    await asyncio.wait_for(running.wait(), 10)
    try:
        yield worker, continuation, ends, voice, context
    finally:
        await worker.queue_frame(EndFrame())
        await asyncio.wait_for(run, 10)


def user_messages(context):
    return [m["content"] for m in context.get_messages() if m["role"] == "user"]


async def test_going_on_before_the_answer_is_heard_makes_one_question():
    async with continuation_rig() as (worker, continuation, ends, voice, context):
        await utterance(worker, "My order number is")
        await ends.wait_for(1)  # the turn ended; no answer was heard
        await utterance(worker, "4572, and I want to know where it is.")
        await ends.wait_for(2)
    assert ends.asked == ["My order number is", "My order number is 4572, and I want to know where it is."]
    assert user_messages(context) == ["My order number is 4572, and I want to know where it is."]
    assert continuation.merged == 1


async def test_going_on_in_the_first_moments_of_the_answer_drops_what_was_said_of_it():
    async with continuation_rig() as (worker, continuation, ends, voice, context):
        await utterance(worker, "I would like to rent two bikes for Saturday.")
        await ends.wait_for(1)
        await voice.speak(True)
        context.add_message({"role": "assistant", "content": "Sure! We're"})  # what was heard of it
        await asyncio.sleep(0.3)
        await utterance(worker, "And a child seat if you have one.")
        await ends.wait_for(2)
    assert [m["role"] for m in context.get_messages()] == ["user"]
    assert user_messages(context) == ["I would like to rent two bikes for Saturday. And a child seat if you have one."]


def routed(name: str, call_id: str) -> list[dict]:
    """A call the fast path made for the caller's words, as pipecat writes it into the context."""
    return [{"role": "assistant", "tool_calls": [{"id": call_id, "type": "function",
                                                  "function": {"name": name, "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": call_id, "content": '{"started": true}'}]


async def test_going_on_takes_back_a_call_the_first_half_made_and_asks_the_whole_question():
    async with continuation_rig() as (worker, continuation, ends, voice, context):
        await utterance(worker, "I would like to rent two bikes for Saturday.")
        await ends.wait_for(1)
        for message in [*routed("book_rental", "brisk-routed-1"),
                        {"role": "developer", "content": "Ask which bike the caller wants."}]:
            context.add_message(message)  # the booking's flow opened at its first step
        await voice.speak(True)
        context.add_message({"role": "assistant", "content": "Which bike would"})
        await asyncio.sleep(0.3)
        await utterance(worker, "And a child seat if you have one.")
        await ends.wait_for(2)
    assert [m["role"] for m in context.get_messages()] == ["user"]
    assert continuation.merged == 1


async def test_a_call_that_did_something_lasting_keeps_the_halves_apart():
    async with continuation_rig() as (worker, continuation, ends, voice, context):
        await utterance(worker, "Yes.")
        await ends.wait_for(1)
        for message in routed("confirm_booking", "brisk-routed-2"):
            context.add_message(message)  # the booking is written
        await asyncio.sleep(0.3)
        await utterance(worker, "And a child seat if you have one.")
        await ends.wait_for(2)
    assert user_messages(context) == ["Yes.", "And a child seat if you have one."] and continuation.merged == 0


async def test_an_answer_heard_to_its_end_is_not_continued():
    async with continuation_rig() as (worker, continuation, ends, voice, context):
        await utterance(worker, "What time do you open?")
        await ends.wait_for(1)
        await voice.speak(True)
        context.add_message({"role": "assistant", "content": "At nine."})
        await voice.speak(False)
        await asyncio.sleep(0.3)
        await utterance(worker, "And on Sunday?")
        await ends.wait_for(2)
    assert user_messages(context) == ["What time do you open?", "And on Sunday?"] and continuation.merged == 0


async def test_an_answer_heard_for_longer_than_its_first_moments_is_a_barge_in_not_a_continuation():
    async with continuation_rig() as (worker, continuation, ends, voice, context):
        await utterance(worker, "Tell me about your bikes.")
        await ends.wait_for(1)
        await voice.speak(True)
        context.add_message({"role": "assistant", "content": "We have city bikes, electric bikes and"})
        await asyncio.sleep(1.2)
        await utterance(worker, "Do you have anything cheaper?")
        await ends.wait_for(2)
    assert user_messages(context) == ["Tell me about your bikes.", "Do you have anything cheaper?"]
    assert continuation.merged == 0
