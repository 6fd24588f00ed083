"""``agent bench --concurrency 1,2,3,4``: how many callers one process serves at single-call speed.

Per level N, N real WebRTC calls start at the same moment against one Brisk server (the
default pipeline, ``BRISK_MAX_CALLS`` raised to N so none is refused), each asking
``QUESTIONS_PER_CALL`` questions from the corpus in turn, each voice and question different
from the other calls'. A question is asked only once the answer to the previous one is over
(the server closed its turn record: the bot stopped speaking), so no answer is interrupted by
its own caller.

Per level: calls, turns, answered (audible bot audio after the question), answers cut short
(the answer ends mid-sentence below the token cap, as a stream ended under it would, or the
pipeline closed the turn as interrupted), answers capped (they reached ``llm_max_tokens``:
mid-sentence by design), voice-to-voice P50/P95
(true end of speech in the WAV -> first audible bot audio at the caller), the agent process's
and the LLM server's CPU seconds per turn, and the ratio of each level's P95 to one call's.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager

from agent.bench.barge_in import InterjectingMicrophone
from agent.bench.corpus import CORPUS, render
from agent.bench.meters import process_cpu_s
from agent.bench.scripted_llm import ScriptedLLM
from agent.bench.stats import fmt, percentiles
from agent.caller.aiortc_caller import WebRTCCaller
from agent.caller.call import running_server
from agent.caller.loopback import serve_app
from agent.config import load_config
from agent.runtime.runtime import Runtime
from processors.speculation.speculation_stats import estimate_tokens

QUESTIONS_PER_CALL = 3
ANSWER_WAIT_S = 40.0  # no answer this long after a question: unanswered
# An answer whose (estimated) tokens reach this share of llm_max_tokens was capped by the limit.
CAPPED_TOKENS_SHARE = 0.85


def _questions(level: int, call: int) -> list:
    """Call ``call`` of ``level``'s questions: every call of a level asks different ones."""
    pool = [u for u in CORPUS if u.kind in ("short", "long")]
    start = (call * QUESTIONS_PER_CALL) % len(pool)
    return [pool[(start + i) % len(pool)] for i in range(QUESTIONS_PER_CALL)]


def _answer_record(records: list[dict], after: float, before: float) -> dict | None:
    """The server's turn record whose first audio went out between ``after`` and ``before``."""
    for record in records:
        t0, out = record.get("t0_monotonic"), (record.get("stages_ms") or {}).get("first_audio_out")
        if t0 is not None and out is not None and after < t0 + out / 1000 < before:
            return record
    return None


async def _one_call(base_url: str, app, utterances: list, max_tokens: int) -> list[dict]:
    """One call asking each utterance after the previous answer; a turn dict per question."""
    clips = [render(u) for u in utterances]
    caller = WebRTCCaller(base_url)
    mic = InterjectingMicrophone(clips[0].sample_rate)
    await caller.connect(mic)
    call = app.state.calls.calls.get(caller.pc_id)
    asked = []  # (true end of speech, when the next question may start)
    try:
        for clip in clips:
            closed_before = len(call.latency.turns) if call else 0
            at = mic.say(clip.samples)
            end_index = at + round(clip.speech_end_s * clip.sample_rate)
            await mic.played(at + len(clip.samples))
            end = mic.time_of_sample(end_index)
            # The answer is over when the server closes its turn record (the bot stopped
            # speaking): a gap between two sentences under load is not the end of it.
            deadline = time.monotonic() + ANSWER_WAIT_S
            while time.monotonic() < deadline and not any(
                (r.get("stages_ms") or {}).get("first_audio_out") is not None for r in call.latency.turns[closed_before:]
            ):
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.5)  # what the transport still had queued reaches the caller
            asked.append((clip.utterance.id, end, time.monotonic()))
    finally:
        records = call.latency.summary()["turns"] if call else []
        await caller.close()
        # Its line is free again only once the server has ended the call.
        deadline = time.monotonic() + 15
        while caller.pc_id in app.state.calls.calls and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    turns = []
    for utterance_id, end, next_start in asked:
        first = caller.first_audible_after(end)
        if first is not None and first > next_start:
            first = None
        record = _answer_record(records, end, next_start)
        text = ((record or {}).get("bot_text") or "").strip()
        # An answer that reached the token cap ends mid-sentence by design, not cut short.
        capped = estimate_tokens(text) >= CAPPED_TOKENS_SHARE * max_tokens
        turns.append({
            "utterance": utterance_id,
            "answered": first is not None,
            "v2v_ms": None if first is None else round((first - end) * 1000, 1),
            "bot_text": text,
            # A stream ended under it stops mid-sentence; the pipeline marks a turn it cut.
            "capped": capped,
            "cut_short": bool(record) and (bool(record.get("interrupted")) or (bool(text) and text[-1] not in ".!?"
                                                                               and not capped)),
        })
    return turns


