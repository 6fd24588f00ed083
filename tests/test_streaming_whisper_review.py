"""StreamingWhisperSTTService's second hearing: doubted words heard again by a second opinion, early
(before the VAD stop) or at a pause, in each of two calls sharing one Whisper; and what a pause the
caller goes on from does to it. ``SlowWhisperEngine`` stands in for both Whispers."""

import asyncio

from pipecat.frames.frames import VADUserStoppedSpeakingFrame
from pipecat.pipeline.worker import PipelineParams
from pipecat.tests.utils import SleepFrame, run_test

from frames.transcription import FinalTranscriptionFrame, PartialTranscriptionFrame
from processors.stt.whisper_engine import SAMPLE_RATE
from processors.stt.whisper_scheduler import WhisperScheduler
from processors.stt.whisper_utterance import PAUSE_S
from tests.fakes.slow_whisper_engine import SlowWhisperEngine
from tests.speech import paced_frames
from tests.stt_frames import (
    START_SECS,
    STOP_SECS,
    PREROLL_S,
    vad_events,
    silence,
    of_type,
    transcripts_in,
    fake_stt,
    doubted_and_reviewed,
    review_heard,
    after_the_vad_stop,
    tone,
)


async def test_words_that_repeat_are_heard_again_before_the_vad_stop_and_the_final_is_ready_at_it():
    unsure, second, scheduler = doubted_and_reviewed(lambda n: "Are you open on certain days?")
    stt = fake_stt(unsure, partial_interval_s=0.02, scheduler=scheduler)
    frames = paced_frames(silence(1.7), SAMPLE_RATE, speed=2.0, events=vad_events(0.5, 1.5)[:1])
    frames += [SleepFrame(sleep=0.3), VADUserStoppedSpeakingFrame(stop_secs=STOP_SECS)]

    down, _ = await run_test(stt, frames_to_send=frames)

    [final] = of_type(down, FinalTranscriptionFrame)
    [review] = second.calls  # one review, on a partial's audio, long before the speech ended
    assert final.text.startswith("reviewed") and final.reused_partial
    assert review_heard(final.text) == round(review.audio_seconds * SAMPLE_RATE) < 1.0 * SAMPLE_RATE
    # The partials after it carry the reviewed words, so a draft is made on them.
    partials = [f.text for f in of_type(down, PartialTranscriptionFrame)]
    assert partials[:2] == ["Are you open on certain days?"] * 2 and partials[-1] == final.text
    assert scheduler.counts["reviewed"] == scheduler.counts["reviewed_early"] == 1


async def test_words_that_change_after_an_early_review_are_heard_again_and_the_old_review_is_not_used():
    gone_on = round(1.2 * SAMPLE_RATE)  # from here on the caller has said more
    unsure, second, scheduler = doubted_and_reviewed(
        lambda n: "I would like" if n < gone_on else "I would like two bikes")
    stt = fake_stt(unsure, partial_interval_s=0.02, scheduler=scheduler)
    frames = paced_frames(silence(1.7), SAMPLE_RATE, speed=2.0, events=vad_events(0.5, 1.5)[:1])
    frames += [SleepFrame(sleep=0.3), VADUserStoppedSpeakingFrame(stop_secs=STOP_SECS)]

    down, _ = await run_test(stt, frames_to_send=frames)

    [final] = of_type(down, FinalTranscriptionFrame)
    assert len(second.calls) == 2
    assert review_heard(final.text) >= gone_on  # the review of the whole words, not of their start


async def test_two_calls_sharing_one_whisper_each_get_the_early_review_of_their_own_words():
    # The longer call goes on past what the shorter one says: its final words are other words.
    unsure, second, scheduler = doubted_and_reviewed(lambda n: "Are you open" if n < 28000 else "Are you open on Sundays")

    async def call(speech_end_s):
        stt = fake_stt(unsure, partial_interval_s=0.02, scheduler=scheduler)
        frames = paced_frames(silence(speech_end_s + 0.2), SAMPLE_RATE, speed=2.0,
                              events=vad_events(0.5, speech_end_s)[:1])
        frames += [SleepFrame(sleep=0.3), VADUserStoppedSpeakingFrame(stop_secs=STOP_SECS)]
        down, _ = await run_test(stt, frames_to_send=frames)
        [final] = of_type(down, FinalTranscriptionFrame)
        return review_heard(final.text), (speech_end_s + 0.2 - (0.5 + START_SECS - PREROLL_S)) * SAMPLE_RATE

    (heard_a, audio_a), (heard_b, audio_b) = await asyncio.gather(call(1.5), call(2.5))
    # Each final is the review of a partial of its own call's audio, not of the other call's.
    assert heard_a <= audio_a < 28000 <= heard_b <= audio_b
    assert scheduler.counts["reviewed_early"] == 3  # one per call, and the longer one's new words


