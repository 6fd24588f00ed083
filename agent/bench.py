"""``agent bench``: Brisk against stock pipecat, side by side, on the same models and transport.

    python -m agent bench [--quick] [--llm embedded|scripted] [--turns N] [--json PATH] [--plot PATH]

One ``Runtime`` (one LLM server, one Whisper, one voice) serves two HTTP servers in this
process: stock pipecat as ``agent/pipeline.py`` builds it, and Brisk as configured by default.
Each spoken turn of the corpus (``agent/bench_corpus.py``) is one real WebRTC call placed with
the aiortc caller, first to one pipeline then to the other (which one goes first alternates),
after one warm-up call to each.

Per turn it records: voice-to-voice latency (true end of speech, found from the WAV's samples,
to the first audible bot audio arriving at the caller), the server's latency waterfall re-based
on that same end of speech, the CPU seconds this process (and the llama.cpp server, in embedded
mode) spent during the call, and the LLM requests and tokens the turn cost. With ``--llm
scripted`` the LLM is a real OpenAI-compatible HTTP+SSE server on loopback with a fixed answer,
TTFT and token rate (``agent/scripted_llm.py``), so pipeline overhead is measured apart from
model speed; it records every request, which is how tokens are counted. In embedded mode the
tokens are read from the llama.cpp server's own log (see ``LlamaLogMeter``).

A call ends (the caller hangs up) once the answer has been heard and the LLM is idle: with the
scripted LLM, 0.3 s after the first audible answer audio and once no request is in flight; with
the embedded LLM, when the server's turn record closes (the bot finished speaking). A turn is
unanswered when no audible bot audio comes within 20 s of the end of speech, or when what comes
is not an LLM answer (the apology spoken after an LLM error); unanswered turns are counted per
side and left out of the latency statistics.

After the A/B turns one more call goes to the Brisk server: the caller talks over the bot again
and again (``agent/bench_barge_in.py``), always with a scripted LLM whose answer is long; its
stop and decision times, stale frames and backchannel false interruptions go under
``brisk.barge_in`` in the JSON.

Then, without calls, two sections that measure pieces apart: per-processor overhead
(``agent/bench_overhead.py``, ``processor_overhead`` in the JSON) and the phone path's front end,
the same utterances through the VAD and streaming STT as 16 kHz PCM and as 8 kHz mu-law
(``agent/bench_phone.py``, ``phone`` in the JSON).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import sys
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import numpy as np

from pipecat.frames.frames import LLMTextFrame
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.llm_service import LLMService

from agent.bench_corpus import WARMUP, Clip, render, select
from agent.webrtc_client import AUDIBLE_RMS, WavMicrophone, WebRTCCaller
from processors.latency import STAGES

FLAVORS = ("stock", "brisk")
# The waterfall in pipeline order: the latency observer's stages after the reference (0 ms).
WAYPOINTS = tuple(stage for stage in STAGES if stage != "speech_end")
QUICK_TURNS = 8
SCRIPTED_TTFT_MS = 300
SCRIPTED_TOKENS_PER_S = 30.0
# Spoken answers are one or two sentences; the cap only bounds a rambling small model.
EMBEDDED_MAX_TOKENS = 60
NO_ANSWER_S = 20.0  # no audible answer this long after the end of speech: unanswered
LISTEN_S = 0.3  # scripted: how much of the answer to hear before hanging up
ANSWER_CAP_S = 30.0  # hang up this long after the first answer audio whatever happens
POLL_S = 0.05
BOOTSTRAP_RESAMPLES = 2000


# -- LLM accounting --------------------------------------------------------------------------


class ScriptedMeter:
    """Requests and tokens of one turn, from the scripted server's own request log."""

    def __init__(self, llm):
        self.llm = llm

    def mark(self) -> int:
        return len(self.llm.requests)

    def busy(self, mark: int) -> bool:
        return any(not (r.completed or r.disconnected) for r in self.llm.requests[mark:])

    def since(self, mark: int) -> dict:
        requests = self.llm.requests[mark:]
        return {
            "requests": len(requests),
            "prompt_tokens": sum(r.prompt_tokens for r in requests),
            "completion_tokens": sum(r.tokens_sent for r in requests),
            "cancelled": sum(1 for r in requests if r.disconnected),
        }


