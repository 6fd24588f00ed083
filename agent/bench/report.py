"""``agent bench``'s results: per-side statistics, the Brisk/stock ratios, the table, the machine.

``summarize_side`` turns one side's turns (``calls.bench_call``'s dicts) into its JSON object,
``v2v_ratios`` gives the ``ratio`` object (paired bootstrap over utterances), ``format_table``
prints both sides, and ``machine_info`` records where and on what the run happened.
"""

from __future__ import annotations

import os
import platform
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import numpy as np

from agent.runtime import llama_build
from agent.bench.barge_in import format_barge_in
from agent.bench.stats import BOOTSTRAP_RESAMPLES, bootstrap_ratio, fmt, percentiles
from processors.observers.latency import STAGES
from processors.speculation.speculation_stats import merge_reports

FLAVORS = ("stock", "brisk")
# The latency A/B also runs stock tuned for speed (agent/call/pipeline.py Flavor), to tell what Brisk's
# techniques buy from what its VAD and turn timings buy.
AB_FLAVORS = ("stock", "stock_tuned", "brisk")
# The waterfall in pipeline order: the latency observer's stages after the reference (0 ms).
WAYPOINTS = tuple(stage for stage in STAGES if stage != "speech_end")


def summarize_side(turns: list[dict]) -> dict:
    """Per-side statistics: latency over the answered turns, ``unanswered`` counts the rest.

    A turn is unanswered when no audible bot audio came (``no_audio``) or when what came was not
    an LLM answer (``no_llm_answer``: the apology spoken after an LLM error). An LLM total is
    None when any turn's count is unknown.
    """
    llm_keys = sorted({k for t in turns for k in t["llm"]})
    answered = [t for t in turns if t["answered"]]
    speculation = [t["speculation"] for t in turns if t.get("speculation") is not None]
    return {
        "turns": len(turns),
        "answered": len(answered),
        "unanswered": len(turns) - len(answered),
        "outcomes": {o: sum(t.get("outcome") == o for t in turns) for o in ("no_audio", "no_llm_answer")},
        "cut": sum(t["cut"] for t in turns),
        "wer_mean": round(float(np.mean([t["wer"] for t in turns])), 3) if turns else None,
        "split_turns": sum(t["pipeline_turns"] > 1 for t in turns),
        "answered_into_a_pause": sum(t.get("answers_into_a_pause", 0) > 0 for t in turns),
        "v2v_ms": percentiles([t["v2v_ms"] for t in answered]),
        # A stage the server could not tie to the answer (None) leaves that turn out of its row.
        "stages_ms": {s: percentiles([t["stages_ms"].get(s) for t in answered]) for s in WAYPOINTS},
        "cpu_s_per_turn": {
            "agent": percentiles([t["cpu_s"]["agent"] for t in turns]),
            "llm_server": percentiles([t["cpu_s"]["llm_server"] for t in turns]),
        },
        "speculation": merge_reports(speculation) if speculation else None,
        "tts_prefetch": _counted([t.get("tts_prefetch") for t in turns]),
        "tts_phrase_cache": _counted([t.get("tts_phrase_cache") for t in turns]),
        "facts_prefill": _counted([t.get("facts_prefill") for t in turns]),
        **_hits(turns),
        **_fast_path_hits(turns),
        "llm_totals": {
            k: (None if any(t["llm"].get(k) is None for t in turns) else sum(t["llm"][k] for t in turns))
            for k in llm_keys
        },
    }


def _counted(reports: list[dict | None]) -> dict | None:
    """The sum of per-call counters; None when no call kept them."""
    reports = [r for r in reports if r]
    return {key: sum(r.get(key, 0) for r in reports) for key in reports[0]} if reports else None


def _hits(turns: list[dict]) -> dict:
    """What speculation did for the turns the LLM answered (not the fast path's): how often a
    draft was in flight when the turn ended (kept or cancelled there), and, for the hits (its
    answer kept), voice-to-voice and turn end -> first audio out. Empty for a side that drafts none."""
    llm = [t for t in turns if t["answered"] and not t.get("fast_path")]
    if not any(t.get("speculation") for t in llm):
        return {}
    hits = [t for t in llm if t.get("speculative")]
    at_end = [t for t in llm if t.get("speculation") and (t["speculation"]["committed"] or t["speculation"]["cancelled"])]

    return {
        "draft_at_turn_end": round(len(at_end) / len(llm), 3) if llm else None,
        "hits_v2v_ms": percentiles([t["v2v_ms"] for t in hits]),
        "hits_turn_end_to_audio_ms": percentiles([after_turn_end(t) for t in hits]),
    }


