"""What the bench's caller hears: when the bot's answer became audible, and how much of it came.

Both helpers scan the aiortc caller's received audio (``WebRTCCaller.received``, on the caller's
``time.monotonic()`` clock) for chunks at or above ``AUDIBLE_RMS``, polling every ``POLL_S``
and looking only at what arrived since the last poll, so listening costs next to no CPU.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from agent.caller.aiortc_caller import AUDIBLE_RMS, WebRTCCaller

POLL_S = 0.05
NO_ANSWER_S = 20.0  # no audible answer this long after the end of speech: unanswered
ANSWER_CAP_S = 30.0  # hang up this long after the first answer audio whatever happens


async def first_audible_answer(caller: WebRTCCaller, end: float,
                               done: Callable[[float, float], bool]) -> tuple[float | None, bool]:
    """Wait for the answer to speech that ended at ``end``; returns (arrival of its first
    audible audio or None, cut short?).

    Returns once ``done(first, now)`` says the call has heard enough, None after
    ``NO_ANSWER_S`` without audible audio, and cut short ``ANSWER_CAP_S`` after the first.
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


def first_audible_after(received: list, after: float) -> float | None:
    """Arrival of the first audible chunk of ``received`` that came after ``after``, or None."""
    return next((chunk.t for chunk in received if chunk.t > after and chunk.rms >= AUDIBLE_RMS), None)


async def heard_for(caller: WebRTCCaller, after: float, seconds: float, timeout: float = NO_ANSWER_S) -> bool:
    """Waits until ``seconds`` of audible bot audio arrived after ``after``; False on timeout."""
    deadline = time.monotonic() + timeout
    seen, audible = 0, 0.0
    while time.monotonic() < deadline:
        received = caller.received
        for chunk in received[seen:]:
            if chunk.t > after and chunk.rms >= AUDIBLE_RMS:
                audible += len(chunk.pcm) / chunk.sample_rate
        seen = len(received)
        if audible >= seconds:
            return True
        await asyncio.sleep(POLL_S)
    return False
