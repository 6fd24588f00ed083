"""LatencyObserver: per-processor latency and the per-turn waterfall, on real pipecat pipelines.

Processors here take known times to answer; measured values are checked against those delays
with a generous upper bound that only catches nonsense, never as a speed requirement.
"""

import json
import time

from loguru import logger

from pipecat.frames.frames import (
    BotStoppedSpeakingFrame,
    Frame,
    InputAudioRawFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    OutputAudioRawFrame,
    TextFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.tests.utils import SleepFrame, run_test
from pipecat.services.tts_service import TextAggregationMode
from frames.turn import FAST_PATH
from processors.llm.answer_check import AnswerChecker
from processors.observers.latency import STAGES, LatencyObserver
from tests.fakes.delay_processor import (
    DelayedEmitProcessor,
    DelayedLLMService,
    DelayedSTTService,
    DelayedToolLLMService,
    DelayedTTSService,
    DelayProcessor,
    InstantOutputTransport,
)

SLACK_MS = 200  # upper bound on scheduling noise; guards against nonsense, not a speed target
STOP_SECS = 0.2
STT_DELAY, LLM_DELAY, TTS_DELAY = 0.1, 0.15, 0.05


def _audio_in() -> InputAudioRawFrame:
    return InputAudioRawFrame(audio=b"\x00\x00" * 160, sample_rate=16000, num_channels=1)


async def test_pass_through_latency_is_the_time_each_frame_was_held():
    delays = [0.01] * 8 + [0.1] * 2
    delayer = DelayProcessor(delays)
    observer = LatencyObserver()

    await run_test(
        delayer,
        frames_to_send=[TextFrame(f"t{i}") for i in range(len(delays))],
        observers=[observer],
    )

    stats = observer.processor_stats()[delayer.name]
    assert stats["count"] == len(delays)
    assert 10 <= stats["p50_ms"] < 10 + SLACK_MS
    assert 100 <= stats["p95_ms"] <= stats["p99_ms"] < 100 + SLACK_MS
    assert stats["p50_ms"] < stats["p95_ms"]


async def test_each_processor_keeps_only_its_latest_window_of_samples():
    delays = [0.2, 0.2, 0.0, 0.0, 0.0]
    delayer = DelayProcessor(delays)
    observer = LatencyObserver(window=3)

    frames = [TextFrame(f"t{i}") for i in range(len(delays))]
    await run_test(delayer, frames_to_send=frames, observers=[observer])

    stats = observer.processor_stats()[delayer.name]
    assert stats["count"] == 3
    assert stats["p99_ms"] < 200  # the two slow frames were the oldest, and have left


async def test_a_new_frame_is_measured_from_the_frame_that_caused_it_not_from_noise():
    # Input audio keeps flowing through the processor while it works on the text; the audio
    # frame that entered last is not what the answer answers.
    emitter = DelayedEmitProcessor(
        trigger=TextFrame,
        make_frame=lambda _: OutputAudioRawFrame(b"\x00\x00" * 160, 16000, 1),
        delay_s=0.08,
    )
    observer = LatencyObserver()
    frames: list[Frame] = []
    for i in range(4):
        frames += [TextFrame(f"t{i}"), SleepFrame(0.02), _audio_in(), _audio_in(), SleepFrame(0.1)]

    await run_test(emitter, frames_to_send=frames, observers=[observer])

    stats = observer.processor_stats()[emitter.name]
    assert stats["count"] == 4
    assert 80 <= stats["p50_ms"] <= stats["p95_ms"] <= stats["p99_ms"] < 80 + SLACK_MS


async def test_llm_latency_is_request_to_first_token_once_per_response():
    llm = DelayedLLMService(tokens=["One ", "two ", "three."], delay_s=LLM_DELAY)
    observer = LatencyObserver()

    requests = [LLMContextFrame(LLMContext()), SleepFrame(0.3), LLMContextFrame(LLMContext())]
    await run_test(llm, frames_to_send=requests, observers=[observer])

    stats = observer.processor_stats()[llm.name]
    assert stats["count"] == 2  # one per response, not one per token
    assert LLM_DELAY * 1000 <= stats["p50_ms"] <= stats["p99_ms"] < LLM_DELAY * 1000 + SLACK_MS


async def test_a_frame_swallowed_long_ago_is_not_taken_as_the_cause():
    emitter = DelayedEmitProcessor(
        trigger=TextFrame,
        make_frame=lambda _: OutputAudioRawFrame(b"\x00\x00" * 160, 16000, 1),
        delay_s=0.08,
    )
    observer = LatencyObserver(max_cause_age_s=0.04)

    await run_test(emitter, frames_to_send=[TextFrame("late")], observers=[observer])

    assert emitter.name not in observer.processor_stats()


def _voice_pipeline(tap=None):
    """STT -> LLM -> TTS -> output transport, each answering after a known delay."""
    stt = DelayedSTTService(text="what time is it", delay_s=STT_DELAY)
    llm = DelayedLLMService(tokens=["It is ", "ten. ", "Bye."], delay_s=LLM_DELAY)
    tts = DelayedTTSService(delay_s=TTS_DELAY)
    processors = [stt, llm, tts, InstantOutputTransport()]
    if tap:
        processors.insert(0, DelayProcessor(0, on_frame=tap))
    return Pipeline(processors), tts


def _user_turn(*, pause_and_resume: bool = False, answer: bool = True) -> list[Frame]:
    frames: list[Frame] = [VADUserStartedSpeakingFrame(), UserStartedSpeakingFrame()]
    frames += [SleepFrame(0.1)]
    if pause_and_resume:
        # A pause long enough for the VAD to stop and the STT to transcribe the first part.
        frames += [VADUserStoppedSpeakingFrame(stop_secs=STOP_SECS), SleepFrame(0.2)]
        frames += [VADUserStartedSpeakingFrame(), SleepFrame(0.1)]
    frames += [VADUserStoppedSpeakingFrame(stop_secs=STOP_SECS), SleepFrame(0.2)]
    frames += [UserStoppedSpeakingFrame(), SleepFrame(0.05)]
    if answer:
        frames += [LLMContextFrame(LLMContext()), SleepFrame(0.6)]
    return frames


def _assert_causal_waterfall(record: dict):
    stages = record["stages_ms"]
    assert list(stages) == list(STAGES)
    assert all(stages[s] is not None for s in STAGES), stages
    values = [stages[s] for s in STAGES]
    assert values == sorted(values), stages
    assert stages["stt_final"] - stages["vad_stop"] >= STT_DELAY * 1000
    assert stages["llm_first_token"] - stages["llm_request"] >= LLM_DELAY * 1000
    assert stages["tts_first_audio"] - stages["tts_first_text"] >= TTS_DELAY * 1000
    assert stages["first_audio_out"] - stages["speech_end"] < 2000 + SLACK_MS


async def test_a_turn_yields_a_complete_causal_waterfall_logged_and_sent_to_listeners():
    pipeline, tts = _voice_pipeline()
    observer = LatencyObserver()
    received_sync, received_async, logged = [], [], []

    def broken_listener(record):
        raise RuntimeError("the browser went away")

    async def async_listener(record):
        received_async.append(record)

    observer.add_turn_listener(broken_listener)
    observer.add_turn_listener(received_sync.append)
    observer.add_turn_listener(async_listener)
    sink = logger.add(
        lambda m: logged.append(m.record["message"]),
        filter=lambda r: r["message"].startswith("turn-latency "),
    )
    try:
        await run_test(pipeline, frames_to_send=_user_turn(), observers=[observer])
    finally:
        logger.remove(sink)

    assert len(observer.turns) == 1  # every frame was seen at every hop, counted once
    record = observer.turns[0]
    _assert_causal_waterfall(record)
    assert record["turn"] == 1
    assert record["reference"] == "vad_estimate"
    assert record["stages_ms"]["speech_end"] == 0.0
    assert record["stages_ms"]["vad_stop"] == STOP_SECS * 1000
    assert record["interrupted"] is False
    assert record["user_text"] == "what time is it"
    assert record["bot_text"] == "It is ten. Bye."
    assert received_sync == [record] and received_async == [record]
    assert [json.loads(m.removeprefix("turn-latency ")) for m in logged] == [record]
    assert observer.summary() == {"processors": observer.processor_stats(), "turns": [record]}
    # The TTS service's own latency is sentence text in -> first audio out.
    tts_stats = observer.processor_stats()[tts.name]
    assert TTS_DELAY * 1000 <= tts_stats["p99_ms"] < TTS_DELAY * 1000 + SLACK_MS


async def test_in_a_call_whose_answers_are_checked_the_bot_said_what_the_check_let_go():
    stt = DelayedSTTService(text="what time is it", delay_s=STT_DELAY)
    llm = DelayedLLMService(tokens=["It is ", "ten. ", "Bye."], delay_s=LLM_DELAY)
    check = AnswerChecker(answer_check=lambda question, text: False, unsupported_text="I don't know.")
    pipeline = Pipeline([stt, check.reader(), llm, check, DelayedTTSService(delay_s=TTS_DELAY),
                         InstantOutputTransport()])
    observer = LatencyObserver()

    await run_test(pipeline, frames_to_send=_user_turn(), observers=[observer])

    [record] = observer.turns
    assert record["bot_text"] == "I don't know." and check.refusals == 1  # the record keeps what was heard
    _assert_causal_waterfall(record)  # the LLM's first token is still the LLM's


async def test_mark_speech_end_makes_the_true_end_of_speech_the_reference():
    observer = LatencyObserver()
    marks = []

    def mark_when_vad_stops(frame):
        if isinstance(frame, VADUserStoppedSpeakingFrame):
            # As if the audio's speech had ended 50 ms before the VAD frame got here.
            marks.append(time.monotonic() - 0.05)
            observer.mark_speech_end(marks[-1])

    pipeline, _ = _voice_pipeline(tap=mark_when_vad_stops)
    await run_test(pipeline, frames_to_send=_user_turn(), observers=[observer])

    (record,) = observer.turns
    _assert_causal_waterfall(record)
    assert record["reference"] == "speech_end"
    assert abs(record["t0_monotonic"] - marks[0]) < 1e-6
    # The VAD frame was pushed just before the tap saw it, so at most 50 ms after the mark.
    assert 0 < record["stages_ms"]["vad_stop"] <= 50


async def test_a_pause_the_user_resumes_from_does_not_split_the_turn():
    observer = LatencyObserver()
    vad_stops_seen = []

    def note_vad_stop(frame):
        if isinstance(frame, VADUserStoppedSpeakingFrame):
            vad_stops_seen.append(time.monotonic())

    pipeline, _ = _voice_pipeline(tap=note_vad_stop)
    await run_test(pipeline, frames_to_send=_user_turn(pause_and_resume=True), observers=[observer])

    (record,) = observer.turns
    _assert_causal_waterfall(record)
    # Measured from the VAD stop that ended the turn, not the one that ended the pause.
    vad_stop_at = record["t0_monotonic"] + record["stages_ms"]["vad_stop"] / 1000
    assert vad_stops_seen[0] < vad_stop_at <= vad_stops_seen[1]
    assert record["user_text"] == "what time is it what time is it"


async def test_a_draft_in_flight_when_the_user_resumes_is_still_the_answer_recorded():
    observer = LatencyObserver()
    pipeline, _ = _voice_pipeline()
    frames = [VADUserStartedSpeakingFrame(), UserStartedSpeakingFrame(), SleepFrame(0.1),
              VADUserStoppedSpeakingFrame(stop_secs=STOP_SECS), SleepFrame(0.05),
              LLMContextFrame(LLMContext(), speculation=True), SleepFrame(0.3),  # drafted on a stable partial
              VADUserStartedSpeakingFrame(), SleepFrame(0.1),  # a breath: the VAD starts again
              VADUserStoppedSpeakingFrame(stop_secs=STOP_SECS), SleepFrame(0.2),
              UserStoppedSpeakingFrame(), SleepFrame(0.6)]  # the draft is kept: no new request

    await run_test(pipeline, frames_to_send=frames, observers=[observer])

    (record,) = observer.turns
    assert record["bot_text"] == "It is ten. Bye." and record["speculative"]
    assert record["stages_ms"]["llm_request"] is not None and record["stages_ms"]["llm_first_token"] is not None


async def test_a_new_turn_closes_an_unanswered_one_as_interrupted():
    pipeline, _ = _voice_pipeline()
    observer = LatencyObserver()

    frames = _user_turn(answer=False) + _user_turn()
    await run_test(pipeline, frames_to_send=frames, observers=[observer])

    first, second = observer.turns
    assert (first["turn"], second["turn"]) == (1, 2)
    assert first["interrupted"] is True
    assert first["stages_ms"]["turn_end"] is not None
    assert first["stages_ms"]["llm_request"] is None
    assert first["stages_ms"]["first_audio_out"] is None
    assert first["bot_text"] == ""
    assert second["interrupted"] is False
    _assert_causal_waterfall(second)


async def test_a_stage_is_timed_where_its_frame_first_appears_not_at_a_later_hop():
    # A slow processor passes the VAD start on only after the VAD stop has been pushed to it:
    # its late hops must neither restart the turn nor move the VAD stop.
    observer = LatencyObserver()
    vad_stop_entered = []

    def note_vad_stop(frame):
        if isinstance(frame, VADUserStoppedSpeakingFrame):
            vad_stop_entered.append(time.monotonic())

    tap = DelayProcessor(0, on_frame=note_vad_stop)
    slow = DelayProcessor(0.3, delay_types=(VADUserStartedSpeakingFrame,))
    pipeline, _ = _voice_pipeline()

    frames = [VADUserStartedSpeakingFrame(), SleepFrame(0.1)]
    frames += [VADUserStoppedSpeakingFrame(stop_secs=STOP_SECS), SleepFrame(0.6)]
    frames += [UserStoppedSpeakingFrame(), SleepFrame(0.05), LLMContextFrame(LLMContext())]
    frames += [SleepFrame(0.6)]
    await run_test(Pipeline([tap, slow, pipeline]), frames_to_send=frames, observers=[observer])

    (record,) = observer.turns
    _assert_causal_waterfall(record)
    vad_stop_at = record["t0_monotonic"] + record["stages_ms"]["vad_stop"] / 1000
    # Pushed to the first processor before it got there (0.1 ms covers the record's rounding).
    assert vad_stop_at <= vad_stop_entered[0] + 0.0001


async def test_the_rest_of_an_interrupted_response_is_not_charged_to_the_next_turn():
    pipeline, _ = _voice_pipeline()
    observer = LatencyObserver()

    # The user speaks again right after the first request: its answer is still on its way
    # (tokens, TTS text and audio, bot speech) while the second turn begins.
    frames = _user_turn(answer=False) + [LLMContextFrame(LLMContext()), SleepFrame(0.05)]
    frames += [VADUserStartedSpeakingFrame(), UserStartedSpeakingFrame(), SleepFrame(0.5)]
    frames += [VADUserStoppedSpeakingFrame(stop_secs=STOP_SECS), SleepFrame(0.2)]
    frames += [UserStoppedSpeakingFrame(), SleepFrame(0.05), LLMContextFrame(LLMContext())]
    frames += [SleepFrame(0.6)]
    await run_test(pipeline, frames_to_send=frames, observers=[observer])

    first, second = observer.turns
    assert first["interrupted"] is True
    assert first["stages_ms"]["llm_request"] is not None
    assert first["stages_ms"]["llm_first_token"] is None
    _assert_causal_waterfall(second)
    assert second["bot_text"] == "It is ten. Bye."


def _slow_answer_pipeline(tokens: list[str], stops: list, on_stop=lambda: None):
    return _pipeline_with_gaps(DelayedLLMService(tokens=tokens, delay_s=LLM_DELAY, gap_s=1.5), stops, on_stop)


def _slow_tool_pipeline(tokens: list[str], stops: list):
    return _pipeline_with_gaps(DelayedToolLLMService(filler="Let me check that.", tool_s=1.5, tokens=tokens), stops)


def _pipeline_with_gaps(llm, stops: list, on_stop=lambda: None):
    """STT -> ``llm`` -> TTS -> output, the TTS stopping in any gap of the answer; ``stops`` gets
    every ``BotStoppedSpeakingFrame``."""
    stt = DelayedSTTService(text="when are you open", delay_s=STT_DELAY)
    # Token by token, and a short idle before TTSStoppedFrame: the bot stops within the gap.
    tts = DelayedTTSService(delay_s=TTS_DELAY, text_aggregation_mode=TextAggregationMode.TOKEN,
                            stop_frame_timeout_s=0.3)

    def tap(frame):
        if isinstance(frame, BotStoppedSpeakingFrame):
            stops.append(frame)
            on_stop()

    tap = DelayProcessor(0, on_frame=tap)
    return Pipeline([stt, llm, tts, InstantOutputTransport(), tap])


async def test_a_gap_in_a_slow_answer_does_not_close_the_turn_before_the_answer_ends():
    # Under load the LLM decodes slower than the bot speaks: the bot stops between sentences
    # and starts again. The turn is the whole answer, and it closes once, after its last audio.
    observer, stops = LatencyObserver(), []
    pipeline = _slow_answer_pipeline(["We open at nine. ", "We close at six."], stops)
    frames = _user_turn(answer=False) + [LLMContextFrame(LLMContext()), SleepFrame(2.5)]
    await run_test(pipeline, frames_to_send=frames, observers=[observer])

    assert len(stops) >= 2, "the bot did not stop in the gap: the test proves nothing"
    [record] = observer.turns
    assert record["bot_text"] == "We open at nine. We close at six."
    assert record["interrupted"] is False


async def test_an_answer_that_ends_with_nothing_more_to_say_closes_at_the_bots_last_stop():
    observer, stops = LatencyObserver(), []
    pipeline = _slow_answer_pipeline(["We open at nine.", " "], stops)
    frames = _user_turn(answer=False) + [LLMContextFrame(LLMContext()), SleepFrame(2.5)]
    await run_test(pipeline, frames_to_send=frames, observers=[observer])

    [record] = observer.turns
    assert record["bot_text"] == "We open at nine."
    assert record["interrupted"] is False  # closed at the stop, not by the pipeline's end


async def test_an_answer_in_a_gap_is_still_answering_until_its_turn_closes():
    observer, stops, answering_at_stops = LatencyObserver(), [], []
    pipeline = _slow_answer_pipeline(["We open at nine. ", "We close at six."], stops,
                                     on_stop=lambda: answering_at_stops.append(observer.answering))
    frames = _user_turn(answer=False) + [LLMContextFrame(LLMContext()), SleepFrame(2.5)]
    await run_test(pipeline, frames_to_send=frames, observers=[observer])

    assert answering_at_stops[0] is True  # the gap: place_call does not hang up here
    assert observer.answering is False and len(observer.turns) == 1


async def test_a_filler_said_while_a_tool_runs_does_not_close_the_turn_before_its_answer():
    observer, stops = LatencyObserver(), []
    pipeline = _slow_tool_pipeline(["It has shipped."], stops)
    frames = _user_turn(answer=False) + [LLMContextFrame(LLMContext()), SleepFrame(2.5)]
    await run_test(pipeline, frames_to_send=frames, observers=[observer])

    assert len(stops) >= 2, "the bot did not stop after the filler: the test proves nothing"
    [record] = observer.turns
    assert record["bot_text"] == "Let me check that. It has shipped."
    assert record["interrupted"] is False


async def test_a_tool_result_with_nothing_said_after_it_ends_the_turn_at_the_fillers_stop():
    # Nothing follows the result (a routed call answered by a flow, say): the caller's next words
    # start a new turn, and the one before is complete where the bot stopped, not interrupted.
    observer, stops = LatencyObserver(), []
    pipeline = _slow_tool_pipeline([], stops)
    frames = _user_turn(answer=False) + [LLMContextFrame(LLMContext()), SleepFrame(2.5)] + _user_turn(answer=False)
    await run_test(pipeline, frames_to_send=frames, observers=[observer])

    first = observer.turns[0]
    assert first["bot_text"] == "Let me check that." and first["interrupted"] is False


class FastPathWithTool(FrameProcessor):
    """Answers a context as the fast path and a tool do: two whole responses, tagged with the intent."""

    ANSWERS = ("I'm sorry, I don't know about a second item; I can put you through to a person for that.",
               "Order 4 5 7 2 has shipped.")

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if not isinstance(frame, LLMContextFrame):
            await self.push_frame(frame, direction)
            return
        for text in self.ANSWERS:
            for out in (LLMFullResponseStartFrame(), LLMTextFrame(text), LLMFullResponseEndFrame()):
                out.metadata[FAST_PATH] = "order_status"
                await self.push_frame(out)


async def test_a_tools_reply_after_the_fast_paths_words_is_recorded_as_a_sentence_of_its_own():
    observer = LatencyObserver()
    pipeline = Pipeline([FastPathWithTool(), DelayedLLMService(tokens=["unused"], delay_s=LLM_DELAY),
                         DelayedTTSService(delay_s=TTS_DELAY), InstantOutputTransport()])
    await run_test(pipeline, frames_to_send=_user_turn(), observers=[observer])

    [record] = observer.turns
    assert record["fast_path"] == "order_status"
    assert record["bot_text"] == " ".join(FastPathWithTool.ANSWERS)


async def test_what_the_caller_and_the_bot_said_is_not_logged_above_debug():
    pipeline, _ = _voice_pipeline()
    observer = LatencyObserver()
    logged = []
    sink = logger.add(lambda m: logged.append(m.record["message"]), level="INFO")
    try:
        await run_test(pipeline, frames_to_send=_user_turn(), observers=[observer])
    finally:
        logger.remove(sink)

    assert observer.turns and observer.turns[0]["user_text"] == "what time is it"
    assert not [m for m in logged if "what time is it" in m or "It is ten" in m]
