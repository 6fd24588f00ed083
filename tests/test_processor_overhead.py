"""The per-processor micro-benchmark (agent/bench/overhead.py) runs and accounts for every frame.

Speeds are printed by ``python -m agent bench --suite overhead``; here only that every case measured a
positive time with all frames through, never how fast.
"""

import pytest
from pipecat.frames.frames import InputAudioRawFrame, TextFrame
from pipecat.processors.filters.function_filter import FunctionFilter
from pipecat.processors.filters.identity_filter import IdentityFilter

from agent.bench.overhead import (
    _audio_frames,
    brisk_pipeline_factory,
    format_overhead,
    measure,
    observer_callback_us,
    time_through,
)


async def test_every_processor_of_the_brisk_pipeline_and_the_latency_observer_get_a_frame_rate():
    result = await measure(frames=100, repeats=1)

    rows = result["processors"]
    assert rows[0]["name"].startswith("IdentityFilter") and rows[0]["net_us"] == 0
    pipeline = [type(p).__name__ for p in brisk_pipeline_factory()()]
    assert "VADProcessor" in pipeline and "HibariTTSService" in pipeline
    # Each processor once on audio pass-through, in pipeline order.
    audio_rows = [row["name"] for row in rows[1:] if row["traffic"] == "input audio pass-through"]
    assert audio_rows == pipeline
    assert any(row["traffic"].startswith("input audio inside an utterance") for row in rows)
    for row in rows:
        assert row["frames_per_s"] > 0 and row["us_per_frame"] > 0
    observer = result["observer"]
    assert observer["callback_us_per_event"] > 0
    assert observer["pipeline_us_per_frame_with"] > 0
    assert "LatencyObserver" in format_overhead(result)


async def test_timing_waits_for_every_frame_of_the_counted_type_to_come_through():
    frames = _audio_frames(50) + [TextFrame(text="not counted")]
    elapsed = await time_through(IdentityFilter(), frames, InputAudioRawFrame)
    assert elapsed > 0


async def test_a_processor_that_drops_frames_gets_no_time(monkeypatch):
    import agent.bench.overhead as bench_overhead

    async def keep_no_audio(frame):
        return not isinstance(frame, InputAudioRawFrame)

    monkeypatch.setattr(bench_overhead, "SINK_TIMEOUT_S", 0.5)
    drops_audio = FunctionFilter(filter=keep_no_audio, filter_system_frames=True)
    with pytest.raises(TimeoutError, match="0 of 5 InputAudioRawFrames"):
        await time_through(drops_audio, _audio_frames(5), InputAudioRawFrame)


async def test_observer_callbacks_are_timed_per_event():
    assert await observer_callback_us(200) > 0
