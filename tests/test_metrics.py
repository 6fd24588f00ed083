"""Operator metrics: GET /metrics histograms and counters, and OpenTelemetry traces, per call.

Calls here are real pipecat pipelines fed to ``BriskMetrics`` the way the server feeds it:
processors that answer after known delays (``tests/fakes/delay_processor.py``) with the real
``LatencyObserver``, and at the end a real call over WebRTC to a real server with the real
models, after which ``/metrics`` is scraped over HTTP.
"""

import asyncio
import sys
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI, Request
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pipecat.frames.frames import (
    EagerEndOfTurnCancelFrame,
    EndFrame,
    LLMContextFrame,
    TextFrame,
    TTSAudioRawFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.workers.runner import WorkerRunner
from prometheus_client.parser import text_string_to_metric_families

from agent.caller.loopback import serve_app
from agent.metrics import BriskMetrics, component_name, setup_tracing
from agent.call.pipeline import Call
from processors.observers.latency import STAGES, LatencyObserver
from tests.fakes.delay_processor import (
    DelayedLLMService,
    DelayedSTTService,
    DelayedTTSService,
    DelayProcessor,
    InstantOutputTransport,
)
from tests.fakes.failing_processor import ErrorOnFrameProcessor
from tests.waiting import until

STOP_SECS = 0.2
REPO = Path(__file__).resolve().parent.parent


def voice_processors(*, answer_s: float = 0.0):
    """STT -> LLM -> TTS -> output; with ``answer_s``, each answer plays for about that long."""
    playing = []
    if answer_s:
        playing = [DelayProcessor(answer_s / 10, delay_types=(TTSAudioRawFrame,))]
    return [
        DelayedSTTService(text="what time is it", delay_s=0.1),
        DelayedLLMService(tokens=["It is ", "ten."], delay_s=0.15),
        DelayedTTSService(delay_s=0.05, chunks=10 if answer_s else 3),
        *playing,
        InstantOutputTransport(),
    ]


def user_turn(*, answer: bool = True, speculative: bool = False) -> list:
    script = [VADUserStartedSpeakingFrame(), UserStartedSpeakingFrame(), 0.1]
    script += [VADUserStoppedSpeakingFrame(stop_secs=STOP_SECS), 0.2]
    if speculative:
        # A draft on the partial transcript, withdrawn, then a second draft that is answered.
        script += [LLMContextFrame(LLMContext(), speculation=True), 0.05, EagerEndOfTurnCancelFrame(), 0.3]
        script += [LLMContextFrame(LLMContext(), speculation=True), 0.05, UserStoppedSpeakingFrame()]
        return script + [0.8]
    script += [UserStoppedSpeakingFrame(), 0.05]
    if answer:
        script += [LLMContextFrame(LLMContext()), 0.8]
    return script


async def run_call(
    metrics: BriskMetrics, script: list, *, processors=None, transport: str = "test", hang_up: bool = False
) -> Call:
    """Run one call's pipeline through ``script`` (frames, and floats = seconds to wait), then end
    it: with an ``EndFrame``, or cancelled as when the caller hangs up."""
    latency = LatencyObserver()
    processors = processors or voice_processors()
    worker = PipelineWorker(Pipeline(processors), params=PipelineParams(), observers=[latency], idle_timeout_secs=None)
    call = Call(worker=worker, latency=latency, context=LLMContext(), flavor="brisk", processors=processors)
    metrics.track_call(call, transport=transport, call_id=f"call-{id(call)}")

    async def caller():
        for step in script:
            if isinstance(step, float):
                await asyncio.sleep(step)
            else:
                await worker.queue_frame(step)
        if hang_up:
            await worker.cancel(reason="the caller hung up")
        else:
            await worker.queue_frame(EndFrame())

    await asyncio.gather(WorkerRunner(handle_sigint=False).run(worker), caller())
    return call


async def scrape(metrics: BriskMetrics) -> dict[tuple[str, tuple], float]:
    """GET /metrics over HTTP: {(sample name, sorted labels): value}."""
    app = FastAPI()
    app.include_router(metrics.router)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://brisk") as http:
        response = await http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


# -- metrics -------------------------------------------------------------------------------


async def test_a_call_moves_the_latency_histograms_and_the_call_and_turn_counters():
    metrics = BriskMetrics()
    before = await scrape(metrics)
    assert value(before, "brisk_voice_to_voice_seconds_count", transport="test") == 0

    call = await run_call(metrics, user_turn())

    after = await scrape(metrics)
    [record] = call.latency.turns
    stages = record["stages_ms"]
    assert value(after, "brisk_calls_total", transport="test") == 1
    assert value(after, "brisk_calls_active", transport="test") == 0
    assert value(after, "brisk_turns_total", transport="test") == 1
    assert value(after, "brisk_voice_to_voice_seconds_count", transport="test") == 1
    assert value(after, "brisk_voice_to_voice_seconds_sum", transport="test") == pytest.approx(
        stages["first_audio_out"] / 1000
    )
    for stage in STAGES[1:]:
        assert value(after, "brisk_turn_stage_seconds_count", stage=stage) == 1, stage
        assert value(after, "brisk_turn_stage_seconds_sum", stage=stage) == pytest.approx(stages[stage] / 1000)
    samples = call.latency.processor_samples()
    assert samples
    for name, seconds in samples.items():
        label = name.split("#")[0]
        assert "#" not in label
        assert value(after, "brisk_processor_latency_seconds_count", processor=label) == len(seconds)
        assert value(after, "brisk_processor_latency_seconds_sum", processor=label) == pytest.approx(sum(seconds))


async def test_processor_latency_is_labelled_by_class_so_calls_add_up():
    metrics = BriskMetrics()
    first = await run_call(metrics, user_turn())
    second = await run_call(metrics, user_turn())

    after = await scrape(metrics)
    tts_samples = [
        len(seconds)
        for call in (first, second)
        for name, seconds in call.latency.processor_samples().items()
        if name.startswith("DelayedTTSService#")
    ]
    assert len(tts_samples) == 2
    assert value(after, "brisk_processor_latency_seconds_count", processor="DelayedTTSService") == sum(tts_samples)
    assert value(after, "brisk_calls_total", transport="test") == 2


async def test_errors_are_counted_by_the_component_that_reported_them():
    metrics = BriskMetrics()
    failing = ErrorOnFrameProcessor(trigger=TextFrame, error="provider down")
    script = [TextFrame("a"), 0.05, TextFrame("b"), 0.1]

    await run_call(metrics, script, processors=[failing, *voice_processors()])

    after = await scrape(metrics)
    assert component_name(failing) == "ErrorOnFrameProcessor"
    assert value(after, "brisk_errors_total", component="ErrorOnFrameProcessor") == 2


async def test_cutting_into_an_answer_counts_an_interruption_and_hanging_up_on_one_does_not():
    metrics = BriskMetrics()
    # Each answer plays for a second. The caller speaks again while the first one plays, and
    # hangs up while the second one plays.
    script = user_turn(answer=False) + [LLMContextFrame(LLMContext()), 0.5]
    script += user_turn(answer=False) + [LLMContextFrame(LLMContext()), 0.8]

    call = await run_call(metrics, script, processors=voice_processors(answer_s=1.0), hang_up=True)

    first, second = call.latency.turns
    for turn in (first, second):
        assert turn["interrupted"] and turn["stages_ms"]["first_audio_out"] is not None, turn
    after = await scrape(metrics)
    assert value(after, "brisk_interruptions_total", transport="test") == 1


async def test_speculative_requests_count_as_hits_when_answered_and_misses_when_withdrawn():
    metrics = BriskMetrics()

    call = await run_call(metrics, user_turn(speculative=True))

    [record] = call.latency.turns
    assert record["speculative"] is True and record["speculations_withdrawn"] == 1
    after = await scrape(metrics)
    assert value(after, "brisk_speculation_total", result="hit") == 1
    assert value(after, "brisk_speculation_total", result="miss") == 1


# -- traces --------------------------------------------------------------------------------


async def test_each_call_is_one_trace_with_a_span_per_turn_and_a_child_span_per_stage():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    metrics = BriskMetrics(tracer=provider.get_tracer("test"))

    calls = [await run_call(metrics, user_turn() + user_turn()) for _ in range(2)]

    spans = exporter.get_finished_spans()
    call_spans = [s for s in spans if s.name == "call"]
    assert len(call_spans) == 2
    assert len({s.context.trace_id for s in spans}) == 2  # one trace per call
    for call, call_span in zip(calls, call_spans):
        assert call_span.parent is None
        assert call_span.attributes["brisk.transport"] == "test"
        turns = [s for s in spans if s.name == "turn" and s.parent.span_id == call_span.context.span_id]
        assert [t.attributes["brisk.turn"] for t in turns] == [r["turn"] for r in call.latency.turns] == [1, 2]
        for turn, record in zip(turns, call.latency.turns):
            assert turn.attributes["brisk.voice_to_voice_ms"] == record["stages_ms"]["first_audio_out"]
            children = [s for s in spans if s.parent is not None and s.parent.span_id == turn.context.span_id]
            assert [c.name for c in children] == list(STAGES[1:])
            for child in children:
                assert turn.start_time <= child.start_time <= child.end_time <= turn.end_time
            # The last stage ends where the waterfall ends: first audio out, after the reference.
            first_audio = children[-1].end_time - turn.start_time
            assert first_audio / 1e6 == pytest.approx(record["stages_ms"]["first_audio_out"], abs=0.01)


def test_tracing_is_off_unless_an_otlp_endpoint_is_configured():
    assert setup_tracing(None) is None
    assert setup_tracing("") is None


# Run in a child process: tracing installs a process-wide tracer provider, which would then
# trace every FastAPI app the rest of the test session starts.
EXPORTING_CALL = """
import asyncio, sys
from opentelemetry import trace
from agent.metrics import BriskMetrics, setup_tracing
from tests.test_metrics import run_call, user_turn

async def main():
    metrics = BriskMetrics(tracer=setup_tracing(sys.argv[1], service_name="brisk-test"))
    await run_call(metrics, user_turn())
    trace.get_tracer_provider().shutdown()  # flushes the batch

asyncio.run(main())
"""


async def test_configured_tracing_exports_call_spans_over_otlp_http():
    received: list[ExportTraceServiceRequest] = []
    collector = FastAPI(telemetry={"tracing": False})

    @collector.post("/v1/traces")
    async def traces(request: Request):
        received.append(ExportTraceServiceRequest.FromString(await request.body()))
        return {}

    async with serve_app(collector) as collector_url:
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", EXPORTING_CALL, collector_url, cwd=REPO, stderr=asyncio.subprocess.PIPE
        )
        _, stderr = await asyncio.wait_for(child.communicate(), timeout=60)
    assert child.returncode == 0, stderr.decode()[-2000:]

    spans = [
        (span, resource_spans.resource)
        for request in received
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    ]
    assert {"call", "turn", "first_audio_out"} <= {span.name for span, _ in spans}
    assert len({span.trace_id for span, _ in spans}) == 1
    services = {a.value.string_value for _, r in spans for a in r.attributes if a.key == "service.name"}
    assert services == {"brisk-test"}


