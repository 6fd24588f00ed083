"""The one place where processors are chosen and wired, and where each transport is made.

``build_call`` assembles a call's pipeline from the config and the process-wide
``Resources`` (models loaded once): either Brisk's pipeline or, with ``flavor="stock"``,
a stock pipecat pipeline on the same models — the baseline every benchmark compares against.

    transport.input() -> DTMF aggregator (brisk) -> VAD -> STT -> facts prefill (when on)
                      -> user aggregator (speculative stop)
                      -> context window -> prefix warmer -> fast path + tool router -> fact grounding
                      -> LLM (tools routed by intent, answers checked) -> tool filler
                      -> sentence chunker -> TTS -> transport.output() -> assistant aggregator
                                                     (observer: processors/observers/latency.py)

(all but VAD, STT, the aggregators, LLM and TTS are Brisk's flavor only). Each Brisk call also
gets its ``CallTools`` (the tools' state, pipecat's ``app_resources``), a ``FlowManager`` for
the booking flow, and the quiet-caller prompts (agent/call/conversation.py).

Transports are made next to their routes (agent/transports/): ``webrtc_transport`` (browsers,
pipecat's SmallWebRTC), ``phone_transport`` (Twilio Media Streams over pipecat's FastAPI
WebSocket, 8 kHz both ways) and ``livekit_transport`` (pipecat's ``LiveKitTransport`` in one room; here, as the LiveKit
module is near its length limit).

Brisk's flavor adds barge-in (processors/barge_in/barge_in.py): its user turn start strategy decides when
speech over the bot interrupts it, a tagger right after the LLM numbers bot turns, a gate before
the output transport drops anything of an interrupted turn (and stops the transport at the
decision), and a tracker after it rewrites a cut answer in the context to what was played.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from loguru import logger
from openai import AsyncOpenAI
from pipecat.audio.vad.silero import SileroVADAnalyzer
from pipecat.audio.vad.vad_analyzer import VADParams
from pipecat.frames.frames import CancelFrame, InputAudioRawFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.flows import FlowManager
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.processors.audio.vad_processor import VADProcessor
from pipecat.processors.frameworks.rtvi.frames import RTVIServerMessageFrame
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.transports.base_transport import BaseTransport
from pipecat.transports.livekit.transport import LiveKitParams, LiveKitTransport

from agent.business.facts import FactIndex
from agent.business.intents import IntentMatcher
from agent.call.call_control import CallControl
from agent.config import BriskConfig
from agent.call.conversation import IdleCaller, greeting_frames
from agent.records.recorder import CallRecorder
from agent.records.recording import CallAudio, recording_path
from agent.call.turn_taking import make_continuation, make_dtmf, make_turn_strategies
from agent.tools.booking import RentalBooking
from agent.tools.functions import CallTools, register_tools, tools_schema
from agent.tools.router import ToolRouter
from processors.llm.answer_check import AnswerCheckMixin
from processors.barge_in.barge_in import BargeIn
from processors.barge_in.barge_in_policy import DEFAULT_BACKCHANNELS, BargeInPolicy
from processors.llm.context_window import ContextWindow
from processors.llm.fact_grounding import FactGrounding
from processors.llm.facts_prefill import FactsPrefill
from processors.fast_path import FastPathResponder
from processors.observers.latency import LatencyObserver
from processors.llm.openai_llm import ResilientOpenAILLMService
from processors.llm.prefix_warmer import PrefixWarmer
from processors.llm.prompt_cache import PromptCache
from processors.llm.routed_calls import RoutedCallsMixin
from processors.llm.tool_filler import ToolFiller
from processors.tts.sentence_chunker import SentenceChunker, SentenceFirstConfig
from processors.speculation.draft_accounting import DraftAccountingMixin
from processors.speculation.withdrawn_drafts import WithdrawnDraftsMixin
from processors.speculation.speculation_stats import SpeculationStats
from processors.speculation.speculative_tts import SpeculativeAudioCache

# brisk: Brisk's pipeline; stock: pipecat at its defaults on the same models; stock_tuned: stock
# with Brisk's VAD parameters and pipecat's speech-timeout end of turn at Brisk's timeout (what a
# pipecat user who tunes for speed gets).
Flavor = Literal["brisk", "stock", "stock_tuned"]

# Hibari speaks at 24 kHz; the pipeline's output runs at the voice's own rate so nothing resamples.
OUTPUT_SAMPLE_RATE = 24000
INPUT_SAMPLE_RATE = 16000
# Twilio Media Streams carry 8 kHz mu-law; the pipeline takes it at that rate (no resampler).
TWILIO_SAMPLE_RATE = 8000


def livekit_transport(url: str, token: str, room: str) -> LiveKitTransport:
    """Brisk as a participant of one LiveKit room (agent/transports/livekit.py's worker mints the token)."""
    return LiveKitTransport(
        url=url,
        token=token,
        room_name=room,
        params=LiveKitParams(
            audio_in_enabled=True,
            audio_in_sample_rate=INPUT_SAMPLE_RATE,
            audio_out_enabled=True,
            audio_out_sample_rate=OUTPUT_SAMPLE_RATE,
            # One mixed stream for the one VAD and STT (immediate with a single caller).
            audio_in_user_tracks=False,
        ),
    )


@dataclass
class Resources:
    """Everything loaded once per process and shared by every call."""

    config: BriskConfig
    whisper_model_path: Path
    llm_client: AsyncOpenAI
    llm_model: str
    whisper_engine: object | None = None  # processors.stt.whisper_engine.WhisperEngine
    whisper_scheduler: object | None = None  # processors.stt.whisper_scheduler.WhisperScheduler, shared by every call
    hibari_voice: object | None = None  # processors.tts.hibari_tts voice, when tts_engine == "hibari"
    phrase_cache: object | None = None  # processors.tts.phrase_cache.PhraseCache for that voice (brisk calls only)
    store: object | None = None  # agent.tools.store.ShopStore: the orders and rentals the tools use
    records: object | None = None  # agent.records.store.CallRecords: every call and its turns
    turn_check: object | None = None  # processors.turns.smart_turn_check.SmartTurnCheck, with BRISK_TURN_AUDIO_CHECK
    stock_whisper: object | None = None  # faster_whisper.WhisperModel for the stock pipelines (Runtime.load_stock_whisper)
    embedder: object | None = None  # agent.business.embedder.SentenceEmbedder, with BRISK_UNDERSTANDING=meaning
    extra: dict = field(default_factory=dict)


@dataclass
class Call:
    """One assembled call: run ``worker`` with a WorkerRunner; read ``latency`` for its numbers."""

    worker: PipelineWorker
    latency: LatencyObserver
    context: LLMContext
    flavor: Flavor
    processors: list  # in pipeline order, for inspection
    speculation: SpeculationStats | None = None  # this call's drafts; None when speculation is off
    speculative_audio: SpeculativeAudioCache | None = None  # held drafts' prefetched first chunks
    phrases: object | None = None  # processors.tts.phrase_cache.PhraseStats: texts spoken from the phrase cache
    barge_in: BargeIn | None = None  # brisk: its interruptions, backchannels, what was played
    fast_path: FastPathResponder | None = None  # brisk: the questions answered without the LLM
    control: CallControl | None = None  # what the conversation may do to the call (hand over, hang up)
    tools: CallTools | None = None  # brisk: the tool handlers' state (calls made, the booking)
    filler: ToolFiller | None = None  # brisk: fillers said on slow tool turns
    idle: IdleCaller | None = None  # the quiet-caller prompts
    greeting: asyncio.Task | None = None  # queueing the greeting, held so the loop keeps it
    recorder: CallRecorder | None = None  # writes the call's record (agent/call/call_runner.py runs it)

    async def hang_up(self, reason: str) -> None:
        """The caller is gone: end the call now, even while the bot's own ending still plays out.

        pipecat's worker takes the CancelFrame only once an EndFrame already queued (a hand-over,
        a goodbye, silence) has played out (pipecat issue #3757), and the output writes that
        audio to a peer that reads no more until its 10 s write timeout, the line held all the
        while. Pushed from the transport's input, the first processor, the cancel overtakes it,
        as a system frame does."""
        await self.worker.cancel(reason=reason)
        if self.control is not None and self.control.ended_by is not None:
            await self.processors[0].push_frame(CancelFrame(reason=reason))

    def greet(self) -> None:
        """Say the business's greeting now (a transport calls it once its caller is connected)."""
        if self.flavor == "brisk" and self.tools is not None:
            self.greeting = asyncio.get_running_loop().create_task(
                self.worker.queue_frames(greeting_frames(self.tools.business)))


class BriskLLMService(WithdrawnDraftsMixin, RoutedCallsMixin, AnswerCheckMixin, DraftAccountingMixin,
                      ResilientOpenAILLMService):
    """The LLM service: tools routed by intent, answers held to the facts, each draft's cost counted,
    a draft overtaken by its own cancel left unanswered."""


class CheckedLLMService(RoutedCallsMixin, AnswerCheckMixin, ResilientOpenAILLMService):
    """The LLM service with tools routed by intent and answers held to the business facts."""


def make_vad(config: BriskConfig, flavor: Flavor) -> SileroVADAnalyzer:
    """Silero VAD on its bundled ONNX model; stock keeps pipecat's default parameters, stock_tuned takes Brisk's."""
    if flavor == "stock":
        return SileroVADAnalyzer()
    return SileroVADAnalyzer(
        params=VADParams(
            confidence=config.vad_confidence,
            start_secs=config.vad_start_secs,
            stop_secs=config.vad_stop_secs,
            min_volume=config.vad_min_volume,
        )
    )


def make_stt(resources: Resources, flavor: Flavor):
    config = resources.config
    if flavor != "brisk":
        from pipecat.services.whisper.stt import WhisperSTTService

        from processors.stt.segmented_whisper import PreloadedWhisperSTTService

        # pipecat's own segmented Whisper: waits for the VAD stop, then transcribes everything.
        options = {"settings": WhisperSTTService.Settings(model=str(resources.whisper_model_path)),
                   "device": "cpu", "compute_type": "int8"}
        if resources.stock_whisper is not None:
            return PreloadedWhisperSTTService(model=resources.stock_whisper, **options)
        return WhisperSTTService(**options)  # loads its model now (Runtime.load_stock_whisper shares one)

    from processors.stt.streaming_whisper import StreamingWhisperSTTService

    return StreamingWhisperSTTService(
        engine=resources.whisper_engine,
        scheduler=resources.whisper_scheduler,
        partial_interval_s=config.stt_partial_interval_secs,
        max_utterance_s=config.stt_max_utterance_secs,
        preroll_s=config.stt_preroll_secs,
        review_early=config.stt_review_early,
    )


def make_llm(
    resources: Resources,
    speculation: SpeculationStats | None = None,
    speculative_audio: SpeculativeAudioCache | None = None,
    facts: FactIndex | None = None,
) -> OpenAILLMService:
    """The LLM service; with ``facts`` (Brisk) and ``llm_answer_check``, its answers held to them."""
    config = resources.config
    check = {}
    if facts is not None:
        check["offer_tools"] = config.tools_offered_to_llm
        if config.llm_answer_check:
            check.update(answer_check=facts.supports, unsupported_text=facts.business.unknown_answer,
                         person_offer=facts.business.person_offer, instead=facts.instead,
                         lacking=facts.lacking)
    kwargs = dict(
        client=resources.llm_client,
        apology_text=config.apology_text,
        supports_developer_role=not config.embedded_llm,
        settings=OpenAILLMService.Settings(
            model=resources.llm_model,
            system_instruction=config.system_prompt,
            temperature=config.llm_temperature,
            max_tokens=config.llm_max_tokens,
        ),
    )
    if speculation is not None:
        return BriskLLMService(speculation_stats=speculation, speculative_audio=speculative_audio, **check, **kwargs)
    if check:
        return CheckedLLMService(**check, **kwargs)
    return ResilientOpenAILLMService(**kwargs)


def make_prompt_processors(resources: Resources, flavor: Flavor, tools=None) -> list:
    """Brisk keeps the prompt prefix stable and warm (so the server's prefix cache holds it); stock sends it as is."""
    if flavor != "brisk":
        return []
    config = resources.config
    processors = [
        ContextWindow(
            max_turns=config.llm_history_turns,
            trim_batch=min(config.llm_history_trim_batch, max(1, config.llm_history_turns)),
        )
    ]
    if config.llm_warm_up:
        processors.append(
            PrefixWarmer(
                client=resources.llm_client,
                model=resources.llm_model,
                system_prompt=config.system_prompt,
                rewarm_after_s=config.llm_rewarm_secs or None,
                convert_developer_to_user=config.embedded_llm,
                tools=tools,
            )
        )
    return processors


def chunking(config: BriskConfig) -> SentenceFirstConfig:
    return SentenceFirstConfig(
        min_first_words=config.first_chunk_min_words,
        first_chunk_word_cap=config.first_chunk_word_cap,
    )


def make_chunker(config: BriskConfig, flavor: Flavor) -> list:
    """Brisk speaks each answer's first clause early; stock keeps pipecat's sentence aggregation."""
    if flavor != "brisk":
        return []
    return [SentenceChunker(chunking(config))]


def make_speculative_audio(config: BriskConfig, speculation: SpeculationStats | None):
    """A held draft's first chunk is synthesised before its turn is confirmed (every engine:
    hibari and espeak synthesise it locally, Cartesia opens its context)."""
    if speculation is None or not config.speculation_prefetch_tts:
        return None
    # Cut with the chunker's rules, so the prefetched chunk is the text the TTS will be asked for.
    return SpeculativeAudioCache(chunking(config))


def make_tts(
    resources: Resources,
    flavor: Flavor = "brisk",
    speculative_audio: SpeculativeAudioCache | None = None,
):
    config = resources.config
    engine = config.tts_engine
    if engine == "hibari":
        from processors.tts.hibari_tts import HibariTTSService

        # Stock pipecat has no such cache: the A/B's stock sides synthesise every text.
        phrases = resources.phrase_cache if flavor == "brisk" else None
        return HibariTTSService(voice=resources.hibari_voice, speculative_audio=speculative_audio,
                                phrase_cache=phrases)
    if engine == "espeak":
        from processors.tts.espeak_tts import EspeakTTSService, EspeakTTSSettings

        return EspeakTTSService(
            settings=EspeakTTSSettings(voice=config.espeak_voice), speculative_audio=speculative_audio
        )
    from processors.tts.cartesia_tts import PrefetchingCartesiaTTSService

    return PrefetchingCartesiaTTSService(
        speculative_audio=speculative_audio,  # None (stock): pipecat's CartesiaTTSService as it is
        api_key=config.cartesia_api_key,
        voice_id=config.cartesia_voice_id,
        model=config.cartesia_model,
        url=config.cartesia_url,
        # Cartesia joins a context's inputs verbatim: without it "today," + "from" is "today,from".
        append_trailing_space=flavor == "brisk",
    )


def make_facts(config: BriskConfig, flavor: Flavor, embedder=None) -> FactIndex | None:
    """Brisk's index of the business facts, one per call for the fast path, grounding and check;
    by meaning too when the runtime loaded the embedder (its sentences are embedded once per process)."""
    if flavor != "brisk":
        return None
    return FactIndex(config.business_definition, limit=config.llm_fact_lines, embedder=embedder)


def make_fast_path(
    config: BriskConfig,
    facts: FactIndex | None,
    speculative_audio: SpeculativeAudioCache | None = None,
    tools: CallTools | None = None,
) -> FastPathResponder | None:
    """Brisk answers the business's frequent questions from its facts and routes its requests to
    its tools (agent/tools/router.py); stock asks the LLM."""
    business = config.business_definition
    if facts is None or not config.fast_path or not (business.intents or facts.meaning):
        return None
    matcher = IntentMatcher(business, facts=facts if config.llm_grounding else None, hedge=config.hedges)
    return FastPathResponder(ToolRouter(matcher, tools) if tools else matcher, speculative_audio=speculative_audio)


def make_grounding(config: BriskConfig, facts: FactIndex | None) -> FactGrounding | None:
    """Brisk puts the facts a question is about next to it; stock sends the context as it is."""
    if facts is None or not config.llm_grounding:
        return None
    return FactGrounding(facts.grounding)


def make_facts_prefill(resources: Resources, facts: FactIndex | None, context: LLMContext,
                       prompt_processors: list) -> FactsPrefill | None:
    """With BRISK_LLM_FACTS_PREFILL, Brisk reads a question's facts into the LLM's cache while the caller asks it."""
    config = resources.config
    if facts is None or not config.facts_prefilled:
        return None
    window = next((p for p in prompt_processors if isinstance(p, ContextWindow)), None)
    cache = PromptCache(client=resources.llm_client, model=resources.llm_model, system_prompt=config.system_prompt,
                        convert_developer_to_user=config.embedded_llm)
    return FactsPrefill(cache=cache, context=context, grounding_for=facts.grounding,
                        layout=functools.partial(window.apply, count_drops=False) if window else None)


def make_barge_in(config: BriskConfig) -> BargeIn:
    return BargeIn(
        BargeInPolicy(
            min_speech_secs=config.barge_in_min_speech_secs,
            min_words=config.barge_in_min_words,
            backchannels=tuple(config.barge_in_backchannels or DEFAULT_BACKCHANNELS),
        )
    )


def build_call(
    resources: Resources,
    transport: BaseTransport,
    *,
    flavor: Flavor = "brisk",
    observers: list | None = None,
    latency: LatencyObserver | None = None,
    input_sample_rate: int = INPUT_SAMPLE_RATE,
    control: CallControl | None = None,
) -> Call:
    """Assemble one call's pipeline and worker on ``transport``; ``control`` is the transport's
    way to hand the caller over or hang up (the base ``CallControl`` when None)."""
    config = resources.config
    business = config.business_definition
    control = control or CallControl()
    tools = CallTools(business, resources.store, control) if flavor == "brisk" else None
    latency = latency or LatencyObserver()
    speculation = SpeculationStats() if flavor == "brisk" and config.speculation else None
    speculative_audio = make_speculative_audio(config, speculation)
    barge_in = make_barge_in(config) if flavor == "brisk" else None
    turn_strategies = make_turn_strategies(config, flavor, speculation, resources.turn_check)
    facts = make_facts(config, flavor, resources.embedder)
    fast_path = make_fast_path(config, facts, speculative_audio, tools)
    grounding = make_grounding(config, facts)
    audio = (CallAudio(recording_path(config.data_dir / "recordings", control.call_id))
             if config.record_audio and resources.records is not None else None)
    if barge_in:
        # While the bot speaks, only speech that passes the barge-in policy starts a turn.
        turn_strategies.start = [barge_in.start_strategy()]
    offered = tools_schema(business) if tools is not None and config.tools_offered_to_llm else None
    context = LLMContext(tools=offered) if offered else LLMContext()
    aggregators = LLMContextAggregatorPair(
        context,
        user_params=LLMUserAggregatorParams(
            user_turn_strategies=turn_strategies,
            user_idle_timeout=config.user_idle_secs if flavor == "brisk" else 0,
        ),
    )
    idle = None
    if flavor == "brisk" and config.user_idle_secs > 0:
        idle = IdleCaller(business, control, ask_after_s=config.user_idle_secs, hang_up_after_s=config.user_idle_hangup_secs)
        idle.attach(aggregators.user())
    llm = make_llm(resources, speculation, speculative_audio, facts)
    prompt_processors = make_prompt_processors(resources, flavor, offered)
    prefill = make_facts_prefill(resources, facts, context, prompt_processors)
    filler = None
    if tools is not None:
        register_tools(llm, business)
        if config.filler_after_secs > 0:
            filler = ToolFiller(business.filler, after_s=config.filler_after_secs)
    processors = [
        transport.input(),
        *make_dtmf(config, flavor),
        VADProcessor(vad_analyzer=make_vad(config, flavor)),
        make_stt(resources, flavor),
        *([prefill] if prefill else []),
        aggregators.user(),
        *make_continuation(config, flavor, context),
        *prompt_processors,
        *([fast_path] if fast_path else []),
        *([grounding] if grounding else []),
        llm,
        *([filler] if filler else []),
        *([barge_in.tagger()] if barge_in else []),  # right after the LLM, in its push order
        *make_chunker(config, flavor),
        tts := make_tts(resources, flavor, speculative_audio),
        *([barge_in.gate()] if barge_in else []),
        transport.output(),
        *([barge_in.playback(aggregators.assistant())] if barge_in else []),
        *([audio.processor] if audio else []),  # the caller's audio and the bot's as it went out
        aggregators.assistant(),
    ]
    pipeline = Pipeline(processors)
    worker = PipelineWorker(
        pipeline,
        params=PipelineParams(
            enable_metrics=True,
            enable_usage_metrics=True,
            audio_in_sample_rate=input_sample_rate,
            audio_out_sample_rate=OUTPUT_SAMPLE_RATE,
        ),
        observers=[latency, *(observers or [])],
        # The tool handlers' per-call state (pipecat hands it to them as params.app_resources).
        app_resources=tools,
        # pipecat's idle machinery: a caller who sends no audio (gone without hanging up) is ended.
        idle_timeout_secs=config.call_idle_timeout_secs or None,
        idle_timeout_frames=(InputAudioRawFrame,),
    )

    async def forward_turn_record(record: dict):
        # The browser draws each turn's waterfall from this message.
        await worker.queue_frame(RTVIServerMessageFrame(data={"type": "turn-latency", **record}))

    latency.add_turn_listener(forward_turn_record)
    if tools is not None and "book_rental" in business.tools:
        flow_manager = FlowManager(worker=worker, llm=llm, context_aggregator=aggregators, transport=transport)
        tools.booking = RentalBooking(flow_manager, business.flows["rental_booking"], tools)
    logger.info(f"assembled a {flavor} pipeline: tts={config.tts_engine}, llm={resources.llm_model}")
    built = Call(
        worker=worker,
        latency=latency,
        context=context,
        flavor=flavor,
        processors=processors,
        speculation=speculation,
        speculative_audio=speculative_audio,
        phrases=getattr(tts, "phrase_stats", None),
        barge_in=barge_in,
        fast_path=fast_path,
        control=control,
        tools=tools,
        filler=filler,
        idle=idle,
    )
    if resources.records is not None:
        built.recorder = CallRecorder(resources.records, built, audio)
    return built
