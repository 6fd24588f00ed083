"""The one place where processors are chosen and wired, and where each transport is made.

``build_call`` assembles a call's Brisk pipeline from the config and the process-wide
``Resources`` (models loaded once). It is the default ``BuildCall`` of every transport and of
the server; a developer's own builder (docs/extending.md) or the benchmark's baseline pipelines
(agent/bench/) take its place there, and reuse each stage's maker (agent/call/stages.py) and
``start_worker`` below.

    transport.input() -> DTMF aggregator (brisk) -> VAD -> STT -> facts prefill (when on)
                      -> user aggregator (speculative stop)
                      -> context window -> prefix warmer -> fast path + tool router -> fact grounding
                      -> LLM (tools routed by intent) -> answer check -> tool filler
                      -> sentence chunker -> TTS -> transport.output() -> assistant aggregator
                                                     (observer: processors/observers/latency.py)

Each call also gets its ``CallTools`` (the tools' state, pipecat's ``app_resources``), a ``FlowManager`` for
the business tools' forms (a booking among them), and the quiet-caller prompts (agent/call/conversation.py).

Transports are made next to their routes (agent/transports/).

Barge-in (processors/barge_in/barge_in.py): its user turn start strategy decides when
speech over the bot interrupts it, a tagger right after the LLM numbers bot turns, a gate before
the output transport drops anything of an interrupted turn (and stops the transport at the
decision), and a tracker after it rewrites a cut answer in the context to what was played; when
the turn that cut the bot ends with no words, the resumer after the tagger says the rest.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Mapping, Protocol

from loguru import logger
from pipecat.frames.frames import CancelFrame, InputAudioRawFrame, InputDTMFFrame, InputTransportMessageFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.flows import FlowManager
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.processors.audio.vad_processor import VADProcessor
from pipecat.processors.frameworks.rtvi.frames import RTVIServerMessageFrame
from pipecat.transports.base_transport import BaseTransport
from pipecat.turns.empty_user_turn import EmptyUserTurnConfig

from agent.call.call_control import CallControl
from agent.call.conversation import IdleCaller, greeting_frames
from agent.call.own_stages import own_stage
from agent.records.recorder import CallRecorder
from agent.call.turn_taking import make_continuation, make_dtmf, make_turn_strategies
from agent.tools.form import Form
from agent.tools.mcp_tools import McpCalls
from agent.tools.functions import CallTools, register_tools, tools_schema
from processors.barge_in.barge_in import BargeIn
from processors.fast_path import FastPathResponder
from processors.observers.latency import LatencyObserver
from processors.llm.tool_filler import ToolFiller
from processors.tts.sentence_chunker import SentenceChunker
from processors.speculation.speculation_stats import SpeculationStats
from processors.speculation.speculative_tts import SpeculativeAudioCache
from agent.call.resources import Resources
from agent.call.stages import (
    chunking, make_answer_check, make_barge_in, make_call_audio, make_facts, make_facts_prefill, make_fast_path, make_grounding,
    make_llm, make_prompt_processors, make_speculative_audio, make_stt, make_tts, make_vad,
)

# Where ``build_call(insert=...)`` puts processors of one's own: after the input transport (raw
# audio), after the STT (transcripts), before the LLM (the context), after the LLM (its text,
# turn-tagged), before the output transport (the voice's audio, stale turns already dropped).
PLACES = ("after_input", "after_stt", "before_llm", "after_llm", "before_output")

# Hibari speaks at 24 kHz; the pipeline's output runs at the voice's own rate so nothing resamples.
OUTPUT_SAMPLE_RATE = 24000
INPUT_SAMPLE_RATE = 16000
# Twilio Media Streams carry 8 kHz mu-law; the pipeline takes it at that rate (no resampler).
TWILIO_SAMPLE_RATE = 8000


@dataclass
class Call:
    """One assembled call: run ``worker`` with a WorkerRunner; read ``latency`` for its numbers."""

    worker: PipelineWorker
    latency: LatencyObserver
    context: LLMContext
    processors: list  # in pipeline order, for inspection
    flavor: str = "brisk"  # which builder made it: "brisk", or the name another builder gives its calls
    speculation: SpeculationStats | None = None  # this call's drafts; None when speculation is off
    speculative_audio: SpeculativeAudioCache | None = None  # held drafts' prefetched first chunks
    phrases: object | None = None  # processors.tts.phrase_cache.PhraseStats: texts spoken from the phrase cache
    barge_in: BargeIn | None = None  # brisk: its interruptions, backchannels, what was played
    fast_path: FastPathResponder | None = None  # brisk: the questions answered without the LLM
    control: CallControl | None = None  # what the conversation may do to the call (hand over, hang up)
    tools: CallTools | None = None  # brisk: the tool handlers' state (calls made, the form)
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
        if self.tools is not None:
            self.greeting = asyncio.get_running_loop().create_task(
                self.worker.queue_frames(greeting_frames(self.tools.business)))


def start_worker(
    resources: Resources,
    processors: list,
    *,
    latency: LatencyObserver,
    observers: list | None = None,
    input_sample_rate: int = INPUT_SAMPLE_RATE,
    app_resources=None,
) -> PipelineWorker:
    """The worker that runs ``processors``: metrics on, idle callers ended, each turn's waterfall
    sent to the page. Every call builder ends with it, so every call is measured the same way."""
    config = resources.config
    worker = PipelineWorker(
        Pipeline(processors),
        params=PipelineParams(
            enable_metrics=True,
            enable_usage_metrics=True,
            audio_in_sample_rate=input_sample_rate,
            audio_out_sample_rate=OUTPUT_SAMPLE_RATE,
        ),
        observers=[latency, *(observers or [])],
        # The tool handlers' per-call state (pipecat hands it to them as params.app_resources).
        app_resources=app_resources,
        # pipecat's idle machinery: a caller who sends nothing (gone without hanging up) is ended.
        # Keys and messages count as well as audio: a text-mode eval sends no audio at all, and
        # was hung up mid-scenario when only audio counted.
        idle_timeout_secs=config.call_idle_timeout_secs or None,
        idle_timeout_frames=(InputAudioRawFrame, InputDTMFFrame, InputTransportMessageFrame),
    )

    async def forward_turn_record(record: dict):
        # The browser draws each turn's waterfall from this message.
        await worker.queue_frame(RTVIServerMessageFrame(data={"type": "turn-latency", **record}))

    latency.add_turn_listener(forward_turn_record)
    return worker


def build_call(
    resources: Resources,
    transport: BaseTransport,
    *,
    observers: list | None = None,
    latency: LatencyObserver | None = None,
    input_sample_rate: int = INPUT_SAMPLE_RATE,
    control: CallControl | None = None,
    insert: Mapping[str, list[FrameProcessor]] | None = None,
) -> Call:
    """Assemble one call's pipeline and worker on ``transport``; ``control`` is the transport's
    way to hand the caller over or hang up (the base ``CallControl`` when None). ``insert`` puts
    processors of one's own at the named places (``PLACES``), new ones for every call."""
    insert = dict(insert or {})
    if unknown := set(insert) - set(PLACES):
        raise ValueError(f"no place called {', '.join(sorted(unknown))} in a call: one of {', '.join(PLACES)}")
    config = resources.config
    business = config.business_definition
    control = control or CallControl()
    tools = CallTools(business, resources.store, control, api=resources.api, mcp_tools=resources.mcp_tools)
    if resources.mcp_tools:
        tools.mcp = McpCalls(business)
    latency = latency or LatencyObserver()
    speculation = SpeculationStats() if config.speculation else None
    speculative_audio = make_speculative_audio(config, speculation)
    barge_in = make_barge_in(config)
    turn_strategies = make_turn_strategies(config, speculation, resources.turn_check)
    facts = make_facts(config, resources.embedder)
    fast_path = make_fast_path(config, facts, speculative_audio, tools)
    grounding = make_grounding(config, facts)
    audio = make_call_audio(resources, control)
    # While the bot speaks, only speech that passes the barge-in policy starts a turn.
    turn_strategies.start = [barge_in.start_strategy()]
    offered = tools_schema(business, resources.mcp_tools) if config.tools_offered_to_llm else None
    context = LLMContext(tools=offered) if offered else LLMContext()
    aggregators = LLMContextAggregatorPair(
        context,
        user_params=LLMUserAggregatorParams(
            user_turn_strategies=turn_strategies,
            user_idle_timeout=config.user_idle_secs,
            # A wordless turn that cut an answer is the resumer's (below), not pipecat's prompt.
            empty_user_turn=EmptyUserTurnConfig(interrupted_prompt=None) if config.barge_in_resume else EmptyUserTurnConfig(),
        ),
    )
    idle = None
    if config.user_idle_secs > 0:
        idle = IdleCaller(business, control, ask_after_s=config.user_idle_secs,
                          hang_up_after_s=config.user_idle_hangup_secs, tools=tools)
        idle.attach(aggregators.user())
    llm = make_llm(resources, speculation, speculative_audio, facts)
    check = make_answer_check(config, facts)
    prompt_processors = make_prompt_processors(resources, offered)
    prefill = make_facts_prefill(resources, facts, context, prompt_processors)
    filler = None
    register_tools(llm, business)
    if config.filler_after_secs > 0:
        filler = ToolFiller(business.filler, after_s=config.filler_after_secs)
    processors = [
        transport.input(),
        *insert.get("after_input", ()),
        *make_dtmf(config),
        VADProcessor(vad_analyzer=vad if (vad := own_stage(resources, "vad")) is not None else make_vad(config)),
        make_stt(resources),
        *insert.get("after_stt", ()),
        *([prefill] if prefill else []),
        aggregators.user(),
        *make_continuation(config, context),
        *prompt_processors,
        *([fast_path] if fast_path else []),
        *([grounding] if grounding else []),
        *insert.get("before_llm", ()),
        *([check.reader()] if check else []),
        llm,
        *([check] if check else []),  # right after the LLM: nothing unchecked goes on
        *([filler] if filler else []),
        barge_in.tagger(),  # right after the LLM, in its push order
        *([barge_in.resumer(aggregators.user())] if config.barge_in_resume else []),
        *insert.get("after_llm", ()),
        SentenceChunker(chunking(config)),  # the first clause at once, then whole sentences
        tts := make_tts(resources, speculative_audio),
        barge_in.gate(),
        *insert.get("before_output", ()),
        transport.output(),
        barge_in.playback(aggregators.assistant()),
        *([audio.processor] if audio else []),  # the caller's audio and the bot's as it went out
        aggregators.assistant(),
    ]
    worker = start_worker(resources, processors, latency=latency, observers=observers,
                          input_sample_rate=input_sample_rate, app_resources=tools)
    if tools.mcp is not None:
        @worker.event_handler("on_pipeline_finished")
        async def close_mcp(_worker, _frame):
            await tools.mcp.close()  # the call's own MCP connections (a stdio server's process)

    if business.declared_tools or business.mcp_servers:
        # One flow manager per call: each of the business's tools' forms runs its flow on it, one at a time.
        flow_manager = FlowManager(worker=worker, llm=llm, context_aggregator=aggregators, transport=transport)
        tools.form = Form(flow_manager, tools)
    logger.info(f"assembled a call: tts={config.tts_engine}, llm={resources.llm_model}")
    built = Call(
        worker=worker,
        latency=latency,
        context=context,
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


class BuildCall(Protocol):
    """What a transport calls to assemble each of its calls: ``build_call`` or a builder of one's own."""

    def __call__(self, resources: Resources, transport: BaseTransport, *, observers: list | None = None,
                 latency: LatencyObserver | None = None, input_sample_rate: int = INPUT_SAMPLE_RATE,
                 control: CallControl | None = None) -> Call: ...