_GENERATE = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")
_FULLY_CACHED = re.compile(r"^Llama\.generate: full prompt already cached", re.M)


class LlamaLogMeter:
    """Requests and tokens of one turn, read from the llama.cpp server's log between two offsets.

    Every completion logs ``Llama.generate: H prefix-match hit, remaining R prompt tokens to
    eval`` when it starts (H + R = prompt tokens requested, R = tokens actually prefilled: the
    system prompt stays cached; a prompt cached whole logs ``full prompt already cached`` and
    counts as a request without tokens); a client that hangs up mid-stream logs
    ``disconnected``. Generated tokens are not taken from here: a completion whose client hung
    up logs no ``eval time`` line. A window that shrank (the file was rewritten) reads as
    unknown (None).
    """

    def __init__(self, log_path: Path):
        self.log_path = Path(log_path)

    def mark(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def busy(self, mark: int) -> bool:
        return False  # embedded calls end on the server's turn record instead

    def since(self, mark: int) -> dict:
        unknown = dict.fromkeys(("requests", "prompt_tokens", "prompt_tokens_computed", "cancelled"))
        try:
            with self.log_path.open("rb") as log:
                if log.seek(0, os.SEEK_END) < mark:
                    return unknown
                log.seek(mark)
                text = log.read().decode("utf-8", errors="replace")
        except OSError:
            return unknown
        starts = [(int(h), int(r)) for h, r in _GENERATE.findall(text)]
        return {
            "requests": len(starts) + len(_FULLY_CACHED.findall(text)),
            "prompt_tokens": sum(h + r for h, r in starts),
            "prompt_tokens_computed": sum(r for _, r in starts),
            "cancelled": len(re.findall(r"^disconnected$", text, re.M)),
        }


class LLMTextCounter(BaseObserver):
    """Counts the text chunks an LLM service pushes in one call (llama.cpp streams a token a chunk).

    A speculative draft that is thrown away never leaves the service's gate, so its tokens are
    not seen here; the call's ``SpeculationStats`` counts those.
    """

    def __init__(self):
        super().__init__()
        self.chunks = 0

    async def on_push_frame(self, data: FramePushed):
        if (
            isinstance(data.frame, LLMTextFrame)
            and data.direction is FrameDirection.DOWNSTREAM
            and isinstance(data.source, LLMService)
        ):
            self.chunks += 1


def _proc_cpu_s(pid: int | None) -> float | None:
    """User + system CPU seconds of another process, from /proc (no psutil)."""
    if not pid:
        return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- one call ----------------------------------------------------------------------------------


@dataclass
class Side:
    flavor: str
    base_url: str
    app: object


def word_error_rate(reference: str, heard: str) -> float:
    """Word-level edit distance over the reference length (case and punctuation ignored)."""
    ref, hyp = (re.sub(r"[^\w\s']", " ", (t or "").lower()).split() for t in (reference, heard))
    row = list(range(len(hyp) + 1))
    for i, word in enumerate(ref, 1):
        diag, row[0] = row[0], i
        for j, other in enumerate(hyp, 1):
            diag, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diag + (word != other))
    return row[-1] / max(1, len(ref))


def _answering_record(records: list[dict], end: float) -> dict | None:
    """The server turn record whose first audio came after the end of speech, else the last one.

    A turn with pauses can be split by the pipeline into several records; a fragment answered
    before the user finished is not the answer to the turn.
    """
    for record in records:
        t0, fao = record.get("t0_monotonic"), (record.get("stages_ms") or {}).get("first_audio_out")
        if t0 is not None and fao is not None and t0 + fao / 1000 > end:
            return record
    return records[-1] if records else None


def _rebased_stages(record: dict | None, end: float) -> dict:
    """Waterfall in ms after the true end of speech (the server measured from the VAD's estimate)."""
    stages = {"speech_end": 0.0}
    raw = (record or {}).get("stages_ms") or {}
    t0 = (record or {}).get("t0_monotonic")
    for stage in WAYPOINTS:
        ms = raw.get(stage)
        stages[stage] = None if ms is None or t0 is None else round((t0 + ms / 1000 - end) * 1000, 1)
    return stages


