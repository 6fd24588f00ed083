"""Barge-in (processors/barge_in/barge_in.py): the interruption policy, stale bot turns, the spoken context.

The policy is tested inside pipecat's real user aggregator. The call-level tests run a real
pipeline: user aggregator -> Brisk's OpenAI LLM service over real HTTP to the scripted LLM
server -> tagger -> a tone voice (tests/fakes/paced_output.py) -> gate -> pipecat's output
transport in front of a real-time peer -> tracker -> assistant aggregator. The user is played
by VAD and transcription frames, the way the VAD and STT processors deliver them.
"""

import asyncio
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    InterimTranscriptionFrame,
    InterruptionFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSTextFrame,
    UserBackchannelFrame,
    UserStartedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.tests.utils import SleepFrame, run_test
from pipecat.turns.empty_user_turn import EmptyUserTurnConfig
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies
from pipecat.utils.time import time_now_iso8601
from pipecat.workers.runner import WorkerRunner

from agent.caller.loopback import serve_app
from agent.bench.scripted_llm import ScriptedLLM
from frames.transcription import NoWordsHeardFrame
from frames.turn import TURN_ID
from processors.barge_in.barge_in import BargeIn
from processors.barge_in.barge_in_policy import BargeInPolicy
from processors.barge_in.false_interruption import unheard_rest
from processors.llm.openai_llm import ResilientOpenAILLMService, make_openai_client
from processors.turns.adaptive_user_turn_stop import AdaptiveUserTurnStopStrategy
from tests.fakes.delay_processor import InstantOutputTransport
from tests.fakes.in_flight_chunk import InFlightChunk
from tests.fakes.paced_output import SAMPLE_RATE, PacedOutputTransport, ToneTTSService
from tests.waiting import until

# -- the policy ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["Uh-huh.", "uh huh", "Uh-uh", "Mm-hmm.", "Mmm", "M M M", "Yeah, yeah.", "OK.", "Okay", "Right.", "嗯", "对对"],
)  # fmt: skip
def test_backchannels_are_recognised_as_whisper_spells_them(text):
    assert BargeInPolicy().is_backchannel(text)


@pytest.mark.parametrize(
    "text", ["", "Yeah, but what about Sunday?", "OK wait", "Right now, please", "Stop.", "Yes"]
)
def test_speech_with_other_words_is_not_a_backchannel(text):
    assert not BargeInPolicy().is_backchannel(text)


@pytest.mark.parametrize(
    "text, expected", [("Ri", True), ("O", True), ("Uh", True), ("Wait", False), ("I", False)]
)
def test_the_start_of_a_backchannel_is_not_taken_for_words_yet(text, expected):
    assert BargeInPolicy().may_become_backchannel(text) is expected


# -- the policy inside pipecat's user aggregator ---------------------------------------------


def user_aggregator(barge_in: BargeIn, context: LLMContext | None = None):
    strategies = UserTurnStrategies(
        start=[barge_in.start_strategy()],
        stop=[SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.05)],
    )
    pair = LLMContextAggregatorPair(
        context or LLMContext(), user_params=LLMUserAggregatorParams(user_turn_strategies=strategies)
    )
    return pair.user()


def interim(text: str) -> InterimTranscriptionFrame:
    return InterimTranscriptionFrame(text, "user", time_now_iso8601())


def final(text: str) -> TranscriptionFrame:
    return TranscriptionFrame(text, "user", time_now_iso8601(), finalized=True)


def names(frames) -> list[type]:
    return [type(f) for f in frames]


async def test_speech_over_the_bot_interrupts_once_it_lasted_long_enough_and_has_a_word():
    barge_in = BargeIn(BargeInPolicy(min_speech_secs=0.25))
    down, _ = await run_test(
        user_aggregator(barge_in),
        frames_to_send=[
            BotStartedSpeakingFrame(),
            VADUserStartedSpeakingFrame(start_secs=0.0),
            interim("Wait"),
            SleepFrame(0.4),
        ],
    )
    # The word was there at once, but the speech had not lasted min_speech_secs yet.
    [decision] = barge_in.decisions
    assert decision.text == "Wait" and decision.bot_mid_answer
    assert decision.decided_at - decision.speech_started_at >= 0.25
    assert names(down).index(UserStartedSpeakingFrame) < names(down).index(InterruptionFrame)


