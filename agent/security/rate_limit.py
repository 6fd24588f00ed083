"""Per-client rate limits: a token bucket per client address and route group.

Consumes a key (a client address) per request; answers how long that client must wait, or
None. Memory is bounded: at most ``max_clients`` buckets, the least recently seen dropped
first, so a flood from many addresses cannot grow the process.

Hand-written rather than ``limits``/``slowapi``: their in-memory storage runs a cleanup timer
thread per process and keeps every key until it expires; this is one dict in the event loop.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable


class RateLimiter:
    """``per_minute`` requests a minute per key, with bursts of up to ``burst``."""

    def __init__(self, per_minute: int, burst: int, *, max_clients: int = 10_000,
                 clock: Callable[[], float] = time.monotonic):
        self.rate = per_minute / 60.0
        self.burst = float(burst)
        self.max_clients = max_clients
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key -> (tokens, at)

    def retry_after(self, key: str) -> int | None:
        """Take one request for ``key``: None when allowed, else whole seconds until one is."""
        now = self._clock()
        tokens, at = self._buckets.pop(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - at) * self.rate)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            allowed = True
        else:
            self._buckets[key] = (tokens, now)
            allowed = False
        while len(self._buckets) > self.max_clients:
            self._buckets.popitem(last=False)
        return None if allowed else max(1, math.ceil((1.0 - tokens) / self.rate))
