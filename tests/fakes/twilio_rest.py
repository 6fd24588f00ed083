"""Twilio's REST API for one thing, redirecting a live call: a real HTTP server for tests.

``POST /2010-04-01/Accounts/{AccountSid}/Calls/{CallSid}.json`` with HTTP basic auth (the
account SID and auth token) and a form body (``Twiml=...``), answered with the call resource
as Twilio's JSON, the way the ``twilio`` package's ``calls(sid).update(twiml=...)`` expects it.
Every update is recorded with its arrival time; a wrong credential gets Twilio's 401.
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qsl

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse


@dataclass
class CallUpdate:
    at: float  # time.monotonic() it arrived
    call_sid: str
    form: dict


@dataclass
class TwilioRestStandIn:
    account_sid: str
    auth_token: str
    updates: list[CallUpdate] = field(default_factory=list)
    refused: int = 0

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/2010-04-01/Accounts/{account_sid}/Calls/{call_sid}.json")
        async def update_call(account_sid: str, call_sid: str, request: Request):
            expected = base64.b64encode(f"{self.account_sid}:{self.auth_token}".encode()).decode()
            if account_sid != self.account_sid or request.headers.get("authorization") != f"Basic {expected}":
                self.refused += 1
                return JSONResponse({"code": 20003, "message": "Authenticate", "status": 401}, status_code=401)
            form = dict(parse_qsl((await request.body()).decode(), keep_blank_values=True))
            self.updates.append(CallUpdate(time.monotonic(), call_sid, form))
            return {"sid": call_sid, "account_sid": account_sid, "status": "in-progress",
                    "uri": f"/2010-04-01/Accounts/{account_sid}/Calls/{call_sid}.json"}

        return app