async def test_with_the_bot_silent_a_turn_starts_at_the_vad_start():
    barge_in = BargeIn(BargeInPolicy(min_speech_secs=5.0, min_words=3))
    down, _ = await run_test(
        user_aggregator(barge_in),
        frames_to_send=[VADUserStartedSpeakingFrame(start_secs=0.2), SleepFrame(0.05)],
    )
    assert InterruptionFrame in names(down)
    [decision] = barge_in.decisions
    assert decision.text == "" and not decision.bot_mid_answer


async def test_a_backchannel_over_the_bot_reaches_the_transcript_but_not_the_context_and_does_not_interrupt():
    barge_in = BargeIn(BargeInPolicy(min_speech_secs=0.05))
    context = LLMContext()
    down, _ = await run_test(
        user_aggregator(barge_in, context),
        frames_to_send=[
            BotStartedSpeakingFrame(),
            VADUserStartedSpeakingFrame(start_secs=0.2),
            interim("Uh"),  # the start of "uh-huh", not yet a word that interrupts
            SleepFrame(0.1),
            interim("Uh-huh"),
            VADUserStoppedSpeakingFrame(stop_secs=0.2),
            final("Uh-huh."),
            SleepFrame(0.3),
        ],
    )
    assert InterruptionFrame not in names(down)
    assert UserStartedSpeakingFrame not in names(down)
    [backchannel] = [f for f in down if isinstance(f, UserBackchannelFrame)]
    assert backchannel.text == "Uh-huh."
    assert [b.text for b in barge_in.backchannels] == ["Uh-huh."]
    assert barge_in.decisions == []
    assert context.messages == []


async def test_speech_shorter_than_the_minimum_does_not_interrupt_the_bot():
    barge_in = BargeIn(BargeInPolicy(min_speech_secs=0.6))
    context = LLMContext()
    down, _ = await run_test(
        user_aggregator(barge_in, context),
        frames_to_send=[
            BotStartedSpeakingFrame(),
            VADUserStartedSpeakingFrame(start_secs=0.2),
            interim("Hey"),
            SleepFrame(0.1),
            VADUserStoppedSpeakingFrame(stop_secs=0.2),  # ~0.1 s of speech
            final("Hey."),
            SleepFrame(0.8),
        ],
    )
    assert InterruptionFrame not in names(down)
    assert barge_in.decisions == [] and barge_in.backchannels == []
    assert context.messages == []  # dropped, not saved up for the user's next message


async def test_fewer_words_than_the_minimum_do_not_interrupt_but_enough_do():
    barge_in = BargeIn(BargeInPolicy(min_speech_secs=0.0, min_words=3))
    down, _ = await run_test(
        user_aggregator(barge_in),
        frames_to_send=[
            BotStartedSpeakingFrame(),
            VADUserStartedSpeakingFrame(start_secs=0.2),
            SleepFrame(0.05),
            interim("Hold on"),
            SleepFrame(0.1),
            interim("Hold on please"),
            SleepFrame(0.1),
        ],
    )
    [decision] = barge_in.decisions
    assert decision.text == "Hold on please"
    assert names(down).count(InterruptionFrame) == 1


async def test_between_two_sentences_the_bot_still_counts_as_mid_answer():
    barge_in = BargeIn(BargeInPolicy(min_speech_secs=0.05, bot_quiet_secs=1.0))
    down, _ = await run_test(
        user_aggregator(barge_in),
        frames_to_send=[
            BotStartedSpeakingFrame(),
            BotStoppedSpeakingFrame(),  # one sentence ended, the next has not started yet
            SleepFrame(0.05),
            VADUserStartedSpeakingFrame(start_secs=0.2),
            SleepFrame(0.1),
            VADUserStoppedSpeakingFrame(stop_secs=0.2),
            final("Okay."),
            SleepFrame(0.2),
        ],
    )
    assert InterruptionFrame not in names(down)
    assert [b.text for b in barge_in.backchannels] == ["Okay."]


# -- stale bot turns: tagger -> TTS -> gate --------------------------------------------------


def after(frames, frame_type):
    """The frames that came after the first ``frame_type``."""
    return frames[names(frames).index(frame_type) + 1 :]


