"""``agent bench --plot``: per-stage waterfall bars for both pipelines and the CDF of voice-to-voice."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from agent.bench.report import FLAVORS, WAYPOINTS

COLORS = {"stock": "#9a9a9a", "brisk": "#1f77b4"}


def plot(result: dict, path: str | Path) -> None:
    """Write a small PNG: left, P50 of each stage (a line on to P95); right, the v2v CDF."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (bars, cdf) = plt.subplots(1, 2, figsize=(10, 4.2), gridspec_kw={"width_ratios": [1.4, 1]})
    labels = [*WAYPOINTS, "v2v (caller)"]
    y = np.arange(len(labels))
    height = 0.38
    for k, flavor in enumerate(FLAVORS):
        side = result[flavor]
        stats = [side["stages_ms"][s] for s in WAYPOINTS] + [side["v2v_ms"]]
        p50 = np.array([np.nan if s["p50"] is None else s["p50"] for s in stats])
        p95 = np.array([np.nan if s["p95"] is None else s["p95"] for s in stats])
        offset = (k - 0.5) * height
        bars.barh(y + offset, np.nan_to_num(p50), height, color=COLORS[flavor], label=f"{flavor} P50")
        bars.hlines(y + offset, np.nan_to_num(p50), np.nan_to_num(p95), color="black", linewidth=1,
                    label="to P95" if k == 1 else None)
    bars.set_yticks(y, labels)
    bars.invert_yaxis()
    bars.set_xlabel("ms after the true end of speech")
    bars.set_title("latency waterfall")
    bars.grid(axis="x", alpha=0.3)
    bars.legend(loc="upper right", fontsize=8)

    for flavor in FLAVORS:
        values = sorted(t["v2v_ms"] for t in result["turns"] if t["side"] == flavor and t["answered"])
        total = sum(1 for t in result["turns"] if t["side"] == flavor)
        if values and total:
            # Unanswered turns keep the curve below 1: they never arrive.
            fraction = np.arange(1, len(values) + 1) / total
            cdf.step(values, fraction, where="post", color=COLORS[flavor],
                     label=f"{flavor} ({len(values)}/{total} answered)")
    cdf.set_xlabel("voice-to-voice, ms")
    cdf.set_ylabel("fraction of turns")
    cdf.set_ylim(0, 1.02)
    cdf.set_title("voice-to-voice CDF")
    cdf.grid(alpha=0.3)
    cdf.legend(loc="lower right", fontsize=8)

    config = result["config"]
    fig.suptitle(f"Brisk vs stock pipecat, LLM {config['llm']}, {result['machine']['date']}", fontsize=10)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
