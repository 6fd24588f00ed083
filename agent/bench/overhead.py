"""Per-processor overhead: frames/s and µs per frame through each processor of Brisk, alone.

    python -m agent bench --suite overhead [--frames N] [--repeats R] [--json PATH]

The processors are those of Brisk's default pipeline, built by ``agent.call.pipeline.build_call``
(so a processor wired in later is measured without touching this file), in pipeline order,
between the transports; models are shared, the STT engine answers at once and the LLM is never
called, so what is timed is each processor's own handling of frames, not model time (that is
what ``agent bench`` measures).

Each case runs one processor in a pipeline of its own (``[processor, counting sink]`` on a
``PipelineWorker``), queues N frames as fast as the pipeline takes them, and times the first
frame in to the last one counted at the sink; the best of R repeats is kept (timeit's rule:
slower runs measure the machine, not the code). pipecat's ``IdentityFilter`` run the same way
is the baseline, pipecat's own cost of one processor hop, which ``net_us`` subtracts.

Traffic: in a call 50 input audio frames a second (20 ms each) pass through every processor, so
every processor is measured on that; an STT service also on audio inside an utterance
(buffering and partial jobs on), and a text processor between LLM and TTS also on an LLM answer
streamed word by word (µs per token). The latency observer is measured twice: its callbacks
alone (µs per frame event), and the identity pipeline with and without it (what one frame costs
once pipecat has queued its events to the observer's task).
"""

from __future__ import annotations

import asyncio
import functools
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import numpy as np
from pipecat.frames.frames import (
    EndFrame,
    Frame,
    InputAudioRawFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    OutputAudioRawFrame,
    VADUserStartedSpeakingFrame,
)
from pipecat.observers.base_observer import FrameProcessed, FramePushed
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_text_processor import LLMTextProcessor
from pipecat.processors.filters.identity_filter import IdentityFilter
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.stt_service import STTService
from pipecat.workers.runner import WorkerRunner

from processors.observers.latency import LatencyObserver
from processors.stt.whisper_engine import SAMPLE_RATE, WhisperResult

T = TypeVar("T")
FRAME_MS = 20
DEFAULT_FRAMES = 2000
DEFAULT_REPEATS = 3
SINK_TIMEOUT_S = 60.0


class _CountingSink(FrameProcessor):
    """Counts frames of one type arriving downstream; notes when the n-th arrives."""

    def __init__(self, frame_type: type, expected: int):
        super().__init__()
        self._type = frame_type
        self._expected = expected
        self.count = 0
        self.done_at: float | None = None
        self.done = asyncio.Event()

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if direction is FrameDirection.DOWNSTREAM and isinstance(frame, self._type):
            self.count += 1
            if self.count == self._expected:
                self.done_at = time.perf_counter()
                self.done.set()
        await self.push_frame(frame, direction)


class InstantWhisperEngine:
    """Duck-types ``WhisperEngine``: answers at once, so only the service's own work is timed."""

    name = "instant"
    language = "en"

    async def transcribe_async(self, audio: np.ndarray, should_stop=None) -> WhisperResult:
        return WhisperResult(text="hello", no_speech_prob=0.0, avg_logprob=-0.1, window_frames=1000)


