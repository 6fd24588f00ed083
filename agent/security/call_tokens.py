"""Short-lived, single-use call tokens: what the browser page presents with its offer.

Consumes nothing from the pipeline; ``issue()`` mints a token (``POST /api/session``) and
``redeem()`` spends it (``POST /api/offer``): a token works once, for ``ttl_s`` seconds. A page
on another site can post to the server, but cannot read the token the server answers with
(no CORS), so it cannot start a call. At most ``max_outstanding`` tokens are kept; expired
ones are dropped as new ones are issued, so nothing grows with the life of the process.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable


class CallTokens:
    """The tokens issued and not yet spent or expired."""

    def __init__(self, ttl_s: float, *, max_outstanding: int = 10_000,
                 clock: Callable[[], float] = time.monotonic):
        self.ttl_s = ttl_s
        self.max_outstanding = max_outstanding
        self.clock = clock
        self._expiry: OrderedDict[str, float] = OrderedDict()  # token -> expiry, oldest first

    def issue(self) -> str:
        now = self.clock()
        while self._expiry and (next(iter(self._expiry.values())) <= now or len(self._expiry) >= self.max_outstanding):
            self._expiry.popitem(last=False)
        token = secrets.token_urlsafe(24)
        self._expiry[token] = now + self.ttl_s
        return token

    @property
    def outstanding(self) -> int:
        """Tokens issued and neither spent nor yet dropped."""
        return len(self._expiry)

    def redeem(self, token: str) -> bool:
        """Spend ``token``: True once, while it is fresh; False if unknown, spent or expired."""
        expiry = self._expiry.pop(token, None)
        return expiry is not None and expiry > self.clock()
