"""What one bench call cost besides time: LLM requests and tokens, and CPU seconds.

LLM tokens are the LLM server's own counts, taken from the first of these that is there:

1. ``usage``: the token usage the server reports with each completion. pipecat's OpenAI service
   asks for it (``stream_options.include_usage``) and, when the worker runs with
   ``enable_usage_metrics``, pushes it as a ``MetricsFrame`` of ``LLMUsageMetricsData``;
   ``LLMUsageObserver`` sums those per call. The scripted LLM reports usage like OpenAI does.
2. ``server_metrics``: the LLM server's Prometheus ``/metrics`` counters, read just before and
   just after the call (llama.cpp's ``llama-server --metrics``; they count every completion on
   the server, the prefix warmer's included).
3. neither: the tokens are unknown (None). llama-cpp-python's server sends no usage on a stream
   and has no ``/metrics``.

A speculative draft cut mid-stream never gets its usage; its tokens are what the call's
``SpeculationStats`` counted for it (streamed chunks, an estimate of its prompt).

The llama.cpp server's CPU seconds are psutil's user + system time of its process.
"""

from __future__ import annotations

import statistics
import time

import httpx
import numpy as np
import psutil
from prometheus_client.parser import text_string_to_metric_families
from pipecat.frames.frames import LLMContextFrame, MetricsFrame
from pipecat.metrics.metrics import LLMUsageMetricsData
from pipecat.observers.base_observer import BaseObserver, FrameProcessed, FramePushed
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.llm_service import LLMService

from processors.llm.facts_prefill import FactsPrefill
from processors.llm.prefix_warmer import PrefixWarmer
from processors.speculation.speculation_stats import DraftOutcome, SpeculationStats

LLM_KEYS = ("requests", "prompt_tokens", "prompt_tokens_computed", "cached", "completion_tokens",
            "cancelled", "warmups")
# llama-server's counters: prompt tokens evaluated (cache misses), read from its cache, generated.
COMPUTED, CACHED, PREDICTED = ("llamacpp:prompt_tokens_total", "llamacpp:prompt_tokens_cached_total",
                               "llamacpp:tokens_predicted_total")
METRICS_TIMEOUT_S = 2.0


def process_cpu_s(pid: int | None) -> float | None:
    """User + system CPU seconds of process ``pid`` so far; None without one (or once it is gone)."""
    if not pid:
        return None
    try:
        times = psutil.Process(pid).cpu_times()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    return times.user + times.system


class LLMUsageObserver(BaseObserver):
    """One call's LLM requests and the usage the server reported for them.

    ``requests`` counts the contexts the LLM service took (one completion each, speculative
    drafts included); ``reports`` the completions whose usage came back. Metrics frames are
    system frames, which the service's speculation gate lets through, so a discarded draft that
    ran to its end is in the sums as well.
    """

    def __init__(self):
        super().__init__()
        self.requests = 0
        self.reports = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cached: int | None = 0  # None once a report left the cache count out

    async def on_process_frame(self, data: FrameProcessed):
        if (
            isinstance(data.frame, LLMContextFrame)
            and data.direction is FrameDirection.DOWNSTREAM
            and isinstance(data.processor, LLMService)
        ):
            self.requests += 1

    async def on_push_frame(self, data: FramePushed):
        if not (isinstance(data.frame, MetricsFrame) and isinstance(data.source, LLMService)):
            return
        for item in data.frame.data:
            if isinstance(item, LLMUsageMetricsData):
                usage = item.value
                self.reports += 1
                self.prompt_tokens += usage.prompt_tokens
                self.completion_tokens += usage.completion_tokens
                if self.cached is not None:
                    hit = usage.cache_read_input_tokens
                    self.cached = None if hit is None else self.cached + hit


def parse_server_counters(text: str) -> dict[str, float]:
    """The unlabelled samples of a Prometheus text exposition, by sample name."""
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.labels
    }


def server_token_delta(before: dict[str, float] | None, after: dict[str, float] | None) -> dict | None:
    """Prompt (computed, cached) and generated tokens between two reads of llama-server's
    counters; None unless both reads have its counters."""
    if not before or not after or any(k not in before or k not in after for k in (COMPUTED, PREDICTED)):
        return None
    computed = round(after[COMPUTED] - before[COMPUTED])
    cached = round(after[CACHED] - before[CACHED]) if CACHED in before and CACHED in after else None
    return {
        "prompt_tokens": None if cached is None else computed + cached,
        "prompt_tokens_computed": computed,
        "cached": cached,
        "completion_tokens": round(after[PREDICTED] - before[PREDICTED]),
    }