async def _listen(caller: WebRTCCaller, end: float, done) -> tuple[float | None, bool]:
    """Wait for the answer; returns (arrival of its first audible audio or None, cut short?).

    Scans only the audio that arrived since the last poll, so listening costs next to no CPU.
    """
    seen = 0
    first = None
    while True:
        await asyncio.sleep(POLL_S)
        received = caller.received
        while first is None and seen < len(received):
            chunk = received[seen]
            seen += 1
            if chunk.t > end and chunk.rms >= AUDIBLE_RMS:
                first = chunk.t
        now = time.monotonic()
        if first is None:
            if now - end > NO_ANSWER_S:
                return None, False
        elif done(first, now):
            return first, False
        elif now - first > ANSWER_CAP_S:
            return first, True


async def bench_call(side: Side, clip: Clip, meter, llm_pid: int | None, scripted: bool,
                     before_call=None) -> dict:
    """Speak ``clip`` into one new call to ``side``; return the turn's measurements.

    ``before_call`` (a coroutine function) runs first, outside the measured window.
    """
    if before_call is not None:
        await before_call()
    caller = WebRTCCaller(side.base_url)
    mic = WavMicrophone(clip.samples, clip.sample_rate)
    calls = side.app.state.calls
    counter = LLMTextCounter()

    def attach(_pc_id, new_call):
        new_call.worker.add_observer(counter)

    calls.listeners.append(attach)
    try:
        await caller.connect(mic)
    finally:
        calls.listeners.remove(attach)
    pc_id = caller.pc_id
    call, task = calls.calls.get(pc_id), calls.tasks.get(pc_id)
    llm_mark = meter.mark()
    cpu0, llm_cpu0 = time.process_time(), _proc_cpu_s(llm_pid)
    records_before = len(call.latency.turns) if call else 0

    def done(first: float, now: float) -> bool:
        if scripted:
            return now - first >= LISTEN_S and not meter.busy(llm_mark)
        closed = call.latency.turns[records_before:] if call else []
        return any((r.get("stages_ms") or {}).get("first_audio_out") is not None for r in closed)

    try:
        await asyncio.wait_for(mic.finished.wait(), timeout=clip.duration_s + 30)
        end = mic.time_of_sample(round(clip.speech_end_s * clip.sample_rate))
        first, cut = await _listen(caller, end, done)
        cpu = time.process_time() - cpu0
        llm_cpu1 = _proc_cpu_s(llm_pid)
    finally:
        await caller.close()
        if task is not None:
            # The pipeline closes its last turn record as it ends; wait for it.
            await asyncio.wait([task], timeout=10)
    records = call.latency.summary()["turns"] if call else []
    record = _answering_record(records, end)
    utterance = clip.utterance
    # What the pipeline heard of the whole utterance, even when it cut it into several turns.
    heard = records[: records.index(record) + 1] if record else []
    user_text = " ".join(r["user_text"] for r in heard if r.get("user_text"))
    stats = getattr(call, "speculation", None)
    speculation = stats.as_dict() if stats is not None else None
    llm = meter.since(llm_mark)
    if not scripted:
        wasted = (speculation or {}).get("wasted_completion_tokens") or 0
        llm["completion_tokens"] = counter.chunks + wasted
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
        "stages_ms": _rebased_stages(record, end),
        "user_text": user_text,
        "wer": round(word_error_rate(utterance.text, user_text), 3),
        "bot_text": (record or {}).get("bot_text", ""),
        "pipeline_turns": len(records),
        "speculative": bool((record or {}).get("speculative")),
        "cpu_s": {
            "agent": round(cpu, 3),
            "llm_server": None if llm_cpu0 is None or llm_cpu1 is None else round(llm_cpu1 - llm_cpu0, 3),
        },
        "llm": llm,
        "speculation": speculation,
    }


# -- statistics --------------------------------------------------------------------------------


