"""One measured bench call: speak a clip into a new WebRTC call and record what came back.

Consumes a ``Side`` (a running Brisk or stock server), a rendered ``Clip`` and the LLM meters;
returns the turn's measurements as a dict: voice-to-voice latency (true end of speech to the
first audible bot audio at the caller), the server's waterfall re-based on that end of speech,
CPU seconds, LLM requests and tokens, what the pipeline heard and what the bot said. Used by
the A/B (``agent/bench/ab.py``) and the FAQ suite (``agent/bench/faq.py``).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from agent.bench.corpus import Clip
from agent.bench.listening import first_audible_after, first_audible_answer
from agent.bench.meters import LLMMeter, LLMUsageObserver, facts_prefill, prefix_warmups, process_cpu_s
from agent.bench.report import WAYPOINTS
from agent.bench.scripted_llm import ScriptedLLM
from agent.bench.stats import word_error_rate
from agent.bench.stock import call_builder, load_segmented_whisper
from agent.caller.aiortc_caller import WavMicrophone, WebRTCCaller

LISTEN_S = 0.3  # scripted: how much of the answer to hear before hanging up



@dataclass
class Side:
    flavor: str
    base_url: str
    app: object


def answering_record(records: list[dict], end: float) -> dict | None:
    """The server turn record whose first audio came after the end of speech, else the last one.

    A turn with pauses can be split by the pipeline into several records; a fragment answered
    before the user finished is not the answer to the turn.
    """
    for record in records:
        sent = answer_out(record)
        if sent is not None and sent > end:
            return record
    return records[-1] if records else None


def answers_into_a_pause(records: list[dict], end: float, since: float | None = None) -> int:
    """How many of a split turn's fragments had answer audio go out before the speech ended:
    the bot talking into the caller's pause, before turn continuation cut it and answered the whole.
    ``since``: where the measured turn began (a follow-up's second question); the answer to the
    question before it is that question's, not one into a pause."""
    return sum(sent is not None and sent <= end and (since is None or sent > since)
               for sent in map(answer_out, records))


def measured_turn_start_s(clip) -> float | None:
    """Where a follow-up's measured turn (its last question) begins in the clip, in seconds: after
    its longest silence, the turn boundary it was written with. None for any other utterance."""
    if clip.utterance.kind != "follow-up":
        return None
    voiced = np.flatnonzero(clip.samples)
    return float(voiced[int(np.argmax(np.diff(voiced))) + 1] / clip.sample_rate)


def answer_out(record: dict | None) -> float | None:
    """When the server sent the record's first answer audio (monotonic), or None."""
    t0, fao = (record or {}).get("t0_monotonic"), ((record or {}).get("stages_ms") or {}).get("first_audio_out")
    return None if t0 is None or fao is None else t0 + fao / 1000


def heard_answer(received: list, first: float | None, record: dict | None) -> float | None:
    """The arrival of the answer's first audible audio: ``first``, unless that came before the
    server sent the answer, when it was other audio still playing at the end of speech (the
    greeting, on a machine too slow for the caller's words to cut it) and the answer is the
    first audible chunk after the server sent it."""
    sent = answer_out(record)
    if first is None or sent is None or first >= sent:
        return first
    return first_audible_after(received, sent)


def answer_went_out(call, records_before: int) -> bool:
    """Whether a turn of ``call`` closed since its first ``records_before`` with answer audio sent."""
    closed = call.latency.turns[records_before:] if call else []
    return any((r.get("stages_ms") or {}).get("first_audio_out") is not None for r in closed)


def heard_text(records: list[dict], record: dict | None) -> str:
    """What the pipeline heard of the whole utterance up to its answering ``record``, even when it
    cut the utterance into several turns."""
    heard = records[: records.index(record) + 1] if record else []
    return " ".join(r["user_text"] for r in heard if r.get("user_text"))


def rebased_stages(record: dict | None, end: float) -> dict:
    """Waterfall in ms after the true end of speech (the server measured from the VAD's estimate)."""
    stages = {"speech_end": 0.0}
    raw = (record or {}).get("stages_ms") or {}
    t0 = (record or {}).get("t0_monotonic")
    for stage in WAYPOINTS:
        ms = raw.get(stage)
        stages[stage] = None if ms is None or t0 is None else round((t0 + ms / 1000 - end) * 1000, 1)
    return stages


async def bench_call(side: Side, clip: Clip, meter: LLMMeter, llm_pid: int | None,
                     scripted_llm: ScriptedLLM | None, before_call=None) -> dict:
    """Speak ``clip`` into one new call to ``side``; return the turn's measurements.

    ``before_call`` (a coroutine function) runs first, outside the measured window.
    """
    if before_call is not None:
        await before_call()
    caller = WebRTCCaller(side.base_url)
    mic = WavMicrophone(clip.samples, clip.sample_rate)
    calls = side.app.state.calls
    usage = LLMUsageObserver()

    def attach(_pc_id, new_call):
        new_call.worker.add_observer(usage)

    # Before the call starts, so what its prefix warmer sends at the start is the call's cost.
    server_mark = await meter.mark()
    calls.listeners.append(attach)
    try:
        await caller.connect(mic)
    finally:
        calls.listeners.remove(attach)
    pc_id = caller.pc_id
    call, task = calls.calls.get(pc_id), calls.tasks.get(pc_id)
    requests_before = len(scripted_llm.requests) if scripted_llm else 0
    cpu0, llm_cpu0 = time.process_time(), process_cpu_s(llm_pid)
    records_before = len(call.latency.turns) if call else 0

    def done(first: float, now: float) -> bool:
        if scripted_llm is not None:
            return now - first >= LISTEN_S and not scripted_llm.busy(requests_before)
        return answer_went_out(call, records_before)

    try:
        await asyncio.wait_for(mic.finished.wait(), timeout=clip.duration_s + 30)
        end = mic.time_of_sample(round(clip.speech_end_s * clip.sample_rate))
        turn_start_s = measured_turn_start_s(clip)
        since = None if turn_start_s is None else mic.time_of_sample(round(turn_start_s * clip.sample_rate))
        first, cut = await first_audible_answer(caller, end, done)
        cpu = time.process_time() - cpu0
        llm_cpu1 = process_cpu_s(llm_pid)
    finally:
        await caller.close()
        if task is not None:
            # The pipeline closes its last turn record as it ends; wait for it.
            await asyncio.wait([task], timeout=10)
    records = call.latency.summary()["turns"] if call else []
    record = answering_record(records, end)
    first = heard_answer(caller.received, first, record)
    utterance = clip.utterance
    user_text = heard_text(records, record)
    stats = getattr(call, "speculation", None)
    prefetch = getattr(call, "speculative_audio", None)
    llm = await meter.measure(usage, server_mark, speculation=stats, warmups=prefix_warmups(call))
    if first is None:
        outcome = "no_audio"
    elif any(r.get("bot_text") for r in records):
        outcome = "answered"
    else:
        outcome = "no_llm_answer"  # audio, but no LLM text: the spoken apology after an LLM error
    return {
        "utterance": utterance.id,
        "kind": utterance.kind,
        "voice": utterance.voice,
        "wpm": utterance.wpm,
        "text": utterance.text,
        "side": side.flavor,
        "speech_end_s": round(clip.speech_end_s, 3),
        "last_voiced_s": round(clip.last_voiced_s, 3),
        "answered": outcome == "answered",
        "outcome": outcome,
        "cut": cut,
        "v2v_ms": None if first is None else round((first - end) * 1000, 1),
        "stages_ms": rebased_stages(record, end),
        "user_text": user_text,
        "wer": round(word_error_rate(utterance.text, user_text), 3),
        "bot_text": (record or {}).get("bot_text", ""),
        "pipeline_turns": len(records),
        "answers_into_a_pause": answers_into_a_pause(records, end, since),
        "speculative": bool((record or {}).get("speculative")),
        "fast_path": (record or {}).get("fast_path"),  # the intent, when answered without the LLM
        "cpu_s": {
            "agent": round(cpu, 3),
            "llm_server": None if llm_cpu0 is None or llm_cpu1 is None else round(llm_cpu1 - llm_cpu0, 3),
        },
        "llm": llm,
        "speculation": stats.as_dict() if stats is not None else None,
        # What became of the held drafts' prefetched first chunks (processors/speculation/speculative_tts.py).
        "tts_prefetch": prefetch.stats.as_dict() if prefetch is not None else None,
        # Texts spoken from the audio of an earlier call's (processors/tts/phrase_cache.py).
        "tts_phrase_cache": call.phrases.as_dict() if call is not None and call.phrases is not None else None,
        # The facts read into the LLM's cache while the caller spoke (processors/llm/facts_prefill.py).
        "facts_prefill": facts_prefill(call),
    }




@dataclass
class Rig:
    """Both sides of a bench on one started runtime, and the meters a call needs."""

    sides: dict[str, Side]
    meter: LLMMeter
    llm_pid: int | None
    scripted_llm: ScriptedLLM | None
    reset_llm_cache: object  # coroutine function, run before every call
    # Threads numpy's BLAS may use during each flavor's calls: Brisk's BRISK_BLAS_THREADS, and
    # numpy's own count for stock pipecat, which sets none. The sides share one process and
    # take turns, so each call runs under its own side's setting.
    blas_threads: dict[str, int | None] = field(default_factory=dict)

    async def call(self, flavor: str, clip: Clip) -> dict:
        """One measured call of ``clip`` to ``flavor`` (see ``bench_call``)."""
        with threadpool_limits(limits=self.blas_threads.get(flavor), user_api="blas"):
            return await bench_call(self.sides[flavor], clip, self.meter, self.llm_pid, self.scripted_llm,
                                    self.reset_llm_cache)


async def start_rig(stack, config, runtime, scripted_llm: ScriptedLLM | None, flavors) -> Rig:
    """One HTTP server per flavor on ``runtime`` (closed with ``stack``), ready to be called."""
    from agent.caller.call import running_server

    llm_server = runtime.llm_server
    meter = LLMMeter(metrics_url=llm_server.metrics_url if llm_server else None)

    async def reset_llm_cache():
        # llama.cpp keeps the last prompt in its KV cache: without this, whichever side hears
        # an utterance second would find the other side's identical question already
        # prefilled. Every call starts where a fresh call does: the system prompt cached.
        if llm_server is not None:
            await llm_server.warm(config.system_prompt)

    sides = {}
    for flavor in flavors:
        if flavor != "brisk":
            await load_segmented_whisper(runtime.resources)
        base_url, app = await stack.enter_async_context(running_server(config, runtime, call_builder(flavor)))
        sides[flavor] = Side(flavor, base_url, app)
    blas = {flavor: config.blas_threads if flavor == "brisk" else runtime.blas_threads_at_start for flavor in flavors}
    return Rig(sides, meter, llm_server.pid if llm_server else None, scripted_llm, reset_llm_cache, blas)
