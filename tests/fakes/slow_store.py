"""The shop's store, slow to answer: a tool call that runs past the filler's budget."""

from __future__ import annotations

import asyncio


class SlowStore:
    """Wraps a ``ShopStore``; every order lookup takes ``delay_s`` longer."""

    def __init__(self, store, delay_s: float):
        self._store = store
        self.delay_s = delay_s

    async def order(self, number: str):
        await asyncio.sleep(self.delay_s)
        return await self._store.order(number)

    def __getattr__(self, name):
        return getattr(self._store, name)