def _stats(values: list[float | None]) -> dict:
    present = [v for v in values if v is not None]
    if not present:
        return {"p50": None, "p95": None, "mean": None, "n": 0}
    arr = np.asarray(present, dtype=float)
    return {
        "p50": round(float(np.percentile(arr, 50)), 1),
        "p95": round(float(np.percentile(arr, 95)), 1),
        "mean": round(float(arr.mean()), 1),
        "n": len(present),
    }


def summarize_side(turns: list[dict]) -> dict:
    """Per-side statistics: latency over the answered turns, ``unanswered`` counts the rest.

    A turn is unanswered when no audible bot audio came (``no_audio``) or when what came was not
    an LLM answer (``no_llm_answer``: the apology spoken after an LLM error).
    """
    llm_keys = sorted({k for t in turns for k in t["llm"]})
    answered = [t for t in turns if t["answered"]]
    return {
        "turns": len(turns),
        "answered": len(answered),
        "unanswered": len(turns) - len(answered),
        "outcomes": {o: sum(t.get("outcome") == o for t in turns) for o in ("no_audio", "no_llm_answer")},
        "cut": sum(t["cut"] for t in turns),
        "wer_mean": round(float(np.mean([t["wer"] for t in turns])), 3) if turns else None,
        "split_turns": sum(t["pipeline_turns"] > 1 for t in turns),
        "v2v_ms": _stats([t["v2v_ms"] for t in answered]),
        # A stage the server could not tie to the answer (None) leaves that turn out of its row.
        "stages_ms": {s: _stats([t["stages_ms"].get(s) for t in answered]) for s in WAYPOINTS},
        "cpu_s_per_turn": {
            "agent": _stats([t["cpu_s"]["agent"] for t in turns]),
            "llm_server": _stats([t["cpu_s"]["llm_server"] for t in turns]),
        },
        "speculation": _merged_speculation([t.get("speculation") for t in turns]),
        "llm_totals": {
            k: (None if any(t["llm"].get(k) is None for t in turns) else sum(t["llm"][k] for t in turns))
            for k in llm_keys
        },
    }


def _merged_speculation(reports: list[dict | None]) -> dict | None:
    present = [r for r in reports if r is not None]
    if not present:
        return None
    from processors.speculation import merge_reports

    return merge_reports(present)


def bootstrap_ratio(stock: list[float | None], brisk: list[float | None], q: float,
                    resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> tuple[float | None, list | None]:
    """Brisk/stock ratio of the q-th percentile of v2v, with a paired bootstrap 95% interval.

    ``stock[i]`` and ``brisk[i]`` are the same utterance; resampling draws utterances, so both
    sides of an utterance stay together. Unanswered turns (None) are left out of each draw.
    """
    def ratio(idx) -> float | None:
        a = [stock[i] for i in idx if stock[i] is not None]
        b = [brisk[i] for i in idx if brisk[i] is not None]
        if not a or not b:
            return None
        return float(np.percentile(b, q) / np.percentile(a, q))

    n = len(stock)
    point = ratio(range(n))
    if point is None:
        return None, None
    rng = np.random.default_rng(seed)
    draws = [r for r in (ratio(rng.integers(0, n, n)) for _ in range(resamples)) if r is not None]
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return round(point, 3), [round(float(lo), 3), round(float(hi), 3)]


# -- report ------------------------------------------------------------------------------------


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.0f}"