# -- a real call, scraped over HTTP --------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.asyncio(loop_scope="session")
async def test_metrics_scraped_after_a_real_call_show_its_latencies(e2e_config, runtime, tmp_path):
    from agent.caller.call import place_call
    from agent.server import create_app
    from tests.routers import include_first
    from tests.speech import synthesize_speech

    metrics = BriskMetrics()
    app = include_first(create_app(e2e_config, runtime=runtime), metrics.router)
    app.state.calls.listeners.append(metrics.listener("webrtc"))
    clip = synthesize_speech("What time do you open on Saturday?", tmp_path / "q.wav", tail_silence=1.0)

    async with serve_app(app) as base_url:
        async with httpx.AsyncClient() as http:
            before = (await http.get(f"{base_url}/metrics")).text
        result = await place_call(base_url, app, clip.samples, clip.sample_rate)
        # The server ends its side once the peer has gone.
        await until(lambda: app.state.calls.active == 0, "the server to end its side", timeout=10)
        async with httpx.AsyncClient() as http:
            after_text = (await http.get(f"{base_url}/metrics")).text

    parse = lambda text: {  # noqa: E731
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    before, after = parse(before), parse(after_text)
    [record] = result.summary["turns"]
    assert value(before, "brisk_voice_to_voice_seconds_count", transport="webrtc") == 0
    assert value(after, "brisk_calls_total", transport="webrtc") == 1
    assert value(after, "brisk_calls_active", transport="webrtc") == 0
    assert value(after, "brisk_turns_total", transport="webrtc") == 1
    assert value(after, "brisk_voice_to_voice_seconds_count", transport="webrtc") == 1
    assert value(after, "brisk_voice_to_voice_seconds_sum", transport="webrtc") == pytest.approx(
        record["stages_ms"]["first_audio_out"] / 1000
    )
    for stage in ("vad_stop", "stt_final", "llm_first_token", "tts_first_audio", "first_audio_out"):
        assert value(after, "brisk_turn_stage_seconds_count", stage=stage) == 1, stage
    # Every processor the call measured (STT, LLM, TTS, transports...) has its samples there.
    measured = result.summary["processors"]
    assert len(measured) >= 5
    for name, stats in measured.items():
        processor = name.split("#")[0]
        assert value(after, "brisk_processor_latency_seconds_count", processor=processor) >= stats["count"], name
