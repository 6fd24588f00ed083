"""Operator metrics: Prometheus histograms and counters, and OpenTelemetry traces, per call.

    GET /metrics   Prometheus text format (``BriskMetrics.router``)

Everything is fed from what ``processors.observers.latency.LatencyObserver`` already measures, so
nothing here runs per frame:

- each closed turn record (a turn listener) -> the voice-to-voice and per-stage histograms,
  the turn, interruption and speculation counters, and one OpenTelemetry ``turn`` span with a
  child span per waterfall stage, under the call's span;
- each ``ErrorFrame`` that reaches the pipeline worker (``on_pipeline_error``) -> errors by
  component;
- the end of the call (``on_pipeline_finished``) -> every processor's frame latency samples
  into its histogram (the observer's window: its last ``window`` samples per processor), and
  the call span ends.

Metric names::

    brisk_calls_total{transport}              calls started
    brisk_calls_active{transport}             calls in progress
    brisk_turns_total{transport}              user turns closed
    brisk_interruptions_total{transport}      answers the caller cut into (barge-in)
    brisk_speculation_total{result}           speculative LLM requests: hit (answered) / miss (withdrawn)
    brisk_errors_total{component}             ErrorFrames, by the processor class that raised them
    brisk_voice_to_voice_seconds{transport}   end of speech -> first bot audio out
    brisk_turn_stage_seconds{stage}           end of speech -> each waterfall stage
    brisk_processor_latency_seconds{processor}  frame in -> caused frame out, per processor class

Tracing is off unless :func:`setup_tracing` is given an OTLP endpoint: one trace per call (a
``call`` span), one ``turn`` span per turn, and stage child spans laid out on the waterfall.
pipecat's own ``setup_tracing`` installs the exporter, so pipecat's service spans, if turned on,
land in the same place; its turn observers are not used, because they would add two observers
per frame to trace what the latency observer already times.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from fastapi import APIRouter
from fastapi.responses import Response
from loguru import logger
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode, Tracer
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from agent.call.pipeline import Call
from processors.observers.latency import STAGES

V2V_BUCKETS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 7.5, 10.0)
STAGE_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)
PROCESSOR_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

_INSTANCE_SUFFIX = re.compile(r"#\d+$")


def component_name(processor) -> str:
    """A processor's class-level name: ``HibariTTSService#3`` -> ``HibariTTSService``.

    Instance numbers grow with every call, and would make label values unbounded.
    """
    if processor is None:
        return "pipeline"
    return _INSTANCE_SUFFIX.sub("", getattr(processor, "name", type(processor).__name__))


class _TrackedCall:
    __slots__ = ("transport", "span", "pending_interruption", "errors", "finished")

    def __init__(self, transport: str, span: Span | None):
        self.transport = transport
        self.span = span
        self.pending_interruption = False
        self.errors = 0
        self.finished = False


class BriskMetrics:
    """Prometheus metrics in their own registry, and optional traces, for every tracked call."""

    def __init__(self, *, registry: CollectorRegistry | None = None, tracer: Tracer | None = None):
        """Create the metrics.

        Args:
            registry: Where the metrics live; a new one when None (so apps and tests never
                collide in prometheus_client's process-wide default registry).
            tracer: An OpenTelemetry tracer (:func:`setup_tracing`); None = no traces.
        """
        self.registry = registry or CollectorRegistry()
        self.tracer = tracer
        # time.monotonic() -> Unix epoch ns, for spans laid out from the observer's timestamps.
        self._epoch_offset_ns = time.time_ns() - time.monotonic_ns()
        r = self.registry
        self.calls = Counter("brisk_calls", "Calls started.", ["transport"], registry=r)
        self.calls_active = Gauge("brisk_calls_active", "Calls in progress.", ["transport"], registry=r)
        self.turns = Counter("brisk_turns", "User turns closed.", ["transport"], registry=r)
        self.interruptions = Counter(
            "brisk_interruptions", "Answers the caller cut into (barge-in).", ["transport"], registry=r
        )
        self.speculation = Counter(
            "brisk_speculation",
            "Speculative LLM requests: hit = it was the answer, miss = it was withdrawn.",
            ["result"],
            registry=r,
        )
        self.errors = Counter("brisk_errors", "Errors reported in a pipeline, by component.", ["component"], registry=r)
        self.v2v = Histogram(
            "brisk_voice_to_voice_seconds",
            "End of the caller's speech to the first bot audio leaving the output transport.",
            ["transport"],
            buckets=V2V_BUCKETS,
            registry=r,
        )
        self.stages = Histogram(
            "brisk_turn_stage_seconds",
            "End of the caller's speech to each stage of the turn's latency waterfall.",
            ["stage"],
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self.processor_latency = Histogram(
            "brisk_processor_latency_seconds",
            "Time from a frame entering a processor to the frame it caused leaving it.",
            ["processor"],
            buckets=PROCESSOR_BUCKETS,
            registry=r,
        )

        self.router = APIRouter()  # GET /metrics
        self.router.add_api_route("/metrics", self.scrape, methods=["GET"], include_in_schema=False)

    # -- wiring ----------------------------------------------------------------------------

    async def scrape(self) -> Response:
        """The registry in Prometheus text format."""
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)

    def listener(self, transport: str) -> Callable[[str, Call], None]:
        """A call listener (``listener(call_id, call)``) that tracks every call it is given."""
        return lambda call_id, call: self.track_call(call, transport=transport, call_id=call_id)

    def track_call(self, call: Call, *, transport: str, call_id: str = "") -> None:
        """Count the call and subscribe to its turn records, errors and end."""
        span = None
        if self.tracer is not None:
            span = self.tracer.start_span(
                "call",
                attributes={"brisk.transport": transport, "brisk.call_id": call_id, "brisk.flavor": call.flavor},
            )
        tracked = _TrackedCall(transport, span)
        self.calls.labels(transport).inc()
        self.calls_active.labels(transport).inc()

        def on_turn(record: dict) -> None:
            self._observe_turn(record, tracked)

        async def on_error(_worker, frame) -> None:
            tracked.errors += 1
            component = component_name(getattr(frame, "processor", None))
            self.errors.labels(component).inc()
            if tracked.span is not None:
                tracked.span.add_event("error", {"brisk.component": component, "brisk.error": str(frame.error)})

        async def on_finished(_worker, _frame) -> None:
            self._finish_call(call, tracked)

        call.latency.add_turn_listener(on_turn)
        call.worker.add_event_handler("on_pipeline_error", on_error)
        call.worker.add_event_handler("on_pipeline_finished", on_finished)

    # -- feeding ---------------------------------------------------------------------------

    def _observe_turn(self, record: dict, tracked: _TrackedCall) -> None:
        """Feed one closed turn record (``LatencyObserver``'s) into the metrics and the trace."""
        transport = tracked.transport
        self.turns.labels(transport).inc()
        if tracked.pending_interruption:
            self.interruptions.labels(transport).inc()
        stages = record.get("stages_ms") or {}
        # An answered turn closed as interrupted is a barge-in only if a next turn follows: the
        # call's end closes its last turn the same way. A record after the end is that last one.
        tracked.pending_interruption = (
            not tracked.finished and bool(record.get("interrupted")) and stages.get("first_audio_out") is not None
        )
        if record.get("speculative"):
            self.speculation.labels("hit").inc()
        withdrawn = record.get("speculations_withdrawn", 0)
        if withdrawn:
            self.speculation.labels("miss").inc(withdrawn)
        v2v_ms = stages.get("first_audio_out")
        if v2v_ms is not None:
            self.v2v.labels(transport).observe(v2v_ms / 1000)
        for stage in STAGES[1:]:
            ms = stages.get(stage)
            if ms is not None:
                self.stages.labels(stage).observe(ms / 1000)
        if tracked.span is not None:
            self._trace_turn(record, tracked.span)

    def _finish_call(self, call: Call, tracked: _TrackedCall) -> None:
        """The call ended: processor samples into their histogram, gauge down, span closed."""
        if tracked.finished:
            return
        tracked.finished = True
        self.calls_active.labels(tracked.transport).dec()
        for processor, samples in call.latency.processor_samples().items():
            histogram = self.processor_latency.labels(_INSTANCE_SUFFIX.sub("", processor))
            for seconds in samples:
                histogram.observe(seconds)
        if tracked.span is not None:
            if tracked.errors:
                tracked.span.set_status(Status(StatusCode.ERROR, f"{tracked.errors} pipeline errors"))
            tracked.span.end()
        logger.debug(f"metrics: {tracked.transport} call finished")

    def _trace_turn(self, record: dict, call_span: Span) -> None:
        t0 = record.get("t0_monotonic")
        stages = record.get("stages_ms") or {}
        attributes = {
            "brisk.turn": record.get("turn", 0),
            "brisk.reference": record.get("reference") or "none",
            "brisk.interrupted": bool(record.get("interrupted")),
            "brisk.speculative": bool(record.get("speculative")),
        }
        context = trace.set_span_in_context(call_span)
        if t0 is None:
            # No VAD stop and no speech-end mark: nothing to lay out.
            self.tracer.start_span("turn", context=context, attributes=attributes).end()
            return
        at = {s: self._epoch_ns(t0 + ms / 1000) for s, ms in stages.items() if ms is not None}
        start = at.get("speech_end", self._epoch_ns(t0))
        end = max(at.values(), default=start)
        if stages.get("first_audio_out") is not None:
            attributes["brisk.voice_to_voice_ms"] = stages["first_audio_out"]
        turn = self.tracer.start_span("turn", context=context, start_time=start, attributes=attributes)
        turn_context = trace.set_span_in_context(turn)
        previous = start
        for stage in STAGES[1:]:
            if stage not in at:
                continue
            # Each stage spans from the stage before it in the waterfall to its own moment.
            stage_start = min(previous, at[stage])
            self.tracer.start_span(stage, context=turn_context, start_time=stage_start).end(end_time=at[stage])
            previous = at[stage]
        turn.end(end_time=end)

    def _epoch_ns(self, t_monotonic: float) -> int:
        return round(t_monotonic * 1e9) + self._epoch_offset_ns


def setup_tracing(otlp_endpoint: str | None, service_name: str = "brisk") -> Tracer | None:
    """Export traces over OTLP/HTTP to ``otlp_endpoint`` (``http://collector:4318``); None = off.

    Spans go to ``<endpoint>/v1/traces``. Installs the process-wide tracer provider through
    pipecat's ``setup_tracing``, so call it once per process.
    """
    if not otlp_endpoint:
        return None
    # Imported only when tracing is on: the exporter pulls in protobuf and requests.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from pipecat.utils.tracing.setup import setup_tracing as pipecat_setup_tracing

    exporter = OTLPSpanExporter(endpoint=otlp_endpoint.rstrip("/") + "/v1/traces")
    if not pipecat_setup_tracing(service_name, exporter=exporter):
        raise RuntimeError("OpenTelemetry tracing could not be set up (is opentelemetry-sdk installed?)")
    logger.info(f"tracing: exporting spans to {otlp_endpoint}")
    return trace.get_tracer("brisk")