def format_table(result: dict) -> str:
    stock, brisk, ratio, config = result["stock"], result["brisk"], result["ratio"], result["config"]
    llm = config["llm"]
    if llm == "scripted":
        llm = f"scripted (TTFT {config['scripted']['ttft_ms']} ms, {config['scripted']['tokens_per_s']:g} tok/s)"
    else:
        llm = f"embedded ({config['llm_model']})"
    lines = [
        f"Brisk vs stock pipecat: {stock['turns']} turns each, LLM {llm}, {result['machine']['date']}",
        "",
        f"{'ms after the true end of speech':<34}{'stock P50':>10}{'P95':>7}{'mean':>7}"
        f"{'brisk P50':>12}{'P95':>7}{'mean':>7}{'B/A P50':>9}{'n':>8}",
    ]

    def row(name, a, b):
        r = "-" if not a["p50"] or b["p50"] is None else f"{b['p50'] / a['p50']:.2f}"
        lines.append(
            f"{name:<34}{_fmt(a['p50']):>10}{_fmt(a['p95']):>7}{_fmt(a['mean']):>7}"
            f"{_fmt(b['p50']):>12}{_fmt(b['p95']):>7}{_fmt(b['mean']):>7}{r:>9}{a['n']:>4}/{b['n']:<3}"
        )

    for stage in WAYPOINTS:
        row(stage, stock["stages_ms"][stage], brisk["stages_ms"][stage])
    row("voice-to-voice (heard by caller)", stock["v2v_ms"], brisk["v2v_ms"])
    lines.append("")

    def ci(key):
        value, interval = ratio[key], ratio[f"{key}_ci95"]
        return "-" if value is None else f"{value:.2f} [{interval[0]:.2f}, {interval[1]:.2f}]"

    lines.append(f"B/A voice-to-voice: P50 {ci('v2v_p50')}   P95 {ci('v2v_p95')}   (paired bootstrap 95% CI)")
    for name, side in (("stock", stock), ("brisk", brisk)):
        tot = side["llm_totals"]
        cpu = side["cpu_s_per_turn"]
        llm_cpu = cpu["llm_server"]["mean"]
        lines.append(
            f"{name}: answered {side['answered']}/{side['turns']} (no audio {side['outcomes']['no_audio']}, "
            f"apology after an LLM error {side['outcomes']['no_llm_answer']}), "
            f"WER {side['wer_mean']}, split into several turns {side['split_turns']}, "
            f"CPU s/turn {cpu['agent']['mean']}" + ("" if llm_cpu is None else f" + LLM server {llm_cpu}")
            + f"; LLM requests {tot.get('requests')}, prompt tokens {tot.get('prompt_tokens')}, "
            f"generated {tot.get('completion_tokens')}, cancelled {tot.get('cancelled')}"
        )
        spec = side.get("speculation")
        if spec:
            lines.append(
                f"{name} speculation: drafts {spec['drafts_started']}, committed {spec['committed']}, "
                f"cancelled {spec['cancelled']}, superseded {spec['superseded']}, hit rate {spec['hit_rate']}, "
                f"wasted tokens {spec['wasted_prompt_tokens']} prompt + {spec['wasted_completion_tokens']} generated"
            )
    if brisk.get("barge_in"):
        from agent.bench_barge_in import format_barge_in

        lines += ["", format_barge_in(brisk["barge_in"])]
    return "\n".join(lines)


def _machine() -> dict:
    def version(dist):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    cpu_model = None
    try:
        cpu_model = next(
            (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
             if line.startswith("model name")), None)
    except OSError:
        pass
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu_model": cpu_model,
        "cpus": len(os.sched_getaffinity(0)),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "platform": platform.platform(),
        "pipecat": version("pipecat-ai"),
        "faster_whisper": version("faster-whisper"),
        "llama_cpp_python": version("llama_cpp_python"),
    }