async def test_a_half_sentence_flushed_after_the_interruption_is_never_sent():
    barge_in = BargeIn()
    tts = ToneTTSService(chars_per_second=200.0)
    down, _ = await run_test(
        Pipeline([barge_in.tagger(), tts, barge_in.gate()]),
        frames_to_send=[
            LLMFullResponseStartFrame(),
            LLMTextFrame("The first sentence is spoken. "),
            LLMTextFrame("The second"),  # the look-ahead that ends the first sentence
            SleepFrame(0.3),
            LLMTextFrame(" sentence is cut"),
            InterruptionFrame(),
            # What a cancelled LLM still delivers: text the interruption overtook, then the
            # end frame from its `finally`, which makes the TTS flush its half sentence.
            LLMTextFrame(" off here"),
            LLMFullResponseEndFrame(),
            SleepFrame(0.3),
            LLMFullResponseStartFrame(),
            LLMTextFrame("A new answer."),
            LLMFullResponseEndFrame(),
            SleepFrame(0.3),
        ],
    )
    assert any("off here" in text for text in tts.requested), "the stale flush did not happen"
    before = down[: names(down).index(InterruptionFrame)]
    assert any(isinstance(f, TTSAudioRawFrame) for f in before)
    stale = [f for f in after(down, InterruptionFrame) if f.metadata.get(TURN_ID) == 1]
    assert stale == [], stale
    spoken_after = [f.text for f in after(down, InterruptionFrame) if isinstance(f, TTSTextFrame)]
    assert spoken_after == ["A new answer."]
    assert any(isinstance(f, TTSAudioRawFrame) for f in after(down, InterruptionFrame))


async def test_speech_outside_an_answer_after_an_interruption_is_a_new_turn_and_is_spoken():
    barge_in = BargeIn()
    tts = ToneTTSService(chars_per_second=200.0)
    down, _ = await run_test(
        Pipeline([barge_in.tagger(), tts, barge_in.gate()]),
        frames_to_send=[
            LLMFullResponseStartFrame(),
            LLMTextFrame("An answer that gets cut."),
            SleepFrame(0.2),
            InterruptionFrame(),
            TTSSpeakFrame("One moment, please."),
            SleepFrame(0.3),
        ],
    )
    rest = after(down, InterruptionFrame)
    assert [f.text for f in rest if isinstance(f, TTSTextFrame)] == ["One moment, please."]
    assert {f.metadata[TURN_ID] for f in rest if isinstance(f, TTSAudioRawFrame)} == {2}


# A phone's transport resamples: its resampler holds back audio, so 40 ms in makes no whole chunk.
@pytest.mark.parametrize("transport_rate, in_flight", [(SAMPLE_RATE, 1), (8000, 4)], ids=["same-rate", "phone"])
async def test_a_cut_chunk_written_after_the_interruption_does_not_leave_the_bot_speaking(transport_rate, in_flight):
    barge_in = BargeIn()
    tracker = barge_in.playback()
    down, _ = await run_test(
        Pipeline([barge_in.tagger(), ToneTTSService(chars_per_second=40.0), barge_in.gate(),
                  InFlightChunk(frames=in_flight), InstantOutputTransport(sample_rate=transport_rate), tracker]),
        frames_to_send=[
            LLMFullResponseStartFrame(),
            LLMTextFrame("The first sentence is spoken. "),
            LLMTextFrame("The second"),  # the look-ahead that ends the first sentence
            SleepFrame(0.2),
            InterruptionFrame(),  # the transport writes the held chunk after it
            SleepFrame(0.3),  # far less than the transport's 3 s fallback stop
            TTSSpeakFrame("One moment, please."),
            SleepFrame(0.3),
        ],
    )
    speech = [f for f in after(down, InterruptionFrame)
              if isinstance(f, (BotStartedSpeakingFrame, BotStoppedSpeakingFrame, TTSAudioRawFrame))]
    first_of_turn_2 = next(i for i, f in enumerate(speech) if f.metadata.get(TURN_ID) == 2)
    before_turn_2 = speech[:first_of_turn_2]
    assert any(f.metadata.get(TURN_ID) == 1 for f in before_turn_2), "the cut chunk was not written"
    # The interruption stops the bot, the cut chunk starts it again and its end stops it, so the
    # next answer's speech starts with its own start.
    assert [type(f) for f in before_turn_2 if not isinstance(f, TTSAudioRawFrame)] == [
        BotStoppedSpeakingFrame, BotStartedSpeakingFrame, BotStoppedSpeakingFrame, BotStartedSpeakingFrame]
    assert barge_in.stale_frames == 0 and barge_in.stale_speech_ended == 1


