"""The statistics every bench reports: percentile summaries, word error rate, the paired bootstrap.

- ``percentiles``: P50 / P95 / mean / n of the values that were measured (None = not measured).
- ``word_error_rate``: jiwer's word-level edit distance after ``WER_NORMALIZER``.
- ``bootstrap_ratio``: the Brisk/stock ratio of a percentile of voice-to-voice latency, with a
  paired bootstrap confidence interval from ``scipy.stats.bootstrap``.
"""

from __future__ import annotations

import warnings

import jiwer
import numpy as np
from scipy.stats import bootstrap

BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE_LEVEL = 0.95

# Case and punctuation are not transcription errors. Punctuation becomes a space (not nothing)
# so "nine-to-six" reads as three words, and apostrophes stay: "don't" is not "do n't".
WER_NORMALIZER = jiwer.Compose([
    jiwer.ToLowerCase(),
    jiwer.SubstituteRegexes({r"[^\w\s']": " "}),
    jiwer.RemoveMultipleSpaces(),
    jiwer.Strip(),
    jiwer.ReduceToListOfListOfWords(),
])  # fmt: skip


def percentiles(values: list[float | None]) -> dict:
    """{"p50", "p95", "mean", "n"} over the values that are not None (all None when none are)."""
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


def fmt(value: float | None) -> str:
    """A table cell: whole units, or "-" for a value that was not measured."""
    return "-" if value is None else f"{value:.0f}"


def word_error_rate(reference: str, heard: str) -> float:
    """(substitutions + deletions + insertions) / reference words, after ``WER_NORMALIZER``.

    An empty reference divides by 1, so anything heard counts as that many insertions; nothing
    heard of a non-empty reference is 1.0.
    """
    out = jiwer.process_words(reference or "", heard or "",
                              reference_transform=WER_NORMALIZER, hypothesis_transform=WER_NORMALIZER)
    errors = out.substitutions + out.deletions + out.insertions
    return errors / max(1, sum(len(words) for words in out.references))


def bootstrap_ratio(stock: list[float | None], brisk: list[float | None], q: float,
                    resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> tuple[float | None, list | None]:
    """Brisk/stock ratio of the q-th percentile, with a paired percentile-bootstrap 95% interval.

    ``stock[i]`` and ``brisk[i]`` are the same utterance, so the bootstrap is paired: a draw
    picks utterances, both sides of each together. None (an unanswered turn) is NaN to scipy
    and the statistic uses NaN-ignoring percentiles, so an unanswered turn leaves only its own
    side's value out of the draw. Returns ``(None, None)`` when a side has no answer at all.
    """
    s = np.array([np.nan if v is None else v for v in stock], dtype=float)
    b = np.array([np.nan if v is None else v for v in brisk], dtype=float)

    def ratio(s, b, axis=-1):
        with warnings.catch_warnings():
            # A draw in which one side has no answer has no ratio (NaN); handled below.
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanpercentile(b, q, axis=axis) / np.nanpercentile(s, q, axis=axis)

    point = float(ratio(s, b))
    if np.isnan(point):
        return None, None
    if len(s) < 2:
        # Every draw of one pair is that pair (and scipy refuses a sample of one).
        return round(point, 3), [round(point, 3), round(point, 3)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # scipy's DegenerateDataWarning on NaN draws
        result = bootstrap((s, b), ratio, paired=True, vectorized=True, n_resamples=resamples,
                           confidence_level=CONFIDENCE_LEVEL, method="percentile",
                           rng=np.random.default_rng(seed))
    low, high = result.confidence_interval
    if np.isnan(low) or np.isnan(high):
        # scipy's quantiles propagate the NaN of draws without a ratio; like any draw whose
        # statistic is undefined, those are left out and the same percentile interval is taken
        # over the rest.
        tail = (1 - CONFIDENCE_LEVEL) / 2 * 100
        low, high = np.nanpercentile(result.bootstrap_distribution, [tail, 100 - tail])
    return round(point, 3), [round(float(low), 3), round(float(high), 3)]
