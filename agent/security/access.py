"""The public doors' checks: call credentials, Origin, rate limits and bodies capped as they are read.

Consumes requests to the routes that start work, join a room or read data; raises the HTTP
error that says why one is refused (401/403 credential or origin, 413 body, 429 with
``Retry-After``). Logs each refusal at WARNING with the client address, never the credential.

Calls are **open** (no credential needed) only when the server listens on loopback with no
credential configured (``make run``), or with ``BRISK_ALLOW_OPEN``; otherwise a call needs the
single-use token the page got from ``POST /api/session`` (``X-Brisk-Call-Token``) or
``Authorization: Bearer <BRISK_API_KEY>``. A request with an ``Origin`` (every browser POST has
one) must come from this server's own page or an origin in ``BRISK_ALLOWED_ORIGINS``: a page on
another site cannot start calls with its visitors' browsers.
"""

from __future__ import annotations

import hmac
import ipaddress
from urllib.parse import urlsplit

from fastapi import HTTPException, Request
from starlette.requests import HTTPConnection
from loguru import logger

from agent.security.call_tokens import CallTokens
from agent.security.rate_limit import RateLimiter

CALL_TOKEN_HEADER = "x-brisk-call-token"
# Rate-limited separately: a flood of offers must not use up a caller's ICE patches.
GROUPS = ("session", "offer", "patch", "livekit", "twilio")


def is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def client_of(connection: HTTPConnection) -> str:
    """The client's address, for a request or a WebSocket."""
    return connection.client.host if connection.client else "?"


class Access:
    """Every door's checks for one server (see the module docstring)."""

    def __init__(self, *, api_key: str | None, allowed_origins: list[str], open_calls: bool,
                 token_ttl_s: float, per_minute: int, burst: int):
        self.api_key = api_key
        self.allowed_origins = {_origin(o) for o in allowed_origins}
        self.open_calls = open_calls
        self.tokens = CallTokens(token_ttl_s)
        self.limiters = {group: RateLimiter(per_minute, burst) for group in GROUPS}

    @classmethod
    def for_config(cls, config) -> "Access":
        return cls(api_key=config.api_key, allowed_origins=config.allowed_origins, open_calls=config.calls_open,
                   token_ttl_s=config.call_token_ttl_secs, per_minute=config.rate_limit_per_minute,
                   burst=config.rate_limit_burst)

    def retry_after(self, connection: HTTPConnection, group: str) -> int | None:
        """Take one of this client's requests to ``group``: None, or seconds until it has one."""
        return self.limiters[group].retry_after(client_of(connection))

    def limit(self, request: Request, group: str) -> None:
        """429 with ``Retry-After`` when this client has used up its requests to ``group``."""
        wait = self.retry_after(request, group)
        if wait is not None:
            logger.warning(f"rate limit: {group} request from {client_of(request)} refused; retry in {wait} s")
            raise HTTPException(429, f"too many {group} requests; retry in {wait} s", headers={"Retry-After": str(wait)})

    def check_origin(self, request: Request) -> None:
        """403 for a browser request from a page that is neither this server's nor an allowed one."""
        origin = request.headers.get("origin")
        if origin is None:
            return  # not a browser: the credential decides
        own = request.headers.get("host", "").lower()
        try:
            if urlsplit(origin).netloc.lower() == own or _origin(origin) in self.allowed_origins:
                return
        except ValueError:  # not a URL at all ("//[": urlsplit's unclosed IPv6 host): refused below
            pass
        logger.warning(f"refused a request from origin {origin!r} ({client_of(request)}): not in BRISK_ALLOWED_ORIGINS")
        raise HTTPException(403, f"origin {origin} may not use this server; it must be in BRISK_ALLOWED_ORIGINS")

    def has_api_key(self, request: Request) -> bool:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        return bool(self.api_key) and scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), self.api_key.encode())

    def authorize_call(self, request: Request) -> None:
        """401 unless the request may start a call: the API key, a fresh call token, or open calls."""
        if self.has_api_key(request):
            return
        token = request.headers.get(CALL_TOKEN_HEADER)
        if token is not None:
            if self.tokens.redeem(token):
                return
            if not self.open_calls:
                logger.warning(f"refused a call from {client_of(request)}: call token unknown, spent or expired")
                raise HTTPException(401, "the call token is unknown, already used or expired: get a new one "
                                         "from POST /api/session")
        if self.open_calls:
            return
        logger.warning(f"refused a call from {client_of(request)}: no credential")
        raise HTTPException(401, "a call needs a call token (POST /api/session, sent as X-Brisk-Call-Token) "
                                 "or Authorization: Bearer <BRISK_API_KEY>", headers={"WWW-Authenticate": "Bearer"})

    def authorize_session(self, request: Request) -> None:
        """Who may get a call token: this server's page or an allowed one (by Origin), API clients, or anyone when open."""
        if self.open_calls or self.has_api_key(request):
            return
        if request.headers.get("origin") is None:
            raise HTTPException(401, "call tokens are for browser pages (an Origin in BRISK_ALLOWED_ORIGINS) "
                                     "or clients with Authorization: Bearer <BRISK_API_KEY>")


async def read_capped(request: Request, max_bytes: int, what: str) -> bytes:
    """The body, read no further than ``max_bytes`` (413 past it), whatever Content-Length says."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise HTTPException(413, f"{what} too large ({declared} bytes > {max_bytes})")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > max_bytes:
            logger.warning(f"refused a {what} from {client_of(request)}: body over {max_bytes} bytes")
            raise HTTPException(413, f"{what} too large (over {max_bytes} bytes)")
    return bytes(body)


def _origin(url: str) -> str:
    parts = urlsplit(url.strip().rstrip("/").lower())
    return f"{parts.scheme}://{parts.netloc}"