# -- whole calls: scripted LLM over HTTP, tone voice, real-time peer ---------------------------


@dataclass
class Rig:
    barge_in: BargeIn
    llm: ScriptedLLM
    tts: ToneTTSService
    output: PacedOutputTransport
    context: LLMContext
    worker: PipelineWorker

    async def start_speaking(self, partial: str | None = None):
        await self.worker.queue_frame(VADUserStartedSpeakingFrame(start_secs=0.2))
        if partial:
            await asyncio.sleep(0.1)
            await self.worker.queue_frame(interim(partial))

    async def stop_speaking(self, transcript: str):
        await self.worker.queue_frame(VADUserStoppedSpeakingFrame(stop_secs=0.2))
        await self.worker.queue_frame(final(transcript))

    async def ask(self, question: str):
        await self.start_speaking()
        await asyncio.sleep(0.2)
        await self.stop_speaking(question)


@asynccontextmanager
async def call(answer_for, *, tts_delay_s: float = 0.0, tokens_per_s: float = 30.0, stop=None):
    """A running pipeline wired as agent/call/pipeline.py wires barge-in, on the scripted LLM."""
    llm = ScriptedLLM(ttft_s=0.05, tokens_per_s=tokens_per_s, answer_for=answer_for)
    async with serve_app(llm.app()) as url:
        client = make_openai_client(base_url=f"{url}/v1", api_key=None, connect_timeout=2, total_timeout=30)
        barge_in = BargeIn(BargeInPolicy(min_speech_secs=0.05))
        context = LLMContext()
        pair = LLMContextAggregatorPair(
            context,
            user_params=LLMUserAggregatorParams(
                user_turn_strategies=UserTurnStrategies(
                    start=[barge_in.start_strategy()],
                    stop=[stop or SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.05)],
                ),
                empty_user_turn=EmptyUserTurnConfig(interrupted_prompt=None),
            ),
        )
        tts = ToneTTSService(delay_s=tts_delay_s)
        output = PacedOutputTransport()
        pipeline = Pipeline(
            [
                pair.user(),
                ResilientOpenAILLMService(
                    client=client,
                    apology_text="Sorry.",
                    settings=OpenAILLMService.Settings(model="scripted", system_instruction="Be brief."),
                ),
                barge_in.tagger(),
                barge_in.resumer(pair.user()),
                tts,
                barge_in.gate(),
                output,
                barge_in.playback(pair.assistant()),
                pair.assistant(),
            ]
        )
        worker = PipelineWorker(
            pipeline, params=PipelineParams(audio_out_sample_rate=SAMPLE_RATE), idle_timeout_secs=None
        )
        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(worker)
        running = asyncio.create_task(runner.run())
        try:
            yield Rig(barge_in, llm, tts, output, context, worker)
        finally:
            await worker.cancel()
            await running
            await client.close()


def assistant_messages(messages) -> list[str]:
    return [m["content"] for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]


def assert_nothing_went_out_after(rig: Rig, interruption):
    """No audio of the cut turn started playing after the interruption reached the transport."""
    assert interruption.reached_output_at is not None
    late = [w for w in rig.output.writes if w.started_at > interruption.reached_output_at]
    assert late == [], late
    assert interruption.stale_frames == 0 and rig.barge_in.stale_frames == 0


LONG = " ".join(["Well, let me tell you about every bike we rent"] + ["and why"] * 40) + "."


@pytest.mark.parametrize("speculative", [False, True], ids=["held-for-a-sentence-end", "speculative"])
async def test_interrupting_an_answer_still_held_closes_the_llm_stream_and_nothing_is_spoken(speculative):
    async with call(lambda _: LONG, tokens_per_s=10.0) as rig:
        if speculative:
            # What the user aggregator pushes when a stop strategy answers a turn not yet ended:
            # the LLM service holds the answer until the turn is confirmed.
            draft = LLMContext(messages=[{"role": "user", "content": "Which bikes do you rent?"}])
            await rig.worker.queue_frame(LLMContextFrame(context=draft, speculation=True))
        else:
            await rig.ask("Which bikes do you rent?")
        await until(lambda: rig.llm.requests and rig.llm.requests[0].tokens_sent >= 5, "tokens")

        await rig.start_speaking()
        await until(lambda: rig.llm.requests[0].disconnected, "the LLM stream to close")
        await asyncio.sleep(0.5)

        assert not rig.llm.requests[0].completed
        # pipecat's TTS may still be handed the half sentence it held (the cancelled LLM's end
        # frame flushes it): none of it may be heard.
        assert rig.output.writes == []
        if speculative:
            assert rig.barge_in.current_turn is None  # the held answer never left the LLM service
        else:
            [interruption] = rig.barge_in.interruptions
            assert interruption.phase == "held"
            assert_nothing_went_out_after(rig, interruption)
        assert assistant_messages(rig.context.messages) == []