# -- the run -----------------------------------------------------------------------------------


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def run_bench(*, llm: str, turns: int | None, quick: bool,
                    ttft_ms: int = SCRIPTED_TTFT_MS, tokens_per_s: float = SCRIPTED_TOKENS_PER_S) -> dict:
    from pipecat.audio.vad.vad_analyzer import VADParams

    from agent.call import running_server
    from agent.config import load_config
    from agent.loopback import serve_app
    from agent.runtime import Runtime
    from agent.scripted_llm import DEFAULT_ANSWER, ScriptedLLM

    machine = _machine()
    utterances = select(turns, quick)
    clips = [render(u) for u in utterances]
    warmup = render(WARMUP)
    scripted = llm == "scripted"

    async with AsyncExitStack() as stack:
        if scripted:
            scripted_llm = ScriptedLLM(ttft_s=ttft_ms / 1000, tokens_per_s=tokens_per_s)
            llm_url = await stack.enter_async_context(serve_app(scripted_llm.app()))
            config = load_config(llm_base_url=f"{llm_url}/v1", llm_model="scripted")
        else:
            config = load_config(llm_max_tokens=EMBEDDED_MAX_TOKENS)
        _log(f"bench: starting the runtime ({llm} LLM) ...")
        runtime = Runtime(config)
        stack.push_async_callback(runtime.stop)
        await runtime.start()
        llm_pid = runtime.llm_server.pid if runtime.llm_server else None

        async def reset_llm_cache():
            # llama.cpp keeps the last prompt in its KV cache: without this, whichever side hears
            # an utterance second would find the other side's identical question already
            # prefilled. Every call starts where a fresh call does: the system prompt cached.
            if runtime.llm_server is not None:
                await runtime.llm_server.warm(config.system_prompt)
        meter = ScriptedMeter(scripted_llm) if scripted else LlamaLogMeter(runtime.llm_server.log_path)
        sides = {}
        for flavor in FLAVORS:
            base_url, app = await stack.enter_async_context(running_server(config, runtime, flavor))
            sides[flavor] = Side(flavor, base_url, app)

        for flavor in FLAVORS:
            warm = await bench_call(sides[flavor], warmup, meter, llm_pid, scripted, reset_llm_cache)
            _log(f"bench: warm-up {flavor}: v2v {_fmt(warm['v2v_ms'])} ms")

        results: list[dict] = []
        total = 2 * len(clips)
        for i, clip in enumerate(clips):
            order = FLAVORS if i % 2 == 0 else FLAVORS[::-1]
            for flavor in order:
                turn = await bench_call(sides[flavor], clip, meter, llm_pid, scripted, reset_llm_cache)
                turn["pair"] = i
                turn["order"] = len(results)
                results.append(turn)
                _log(
                    f"[{len(results)}/{total}] {flavor:5} {clip.utterance.id:20} v2v {_fmt(turn['v2v_ms']):>5} ms"
                    f"  heard {turn['user_text']!r}"
                )

        # After the A/B turns, so its load never overlaps a measured turn.
        from agent.bench_barge_in import BARGE_IN_METHOD, FULL_INTERRUPTIONS, QUICK_INTERRUPTIONS, run_barge_in

        _log("bench: barge-in call (brisk, scripted LLM) ...")
        barge_in = await run_barge_in(
            config, runtime, interruptions=QUICK_INTERRUPTIONS if quick else FULL_INTERRUPTIONS,
            ttft_s=ttft_ms / 1000, tokens_per_s=tokens_per_s, log=_log,
        )

    machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    by_side = {f: [t for t in results if t["side"] == f] for f in FLAVORS}
    paired = {
        f: [t["v2v_ms"] if t["answered"] else None for t in sorted(by_side[f], key=lambda t: t["pair"])]
        for f in FLAVORS
    }
    ratio = {}
    for q in (50, 95):
        value, interval = bootstrap_ratio(paired["stock"], paired["brisk"], q)
        ratio[f"v2v_p{q}"] = value
        ratio[f"v2v_p{q}_ci95"] = interval
    ratio["method"] = f"brisk/stock; paired bootstrap over utterances, {BOOTSTRAP_RESAMPLES} resamples, percentile CI"

    return {
        "stock": summarize_side(by_side["stock"]),
        "brisk": {**summarize_side(by_side["brisk"]), "barge_in": barge_in},
        "ratio": ratio,
        "turns": results,
        "machine": machine,
        "config": {
            "llm": llm,
            "llm_model": runtime.resources.llm_model if runtime.resources else None,
            "scripted": {"ttft_ms": ttft_ms, "tokens_per_s": tokens_per_s, "answer": DEFAULT_ANSWER}
            if scripted else None,
            "llm_max_tokens": config.llm_max_tokens,
            "turns_per_side": len(clips),
            "quick": quick,
            "order": "per utterance, stock and brisk back to back, alternating which goes first",
            "warmup_calls_per_side": 1,
            "barge_in": BARGE_IN_METHOD,
            "tts": config.tts_engine,
            "whisper_model": config.whisper_model,
            "vad": {
                "stock": VADParams().model_dump(),
                "brisk": {"confidence": config.vad_confidence, "start_secs": config.vad_start_secs,
                          "stop_secs": config.vad_stop_secs, "min_volume": config.vad_min_volume},
            },
            "turn_stop": {"stock": "pipecat default UserTurnStrategies (Smart Turn v3)",
                          "brisk": f"speech timeout {config.turn_stop_timeout_secs} s after the VAD stop"},
            "speech_end": "end of the last 10 ms window within 40 dB of the clip's loudest (agent/audio.py)",
            "v2v": f"speech end -> first received audio chunk with RMS >= {AUDIBLE_RMS:g} at the aiortc caller",
            "hang_up": "scripted: 0.3 s after the first answer audio, LLM idle; embedded: bot finished speaking",
            "no_answer_s": NO_ANSWER_S,
            "llm_cache": None if scripted else "before every call the llama.cpp KV cache is reset to the "
                         "system prompt (LocalLLMServer.warm), so no side inherits the other's prefill",
            "llm_tokens": "scripted: the server's own count (prompt tokens are words with their leading "
                          "space); embedded: requests and prompt tokens from the llama.cpp server log, "
                          "generated = text chunks the LLM service pushed + tokens of discarded drafts "
                          "(processors/speculation.py)",
            "cpu": "time.process_time() of this process (servers, caller and scripted LLM) from connect to "
                   "hang-up; llm_server from /proc/<pid>/stat",
        },
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m agent bench",
        description="Brisk vs stock pipecat, interleaved per spoken turn over real WebRTC calls.",
    )
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_TURNS} turns with the scripted LLM (a few minutes)")
    parser.add_argument("--llm", choices=("embedded", "scripted"), default=None,
                        help="embedded: the packaged local model (default); scripted: a loopback "
                             "OpenAI-compatible server with a fixed answer (default with --quick)")
    parser.add_argument("--turns", type=int, default=None,
                        help="spoken turns per side (default: the whole corpus, or 8 with --quick)")
    parser.add_argument("--json", dest="json_path", default=None, help="write the full results as JSON here")
    parser.add_argument("--plot", dest="plot_path", default=None, help="write a PNG (waterfall + v2v CDF) here")
    parser.add_argument("--scripted-ttft-ms", type=int, default=SCRIPTED_TTFT_MS,
                        help="scripted LLM time to first token (default 300)")
    parser.add_argument("--scripted-tokens-per-s", type=float, default=SCRIPTED_TOKENS_PER_S,
                        help="scripted LLM token rate (default 30)")
    args = parser.parse_args(argv)
    if args.llm is None:
        args.llm = "scripted" if args.quick else "embedded"
    if args.turns is None and args.quick:
        args.turns = QUICK_TURNS
    if args.turns is not None and args.turns < 1:
        parser.error("--turns must be at least 1")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    from loguru import logger

    # pipecat logs every call's set-up and tear-down; the table is what matters here.
    logger.remove()
    logger.add(sys.stderr, level="ERROR")

    started = time.monotonic()
    result = asyncio.run(
        run_bench(llm=args.llm, turns=args.turns, quick=args.quick,
                  ttft_ms=args.scripted_ttft_ms, tokens_per_s=args.scripted_tokens_per_s)
    )
    result["machine"]["wall_s"] = round(time.monotonic() - started, 1)
    print(format_table(result))
    # Per-processor overhead: seconds of work, so it runs after the calls, not between them.
    from agent.bench_overhead import format_overhead, measure

    result["processor_overhead"] = asyncio.run(measure(frames=500 if args.quick else 2000))
    print()
    print(format_overhead(result["processor_overhead"]))
    # The phone path's front end (VAD + STT at 8 kHz mu-law vs 16 kHz), on the same utterances.
    from agent.bench_phone import format_phone
    from agent.bench_phone import measure as measure_phone

    result["phone"] = asyncio.run(measure_phone(select(args.turns, args.quick)))
    print()
    print(format_phone(result["phone"]))
    if args.json_path:
        Path(args.json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_path).write_text(json.dumps(result, indent=2))
        print(f"JSON written to {args.json_path}")
    if args.plot_path:
        from agent.bench_plot import plot

        plot(result, args.plot_path)
        print(f"plot written to {args.plot_path}")
    return 0
