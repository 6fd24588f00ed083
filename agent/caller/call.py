"""``agent call IN.wav``: one real call from a file, through the same server, transport and pipeline.

Starts the runtime and the HTTP server in-process on a free loopback port, dials it with the
aiortc caller (real WebRTC), plays the WAV in real time as the caller's microphone, records
the bot, and reports per-turn latency measured from the true end of speech in the WAV.
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from dataclasses import dataclass

import numpy as np

from agent.audio import read_wav, speech_segments, write_wav
from agent.config import BriskConfig
from agent.caller.loopback import serve_app
from agent.call.pipeline import INPUT_SAMPLE_RATE, BuildCall, build_call
from agent.runtime.runtime import Runtime
from agent.server import create_app
from agent.caller.aiortc_caller import WavMicrophone, WebRTCCaller

# Silence longer than this between speech separates two user turns in a WAV.
TURN_GAP_S = 1.5


@asynccontextmanager
async def running_server(config: BriskConfig, runtime: Runtime, build: BuildCall = build_call):
    """A Brisk server on a free loopback port inside this event loop; yields (base_url, app)."""
    app = create_app(config, runtime=runtime, build=build)
    async with serve_app(app) as base_url:
        yield base_url, app


@dataclass
class CallResult:
    caller: WebRTCCaller
    utterance_ends: list[float]  # monotonic times of each user turn's true speech end
    summary: dict  # the server-side latency observer's summary


def utterance_end_offsets(samples: np.ndarray, rate: int) -> list[float]:
    return [end for _, end in speech_segments(samples, rate, min_gap_s=TURN_GAP_S)]


async def place_call(
    base_url: str,
    app,
    samples: np.ndarray,
    rate: int,
    max_wait_s: float = 60.0,
    caller: WebRTCCaller | None = None,
) -> CallResult:
    """Dial ``base_url``, speak ``samples``, wait for the answer to the last turn to finish, hang up.

    Pass your own ``caller`` to watch the call while it happens (its messages and audio fill live).
    """
    caller = caller or WebRTCCaller(base_url)
    mic = WavMicrophone(samples, rate)
    offsets = utterance_end_offsets(samples, rate)
    await caller.connect(mic)
    try:
        await asyncio.wait_for(mic.finished.wait(), timeout=len(samples) / rate + 30)
        last_end = mic.time_of_sample(int(offsets[-1] * rate)) if offsets else mic.start_time
        deadline = asyncio.get_running_loop().time() + max_wait_s
        await caller.wait_until_quiet(after=last_end, quiet_secs=2.5, max_secs=max_wait_s)
        # Under load the LLM can decode slower than the bot speaks, and the answer falls silent
        # longer than that before it goes on: the call is over when the server's turn is.
        call = app.state.calls.calls.get(caller.pc_id)
        if call and call.latency.answering:
            while call.latency.answering and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.1)
            await caller.wait_until_quiet(after=last_end, quiet_secs=1.0, max_secs=10.0)
    finally:
        call = app.state.calls.calls.get(caller.pc_id)
        summary = call.latency.summary() if call else {"processors": {}, "turns": []}
        await caller.close()
    ends = [mic.time_of_sample(int(end * rate)) for end in offsets]
    return CallResult(caller=caller, utterance_ends=ends, summary=summary)


def report(result: CallResult) -> dict:
    """The ``agent call --json`` object: every turn the server saw, its text, flags and latency, and
    the per-processor stats.

    A turn is the server's (its latency observer's record), not a stretch of speech in the WAV: a
    pause that ended a turn early shows as a turn ``interrupted`` by the next, and that next one
    as ``merged`` when it was answered as one question with it (processors/turns/turn_continuation.py).
    Latencies are measured from the true end of speech in the WAV nearest the turn's own end of
    speech (within half a second), else from that estimate.
    """
    records = result.summary.get("turns") or result.caller.turn_records()
    ends = [_speech_end_of(record, result.utterance_ends) for record in records]
    turns = []
    for i, (record, end) in enumerate(zip(records, ends)):
        latency: dict = {"v2v": None}
        if end is not None:
            first_audio = result.caller.first_audible_after(end)
            next_end = next((e for e in ends[i + 1:] if e is not None), None)
            if first_audio is not None and (next_end is None or first_audio <= next_end):
                latency["v2v"] = round((first_audio - end) * 1000, 1)  # else that audio answered a later turn
        t0 = record.get("t0_monotonic")
        for stage, ms in (record.get("stages_ms") or {}).items():
            # Re-base every stage on the true end of speech in the WAV, not the VAD's estimate.
            latency[stage] = None if ms is None or t0 is None or end is None else round((t0 + ms / 1000 - end) * 1000, 1)
        stages = record.get("stages_ms") or {}
        if stages.get("llm_request") is not None and stages.get("llm_first_token") is not None:
            latency["llm_ttft"] = round(stages["llm_first_token"] - stages["llm_request"], 1)
        if stages.get("tts_first_text") is not None and stages.get("tts_first_audio") is not None:
            latency["tts_ttfb"] = round(stages["tts_first_audio"] - stages["tts_first_text"], 1)
        turns.append({"n": record.get("turn", i + 1), "user_text": record.get("user_text", ""),
                      "bot_text": record.get("bot_text", ""), "interrupted": bool(record.get("interrupted")),
                      "merged": bool(record.get("merged")), "latency_ms": latency})
    return {"turns": turns, "utterances": len(result.utterance_ends), "processors": result.summary.get("processors", {})}


def _speech_end_of(record: dict, utterance_ends: list[float]) -> float | None:
    t0 = record.get("t0_monotonic")
    if t0 is None:
        return None
    nearest = min(utterance_ends, key=lambda e: abs(e - t0), default=None)
    return nearest if nearest is not None and abs(nearest - t0) <= 0.5 else t0


async def run_call(config: BriskConfig, wav_path: str, out_path: str | None = None) -> dict:
    samples, rate = read_wav(wav_path, target_rate=INPUT_SAMPLE_RATE)
    if not utterance_end_offsets(samples, rate):
        raise ValueError(f"{wav_path}: no speech found in the file")
    runtime = Runtime(config)
    await runtime.start()
    try:
        async with running_server(config, runtime) as (base_url, app):
            result = await place_call(base_url, app, samples, rate)
    finally:
        await runtime.stop()
    if out_path:
        audio, out_rate = result.caller.recorded_audio()
        write_wav(out_path, audio, out_rate)
    return report(result)