async def test_interrupting_during_synthesis_cancels_it_and_nothing_is_spoken():
    answer = "This first sentence takes the voice a while. " + LONG
    async with call(lambda _: answer, tts_delay_s=3.0) as rig:
        await rig.ask("Which bikes do you rent?")
        await until(lambda: rig.tts.requested, "synthesis to start")

        await rig.start_speaking()
        await until(lambda: rig.tts.cancelled, "synthesis to be cancelled")
        await asyncio.sleep(0.5)

        [interruption] = rig.barge_in.interruptions
        assert interruption.phase == "synthesis"
        assert rig.tts.cancelled == rig.tts.requested == ["This first sentence takes the voice a while."]
        assert rig.output.writes == []
        assert rig.llm.requests[0].disconnected
        assert_nothing_went_out_after(rig, interruption)
        assert assistant_messages(rig.context.messages) == []


async def test_interrupting_during_playback_stops_the_audio_at_once_and_nothing_stale_follows():
    answer = "Here is a long answer. " * 12
    async with call(lambda _: answer) as rig:
        await rig.ask("Tell me everything.")
        await until(lambda: len(rig.output.audible_writes()) >= 15, "the bot to be heard")

        await rig.start_speaking(partial="Wait a moment")
        await until(lambda: rig.barge_in.interruptions, "the interruption")
        [interruption] = rig.barge_in.interruptions
        await until(lambda: interruption.reached_output_at, "the interruption at the transport")
        await asyncio.sleep(0.6)

        assert interruption.phase == "playback" and interruption.text == "Wait a moment"
        assert_nothing_went_out_after(rig, interruption)
        # One interruption reached the transport per user turn start: the one sent ahead at the
        # decision, not pipecat's own a second time.
        assert interruption.decided_at < rig.output.interruptions[-1] <= interruption.reached_output_at
        assert len(rig.output.interruptions) == len(rig.barge_in.decisions) == 2
        # The last audio out of the cut turn is the last chunk the peer played.
        assert interruption.last_audio_out_at >= rig.output.writes[-1].played_at
        assert interruption.stop_ms is not None
        assert rig.llm.requests[0].disconnected and not rig.llm.requests[0].completed
        print(
            f"\nplayback barge-in: decision -> interruption at transport "
            f"{(interruption.reached_output_at - interruption.decided_at) * 1000:.1f} ms, "
            f"decision -> last audio out {interruption.stop_ms:.1f} ms, "
            f"stale frames out {rig.barge_in.stale_frames}"
        )


async def test_after_an_interruption_the_context_holds_only_what_was_played():
    first = "Sentence one is here."
    second = "Sentence two is a good deal longer than the first one was."
    third = "Sentence three is never heard."
    answers = iter([f"{first} {second} {third}", "Sunday is closed."])
    async with call(lambda _: next(answers)) as rig:
        await rig.ask("When are you open?")
        # One sentence lasts len(text) / 15 s with the tone voice: stop ~1 s into the second.
        heard_s = len(first) / rig.tts.chars_per_second + 1.0
        await until(lambda: len(rig.output.audible_writes()) * 0.04 >= heard_s, "sentence two")
        await rig.start_speaking(partial="What about")
        await until(lambda: rig.barge_in.interruptions, "the interruption")
        await asyncio.sleep(0.3)
        await rig.stop_speaking("What about Sunday?")
        await until(lambda: len(rig.llm.requests) == 2, "the next question")

        [interruption] = rig.barge_in.interruptions
        spoken = interruption.spoken_text
        assert spoken.startswith(f"{first} Sentence two")
        assert spoken != f"{first} {second}" and f"{first} {second}".startswith(spoken)
        # The words kept are the ones whose audio went out (the voice speaks at a known rate).
        played_of_second = len(rig.output.audible_writes()) * 0.04 - len(first) / rig.tts.chars_per_second
        kept_chars = len(spoken) - len(first) - 1
        assert kept_chars <= played_of_second * rig.tts.chars_per_second + 1

        next_request = rig.llm.requests[1].messages
        assert assistant_messages(next_request) == [spoken]
        assert next_request[-1] == {"role": "user", "content": "What about Sunday?"}
        assert not any(third in str(m.get("content")) for m in next_request)


