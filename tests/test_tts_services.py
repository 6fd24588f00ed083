"""The embedded TTS services: hibari (in-process voice) and espeak-ng (subprocess)."""

import os
import stat
import sys
import threading

import numpy as np
import pytest

from pipecat.audio.utils import detect_speech_onset
from pipecat.frames.frames import (
    ErrorFrame,
    InterruptionFrame,
    MetricsFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSUpdateSettingsFrame,
)
from pipecat.metrics.metrics import TTFBMetricsData
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.pipeline.worker import PipelineParams
from pipecat.tests.utils import SleepFrame, run_test
from processors.tts.espeak_tts import ESPEAK_SAMPLE_RATE, EspeakTTSService, EspeakTTSSettings
from processors.tts.hibari_tts import SAMPLE_RATE, HibariTTSService, load_voice
from tests.fakes.hibari_voices import FailingVoice, GatedVoice

SENTENCE = "The library opens at ten in the morning."
LONG_TEXT = (
    "The library opens at ten in the morning. It closes at six in the evening. "
    "On Sundays it stays closed all day. Books can be returned at the front desk."
)
ESPEAK = "/usr/bin/espeak-ng"
needs_espeak = pytest.mark.skipif(not os.access(ESPEAK, os.X_OK), reason="Debian espeak-ng missing")


def speech_frames(frames):
    return [f for f in frames if isinstance(f, (TTSStartedFrame, TTSAudioRawFrame, TTSStoppedFrame))]


def audio_frames(frames):
    return [f for f in frames if isinstance(f, TTSAudioRawFrame)]


def seconds_of(frames) -> float:
    return sum(len(f.audio) / 2 / f.sample_rate for f in frames)


def rms(frames) -> float:
    samples = np.frombuffer(b"".join(f.audio for f in frames), dtype="<i2").astype(np.float64)
    return float(np.sqrt(np.mean(samples**2)))


def assert_spoken_in_order(frames, sample_rate, max_frame_s=0.04):
    """Started, a run of short non-silent audio frames at `sample_rate`, stopped."""
    speech = speech_frames(frames)
    assert isinstance(speech[0], TTSStartedFrame)
    assert isinstance(speech[-1], TTSStoppedFrame)
    audio = speech[1:-1]
    assert len(audio) > 1
    assert all(isinstance(f, TTSAudioRawFrame) for f in audio)
    assert {f.sample_rate for f in audio} == {sample_rate}
    assert {f.num_channels for f in audio} == {1}
    assert max(len(f.audio) for f in audio) <= int(sample_rate * max_frame_s) * 2
    assert rms(audio) > 300


class OpenGateOnPush(BaseObserver):
    """Opens `gate` when `source` pushes a frame of type `frame_type`."""

    def __init__(self, source, frame_type, gate: threading.Event):
        super().__init__()
        self._source, self._frame_type, self._gate = source, frame_type, gate

    async def on_push_frame(self, data: FramePushed):
        if data.source is self._source and isinstance(data.frame, self._frame_type):
            self._gate.set()


# -- hibari -----------------------------------------------------------------------------------


async def test_hibari_speaks_a_sentence_as_short_24khz_frames_between_started_and_stopped():
    down, up = await run_test(HibariTTSService(), frames_to_send=[TTSSpeakFrame(SENTENCE)])

    assert_spoken_in_order(down, SAMPLE_RATE)
    assert not [f for f in up if isinstance(f, ErrorFrame)]


async def test_hibari_shares_one_loaded_voice_between_services():
    assert HibariTTSService()._voice is HibariTTSService()._voice is load_voice()


async def test_hibari_sends_first_audio_before_the_rest_of_a_long_text_is_synthesised():
    gate = threading.Event()
    voice = GatedVoice(hold_at=len(load_voice().phonemize(LONG_TEXT)) - 1, gate=gate)
    tts = HibariTTSService(voice=voice)
    try:
        down, _ = await run_test(
            tts,
            frames_to_send=[TTSSpeakFrame(LONG_TEXT)],
            observers=[OpenGateOnPush(tts, TTSAudioRawFrame, gate)],
        )
    finally:
        gate.set()

    # The last sentence was held until audio had left the service, so audio came first.
    assert voice.gate_opened is True
    assert_spoken_in_order(down, SAMPLE_RATE)