def _fast_path_hits(turns: list[dict]) -> dict:
    """Turn end -> first audio out on the fast path's hits: the turns it answered whose held answer
    the turn's end kept (its first words prefetched on the draft). Apart from the LLM's hits."""
    hits = [t for t in turns if t["answered"] and t.get("fast_path") and (t.get("speculation") or {}).get("committed")]
    return {"fast_path_hits_turn_end_to_audio_ms": percentiles([after_turn_end(t) for t in hits])} if hits else {}


def after_turn_end(turn: dict) -> float | None:
    """A turn's time from its end to its first audio out of the server, in ms."""
    stages = turn["stages_ms"]
    if stages.get("first_audio_out") is None or stages.get("turn_end") is None:
        return None
    return round(stages["first_audio_out"] - stages["turn_end"], 1)


def v2v_ratios(turns: list[dict], baseline: str = "stock") -> dict:
    """The ``ratio`` object (``ratio_tuned`` with ``baseline="stock_tuned"``): brisk/baseline P50 and
    P95 of voice-to-voice with their 95% intervals, pairing the sides' turns of each utterance
    (``pair``); unanswered turns are None."""
    paired = {
        flavor: [t["v2v_ms"] if t["answered"] else None
                 for t in sorted((t for t in turns if t["side"] == flavor), key=lambda t: t["pair"])]
        for flavor in (baseline, "brisk")
    }
    ratio = {}
    for q in (50, 95):
        value, interval = bootstrap_ratio(paired[baseline], paired["brisk"], q)
        ratio[f"v2v_p{q}"] = value
        ratio[f"v2v_p{q}_ci95"] = interval
    ratio["method"] = (f"brisk/{baseline}; paired bootstrap over utterances, {BOOTSTRAP_RESAMPLES} resamples, "
                       "percentile CI (scipy.stats.bootstrap)")
    return ratio


def _count(value) -> str:
    return "?" if value is None else str(value)