async def test_without_early_review_a_doubted_final_is_heard_again_after_the_vad_stop():
    unsure, second, scheduler = doubted_and_reviewed(lambda n: "Are you open on certain days?")
    stt = fake_stt(unsure, partial_interval_s=0.02, scheduler=scheduler, review_early=False)
    frames = paced_frames(silence(1.7), SAMPLE_RATE, speed=2.0, events=vad_events(0.5, 1.5)[:1])
    frames += [SleepFrame(sleep=0.3), VADUserStoppedSpeakingFrame(stop_secs=STOP_SECS)]

    down, _ = await run_test(stt, frames_to_send=frames)

    [final] = of_type(down, FinalTranscriptionFrame)
    [review] = second.calls
    utterance_start = 0.5 + START_SECS - PREROLL_S
    assert review_heard(final.text) == round((1.7 - utterance_start) * SAMPLE_RATE) and not final.reused_partial
    assert set(f.text for f in of_type(down, PartialTranscriptionFrame)) == {"Are you open on certain days?"}


async def test_while_a_final_is_heard_again_its_first_words_go_on_as_a_partial_in_each_of_two_calls():
    unsure, second, scheduler = doubted_and_reviewed(lambda n: "Are you open on certain days?", review_delay_s=0.2)

    async def call():
        stt = fake_stt(unsure, partial_interval_s=0.02, scheduler=scheduler, review_early=False)
        frames = paced_frames(silence(1.7), SAMPLE_RATE, speed=2.0, events=vad_events(0.5, 1.5)[:1])
        frames += [SleepFrame(sleep=0.3), VADUserStoppedSpeakingFrame(stop_secs=STOP_SECS)]
        down, _ = await run_test(stt, frames_to_send=frames)
        return transcripts_in(after_the_vad_stop(down))

    for after_stop in await asyncio.gather(call(), call()):
        # The draft's words first, then the final as the second opinion heard it.
        [partial, final] = after_stop
        assert isinstance(partial, PartialTranscriptionFrame) and partial.text == "Are you open on certain days?"
        assert isinstance(final, FinalTranscriptionFrame) and final.text.startswith("reviewed")
        assert final.revised  # the words the draft was made on were replaced
    assert scheduler.counts["reviewed"] == 2


async def test_a_final_that_is_not_heard_again_comes_with_no_partial_after_the_vad_stop():
    sure = SlowWhisperEngine(delay_s=0.01, text_of=lambda n: "Are you open on Sundays?")
    second = SlowWhisperEngine(delay_s=0.2)
    stt = fake_stt(sure, partial_interval_s=0.02, scheduler=WhisperScheduler(sure, second_opinion=second),
                   review_early=False)
    frames = paced_frames(silence(1.7), SAMPLE_RATE, speed=2.0, events=vad_events(0.5, 1.5)[:1])
    frames += [SleepFrame(sleep=0.3), VADUserStoppedSpeakingFrame(stop_secs=STOP_SECS)]

    down, _ = await run_test(stt, frames_to_send=frames)

    [final] = transcripts_in(after_the_vad_stop(down))
    assert isinstance(final, FinalTranscriptionFrame) and not final.revised
    assert not second.calls


