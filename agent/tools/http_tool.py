"""A business's own HTTP tool, run: the request its file declares, signed, and the reply said.

Consumes a ``DeclaredTool`` with ``http`` (agent/business/tool_spec.py) and the arguments of one call; sends

    POST <url>                       (GET, DELETE: the arguments as query parameters instead)
    Content-Type: application/json
    X-Brisk-Call-Id: <the call's id>
    X-Brisk-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(BRISK_TOOL_SECRET, "<t>.<body>")>
    <the file's headers, ${VAR} read from the environment>
    {"party_size": 4, "day": "friday"}

and returns an ``Outcome``: what the caller hears (the ``say`` template filled from the JSON
reply and the arguments, as they are said: "Thursday") or why it failed. Arguments that break the tool's schema, no answer
within ``timeout_secs``, a 4xx/5xx, a reply that is not JSON or breaks the ``response`` schema, or
a template it cannot fill: the outcome is failed and says why, for the log and the call's record;
the caller hears the business's ``tool_failed_text`` (agent/tools/functions.py).

One ``BusinessApi`` per process: its HTTP client's connection pool is shared by every call.
Measures each request's ``elapsed_ms``, in the outcome.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import httpx
from jsonschema import Draft202012Validator
from loguru import logger

from agent.business.tool_spec import DeclaredTool, expand_env
from agent.security.signing import HEADER, signature
from agent.tools.arguments import read_back

_BODY_METHODS = ("POST", "PUT", "PATCH")


@dataclass
class Outcome:
    """One request's result: ``said`` when it worked, ``error`` when not; the rest is for the record."""

    said: str | None
    response: object = None
    error: str | None = None
    status: int | None = None
    elapsed_ms: float | None = None
    request: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None

    def result(self) -> dict:
        """What the tool's function call returns (an LLM reads it)."""
        if self.ok:
            return {"ok": True, "said": self.said, "response": self.response}
        return {"ok": False, "error": self.error}

    def record(self) -> dict:
        """What the call's record keeps: the request (its URL as the file writes it: no secret
        read from the environment), the status and the reply, or the error."""
        kept = {"request": self.request, "status": self.status, "elapsed_ms": self.elapsed_ms,
                "outcome": "ok" if self.ok else "failed"}
        return {**kept, **({"response": self.response} if self.ok else {"error": self.error})}


class BusinessApi:
    """Sends the business's HTTP tools' requests; see the module docstring."""

    def __init__(self, secret: str, client: httpx.AsyncClient | None = None):
        self.secret = secret
        self.client = client or httpx.AsyncClient()

    async def call(self, tool: DeclaredTool, arguments: dict, *, call_id: str = "") -> Outcome:
        """One request of ``tool``; logged here, once, whichever way it went."""
        outcome = await self._send(tool, arguments, call_id)
        if outcome.ok:
            logger.info(f"call {call_id}: tool {tool.name}: HTTP {outcome.status} in {outcome.elapsed_ms:.0f} ms")
        else:
            logger.warning(f"call {call_id}: tool {tool.name} failed: {outcome.error}")
        return outcome

    async def _send(self, tool: DeclaredTool, arguments: dict, call_id: str) -> Outcome:
        request = {"method": tool.http.method, "url": tool.http.url, "arguments": arguments}
        problems = sorted(Draft202012Validator(tool.parameters).iter_errors(arguments), key=lambda e: list(e.path))
        if problems:
            where = ".".join(str(p) for p in problems[0].absolute_path)
            return Outcome(None, error=f"arguments{'.' + where if where else ''}: {problems[0].message}", request=request)
        body = json.dumps(arguments, separators=(",", ":")).encode() if tool.http.method in _BODY_METHODS else b""
        headers = {name: expand_env(value) for name, value in tool.http.headers.items()}
        headers.update({"Content-Type": "application/json", "X-Brisk-Call-Id": call_id,
                        HEADER: signature(self.secret, body, int(time.time()))})
        params = None if body else {k: _query_value(v) for k, v in arguments.items()}
        started = time.monotonic()
        try:
            reply = await self.client.request(tool.http.method, expand_env(tool.http.url), content=body or None,
                                              params=params, headers=headers, timeout=tool.http.timeout_secs)
        except httpx.TimeoutException:
            return Outcome(None, error=f"no answer within {tool.http.timeout_secs:g} s", request=request,
                           elapsed_ms=elapsed_since(started))
        except httpx.HTTPError as error:
            return Outcome(None, error=f"the request failed: {type(error).__name__}: {error}", request=request,
                           elapsed_ms=elapsed_since(started))
        elapsed = elapsed_since(started)
        if reply.status_code >= 400:
            return Outcome(None, error=f"HTTP {reply.status_code}: {reply.text[:200]}", status=reply.status_code,
                           request=request, elapsed_ms=elapsed)
        try:
            data = reply.json()
        except ValueError:
            return Outcome(None, error=f"the reply is not JSON: {reply.text[:200]!r}", status=reply.status_code,
                           request=request, elapsed_ms=elapsed)
        problem = next(iter(Draft202012Validator(tool.response).iter_errors(data)), None)
        if problem is not None:
            where = ".".join(str(p) for p in problem.absolute_path)
            return Outcome(None, response=data, error=f"the reply breaks the tool's response schema at "
                           f"{where or '(top)'}: {problem.message}", status=reply.status_code, request=request,
                           elapsed_ms=elapsed)
        try:
            said = read_back(tool, tool.say, arguments, data if isinstance(data, dict) else None)
        except (KeyError, ValueError, IndexError) as error:
            return Outcome(None, response=data, error=f"say cannot be filled: the reply has no {error}",
                           status=reply.status_code, request=request, elapsed_ms=elapsed)
        return Outcome(said, response=data, status=reply.status_code, request=request, elapsed_ms=elapsed)

    async def close(self) -> None:
        await self.client.aclose()


def _query_value(value) -> str:
    return json.dumps(value) if isinstance(value, bool) else str(value)


def elapsed_since(started: float) -> float:
    """Milliseconds since ``started`` (a ``time.monotonic()``), to a tenth."""
    return round((time.monotonic() - started) * 1000, 1)
