"""``agent bench``'s LLM meters: the usage each completion reports, llama-server's counters, CPU time.

What the A/B's per-turn LLM columns are made of (agent/bench/meters.py), checked on pipecat's own
OpenAI service against the scripted LLM server and on frames fed to the observer.
"""

import os
import subprocess
import sys
from pathlib import Path

from pipecat.frames.frames import LLMContextFrame, LLMTextFrame, MetricsFrame
from pipecat.metrics.metrics import LLMTokenUsage, LLMUsageMetricsData, TTFBMetricsData
from pipecat.observers.base_observer import FrameProcessed, FramePushed
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import LLMService

from agent.bench.meters import (
    LLM_KEYS,
    LLMMeter,
    LLMUsageObserver,
    parse_server_counters,
    process_cpu_s,
    server_token_delta,
)
from processors.speculation.speculation_stats import DraftOutcome, SpeculationStats

REPO = Path(__file__).resolve().parent.parent


def _usage_frame(prompt, completion, cached=None):
    usage = LLMTokenUsage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion,
                          cache_read_input_tokens=cached)
    return MetricsFrame(data=[LLMUsageMetricsData(processor="llm", value=usage),
                              TTFBMetricsData(processor="llm", value=0.2)])


async def _feed_call(observer, llm, usages, contexts):
    """What an observer of a call sees: ``contexts`` requests reaching ``llm``, then its usage."""
    down = FrameDirection.DOWNSTREAM
    other = FrameProcessor()
    for _ in range(contexts):
        await observer.on_process_frame(FrameProcessed(llm, LLMContextFrame(LLMContext()), down, 1))
    await observer.on_process_frame(FrameProcessed(other, LLMContextFrame(LLMContext()), down, 1))
    for frame in usages:
        await observer.on_push_frame(FramePushed(llm, other, frame, down, 2))
        # The same frame passed on downstream is not another report.
        await observer.on_push_frame(FramePushed(other, FrameProcessor(), frame, down, 3))
    await observer.on_push_frame(FramePushed(llm, other, LLMTextFrame("hi"), down, 4))


async def test_the_usage_each_completion_reports_is_summed_per_call_with_cut_drafts_counted_apart():
    llm = LLMService()
    observer = LLMUsageObserver()
    # Three completions: two reported usage, one (a draft cut mid-stream) never did.
    await _feed_call(observer, llm, [_usage_frame(300, 20, cached=290), _usage_frame(310, 12, cached=300)], 3)
    stats = SpeculationStats()
    cut = stats.start("what time", "stable")
    stats.take_request()
    cut.prompt_tokens, cut.completion_tokens = 305, 4  # the service's estimate and streamed chunks
    stats.resolve(cut, DraftOutcome.CANCELLED)
    ran_out = stats.start("what time do", "stable")
    stats.take_request()
    ran_out.prompt_tokens, ran_out.completion_tokens, ran_out.usage_reported = 310, 12, True
    stats.resolve(ran_out, DraftOutcome.SUPERSEDED)  # its usage is already one of the two reports

    meter = LLMMeter()
    llm_result = await meter.measure(observer, await meter.mark(), speculation=stats, warmups=1)

    assert set(llm_result) == set(LLM_KEYS)
    assert llm_result == {
        "requests": 3, "warmups": 1, "cancelled": 1,
        "prompt_tokens": 300 + 310 + 305, "cached": 590, "prompt_tokens_computed": 300 + 310 + 305 - 590,
        "completion_tokens": 20 + 12 + 4,
    }
    assert meter.source == "usage"
    # From now on the server is known to report usage: a call without a report cost 0, not unknown.
    quiet = LLMUsageObserver()
    await _feed_call(quiet, llm, [], 1)
    again = await meter.measure(quiet, await meter.mark())
    assert (again["requests"], again["cancelled"], again["completion_tokens"]) == (1, 1, 0)


async def test_a_report_without_the_cache_count_leaves_cached_unknown():
    observer = LLMUsageObserver()
    await _feed_call(observer, LLMService(), [_usage_frame(300, 20, cached=290), _usage_frame(40, 5)], 2)
    result = await LLMMeter().measure(observer, None)
    assert (result["prompt_tokens"], result["completion_tokens"]) == (340, 25)
    assert result["cached"] is None and result["prompt_tokens_computed"] is None


