"""The call records over HTTP, for the business's operators.

    GET /api/calls?limit=N&cursor=C   {"calls": [{"id", "status", "transport", "started_at",
                                       "ended_at", "ended_by", "turn_count", ...}], "next": cursor}
    GET /api/calls/{id}               the call with "turns": [{"user_text", "bot_text",
                                       "interrupted", "latency_ms", "tool_calls", ...}]
    GET /api/calls/{id}/audio         its recording (audio/wav: caller left, bot right), with
                                       BRISK_RECORD_AUDIO; 404 when none is kept

All need ``Authorization: Bearer <BRISK_OPERATOR_KEY>``. With no key configured only clients on
this machine (loopback) are answered: records hold what callers said.
"""

from __future__ import annotations

import hmac
import ipaddress

from pathlib import Path

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import FileResponse


def operator_check(operator_key: str | None):
    """Whether a request is the operator's: it carries the operator key (or, with none set, is local)."""

    def is_operator(request: Request) -> bool:
        if operator_key is None:
            host = request.client.host if request.client else ""
            try:
                return ipaddress.ip_address(host).is_loopback
            except ValueError:
                return False
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), operator_key.encode())

    return is_operator


def operator_only(operator_key: str | None):
    """A FastAPI dependency: 401 unless the request is the operator's (``operator_check``)."""
    is_operator = operator_check(operator_key)

    async def check(request: Request) -> None:
        if is_operator(request):
            return
        if operator_key is None:
            raise HTTPException(401, "this is only served to this machine unless BRISK_OPERATOR_KEY is set")
        raise HTTPException(401, "send the operator key: Authorization: Bearer <BRISK_OPERATOR_KEY>",
                            headers={"WWW-Authenticate": "Bearer"})

    return check


def records_router(runtime, operator_key: str | None) -> APIRouter:
    router = APIRouter(dependencies=[Depends(operator_only(operator_key))])

    def records():
        resources = runtime.resources
        if resources is None or resources.records is None:
            raise HTTPException(503, "Brisk is still starting")
        return resources.records

    @router.get("/api/calls")
    async def list_calls(limit: int = Query(50, ge=1, le=200), cursor: str | None = Query(None, max_length=512)):
        try:
            calls, next_cursor = await records().calls(limit=limit, cursor=cursor)
        except ValueError as error:
            raise HTTPException(400, str(error)) from None
        return {"calls": calls, "next": next_cursor}

    @router.get("/api/calls/{call_id}")
    async def get_call(call_id: str):
        call = await records().call(call_id)
        if call is None:
            raise HTTPException(404, f"no call {call_id!r}")
        return call

    @router.get("/api/calls/{call_id}/audio", response_class=FileResponse)
    async def get_audio(call_id: str):
        path = await records().recording(call_id)
        if path is None:
            raise HTTPException(404, f"no recording of call {call_id!r} (BRISK_RECORD_AUDIO off, or deleted by retention)")
        if not Path(path).is_file():
            raise HTTPException(404, f"the recording of call {call_id!r} is not on this server")
        return FileResponse(path, media_type="audio/wav", filename=Path(path).name)

    return router
