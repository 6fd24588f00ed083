"""The ICE servers a caller's page connects through, TURN with short-lived credentials.

Consumes ``BRISK_ICE_SERVERS`` (STUN/TURN URLs) and ``BRISK_TURN_SECRET``; emits the
``iceServers`` list for ``RTCPeerConnection``, handed to the page with its call token. With a
secret, each TURN URL gets the credentials of coturn's REST API scheme (``use-auth-secret``):
username ``<expiry>:brisk``, credential base64(HMAC-SHA1(secret, username)), valid for
``ttl_s``: a page's credential stops working soon after, and no long-lived password is served.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time


def page_ice_servers(urls: list[str], turn_secret: str | None, ttl_s: int, now: float | None = None) -> list[dict]:
    stun = [u for u in urls if not u.startswith(("turn:", "turns:"))]
    turn = [u for u in urls if u.startswith(("turn:", "turns:"))]
    servers: list[dict] = [{"urls": stun}] if stun else []
    if turn and turn_secret:
        username = f"{int((now or time.time()) + ttl_s)}:brisk"
        digest = hmac.new(turn_secret.encode(), username.encode(), hashlib.sha1).digest()
        servers.append({"urls": turn, "username": username, "credential": base64.b64encode(digest).decode()})
    elif turn:
        servers.append({"urls": turn})  # a TURN server that needs no credential (or its own)
    return servers
