"""The A/B graded and split by what answered: right answers, and how fast each path gave them.

Consumes the A/B's per-turn dicts (``calls.bench_call``'s, with the ``grade``, ``needs`` and
``path`` ``ab.py`` adds) and returns, per side, ``graded`` (right / wrong / refused, and
voice-to-voice over the right answers only) and ``by_path`` (fast_path / tool / llm, each with
its turns, right answers and v2v percentiles), and ``ratio_llm``: Brisk/stock voice-to-voice
over the utterances Brisk's LLM answered, paired with stock's turns of the same utterances. A
speed figure is only ever over turns whose path and grade it names.
"""

from __future__ import annotations

from agent.bench.ab_corpus import GRADES
from agent.bench.stats import BOOTSTRAP_RESAMPLES, bootstrap_ratio, fmt, percentiles

PATHS = ("fast_path", "tool", "llm")


def path_of(turn: dict, business) -> str:
    """What answered a turn: the fast path's fixed answer, a tool it started, or the LLM (stock
    pipecat has only the LLM). ``fast_path`` on the turn is the intent the fast path matched."""
    intent = turn.get("fast_path")
    if not intent:
        return "llm"
    known = business.intents.get(intent)
    return "tool" if known is not None and known.tool else "fast_path"


def graded(turns: list[dict]) -> dict:
    """Counts of each grade, and v2v P50/P95 over the right answers only."""
    counts = {g: sum(1 for t in turns if t.get("grade") == g) for g in GRADES}
    right = [t["v2v_ms"] for t in turns if t.get("grade") == "right"]
    return {**counts, "v2v_ms_right": percentiles(right)}


def by_path(turns: list[dict]) -> dict:
    """Per path: how many turns it answered, how many right, and their v2v (all and right only)."""
    out = {}
    for path in PATHS:
        mine = [t for t in turns if t.get("path") == path]
        out[path] = {"n": len(mine), "right": sum(1 for t in mine if t.get("grade") == "right"),
                     "v2v_ms": percentiles([t["v2v_ms"] for t in mine]),
                     "v2v_ms_right": percentiles([t["v2v_ms"] for t in mine if t.get("grade") == "right"])}
    # What an LLM turn cost the server: prompt tokens it had to compute (not read from its cache),
    # over all the turn's requests, drafts included, and those requests.
    llm = [t for t in turns if t.get("path") == "llm" and t.get("llm")]
    out["llm"]["prompt_tokens_computed"] = percentiles([t["llm"].get("prompt_tokens_computed") for t in llm])
    out["llm"]["prompt_tokens"] = percentiles([t["llm"].get("prompt_tokens") for t in llm])
    out["llm"]["requests"] = percentiles([t["llm"].get("requests") for t in llm])
    return out


def ratio_llm(turns: list[dict], baseline: str = "stock") -> dict:
    """Brisk/``baseline`` v2v P50 and P95 with paired bootstrap 95% CIs, over the utterances
    Brisk's LLM answered (``pair`` ties one utterance's turns); n = those utterances."""
    brisk = {t["pair"]: t for t in turns if t["side"] == "brisk" and t.get("path") == "llm"}
    base = {t["pair"]: t for t in turns if t["side"] == baseline and t["pair"] in brisk}
    pairs = sorted(set(brisk) & set(base))

    def v2v(turn):
        return turn["v2v_ms"] if turn["answered"] else None

    out = {"n": len(pairs)}
    for q in (50, 95):
        value, interval = bootstrap_ratio([v2v(base[p]) for p in pairs], [v2v(brisk[p]) for p in pairs], q)
        out[f"v2v_p{q}"], out[f"v2v_p{q}_ci95"] = value, interval
    out["method"] = (f"brisk/{baseline} over the utterances Brisk's LLM answered, paired; bootstrap over "
                     f"utterances, {BOOTSTRAP_RESAMPLES} resamples, percentile CI (scipy.stats.bootstrap)")
    return out


def format_graded(result: dict, flavors: tuple[str, ...]) -> str:
    """The graded, per-path table: what each side got right, by which path, how fast."""
    lines = ["| side | right | wrong | refused | incomplete | no answer | v2v P50/P95 of right answers (ms) | "
             "fast path n (right) P50 | tool n (right) P50 | LLM n (right) P50 |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for flavor in flavors:
        side = result[flavor]
        g, paths = side["graded"], side["by_path"]
        v = g["v2v_ms_right"]

        def cell(path):
            p = paths[path]
            return f"{p['n']} ({p['right']}) {fmt(p['v2v_ms']['p50'])}"

        lines.append(f"| {flavor} | {g['right']} | {g['wrong']} | {g['refused']} | {g['incomplete']} | "
                     f"{g['no_answer']} | {fmt(v['p50'])}/{fmt(v['p95'])} | {cell('fast_path')} | {cell('tool')} | "
                     f"{cell('llm')} |")
    for flavor in flavors:
        tokens = result[flavor]["by_path"]["llm"]
        if tokens["prompt_tokens"]["n"]:
            lines.append(f"{flavor} LLM turns: prompt tokens P50 {fmt(tokens['prompt_tokens']['p50'])}, computed (not "
                         f"cached) P50 {fmt(tokens['prompt_tokens_computed']['p50'])}, requests P50 "
                         f"{fmt(tokens['requests']['p50'])}, over {tokens['prompt_tokens']['n']} turns")
    r = result["ratio_llm"]
    ci = r.get("v2v_p50_ci95")
    lines.append("")
    lines.append(f"ratio_llm (Brisk/stock v2v over the {r['n']} utterances Brisk's LLM answered): P50 "
                 + ("-" if r["v2v_p50"] is None else f"{r['v2v_p50']:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]")
                 + "   P95 " + ("-" if r["v2v_p95"] is None else f"{r['v2v_p95']:.2f}"))
    return "\n".join(lines)