async def measure_level(base_url: str, app, level: int, llm_pid: int | None) -> dict:
    cpu0, llm0, t0 = time.process_time(), process_cpu_s(llm_pid), time.monotonic()
    max_tokens = app.state.runtime.config.llm_max_tokens
    calls = await asyncio.gather(*(_one_call(base_url, app, _questions(level, i), max_tokens) for i in range(level)))
    cpu, llm1 = time.process_time() - cpu0, process_cpu_s(llm_pid)
    turns = [t for call in calls for t in call]
    answered = [t for t in turns if t["answered"]]
    return {
        "calls": level,
        "turns": len(turns),
        "answered": len(answered),
        "answers_cut_short": sum(t["cut_short"] for t in turns),
        "answers_capped": sum(t["capped"] for t in turns),
        "v2v_ms": percentiles([t["v2v_ms"] for t in answered]),
        "cpu_s_per_turn": {
            "agent": round(cpu / max(1, len(turns)), 3),
            "llm_server": None if llm0 is None or llm1 is None else round((llm1 - llm0) / max(1, len(turns)), 3),
        },
        "wall_s": round(time.monotonic() - t0, 1),
        "per_call": calls,
    }


async def run_capacity(levels: list[int], *, llm: str, log) -> dict:
    """Each level in turn on one runtime; ``{"<n>": {...}}`` plus the P95 ratios to one call."""
    results: dict[str, dict] = {}
    async with _config(llm, max(levels)) as config:
        runtime = Runtime(config)
        await runtime.start()
        try:
            llm_pid = runtime.llm_server.pid if runtime.llm_server else None
            async with running_server(config, runtime) as (base_url, app):
                await _one_call(base_url, app, _questions(0, 0)[:1], config.llm_max_tokens)  # warm-up
                for level in levels:
                    log(f"capacity: {level} call(s) at once ...")
                    results[str(level)] = await measure_level(base_url, app, level, llm_pid)
                    r = results[str(level)]
                    log(f"capacity: {level}: answered {r['answered']}/{r['turns']}, cut short "
                        f"{r['answers_cut_short']}, v2v P50 {fmt(r['v2v_ms']['p50'])} P95 {fmt(r['v2v_ms']['p95'])} ms")
        finally:
            await runtime.stop()
    lone = results.get("1", {}).get("v2v_ms", {}).get("p95")
    for r in results.values():
        p95 = r["v2v_ms"]["p95"]
        r["p95_vs_one_call"] = None if not lone or p95 is None else round(p95 / lone, 2)
    return results


@asynccontextmanager
async def _config(llm: str, max_calls: int):
    """The run's config: the embedded LLM, or the scripted one served on loopback meanwhile."""
    if llm != "scripted":
        yield load_config(max_calls=max_calls, llm_max_tokens=60)
        return
    async with serve_app(ScriptedLLM(ttft_s=0.3, tokens_per_s=30.0).app()) as url:
        yield load_config(llm_base_url=f"{url}/v1", llm_model="scripted", max_calls=max_calls)


def format_capacity(result: dict, llm: str) -> str:
    lines = [
        f"Capacity ({llm} LLM): N calls at once, {QUESTIONS_PER_CALL} questions each",
        f"{'calls':>6}{'turns':>7}{'answered':>10}{'cut short':>11}{'v2v P50':>9}{'P95':>7}"
        f"{'P95/1 call':>12}{'CPU s/turn':>12}{'+LLM':>7}",
    ]
    for n, r in result.items():
        ratio = r["p95_vs_one_call"]
        llm_cpu = r["cpu_s_per_turn"]["llm_server"]
        lines.append(
            f"{n:>6}{r['turns']:>7}{r['answered']:>10}{r['answers_cut_short']:>11}{fmt(r['v2v_ms']['p50']):>9}"
            f"{fmt(r['v2v_ms']['p95']):>7}{'-' if ratio is None else f'{ratio:.2f}x':>12}"
            f"{r['cpu_s_per_turn']['agent']:>12}{'-' if llm_cpu is None else llm_cpu:>7}"
        )
    return "\n".join(lines)