async def test_a_pause_after_finished_words_is_heard_again_at_once_and_one_after_unfinished_words_waits():
    # Two calls on one Whisper; what each has said is told apart by its length.
    unsure, second, scheduler = doubted_and_reviewed(
        lambda n: "Are you open on Sundays?" if n < 28000 else "I'd like to order the")

    async def call(speech_s: float):
        # Partials are due every 3 s, long after the VAD stop: only the pause brings one forward.
        stt = fake_stt(unsure, partial_interval_s=3.0, scheduler=scheduler)
        speech_end = 0.5 + speech_s
        frames = paced_frames(silence(0.5) + tone(speech_s) + silence(0.3), SAMPLE_RATE,
                              events=vad_events(0.5, speech_end, stop_secs=0.3))
        down, _ = await run_test(stt, frames_to_send=frames)
        [final] = of_type(down, FinalTranscriptionFrame)
        return final, len(stt.partial_stats.jobs), speech_end - (0.5 + START_SECS - PREROLL_S)

    (finished, jobs_a, speech_a), (unfinished, jobs_b, speech_b) = await asyncio.gather(call(1.0), call(1.8))

    assert jobs_a == jobs_b == 1  # the pause's partial, in both calls
    # Finished words: reviewed on that partial, during the pause, and the final is that review.
    assert speech_a * SAMPLE_RATE < review_heard(finished.text) < (speech_a + 0.3) * SAMPLE_RATE
    # "...order the" may go on: its review waits for the VAD stop and hears the whole utterance.
    assert review_heard(unfinished.text) == round((speech_b + 0.3) * SAMPLE_RATE)
    assert scheduler.counts["reviewed"] == 2 and scheduler.counts["reviewed_early"] == 1


async def test_a_pause_after_doubted_words_is_heard_by_both_whispers_at_once():
    speech_end = round((1.5 - (0.5 + START_SECS - PREROLL_S)) * SAMPLE_RATE)
    # The words change with every partial while the caller speaks (no repeat to review early).
    unsure, second, scheduler = doubted_and_reviewed(
        lambda n: "Are you open on Sundays?" if n >= speech_end else f"Are you {n}", review_delay_s=0.1, delay_s=0.1)
    stt = fake_stt(unsure, partial_interval_s=0.3, scheduler=scheduler)
    frames = paced_frames(silence(0.5) + tone(1.0) + silence(0.5), SAMPLE_RATE,
                          events=vad_events(0.5, 1.5, stop_secs=0.3))

    down, _ = await run_test(stt, frames_to_send=frames)

    [final] = of_type(down, FinalTranscriptionFrame)
    [review] = second.calls
    [at_the_pause] = [call for call in unsure.calls if call.audio_seconds == review.audio_seconds]
    assert round(review.audio_seconds * SAMPLE_RATE) >= speech_end
    assert review.started_at < at_the_pause.ended_at  # side by side, not one after the other
    assert review_heard(final.text) == round(review.audio_seconds * SAMPLE_RATE)
    assert scheduler.counts["reviewed"] == scheduler.counts["reviewed_early"] == 1


async def test_a_pause_heard_while_a_partial_runs_is_heard_again_at_once_in_each_of_two_calls():
    # The words change with every partial (nothing to review early); each partial takes 0.3 s and
    # the next starts as it ends, so one is always running when the pause is heard.
    unsure, second, scheduler = doubted_and_reviewed(lambda n: f"Are you {n}", review_delay_s=0.3, delay_s=0.3)

    async def call(speech_s: float):
        stt = fake_stt(unsure, partial_interval_s=0.02, scheduler=scheduler)
        frames = paced_frames(silence(0.5) + tone(speech_s) + silence(0.6), SAMPLE_RATE,
                              events=vad_events(0.5, 0.5 + speech_s, stop_secs=0.3))
        down, _ = await run_test(stt, frames_to_send=frames)
        [final] = of_type(down, FinalTranscriptionFrame)
        return final

    finals = await asyncio.gather(call(1.0), call(1.4))

    assert len(second.calls) == 2 and scheduler.counts["reviewed"] == 2  # one hearing per call
    for final, speech_s in zip(finals, (1.0, 1.4)):
        [review] = [c for c in second.calls if round(c.audio_seconds * SAMPLE_RATE) == review_heard(final.text)]
        # It heard all of the sound, as the pause was heard ...
        to_speech_end = 0.5 + speech_s - (0.5 + START_SECS - PREROLL_S)
        assert to_speech_end <= review.audio_seconds < to_speech_end + 0.3
        # ... beside a partial of the audio before the pause, not after that partial.
        assert any(c.started_at < review.started_at < c.ended_at and c.audio_seconds < to_speech_end + 0.2
                   for c in unsure.calls)