async def test_a_turn_with_no_words_that_cut_the_answer_lets_the_bot_go_on_from_the_sentence_it_was_cut_in():
    # A cough over the bot that Whisper's partial heard as a word: the bot stops; its final has none.
    first = "Sentence one is here."
    second = "Sentence two is a good deal longer than the first one was."
    third = "Sentence three comes last."
    ends = AdaptiveUserTurnStopStrategy(user_speech_timeout=0.05)  # Brisk's: it ends a turn with no words
    async with call(lambda _: f"{first} {second} {third}", stop=ends) as rig:
        await rig.ask("When are you open?")
        heard_s = len(first) / rig.tts.chars_per_second + 1.0
        await until(lambda: len(rig.output.audible_writes()) * 0.04 >= heard_s, "sentence two")
        await rig.start_speaking(partial="You")
        await until(lambda: rig.barge_in.interruptions, "the interruption")
        [interruption] = rig.barge_in.interruptions
        await until(lambda: interruption.reached_output_at, "the interruption at the transport")
        cut_at = len(rig.output.writes)
        await rig.worker.queue_frame(VADUserStoppedSpeakingFrame(stop_secs=0.2))
        await rig.worker.queue_frame(NoWordsHeardFrame(utterance_id=1))  # the STT's final: no words
        await until(lambda: rig.barge_in.resumed, "the bot to go on", timeout=3)
        # When the rest was sent on, not when this test saw it: under load its first audio can
        # go out before the test reads a clock.
        [resumed_at] = rig.barge_in.resumed_at
        assert ends.ended_without_words == 1
        went_on = len(second + third) / rig.tts.chars_per_second
        await until(lambda: len(rig.output.audible_writes()) - cut_at >= went_on / 0.04 * 0.9, "the rest to be heard",
                    timeout=10)

        assert rig.barge_in.resumed == [f"{second} {third}"]
        assert len(rig.llm.requests) == 1  # said on, not asked again
        # Nothing of the cut turn went out after the cut; the rest is a turn of its own, said after the pause.
        assert interruption.stale_frames == 0 and rig.barge_in.stale_frames == 0
        assert [w for w in rig.output.writes if interruption.reached_output_at < w.started_at < resumed_at] == []
        assert [t.kind for t in rig.barge_in.turns] == ["answer", "utterance"]
        await until(lambda: len(assistant_messages(rig.context.messages)) == 2, "the rest in the context")
        assert assistant_messages(rig.context.messages) == [interruption.spoken_text, f"{second} {third}"]
        assert interruption.spoken_text.startswith(f"{first} Sentence two")


async def test_words_after_the_cut_are_answered_and_the_cut_answer_is_not_said_on():
    answers = iter(["Sentence one is here. Sentence two is a good deal longer than the first one was.",
                    "Sunday is closed."])
    async with call(lambda _: next(answers)) as rig:
        await rig.ask("When are you open?")
        await until(lambda: len(rig.output.audible_writes()) >= 30, "the bot to be heard")
        await rig.start_speaking(partial="What about")
        await until(lambda: rig.barge_in.interruptions, "the interruption")
        await rig.stop_speaking("What about Sunday?")
        await until(lambda: len(rig.llm.requests) == 2, "the next question")
        await until(lambda: "Sunday is closed." in assistant_messages(rig.context.messages), "its answer")
        assert rig.barge_in.resumed == []


@pytest.mark.parametrize("heard, rest", [
    ("", "We open at nine. On Sundays at ten. Bring a photo ID."),
    ("We open at nine. On Sundays", "On Sundays at ten. Bring a photo ID."),
    ("We open at nine.", "On Sundays at ten. Bring a photo ID."),
    ("We open at nine. On Sundays at ten. Bring a photo ID.", ""),
])
def test_an_answer_goes_on_from_the_first_sentence_not_heard_whole(heard, rest):
    assert unheard_rest("We open at nine.  On Sundays at ten. Bring a photo ID.", heard) == rest