async def test_hibari_interruption_stops_the_audio_and_the_remaining_synthesis():
    sentences = len(load_voice().phonemize(LONG_TEXT))
    assert sentences > 2
    gate = threading.Event()
    voice = GatedVoice(hold_at=1, gate=gate)
    tts = HibariTTSService(voice=voice)
    try:
        down, _ = await run_test(
            tts,
            frames_to_send=[TTSSpeakFrame(LONG_TEXT), SleepFrame(1.0), InterruptionFrame()],
            # The second sentence finishes only once the interruption has gone through.
            observers=[OpenGateOnPush(tts, InterruptionFrame, gate)],
        )
    finally:
        gate.set()

    cut = next(i for i, f in enumerate(down) if isinstance(f, InterruptionFrame))
    assert audio_frames(down[:cut])
    assert not audio_frames(down[cut:])
    assert voice.sentences_started == 2


async def test_hibari_stays_silent_without_error_for_text_with_nothing_to_say():
    down, up = await run_test(
        HibariTTSService(), frames_to_send=[TTSSpeakFrame("   "), TTSSpeakFrame("🙂 *")]
    )

    assert not speech_frames(down)
    assert not [f for f in up if isinstance(f, ErrorFrame)]


async def test_hibari_reports_a_failed_sentence_and_keeps_speaking():
    tts = HibariTTSService(voice=FailingVoice(fail_at=1))
    down, up = await run_test(
        tts,
        frames_to_send=[
            TTSSpeakFrame("Good morning. We sail to Zanzibar."),
            TTSSpeakFrame("Good evening."),
        ],
    )

    errors = [f for f in up if isinstance(f, ErrorFrame)]
    assert len(errors) == 1
    assert "Zanzibar" in errors[0].error
    assert tts.is_usable
    started = [i for i, f in enumerate(down) if isinstance(f, TTSStartedFrame)]
    assert len(started) == 2
    assert audio_frames(down[started[0] : started[1]])
    assert audio_frames(down[started[1] :])


async def test_hibari_resamples_with_pipecat_when_asked_for_another_rate():
    native, _ = await run_test(HibariTTSService(), frames_to_send=[TTSSpeakFrame(SENTENCE)])
    resampled, _ = await run_test(
        HibariTTSService(sample_rate=16000), frames_to_send=[TTSSpeakFrame(SENTENCE)]
    )

    # pipecat's stream resampler releases audio in bursts of its own size.
    assert_spoken_in_order(resampled, 16000, max_frame_s=0.1)
    assert seconds_of(audio_frames(resampled)) == pytest.approx(
        seconds_of(audio_frames(native)), rel=0.05
    )


async def test_hibari_cuts_the_silence_before_speech_to_a_short_lead_in():
    async def onset_seconds(**kwargs):
        down, _ = await run_test(HibariTTSService(**kwargs), frames_to_send=[TTSSpeakFrame("Hi.")])
        pcm = b"".join(f.audio for f in audio_frames(down))
        return detect_speech_onset(pcm, SAMPLE_RATE, threshold_db=-60.0) / SAMPLE_RATE

    assert await onset_seconds(leading_silence_s=None) > 0.15
    assert await onset_seconds() <= 0.02  # an answer's first words: nothing plays before them


async def test_hibari_keeps_a_longer_lead_in_before_an_answers_later_sentences_than_before_its_first():
    tts = HibariTTSService()

    async def onset_seconds(**kwargs):
        pcm = b"".join([chunk async for chunk in tts._pcm_chunks("Hi.", **kwargs)])
        return detect_speech_onset(pcm, SAMPLE_RATE, threshold_db=-60.0) / SAMPLE_RATE

    assert await onset_seconds(answer_start=True) <= 0.02
    assert 0.04 <= await onset_seconds() <= 0.06  # the spacing of the comma's pause at a join


