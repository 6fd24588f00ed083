"""The baselines: stock pipecat pipelines on Brisk's models, which every A/B compares against.

Built here, not in the product: the server and the transports take a call builder
(``agent.call.pipeline.BuildCall``), and the bench hands them ``call_builder(flavor)``.

    stock        pipecat at its defaults: Silero VAD's default parameters, pipecat's segmented
                 Whisper (it transcribes after the VAD stop), Smart Turn v3 ends the turn, the
                 OpenAI service and the TTS as they are, pipecat's sentence aggregation
    stock_tuned  stock with Brisk's VAD parameters and pipecat's speech-timeout end of turn at
                 Brisk's timeout: what a pipecat user who tunes for speed gets

Both run on the same Whisper weights, LLM server and voice as Brisk; they have no fast path, no
tools, no speculation, no barge-in policy and no phrase cache. Measures nothing itself.
"""

from __future__ import annotations

import asyncio
import functools

from pipecat.audio.vad.silero import SileroVADAnalyzer
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.processors.audio.vad_processor import VADProcessor
from pipecat.services.whisper.stt import WhisperSTTService
from pipecat.transports.base_transport import BaseTransport
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from agent.bench.segmented_whisper import PreloadedWhisperSTTService
from agent.call.call_control import CallControl
from agent.call.pipeline import INPUT_SAMPLE_RATE, BuildCall, Call, build_call, start_worker
from agent.call.resources import Resources
from agent.call.stages import make_call_audio, make_llm, make_tts, make_vad
from agent.records.recorder import CallRecorder
from processors.observers.latency import LatencyObserver

PIPELINES = ("brisk", "stock", "stock_tuned")
# Where the process's one segmented-Whisper model is kept (Resources.extra).
SEGMENTED_WHISPER = "segmented_whisper"


async def load_segmented_whisper(resources: Resources) -> None:
    """The baselines' faster-whisper model, loaded once and off the event loop, as Brisk's is."""
    if SEGMENTED_WHISPER in resources.extra:
        return
    from faster_whisper import WhisperModel

    resources.extra[SEGMENTED_WHISPER] = await asyncio.to_thread(
        WhisperModel, str(resources.whisper_model_path), device="cpu", compute_type="int8")


def segmented_stt(resources: Resources) -> WhisperSTTService:
    """pipecat's own segmented Whisper: waits for the VAD stop, then transcribes everything."""
    options = {"settings": WhisperSTTService.Settings(model=str(resources.whisper_model_path)),
               "device": "cpu", "compute_type": "int8"}
    model = resources.extra.get(SEGMENTED_WHISPER)
    if model is not None:
        return PreloadedWhisperSTTService(model=model, **options)
    return WhisperSTTService(**options)  # loads its model now (load_segmented_whisper shares one)


def turn_strategies(resources: Resources, tuned: bool) -> UserTurnStrategies:
    if not tuned:
        return UserTurnStrategies()  # pipecat defaults: VAD/transcription start, Smart Turn v3 stop
    timeout = resources.config.turn_stop_timeout_secs
    return UserTurnStrategies(stop=[SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=timeout)])


def build_stock_call(
    resources: Resources,
    transport: BaseTransport,
    *,
    tuned: bool = False,
    observers: list | None = None,
    latency: LatencyObserver | None = None,
    input_sample_rate: int = INPUT_SAMPLE_RATE,
    control: CallControl | None = None,
) -> Call:
    """One stock pipecat call on ``transport`` (``tuned``: stock_tuned), measured as Brisk's are."""
    control = control or CallControl()
    latency = latency or LatencyObserver()
    context = LLMContext()
    aggregators = LLMContextAggregatorPair(
        context,
        user_params=LLMUserAggregatorParams(user_turn_strategies=turn_strategies(resources, tuned),
                                            user_idle_timeout=0),
    )
    audio = make_call_audio(resources, control)
    vad = make_vad(resources.config) if tuned else SileroVADAnalyzer()
    processors = [
        transport.input(),
        VADProcessor(vad_analyzer=vad),
        segmented_stt(resources),
        aggregators.user(),
        make_llm(resources),
        make_tts(resources, phrase_cache=False, chunked=False),
        transport.output(),
        *([audio.processor] if audio else []),
        aggregators.assistant(),
    ]
    worker = start_worker(resources, processors, latency=latency, observers=observers,
                          input_sample_rate=input_sample_rate)
    call = Call(worker=worker, latency=latency, context=context, processors=processors,
                flavor="stock_tuned" if tuned else "stock", control=control)
    if resources.records is not None:
        call.recorder = CallRecorder(resources.records, call, audio)
    return call


def call_builder(flavor: str) -> BuildCall:
    """The call builder for one side of an A/B: Brisk's own, or a baseline."""
    if flavor == "brisk":
        return build_call
    if flavor not in PIPELINES:
        raise ValueError(f"unknown pipeline {flavor!r}: one of {', '.join(PIPELINES)}")
    return functools.partial(build_stock_call, tuned=flavor == "stock_tuned")