async def test_a_pause_after_unfinished_words_is_not_heard_again_while_a_partial_runs():
    unsure, second, scheduler = doubted_and_reviewed(lambda n: f"I'd like to order {n} of the", review_delay_s=0.3, delay_s=0.3)
    stt = fake_stt(unsure, partial_interval_s=0.02, scheduler=scheduler)
    frames = paced_frames(silence(0.5) + tone(1.0) + silence(0.6), SAMPLE_RATE,
                          events=vad_events(0.5, 1.5, stop_secs=0.3))

    down, _ = await run_test(stt, frames_to_send=frames)

    [final] = of_type(down, FinalTranscriptionFrame)
    # "...order the" may go on: one review, of the whole utterance, after the VAD stop.
    [review] = second.calls
    assert review.audio_seconds >= 1.8 - (0.5 + START_SECS - PREROLL_S) - 0.02
    assert review_heard(final.text) == round(review.audio_seconds * SAMPLE_RATE)


async def test_a_pause_the_caller_goes_on_from_is_not_the_final_s_review():
    unsure, second, scheduler = doubted_and_reviewed(lambda n: f"Are you {n}", review_delay_s=0.3, delay_s=0.3)
    stt = fake_stt(unsure, partial_interval_s=0.02, scheduler=scheduler)
    # 0.3 s of quiet (a pause, heard at 1.7 s), then more words.
    frames = paced_frames(silence(0.5) + tone(1.0) + silence(0.3) + tone(0.5) + silence(0.5), SAMPLE_RATE,
                          events=vad_events(0.5, 2.3, stop_secs=0.3))

    down, _ = await run_test(stt, frames_to_send=frames)

    [final] = of_type(down, FinalTranscriptionFrame)
    dropped = [c for c in second.calls if c.cancelled]
    assert dropped and all(c.audio_seconds < 1.0 + PREROLL_S + 0.3 for c in dropped)
    # The final's review heard the words after the pause too.
    assert review_heard(final.text) >= (2.3 - (0.5 + START_SECS - PREROLL_S)) * SAMPLE_RATE
    assert scheduler.counts["reviewed"] == 1


async def test_no_partial_hears_more_of_a_pause_after_finished_words_in_each_of_two_calls():
    # What each call has said is told apart by its length.
    sure = SlowWhisperEngine(delay_s=0.05, text_of=lambda n: "Are you open on Sundays?" if n < 28000 else "I'd like to order the")
    scheduler = WhisperScheduler(sure)

    async def call(speech_s: float):
        stt = fake_stt(sure, partial_interval_s=0.02, scheduler=scheduler)
        speech_end = 0.5 + speech_s
        # The VAD stops late and puts the speech's end late too, as when it hears a soft tail
        # the energy rule counts as quiet.
        frames = paced_frames(silence(0.5) + tone(speech_s) + silence(0.9), SAMPLE_RATE,
                              events=vad_events(0.5, speech_end + 0.75, stop_secs=0.05))
        down, _ = await run_test(stt, frames_to_send=frames)
        [final] = of_type(down, FinalTranscriptionFrame)
        in_the_pause = [j for j in stt.partial_stats.jobs if j.audio_end_s >= speech_end + PAUSE_S - 0.01]
        return final, stt.partial_stats, in_the_pause

    (finished, stats, in_the_pause), (unfinished, _, in_the_pause_b) = await asyncio.gather(call(1.0), call(1.8))

    # Finished words: the pause's own partial, then none; it heard every sound, so it is the final.
    assert len(in_the_pause) == 1
    assert finished.text == "Are you open on Sundays?" and finished.reused_partial
    assert stats.transcribed_finals == 0
    # "...order the" may go on: partials keep listening.
    assert unfinished.text == "I'd like to order the" and len(in_the_pause_b) > 2


