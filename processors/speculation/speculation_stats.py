"""What one call's speculative drafts did: started, committed, cancelled, superseded, and cost.

The stop strategy records each draft and its outcome; the LLM service's
``DraftAccountingMixin`` adds request time, first token and tokens. ``as_dict`` is the
``"speculation"`` JSON object of a call and of the benchmark.
"""

from __future__ import annotations

import re
import statistics
import time
from collections import deque
from dataclasses import dataclass
from enum import Enum


class DraftOutcome(Enum):
    """How a draft ended."""

    COMMITTED = "committed"  # the final matched: its answer was released
    CANCELLED = "cancelled"  # the final differed, the LLM withdrew it, or the turn ended unresolved
    SUPERSEDED = "superseded"  # a newer, different stable partial replaced it


_TOKEN = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]|\w+|[^\w\s]")


def estimate_tokens(text: str) -> int:
    """Rough BPE-like count (a word, a CJK character or a punctuation mark each): an estimate."""
    return len(_TOKEN.findall(text))


@dataclass
class Draft:
    """One speculative inference and what became of it. Times are ``time.monotonic()``."""

    text: str
    trigger: str
    started_at: float
    request_at: float | None = None  # the LLM service took the request
    first_token_at: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usage_reported: bool = False  # token counts are the server's, not estimates
    outcome: DraftOutcome | None = None
    reason: str = ""
    compared_with: str | None = None  # the final transcript, or the newer text that replaced it
    score: float | None = None
    resolved_at: float | None = None

    @property
    def time_saved_s(self) -> float | None:
        """For a committed draft, how much earlier its first token was there than a request
        sent at the end of the turn would have had it (same TTFT assumed).

        min(head start, TTFT): the head start when the draft was still waiting for its first
        token at the turn end, the whole TTFT when it was already answering. Without a first
        token time (no accounting on the LLM service) it is the head start, an upper bound.
        """
        if self.outcome is not DraftOutcome.COMMITTED or self.resolved_at is None:
            return None
        sent = self.request_at if self.request_at is not None else self.started_at
        head_start = max(0.0, self.resolved_at - sent)
        if self.first_token_at is None:
            return head_start
        return min(head_start, max(0.0, self.first_token_at - sent))


class SpeculationStats:
    """Counters of one call's drafts; :func:`merge_reports` adds up several calls' reports."""

    def __init__(self, max_drafts: int = 10_000):
        """Args: max_drafts: drafts remembered (the oldest are forgotten past this)."""
        self.drafts: deque[Draft] = deque(maxlen=max_drafts)

    def start(self, text: str, trigger: str) -> Draft:
        """Record a draft started now."""
        draft = Draft(text=text, trigger=trigger, started_at=time.monotonic())
        self.drafts.append(draft)
        return draft

    def resolve(
        self,
        draft: Draft,
        outcome: DraftOutcome,
        *,
        reason: str = "",
        compared_with: str | None = None,
        score: float | None = None,
    ):
        """Record how ``draft`` ended, now."""
        draft.outcome = outcome
        draft.reason = reason
        draft.compared_with = compared_with
        draft.score = score
        draft.resolved_at = time.monotonic()

    def take_request(self) -> Draft | None:
        """The newest draft whose request has not reached the LLM yet, marked as sent now."""
        for draft in reversed(self.drafts):
            if draft.request_at is None:
                if draft.outcome is not None:
                    # Withdrawn before its request got to the LLM: it never runs.
                    return None
                draft.request_at = time.monotonic()
                return draft
            return None
        return None

    def count(self, outcome: DraftOutcome) -> int:
        """Drafts that ended with ``outcome``."""
        return sum(1 for d in self.drafts if d.outcome is outcome)

    def as_dict(self) -> dict:
        """The JSON object reported per call and in the benchmark (``"speculation": {...}``).

        ``hit_rate`` is committed / (committed + cancelled): of the turns that ended with a
        draft in flight, how many kept it (superseded drafts are replaced within their turn
        and are counted as waste instead). ``waste_rate`` is (cancelled + superseded) /
        started. Wasted tokens are those of cancelled and superseded drafts: the server's
        usage when it reported one, else estimates (streamed chunks for completion tokens,
        :func:`estimate_tokens` of the prompt) — ``tokens_estimated`` says whether any
        estimate is in the sum; all three are None when the LLM service has no
        :class:`DraftAccountingMixin` to count them. ``time_saved_ms`` lists each hit's
        :attr:`Draft.time_saved_s`, so reports of several calls can be merged
        (:func:`merge_reports`).
        """
        wasted = [d for d in self.drafts if d.outcome in (DraftOutcome.CANCELLED, DraftOutcome.SUPERSEDED)]
        sent = [d for d in wasted if d.request_at is not None]
        # Wasted drafts and not one request time: nothing on the LLM service counted them.
        accounted = not wasted or any(d.request_at is not None for d in self.drafts)
        return _report(
            started=len(self.drafts),
            committed=self.count(DraftOutcome.COMMITTED),
            cancelled=self.count(DraftOutcome.CANCELLED),
            superseded=self.count(DraftOutcome.SUPERSEDED),
            wasted_prompt_tokens=sum(d.prompt_tokens for d in sent) if accounted else None,
            wasted_completion_tokens=sum(d.completion_tokens for d in sent) if accounted else None,
            tokens_estimated=any(not d.usage_reported for d in sent) if accounted else None,
            time_saved_ms=[round(d.time_saved_s * 1000, 1) for d in self.drafts if d.time_saved_s is not None],
        )


def merge_reports(reports: list[dict]) -> dict:
    """One report over several :meth:`SpeculationStats.as_dict` reports (e.g. a benchmark side)."""

    def total(key: str):
        values = [r[key] for r in reports]
        return None if not values or any(v is None for v in values) else sum(values)

    estimated = [r["tokens_estimated"] for r in reports]
    return _report(
        started=sum(r["drafts_started"] for r in reports),
        committed=sum(r["committed"] for r in reports),
        cancelled=sum(r["cancelled"] for r in reports),
        superseded=sum(r["superseded"] for r in reports),
        wasted_prompt_tokens=total("wasted_prompt_tokens"),
        wasted_completion_tokens=total("wasted_completion_tokens"),
        tokens_estimated=None if not estimated or None in estimated else any(estimated),
        time_saved_ms=[ms for r in reports for ms in r["time_saved_ms"]],
    )


def _report(
    *, started, committed, cancelled, superseded, wasted_prompt_tokens, wasted_completion_tokens,
    tokens_estimated, time_saved_ms: list[float],
) -> dict:
    decided = committed + cancelled
    return {
        "drafts_started": started,
        "committed": committed,
        "cancelled": cancelled,
        "superseded": superseded,
        "hit_rate": round(committed / decided, 3) if decided else None,
        "waste_rate": round((cancelled + superseded) / started, 3) if started else None,
        "wasted_prompt_tokens": wasted_prompt_tokens,
        "wasted_completion_tokens": wasted_completion_tokens,
        "tokens_estimated": tokens_estimated,
        "time_saved_ms_per_hit": round(statistics.fmean(time_saved_ms), 1) if time_saved_ms else None,
        "time_saved_ms_p50": round(statistics.median(time_saved_ms), 1) if time_saved_ms else None,
        "time_saved_ms": time_saved_ms,
    }