def unreported_draft_tokens(speculation: SpeculationStats | None) -> tuple[int, int]:
    """(prompt, completion) tokens of the call's discarded drafts whose usage never came back."""
    cut = [
        d for d in (speculation.drafts if speculation is not None else ())
        if d.outcome in (DraftOutcome.CANCELLED, DraftOutcome.SUPERSEDED)
        and d.request_at is not None and not d.usage_reported
    ]
    return sum(d.prompt_tokens for d in cut), sum(d.completion_tokens for d in cut)


def prefix_warmups(call) -> int:
    """Out-of-band warm-up completions the call's prefix warmer sent (brisk; stock has none)."""
    return sum(p.warmups for p in (call.processors if call else ()) if isinstance(p, PrefixWarmer))


def whisper_ms(engine, samples: np.ndarray, repeats: int = 3) -> float:
    """The median ms one transcription of ``samples`` (16 kHz int16) takes on this machine, nothing
    else running: how fast the machine is, so runs on different machines can be told apart."""
    audio = samples.astype(np.float32) / 32768
    took = []
    for _ in range(repeats):
        started = time.perf_counter()
        engine.transcribe(audio)
        took.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(took), 1)


def facts_prefill(call) -> dict | None:
    """What the call's facts prefill read into the LLM's cache during speech (brisk), or None."""
    prefill = next((p for p in (call.processors if call else ()) if isinstance(p, FactsPrefill)), None)
    return prefill.as_dict() if prefill is not None else None


class LLMMeter:
    """A run's LLM accounting, one call at a time.

    Per call: a fresh ``LLMUsageObserver`` on the call's worker, ``await mark()`` just before
    the call, ``await measure(...)`` once it has ended. Whether the server reports usage is
    settled by the run's first completion (the warm-up calls come first): from then on a call
    whose completions were all cut has 0 reported tokens, not unknown ones.
    """

    def __init__(self, metrics_url: str | None = None):
        self.metrics_url = metrics_url
        self.usage_seen = False
        self.source: str | None = None  # of the last call measured: "usage", "server_metrics" or None

    async def read_server(self) -> dict[str, float] | None:
        """The LLM server's ``/metrics`` counters now; None when it has no such endpoint."""
        if not self.metrics_url:
            return None
        try:
            async with httpx.AsyncClient(timeout=METRICS_TIMEOUT_S) as client:
                response = await client.get(self.metrics_url)
            response.raise_for_status()
            return parse_server_counters(response.text)
        except (httpx.HTTPError, ValueError):
            return None

    async def mark(self) -> dict[str, float] | None:
        """The server's counters before a call; not read once usage reports are known to come."""
        return None if self.usage_seen else await self.read_server()

    async def measure(self, usage: LLMUsageObserver, mark: dict[str, float] | None, *,
                      speculation: SpeculationStats | None = None, warmups: int = 0) -> dict:
        """The ``llm`` object of one turn (every key of ``LLM_KEYS``, None where unknown)."""
        self.usage_seen = self.usage_seen or usage.reports > 0
        result = dict.fromkeys(LLM_KEYS)
        result.update(requests=usage.requests, warmups=warmups)
        if self.usage_seen:
            self.source = "usage"
            prompt, completion = unreported_draft_tokens(speculation)
            prompt += usage.prompt_tokens
            result.update(
                prompt_tokens=prompt,
                # Cut drafts' prompts count as computed: the server did prefill them.
                prompt_tokens_computed=None if usage.cached is None else prompt - usage.cached,
                cached=usage.cached,
                completion_tokens=usage.completion_tokens + completion,
                # Every completion that ends reports its usage: the others were cut mid-stream
                # (a withdrawn draft, an interruption) or failed.
                cancelled=usage.requests - usage.reports,
            )
            return result
        delta = server_token_delta(mark, await self.read_server())
        self.source = "server_metrics" if delta else None
        result.update(delta or {})
        return result