async def test_words_the_partial_running_at_a_pause_repeats_are_reviewed_by_the_pause_s_hearing_in_each_of_two_calls():
    # Both calls say the same; the words are whole from 1.2 s of the clip (16000 samples after
    # the utterance's start), and each partial takes 0.15 s of the one Whisper both calls share.
    unsure, second, scheduler = doubted_and_reviewed(
        lambda n: "Are you open on Sundays?" if n >= 16000 else f"Are you {n}", review_delay_s=0.15, delay_s=0.15)

    async def call():
        stt = fake_stt(unsure, partial_interval_s=0.02, scheduler=scheduler)
        frames = paced_frames(silence(0.5) + tone(1.0) + silence(0.6), SAMPLE_RATE,
                              events=vad_events(0.5, 1.5, stop_secs=0.3))
        down, _ = await run_test(stt, frames_to_send=frames)
        [final] = of_type(down, FinalTranscriptionFrame)
        return final

    finals = await asyncio.gather(call(), call())

    # One hearing per call, begun at the pause, settled with the words it repeats.
    assert len(second.calls) == 2 and not any(c.cancelled for c in second.calls)
    to_speech_end = 1.5 - (0.5 + START_SECS - PREROLL_S)
    assert all(to_speech_end + PAUSE_S - 0.01 <= c.audio_seconds for c in second.calls)
    assert {review_heard(f.text) for f in finals} == {round(c.audio_seconds * SAMPLE_RATE) for c in second.calls}
    assert scheduler.counts["reviewed"] == scheduler.counts["reviewed_early"] == 2


async def test_a_pause_s_hearing_stops_an_early_review_of_words_the_caller_has_gone_on_from():
    # Partials take 0.4 s. "I would like" is said from 0.9 s of the clip to 1.6 s (two partials
    # repeat it: an early review of it begins), then the words change with every partial; the
    # pause after them is heard while a partial runs, and its hearing begins as that one ends.
    unsure, second, scheduler = doubted_and_reviewed(
        lambda n: f"Are you {n}" if n < 11200 else "I would like" if n < 22400 else f"I would like two {n}",
        review_delay_s=1.5, delay_s=0.4)
    stt = fake_stt(unsure, partial_interval_s=0.02, scheduler=scheduler)
    frames = paced_frames(silence(0.5) + tone(1.4) + silence(1.1), SAMPLE_RATE,
                          events=vad_events(0.5, 1.9, stop_secs=1.0))
    frames += [SleepFrame(sleep=1.8)]

    down, _ = await run_test(stt, frames_to_send=frames)

    [final] = of_type(down, FinalTranscriptionFrame)
    [stale, hearing] = second.calls
    assert stale.cancelled and stale.audio_seconds < 22400 / SAMPLE_RATE
    # The hearing began beside the pause's partial, not after it (when that partial's words
    # would have stopped the stale review).
    [at_the_pause] = [c for c in unsure.calls if c.audio_seconds == hearing.audio_seconds]
    assert hearing.started_at < at_the_pause.ended_at - 0.2
    assert review_heard(final.text) == round(hearing.audio_seconds * SAMPLE_RATE)


async def test_with_narrowband_review_every_final_of_a_phone_call_is_heard_again_and_a_browsers_is_not():
    # The first Whisper sure of its words: only the 8 kHz call's final is doubted, for its band
    # alone, and the second opinion's, surer still, is kept; without the setting, neither is.
    sure = SlowWhisperEngine(delay_s=0.01, avg_logprob=-0.2, text_of=lambda n: "What time do you open?")
    second = SlowWhisperEngine(delay_s=0.01, avg_logprob=-0.1, text_of=lambda n: f"reviewed {n}")
    narrowband = WhisperScheduler(sure, second_opinion=second, review_narrowband=True)
    default = WhisperScheduler(sure, second_opinion=second)

    async def call(rate, scheduler):
        stt = fake_stt(sure, partial_interval_s=0.02, scheduler=scheduler)
        frames = paced_frames(silence(1.7, rate), rate, speed=2.0, events=vad_events(0.5, 1.5)[:1])
        frames += [SleepFrame(sleep=0.3), VADUserStoppedSpeakingFrame(stop_secs=STOP_SECS)]
        down, _ = await run_test(stt, frames_to_send=frames, pipeline_params=PipelineParams(audio_in_sample_rate=rate))
        [final] = of_type(down, FinalTranscriptionFrame)
        return final.text

    phone, browser, phone_without = await asyncio.gather(
        call(8000, narrowband), call(SAMPLE_RATE, narrowband), call(8000, default))
    assert phone.startswith("reviewed")
    assert browser == phone_without == "What time do you open?"
    assert narrowband.counts["reviewed"] == 1 and default.counts["reviewed"] == 0
