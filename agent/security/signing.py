"""``X-Brisk-Signature``: how Brisk signs what it sends a business's servers (the post-call
webhook, the HTTP tools' requests), and how a receiver checks it.

The value is ``t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>``: the time is
signed with the body, so a receiver can refuse a replayed request (``verify``'s tolerance).
"""

from __future__ import annotations

import hashlib
import hmac
import time

HEADER = "X-Brisk-Signature"


def signature(secret: str, body: bytes, timestamp: int) -> str:
    """The ``X-Brisk-Signature`` value of ``body`` sent at ``timestamp`` (what a receiver recomputes)."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify(secret: str, body: bytes, header: str, *, tolerance_s: float = 300.0) -> bool:
    """Whether ``header`` signs ``body`` with ``secret`` and is at most ``tolerance_s`` old (for receivers)."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(fields["t"])
    except (KeyError, ValueError):
        return False
    if abs(time.time() - timestamp) > tolerance_s:
        return False
    return hmac.compare_digest(signature(secret, body, timestamp), f"t={timestamp},v1={fields.get('v1', '')}")