async def test_hibari_ends_a_clause_with_a_commas_pause_and_a_sentence_with_a_sentences():
    async def trailing_silence_s(text: str) -> float:
        down, _ = await run_test(HibariTTSService(), frames_to_send=[TTSSpeakFrame(text)])
        spoken = speech_frames(down)
        stopped = next(i for i, f in enumerate(spoken) if isinstance(f, TTSStoppedFrame))
        samples = np.frombuffer(b"".join(f.audio for f in audio_frames(spoken[:stopped])), "<i2")
        window = SAMPLE_RATE // 100
        levels = np.sqrt(np.mean(samples[: len(samples) // window * window].astype(float).reshape(-1, window) ** 2, 1))
        return (len(levels) - 1 - np.flatnonzero(levels >= 300)[-1]) * 0.01

    # The sentence-first chunker's first chunk ends at a comma; the next chunk follows it at once.
    assert await trailing_silence_s("I'm sorry,") <= 0.09
    assert await trailing_silence_s("I don't know that.") >= 0.3


async def test_hibari_reports_time_to_first_byte():
    tts = HibariTTSService()
    down, _ = await run_test(
        tts,
        frames_to_send=[TTSSpeakFrame(SENTENCE)],
        pipeline_params=PipelineParams(enable_metrics=True),
    )

    ttfb = [
        d
        for f in down
        if isinstance(f, MetricsFrame)
        for d in f.data
        if isinstance(d, TTFBMetricsData) and d.processor == tts.name
    ]
    # Pipecat reports a zero for every service at start; the measurement is the other one.
    assert len([d for d in ttfb if d.value > 0]) == 1


# -- espeak-ng --------------------------------------------------------------------------------


@needs_espeak
async def test_espeak_speaks_a_sentence_as_short_22050hz_frames_between_started_and_stopped():
    down, up = await run_test(
        EspeakTTSService(executable=ESPEAK), frames_to_send=[TTSSpeakFrame(SENTENCE)]
    )

    assert_spoken_in_order(down, ESPEAK_SAMPLE_RATE)
    assert not [f for f in up if isinstance(f, ErrorFrame)]


@needs_espeak
async def test_espeak_speaks_longer_at_fewer_words_per_minute():
    async def seconds_at(wpm):
        tts = EspeakTTSService(
            executable=ESPEAK, settings=EspeakTTSSettings(words_per_minute=wpm)
        )
        down, _ = await run_test(tts, frames_to_send=[TTSSpeakFrame(SENTENCE)])
        return seconds_of(audio_frames(down))

    assert await seconds_at(100) > 1.5 * await seconds_at(300)


@needs_espeak
async def test_espeak_reports_an_unknown_voice_and_speaks_once_the_voice_is_fixed():
    tts = EspeakTTSService(
        executable=ESPEAK,
        settings=EspeakTTSSettings(voice="nosuchvoice"),
        # The failed text leaves a context with no audio; don't wait the default 3 s on it.
        stop_frame_timeout_s=0.3,
    )
    down, up = await run_test(
        tts,
        frames_to_send=[
            TTSSpeakFrame("Hello."),
            TTSUpdateSettingsFrame(delta=EspeakTTSSettings(voice="en-us")),
            TTSSpeakFrame(SENTENCE),
        ],
    )

    errors = [f.error for f in up if isinstance(f, ErrorFrame)]
    assert any("voice does not exist" in e for e in errors)
    last_start = max(i for i, f in enumerate(down) if isinstance(f, TTSStartedFrame))
    assert_spoken_in_order(down[last_start:], ESPEAK_SAMPLE_RATE)


@needs_espeak
async def test_espeak_says_nothing_for_whitespace_text():
    down, up = await run_test(
        EspeakTTSService(executable=ESPEAK), frames_to_send=[TTSSpeakFrame(" \n ")]
    )

    assert not speech_frames(down)
    assert not [f for f in up if isinstance(f, ErrorFrame)]


@needs_espeak
async def test_espeak_interruption_stops_the_audio_and_kills_the_process(tmp_path):
    # espeak-ng renders a minute of speech in ~0.1 s, too fast to interrupt. This stand-in
    # runs the real binary but writes its WAV in real time, and keeps going when its reader
    # goes away, as a busy synthesiser would: only a kill ends it early.
    pid_file = tmp_path / "pid"
    slow_espeak = tmp_path / "slow-espeak"
    slow_espeak.write_text(
        f"#!{sys.executable}\n"
        "import os, subprocess, sys, time\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        f"wav = subprocess.run([{ESPEAK!r}, *sys.argv[1:]], stdin=sys.stdin,\n"
        "                     capture_output=True, check=True).stdout\n"
        "for start in range(0, len(wav), 882):\n"
        "    try:\n"
        "        os.write(1, wav[start:start + 882])\n"
        "    except BrokenPipeError:\n"
        "        pass\n"
        "    time.sleep(0.02)\n"
    )
    slow_espeak.chmod(slow_espeak.stat().st_mode | stat.S_IXUSR)

    down, _ = await run_test(
        EspeakTTSService(executable=str(slow_espeak)),
        frames_to_send=[TTSSpeakFrame(LONG_TEXT), SleepFrame(1.5), InterruptionFrame()],
    )

    cut = next(i for i, f in enumerate(down) if isinstance(f, InterruptionFrame))
    assert audio_frames(down[:cut])
    assert not audio_frames(down[cut:])
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)