def _audio_frames(n: int) -> list[Frame]:
    chunk = (np.sin(np.arange(SAMPLE_RATE * FRAME_MS // 1000) / 8) * 3000).astype(np.int16).tobytes()
    return [InputAudioRawFrame(audio=chunk, sample_rate=SAMPLE_RATE, num_channels=1) for _ in range(n)]


async def feed_pipeline(processors: list[FrameProcessor], feed: Callable[[PipelineWorker], Awaitable[T]],
                        *, sample_rate: int = SAMPLE_RATE, observers: list | None = None) -> T:
    """Run ``processors`` as a pipeline of their own (no transport) while ``feed(worker)`` queues
    frames into it once it has started; returns what ``feed`` returns, after the pipeline ended.
    ``feed`` must end the pipeline (queue an ``EndFrame``); if it fails the pipeline is cancelled."""
    worker = PipelineWorker(
        Pipeline(processors),
        params=PipelineParams(audio_in_sample_rate=sample_rate),
        observers=observers or [],
        cancel_on_idle_timeout=False,
        idle_timeout_secs=None,
    )
    started = asyncio.Event()

    @worker.event_handler("on_pipeline_started")
    async def _on_started(_worker, _frame):
        started.set()

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    running = asyncio.create_task(runner.run())
    try:
        await asyncio.wait_for(started.wait(), timeout=30)
        return await feed(worker)
    except BaseException:
        await worker.cancel()
        raise
    finally:
        await running


async def time_through(processor: FrameProcessor, frames: list[Frame], count_type: type,
                       *, lead: list[Frame] = (), observers: list | None = None) -> float:
    """Seconds from queueing the first of ``frames`` to the last one reaching the sink."""
    expected = sum(isinstance(f, count_type) for f in frames)
    sink = _CountingSink(count_type, expected)

    async def feed(worker: PipelineWorker) -> float:
        for frame in lead:
            await worker.queue_frame(frame)
        t0 = time.perf_counter()
        for frame in frames:
            await worker.queue_frame(frame)
        try:
            await asyncio.wait_for(sink.done.wait(), timeout=SINK_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise TimeoutError(
                f"{processor}: {sink.count} of {expected} {count_type.__name__}s came through "
                f"in {SINK_TIMEOUT_S} s; a processor that drops frames has no per-frame time"
            ) from None
        await worker.queue_frame(EndFrame())
        return sink.done_at - t0

    return await feed_pipeline([processor, sink], feed, observers=observers)


class _BareTransport:
    """pipecat's own base input/output transports: all ``build_call`` needs, no network."""

    def __init__(self):
        from pipecat.transports.base_input import BaseInputTransport
        from pipecat.transports.base_output import BaseOutputTransport
        from pipecat.transports.base_transport import TransportParams

        params = TransportParams(audio_in_enabled=True, audio_out_enabled=True)
        self._input, self._output = BaseInputTransport(params), BaseOutputTransport(params)

    def input(self):
        return self._input

    def output(self):
        return self._output


def _leaves(processor: FrameProcessor):
    from pipecat.pipeline.base_pipeline import BasePipeline

    if isinstance(processor, BasePipeline):
        for child in processor.processors:
            yield from _leaves(child)
    else:
        yield processor


def brisk_pipeline_factory() -> Callable[[], list[FrameProcessor]]:
    """Builds Brisk's default pipeline (``agent.call.pipeline.build_call``) afresh on each call and
    returns its processors between the transports, in order; models are shared, the STT engine
    answers at once and the LLM is never called."""
    from pipecat.pipeline.pipeline import PipelineSink, PipelineSource
    from pipecat.processors.frameworks.rtvi import RTVIProcessor
    from pipecat.transports.base_input import BaseInputTransport
    from pipecat.transports.base_output import BaseOutputTransport

    from agent.config import load_config
    from agent.call.pipeline import build_call
    from agent.call.resources import Resources
    from processors.tts.hibari_tts import load_voice
    from processors.llm.openai_llm import make_openai_client

    config = load_config(llm_base_url="http://127.0.0.1:9/v1", llm_model="unused", tts="hibari")
    resources = Resources(
        config=config,
        whisper_model_path=Path("unused"),
        whisper_engine=InstantWhisperEngine(),
        hibari_voice=load_voice(),
        llm_client=make_openai_client(base_url=config.llm_base_url, api_key=None, connect_timeout=1,
                                      total_timeout=1),
        llm_model="unused",
    )
    skip = (PipelineSource, PipelineSink, RTVIProcessor, BaseInputTransport, BaseOutputTransport)

    def build() -> list[FrameProcessor]:
        call = build_call(resources, _BareTransport())
        return [p for p in _leaves(call.worker.pipeline) if not isinstance(p, skip)]

    return build


def _token_frames(answers: int) -> list[Frame]:
    """LLM answers streamed a word at a time, the way the LLM service pushes them."""
    words = re.findall(r"\s*\S+", "Sure. We are open from ten in the morning to four in the afternoon on "
                                  "Saturday, and the repair desk closes an hour earlier.")
    frames: list[Frame] = []
    for _ in range(answers):
        frames += [LLMFullResponseStartFrame(), *(LLMTextFrame(w) for w in words), LLMFullResponseEndFrame()]
    return frames


async def _best(repeats: int, make: Callable[[], FrameProcessor], frames: Callable[[], list[Frame]],
                count_type: type, lead: Callable[[], list[Frame]] = list,
                observers: Callable[[], list] = list) -> float:
    best = float("inf")
    for _ in range(repeats):
        best = min(best, await time_through(make(), frames(), count_type, lead=lead(), observers=observers()))
    return best


async def observer_callback_us(events: int) -> float:
    """µs per observer callback over call-like traffic: audio through 8 processors, some payload."""
    observer = LatencyObserver()
    hops = [FrameProcessor(name=f"p{i}") for i in range(9)]
    audio = _audio_frames(1)[0]
    out = OutputAudioRawFrame(audio=audio.audio, sample_rate=24000, num_channels=1)
    down = FrameDirection.DOWNSTREAM
    per_frame = 2 * (len(hops) - 1)  # one enter and one push per hop
    rounds = max(1, events // per_frame)
    ts = 1
    t0 = time.perf_counter()
    for r in range(rounds):
        frame = out if r % 10 == 0 else audio  # ~1 in 10 frames is bot audio (payload)
        for src, dst in zip(hops, hops[1:]):
            ts += 1000
            await observer.on_push_frame(FramePushed(src, dst, frame, down, ts))
            await observer.on_process_frame(FrameProcessed(dst, frame, down, ts))
    return (time.perf_counter() - t0) / (rounds * per_frame) * 1e6


async def measure(frames: int = DEFAULT_FRAMES, repeats: int = DEFAULT_REPEATS) -> dict:
    """{"frames", "repeats", "processors": [{name, module, traffic, frames_per_s, us_per_frame, net_us}],
    "observer": {...}}: every processor of Brisk's default pipeline, in pipeline order."""
    build = brisk_pipeline_factory()

    def audio() -> list[Frame]:
        return _audio_frames(frames)

    def nth(i: int) -> FrameProcessor:
        return build()[i]

    async def row(name, module, traffic, make, frame_list, count_type, per, lead=list):
        seconds = await _best(repeats, make, frame_list, count_type, lead=lead)
        return {"name": name, "module": module, "traffic": traffic,
                "frames_per_s": round(per / seconds), "us_per_frame": round(seconds / per * 1e6, 1)}

    rows = [await row("IdentityFilter (baseline)", "pipecat", "input audio pass-through",
                      IdentityFilter, audio, InputAudioRawFrame, frames)]
    for i, processor in enumerate(build()):
        cls = type(processor)
        make = functools.partial(nth, i)
        rows.append(await row(cls.__name__, cls.__module__, "input audio pass-through",
                              make, audio, InputAudioRawFrame, frames))
        if isinstance(processor, STTService):
            rows.append(await row(cls.__name__, cls.__module__, "input audio inside an utterance, partials on",
                                  make, audio, InputAudioRawFrame, frames,
                                  lead=lambda: [VADUserStartedSpeakingFrame(start_secs=0.2, timestamp=0.0)]))
        if isinstance(processor, LLMTextProcessor):
            answers = max(1, frames // 25)
            tokens = sum(isinstance(f, LLMTextFrame) for f in _token_frames(answers))
            rows.append(await row(cls.__name__, cls.__module__, "LLM tokens (per token)",
                                  make, functools.partial(_token_frames, answers), LLMFullResponseEndFrame, tokens))
    baseline = rows[0]["us_per_frame"]
    for r in rows:
        r["net_us"] = round(r["us_per_frame"] - baseline, 1) if r["traffic"] == rows[0]["traffic"] else None

    without = await _best(repeats, IdentityFilter, audio, InputAudioRawFrame)
    with_observer = await _best(repeats, IdentityFilter, audio, InputAudioRawFrame,
                                observers=lambda: [LatencyObserver()])
    return {
        "frames": frames,
        "repeats": repeats,
        "processors": rows,
        "observer": {
            "name": "LatencyObserver",
            "callback_us_per_event": round(await observer_callback_us(frames * 4), 2),
            "pipeline_us_per_frame_without": round(without / frames * 1e6, 1),
            "pipeline_us_per_frame_with": round(with_observer / frames * 1e6, 1),
            "frames_per_s_with": round(frames / with_observer),
        },
    }


def format_overhead(result: dict) -> str:
    lines = [
        f"Per-processor overhead, Brisk's default pipeline in order ({result['frames']} frames of 20 ms "
        f"audio, best of {result['repeats']}; net = minus the IdentityFilter hop)",
        f"{'processor':<40}{'frames/s':>10}{'µs/frame':>10}{'net µs':>8}  traffic",
    ]
    for row in result["processors"]:
        net = "" if row["net_us"] is None else f"{row['net_us']:.1f}"
        lines.append(f"{row['name']:<40}{row['frames_per_s']:>10}{row['us_per_frame']:>10.1f}"
                     f"{net:>8}  {row['traffic']}")
    obs = result["observer"]
    lines.append(
        f"{'LatencyObserver':<40}{obs['frames_per_s_with']:>10}{obs['pipeline_us_per_frame_with']:>10.1f}"
        f"{obs['pipeline_us_per_frame_with'] - obs['pipeline_us_per_frame_without']:>8.1f}"
        f"  one-hop pipeline with vs without it; callbacks alone {obs['callback_us_per_event']} µs/event"
    )
    return "\n".join(lines)