def format_table(result: dict) -> str:
    stock, brisk, ratio, config = result["stock"], result["brisk"], result["ratio"], result["config"]
    tuned = result.get("stock_tuned")
    llm = config["llm"]
    if llm == "scripted":
        llm = f"scripted (TTFT {config['scripted']['ttft_ms']} ms, {config['scripted']['tokens_per_s']:g} tok/s)"
    elif llm == "reference":
        ref = config["reference"]
        llm = (f"reference (right answers, TTFT ~{ref['ttft_ms_median']} ms, "
               f"{ref['tokens_per_s'][0]:g}-{ref['tokens_per_s'][1]:g} tok/s)")
    else:
        llm = f"embedded ({config['llm_model']})"
    lines = [
        f"Brisk vs stock pipecat{' and stock tuned' if tuned else ''}: {stock['turns']} turns each, LLM {llm}, "
        f"{result['machine']['date']}"
        + (f"; machine speed: Whisper hears the ARCTIC clip in {result['machine']['whisper_ms']} ms"
           if result["machine"].get("whisper_ms") is not None else ""),
        "",
        f"{'ms after the true end of speech':<34}{'stock P50':>10}{'P95':>7}"
        + (f"{'tuned P50':>11}{'P95':>7}" if tuned else "")
        + f"{'brisk P50':>11}{'P95':>7}{'mean':>7}{'B/A P50':>9}" + (f"{'B/T P50':>9}" if tuned else "") + f"{'n':>8}",
    ]

    def over(b, a):
        return "-" if not a["p50"] or b["p50"] is None else f"{b['p50'] / a['p50']:.2f}"

    def row(name, a, b, t=None):
        lines.append(
            f"{name:<34}{fmt(a['p50']):>10}{fmt(a['p95']):>7}"
            + (f"{fmt(t['p50']):>11}{fmt(t['p95']):>7}" if t is not None else "")
            + f"{fmt(b['p50']):>11}{fmt(b['p95']):>7}{fmt(b['mean']):>7}{over(b, a):>9}"
            + (f"{over(b, t):>9}" if t is not None else "") + f"{a['n']:>4}/{b['n']:<3}"
        )

    for stage in WAYPOINTS:
        row(stage, stock["stages_ms"][stage], brisk["stages_ms"][stage], tuned["stages_ms"][stage] if tuned else None)
    row("voice-to-voice (heard by caller)", stock["v2v_ms"], brisk["v2v_ms"], tuned["v2v_ms"] if tuned else None)
    lines.append("")

    def ci(ratios, key):
        value, interval = ratios[key], ratios[f"{key}_ci95"]
        return "-" if value is None else f"{value:.2f} [{interval[0]:.2f}, {interval[1]:.2f}]"

    lines.append(f"B/A voice-to-voice: P50 {ci(ratio, 'v2v_p50')}   P95 {ci(ratio, 'v2v_p95')}   (paired bootstrap 95% CI)")
    if tuned:
        tuned_ratio = result["ratio_tuned"]
        lines.append(f"B/T voice-to-voice: P50 {ci(tuned_ratio, 'v2v_p50')}   P95 {ci(tuned_ratio, 'v2v_p95')}   "
                     "(brisk over stock tuned for speed)")
    for name, side in (("stock", stock), *((("stock_tuned", tuned),) if tuned else ()), ("brisk", brisk)):
        tot = side["llm_totals"]
        cpu = side["cpu_s_per_turn"]
        llm_cpu = cpu["llm_server"]["mean"]
        lines.append(
            f"{name}: answered {side['answered']}/{side['turns']} (no audio {side['outcomes']['no_audio']}, "
            f"apology after an LLM error {side['outcomes']['no_llm_answer']}), "
            f"WER {side['wer_mean']}, split into several turns {side['split_turns']} "
            f"(answered into the caller's pause {side.get('answered_into_a_pause', 0)}), "
            f"CPU s/turn {cpu['agent']['mean']}" + ("" if llm_cpu is None else f" + LLM server {llm_cpu}")
            + f"; LLM requests {_count(tot.get('requests'))}, prompt tokens {_count(tot.get('prompt_tokens'))}, "
            f"generated {_count(tot.get('completion_tokens'))}, cancelled {_count(tot.get('cancelled'))}"
        )
        spec = side.get("speculation")
        if spec:
            lines.append(
                f"{name} speculation: drafts {spec['drafts_started']}, committed {spec['committed']}, "
                f"cancelled {spec['cancelled']}, superseded {spec['superseded']}, hit rate {spec['hit_rate']}, "
                f"wasted tokens {spec['wasted_prompt_tokens']} prompt + {spec['wasted_completion_tokens']} generated"
            )
        prefetch = side.get("tts_prefetch")
        if prefetch:
            lines.append(
                f"{name} first chunks prefetched: {prefetch.get('started', 0)}, spoken from the prefetch "
                f"{prefetch.get('used', 0)}, discarded {prefetch.get('discarded', 0)}, missed {prefetch.get('missed', 0)}"
            )
        phrases = side.get("tts_phrase_cache")
        if phrases:
            lines.append(f"{name} texts spoken from the phrase cache: {phrases.get('hits', 0)}, "
                         f"synthesised {phrases.get('misses', 0)}")
        prefill = side.get("facts_prefill")
        if prefill:
            lines.append(
                f"{name} facts read during speech: {prefill.get('prefills', 0)} prefills "
                f"({round(prefill.get('prefill_s', 0.0), 1)} s of the LLM server), skipped {prefill.get('skipped', 0)}, "
                f"failed {prefill.get('failures', 0)}"
            )
        if side.get("hits_v2v_ms"):
            hits, after = side["hits_v2v_ms"], side["hits_turn_end_to_audio_ms"]
            lines.append(
                f"{name} LLM turns: a draft in flight at the turn end {side['draft_at_turn_end']}; on hits (n={hits['n']}) "
                f"v2v P50/P95 {fmt(hits['p50'])}/{fmt(hits['p95'])} ms, turn end -> first audio out "
                f"{fmt(after['p50'])}/{fmt(after['p95'])} ms"
            )
        fast = side.get("fast_path_hits_turn_end_to_audio_ms")
        if fast:
            lines.append(f"{name} fast path's hits (n={fast['n']}): turn end -> first audio out "
                         f"P50/P95 {fmt(fast['p50'])}/{fmt(fast['p95'])} ms")
    if config.get("llm_tokens_source") is None:
        lines.append("LLM tokens: ? = unknown (the LLM server reported no usage and has no /metrics)")
    if brisk.get("barge_in"):
        lines += ["", format_barge_in(brisk["barge_in"])]
    return "\n".join(lines)


def machine_info() -> dict:
    """The ``machine`` object at the start of a run (``loadavg_end`` and ``wall_s`` come later)."""
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
        "llama_cpp": f"llama-server from llama-cpp-python {llama_build.SDIST_VERSION}",
    }