LLAMA_SERVER_METRICS = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total {computed}
# HELP llamacpp:prompt_tokens_cached_total Number of prompt tokens read from the cache.
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_cached_total {cached}
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total {predicted}
# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 0
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="0"}} 47
"""


def test_llama_server_metrics_give_the_tokens_between_two_reads():
    before = parse_server_counters(LLAMA_SERVER_METRICS.format(computed=9467, cached=1200, predicted=167))
    after = parse_server_counters(LLAMA_SERVER_METRICS.format(computed=9490, cached=1500, predicted=210))
    assert before["llamacpp:tokens_predicted_total"] == 167
    assert server_token_delta(before, after) == {
        "prompt_tokens": 23 + 300, "prompt_tokens_computed": 23, "cached": 300, "completion_tokens": 43,
    }
    # An older llama-server without the cache counter: computed and generated only.
    no_cache = {k: v for k, v in after.items() if k != "llamacpp:prompt_tokens_cached_total"}
    assert server_token_delta(before, no_cache)["prompt_tokens"] is None
    assert server_token_delta(None, after) is None
    assert server_token_delta(before, {"up": 1.0}) is None


async def test_without_usage_reports_the_meter_reads_the_server_counters_else_reports_unknown(monkeypatch):
    reads = iter([
        parse_server_counters(LLAMA_SERVER_METRICS.format(computed=100, cached=0, predicted=10)),
        parse_server_counters(LLAMA_SERVER_METRICS.format(computed=130, cached=300, predicted=52)),
    ])
    meter = LLMMeter(metrics_url="http://127.0.0.1:9/metrics")

    async def read_server():
        return next(reads)

    monkeypatch.setattr(meter, "read_server", read_server)
    observer = LLMUsageObserver()
    await _feed_call(observer, LLMService(), [], 2)
    result = await meter.measure(observer, await meter.mark())
    assert (result["requests"], result["prompt_tokens_computed"], result["cached"], result["completion_tokens"]) \
        == (2, 30, 300, 42)
    assert result["cancelled"] is None and meter.source == "server_metrics"

    # llama-cpp-python's server: no usage, no /metrics (nothing listens on port 9 here).
    unknown = LLMMeter(metrics_url="http://127.0.0.1:9/metrics")
    result = await unknown.measure(observer, await unknown.mark())
    assert result["requests"] == 2 and unknown.source is None
    assert all(result[k] is None for k in ("prompt_tokens", "completion_tokens", "cancelled", "cached"))


async def test_the_scripted_llm_reports_usage_like_openai_when_asked():
    from openai import AsyncOpenAI

    from agent.bench.scripted_llm import ScriptedLLM
    from agent.caller.loopback import serve_app

    llm = ScriptedLLM(ttft_s=0, tokens_per_s=1000, answer_for=lambda _messages: "Open until six today.")
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "When do you close?"}]
    async with serve_app(llm.app()) as url:
        client = AsyncOpenAI(base_url=f"{url}/v1", api_key="unused")
        try:
            asked = [c async for c in await client.chat.completions.create(
                model="scripted", messages=messages, stream=True, stream_options={"include_usage": True})]
            plain = [c async for c in await client.chat.completions.create(
                model="scripted", messages=messages, stream=True)]
            whole = await client.chat.completions.create(model="scripted", messages=messages)
        finally:
            await client.close()

    # The usage comes alone, after the finish, as OpenAI sends it; only when asked for.
    assert asked[-1].choices == [] and asked[-2].choices[0].finish_reason == "stop"
    assert (asked[-1].usage.prompt_tokens, asked[-1].usage.completion_tokens) == (2 + 4, 4)
    assert asked[-1].usage.prompt_tokens_details.cached_tokens == 0
    assert all(c.usage is None for c in plain)
    assert whole.usage.completion_tokens == 4
    assert not llm.busy()


async def test_pipecats_openai_service_hands_the_scripted_llms_usage_to_the_meter():
    """The whole path of ``usage``: include_usage asked, the usage chunk, pipecat's usage metrics,
    the observer. pipecat pushes those metrics only with ``enable_usage_metrics``."""
    import asyncio

    from pipecat.frames.frames import EndFrame, LLMFullResponseEndFrame
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.worker import PipelineParams, PipelineWorker
    from pipecat.services.openai.llm import OpenAILLMService
    from pipecat.workers.runner import WorkerRunner

    from agent.bench.scripted_llm import ScriptedLLM
    from agent.caller.loopback import serve_app

    class AnswerEnd(FrameProcessor):
        def __init__(self):
            super().__init__()
            self.seen = asyncio.Event()

        async def process_frame(self, frame, direction):
            await super().process_frame(frame, direction)
            if isinstance(frame, LLMFullResponseEndFrame):
                self.seen.set()
            await self.push_frame(frame, direction)

    scripted = ScriptedLLM(ttft_s=0, tokens_per_s=1000)
    observer, end = LLMUsageObserver(), AnswerEnd()
    async with serve_app(scripted.app()) as url:
        llm = OpenAILLMService(api_key="unused", base_url=f"{url}/v1",
                               settings=OpenAILLMService.Settings(model="scripted"))
        worker = PipelineWorker(Pipeline([llm, end]), observers=[observer], idle_timeout_secs=None,
                                params=PipelineParams(enable_metrics=True, enable_usage_metrics=True))
        started = asyncio.Event()

        @worker.event_handler("on_pipeline_started")
        async def _started(_worker, _frame):
            started.set()

        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(worker)
        running = asyncio.create_task(runner.run())
        try:
            await asyncio.wait_for(started.wait(), 30)
            context = LLMContext(messages=[{"role": "user", "content": "When do you open?"}])
            await worker.queue_frame(LLMContextFrame(context))
            await asyncio.wait_for(end.seen.wait(), 30)
            await worker.queue_frame(EndFrame())
        finally:
            await asyncio.wait_for(running, 30)

    request = scripted.requests[0]
    assert request.include_usage
    result = await LLMMeter().measure(observer, None)
    assert (result["requests"], result["cancelled"]) == (1, 0)
    assert (result["prompt_tokens"], result["completion_tokens"]) == (request.prompt_tokens, request.tokens_sent)
    assert (result["cached"], result["prompt_tokens_computed"]) == (0, request.prompt_tokens)


def test_the_cpu_time_of_another_process_is_read_while_it_lives():
    assert process_cpu_s(os.getpid()) > 0
    assert process_cpu_s(None) is None
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert process_cpu_s(child.pid) is None
