"""LiveKit's on-device end-of-turn model, as Brisk asks it at a pause: a sentence said to its end
sounds finished, the same voice stopping mid-sentence does not, whatever the words; phone audio
is heard at its own rate; two calls asking at once each get their own answer; and a statement
the words call finished waits when the audio says the caller is not done."""

import asyncio

import numpy as np
import pytest

from agent.bench.turns import NEURAL_TURNS, NeuralVoice, render_turn
from processors.turns.livekit_eot_check import ENGLISH_THRESHOLD, LiveKitEotCheck
from tests.test_turn_end import LOUD, SILENT, turn_rig
from frames.transcription import FinalTranscriptionFrame
from pipecat.frames.frames import InputAudioRawFrame, VADUserStartedSpeakingFrame, VADUserStoppedSpeakingFrame

RATE = 16000


@pytest.fixture(scope="module")
def check():
    model = LiveKitEotCheck()
    yield model
    model.close()


@pytest.fixture(scope="module")
def voice():
    return NeuralVoice()


def at_pause(voice: NeuralVoice, utterance_id: str) -> np.ndarray:
    """The caller's audio up to their first pause (or their end) and 0.3 s of its silence: what the VAD stop sees."""
    [utterance] = [u for u in NEURAL_TURNS if u.id == utterance_id]
    clip = render_turn(utterance, voice)
    until = clip.pauses[0][0] if clip.pauses else clip.speech_end_s
    return clip.samples[: round((until + 0.3) * RATE)]


async def test_a_finished_sentence_sounds_finished_and_the_same_voice_stopping_mid_sentence_does_not(check, voice):
    finished = [await check.probability(at_pause(voice, i), RATE)
                for i in ("n-c-cancel", "n-c-return-helmet", "n-c-thanks")]
    stopped = [await check.probability(at_pause(voice, i), RATE)
               for i in ("n-p-and", "n-p-thing-is", "n-p-has-a")]
    assert all(0 <= p <= 1 for p in finished + stopped)
    assert min(finished) >= ENGLISH_THRESHOLD > max(stopped), (finished, stopped)


async def test_phone_audio_is_judged_at_its_own_rate(check, voice):
    import soxr

    audio = at_pause(voice, "n-p-thing-is")
    phone = soxr.resample(audio.astype(np.float32), RATE, 8000).astype(np.int16)
    wide, narrow = await check.probability(audio, RATE), await check.probability(phone, 8000)
    assert narrow < ENGLISH_THRESHOLD and abs(wide - narrow) < 0.15


async def test_two_calls_asking_at_once_each_get_the_answer_for_their_own_audio(check, voice):
    done, stopped = at_pause(voice, "n-c-cancel"), at_pause(voice, "n-p-and")
    alone = [await check.probability(done, RATE), await check.probability(stopped, RATE)]
    together = await asyncio.gather(check.probability(done, RATE), check.probability(stopped, RATE))
    assert together == pytest.approx(alone, abs=1e-6)


def frames_of(samples: np.ndarray) -> list[InputAudioRawFrame]:
    step = RATE // 50
    return [InputAudioRawFrame(audio=samples[i: i + step].tobytes(), sample_rate=RATE, num_channels=1)
            for i in range(0, len(samples) - step + 1, step)]


async def test_words_whisper_ends_with_a_full_stop_wait_when_the_audio_says_the_caller_is_not_done(check, voice):
    # "I was wondering if" stopped to think: Whisper may write "I was wondering." (finished words).
    async with turn_rig(check) as (worker, strategy, ends):
        await worker.queue_frame(VADUserStartedSpeakingFrame())
        for frame in frames_of(at_pause(voice, "n-p-wondering")):
            await worker.queue_frame(frame)
        await worker.queue_frame(VADUserStoppedSpeakingFrame(stop_secs=0.3))
        await worker.queue_frame(FinalTranscriptionFrame(text="I was wondering.", user_id="", timestamp="",
                                                         utterance_id=1))
        await asyncio.sleep(0.5)
        assert ends.ends == [] and strategy.held_by_audio == 1
        await worker.queue_frame(VADUserStartedSpeakingFrame())
        for audio in [LOUD] * 25 + [SILENT] * 15:
            await worker.queue_frame(InputAudioRawFrame(audio=audio, sample_rate=RATE, num_channels=1))
        await worker.queue_frame(VADUserStoppedSpeakingFrame(stop_secs=0.3))
        await worker.queue_frame(FinalTranscriptionFrame(text="If you rent electric bikes.", user_id="", timestamp="",
                                                         utterance_id=2))
        await ends.wait_for(1)
    assert ends.asked == ["I was wondering. If you rent electric bikes."]
