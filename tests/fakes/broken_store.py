"""The shop's store with its database gone: every read and write fails the way SQLAlchemy does."""

from __future__ import annotations

from sqlalchemy.exc import OperationalError


class BrokenStore:
    """Stands where a ``ShopStore`` does; each call raises ``OperationalError`` and is counted."""

    def __init__(self):
        self.failed = 0

    def _fail(self):
        self.failed += 1
        raise OperationalError("SELECT ...", {}, Exception("unable to open database file"))

    async def order(self, number: str):
        self._fail()

    async def book(self, tool: str, details: dict, *, call_id: str = ""):
        self._fail()
