"""A business's own API, the one its file's HTTP tools call: a real HTTP server on loopback.

It answers what the plumbing example's tools ask (agent/business/examples/brightwater_plumbing.yaml):
``GET /availability?day=thursday`` ("An engineer is free on Thursday from 10 am.") and
``POST /bookings`` (a visit booked, its reference). Every request is kept with its method, path,
query, headers and body, and whether its ``X-Brisk-Signature`` checks out with the shared secret
(``agent.security.signing.verify``), as a real receiver would check it.

``mode`` makes it misbehave: ``"500"`` answers 500, ``"not json"`` answers HTML, ``"no message"``
answers JSON without the field the tool says, ``"slow"`` answers after ``slow_s``.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse

from agent.security.signing import verify

FREE_FROM = {"monday": "9 am", "tuesday": "2 pm", "wednesday": "11 am", "thursday": "10 am", "friday": "1 pm",
             "saturday": "9 am"}


@dataclass
class Received:
    method: str
    path: str
    query: dict
    headers: dict
    body: dict | None
    signed: bool


@dataclass
class BusinessApiStandIn:
    secret: str
    received: list[Received] = field(default_factory=list)
    mode: str = "ok"
    slow_s: float = 2.0
    bookings: list[dict] = field(default_factory=list)

    def app(self) -> FastAPI:
        app = FastAPI()

        async def keep(request: Request) -> Received:
            body = await request.body()
            kept = Received(
                method=request.method, path=request.url.path, query=dict(request.query_params),
                headers={k.lower(): v for k, v in request.headers.items()},
                body=json.loads(body) if body else None,
                signed=verify(self.secret, body, request.headers.get("x-brisk-signature", "")))
            self.received.append(kept)
            return kept

        async def misbehaving():
            if self.mode == "slow":
                await asyncio.sleep(self.slow_s)
            if self.mode == "500":
                return JSONResponse({"error": "the diary is down"}, status_code=500)
            if self.mode == "not json":
                return HTMLResponse("<html>Bad gateway</html>")
            if self.mode == "no message":
                return JSONResponse({"free": True})
            return None

        @app.get("/availability")
        async def availability(request: Request):
            kept = await keep(request)
            if (wrong := await misbehaving()) is not None:
                return wrong
            day = kept.query.get("day", "")
            if day not in FREE_FROM:
                return {"free": False, "message": f"Sorry, nobody is free on {day.capitalize() or 'that day'}."}
            return {"free": True, "message": f"An engineer is free on {day.capitalize()} from {FREE_FROM[day]}."}

        @app.post("/bookings")
        async def book(request: Request):
            kept = await keep(request)
            if (wrong := await misbehaving()) is not None:
                return wrong
            reference = f"BW{100 + len(self.bookings)}"
            self.bookings.append({**(kept.body or {}), "reference": reference})
            return {"reference": reference}

        return app
