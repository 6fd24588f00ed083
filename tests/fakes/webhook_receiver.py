"""A business's webhook receiver: a real HTTP server that keeps every delivery Brisk POSTs to it.

Each delivery is kept with its headers and body, and its signature is checked with the shared
secret the way a receiver would (``agent.security.signing.verify``). ``fail_next`` makes the
next deliveries answer 503, a receiver having a bad moment.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from fastapi import FastAPI, Request, Response

from agent.security.signing import verify


@dataclass
class Delivery:
    delivery_id: str
    signed: bool
    body: dict


@dataclass
class WebhookReceiver:
    secret: str
    deliveries: list[Delivery] = field(default_factory=list)
    fail_next: int = 0

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/hooks/calls")
        async def receive(request: Request):
            if self.fail_next > 0:
                self.fail_next -= 1
                return Response(status_code=503)
            body = await request.body()
            self.deliveries.append(Delivery(
                delivery_id=request.headers.get("x-brisk-delivery", ""),
                signed=verify(self.secret, body, request.headers.get("x-brisk-signature", "")),
                body=json.loads(body)))
            return Response(status_code=204)

        return app
