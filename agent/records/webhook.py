"""The post-call webhook: each ended call's record POSTed to ``BRISK_WEBHOOK_URL``, signed, retried.

Consumes the outbox (agent/records/store.py writes a row in the transaction that ends a call), so
a receiver that is down, or a restart of Brisk, loses nothing; the sender runs beside the calls
in its own task and never delays one. A delivery is::

    POST <BRISK_WEBHOOK_URL>
    Content-Type: application/json
    X-Brisk-Delivery: <id>          the same id on every retry of it: a receiver may drop repeats
    X-Brisk-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
    {"event": "call.ended", "call": {... GET /api/calls/{id} ...}}

Any 2xx is delivered (the row is deleted); anything else, or no answer within 10 s, is tried
again after ``retry_s``, doubling up to 10 minutes, for as long as it takes (the row stays until
then, its ``last_error`` saying why). Delivery is at
least once: a receiver that answers after Brisk stopped waiting can see a delivery twice, with
the same ``X-Brisk-Delivery``. Measures: ``delivered`` and ``failed_attempts`` of this process.
"""

from __future__ import annotations

import asyncio
import random
import time

import httpx
from loguru import logger

from agent.records.store import CallRecords
from agent.security.signing import signature

MAX_RETRY_S = 600.0
POST_TIMEOUT_S = 10.0
POLL_S = 5.0  # for rows other servers queued, or that came due while nothing woke the sender


class WebhookSender:
    """Delivers the outbox's rows until stopped; ``start()`` once per process."""

    def __init__(self, records: CallRecords, url: str, secret: str, *, retry_s: float = 2.0,
                 client: httpx.AsyncClient | None = None):
        self.records = records
        self.url = url
        self.secret = secret
        self.retry_s = retry_s
        self.delivered = 0
        self.failed_attempts = 0
        self._client = client or httpx.AsyncClient(timeout=POST_TIMEOUT_S)
        self._task: asyncio.Task | None = None
        self._retry_at: float | None = None  # time.monotonic() of the earliest retry this round set

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="webhook-sender")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._client.aclose()

    async def _run(self) -> None:
        while True:
            self.records.delivery_owed.clear()
            self._retry_at = None  # set by this round's failed deliveries
            try:
                batch = await self.records.claim_deliveries(limit=20, lease_s=POST_TIMEOUT_S * 3)
                await asyncio.gather(*(self._deliver(*row) for row in batch))
            except asyncio.CancelledError:
                raise
            except Exception:  # the database is down, say: the rows wait, and so do we
                logger.exception("webhook: could not read the outbox; trying again shortly")
                batch = []
            if len(batch) < 20:
                # Until a new call ends, the first retry of this round is due, or the poll.
                wait = POLL_S if self._retry_at is None else min(POLL_S, max(0.0, self._retry_at - time.monotonic()))
                try:
                    await asyncio.wait_for(self.records.delivery_owed.wait(), wait)
                except asyncio.TimeoutError:
                    pass

    async def _deliver(self, delivery_id: int, payload: str, attempts: int) -> None:
        body = payload.encode()
        headers = {"content-type": "application/json", "x-brisk-delivery": str(delivery_id),
                   "x-brisk-signature": signature(self.secret, body, int(time.time()))}
        try:
            response = await self._client.post(self.url, content=body, headers=headers)
            error = None if response.is_success else f"HTTP {response.status_code}"
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}"
        if error is None:
            await self.records.delivered(delivery_id)
            self.delivered += 1
            return
        self.failed_attempts += 1
        # Doubling, with jitter so a receiver coming back is not hit by every server at once.
        after = min(MAX_RETRY_S, self.retry_s * 2 ** attempts) * random.uniform(0.8, 1.2)
        logger.warning(f"webhook: delivery {delivery_id} failed ({error}); retry {attempts + 1} in {after:.1f} s")
        await self.records.retry_later(delivery_id, after_s=after, error=error)
        due = time.monotonic() + after
        self._retry_at = due if self._retry_at is None else min(self._retry_at, due)
