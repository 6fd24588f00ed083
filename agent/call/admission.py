"""One admission gate for every transport: a call is taken only while a line is free.

WebRTC offers, Twilio calls and LiveKit jobs all ask the same ``CallAdmission`` before any
pipeline is built. ``admit`` decides and takes the line in one step with no await in between,
so concurrent offers cannot all pass a check that only one of them fits; whoever was admitted
must ``release`` the ticket when the call ends (``Ticket`` is also a context manager).

A phone call is admitted at its webhook but its media stream arrives a moment later: the
ticket is held for it as a reservation, and a reservation nobody claims within
``reservation_s`` (the caller hung up while it rang) frees its line again.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

from loguru import logger


@dataclass(eq=False)
class Ticket:
    """A line held for one call. ``release()`` frees it; releasing twice is harmless."""

    gate: CallAdmission
    transport: str
    call_id: str
    taken_at: float = field(default_factory=time.monotonic)
    reserved_until: float | None = None  # held for a call whose media has not arrived yet
    released: bool = False
    key: int = -1

    def claim(self):
        """The reserved call arrived: the line stays taken until ``release``."""
        self.reserved_until = None

    def release(self):
        if not self.released:
            self.released = True
            self.gate._release(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


class CallAdmission:
    """The process's call limit, shared by every transport; see the module docstring."""

    def __init__(self, max_calls: int, *, reservation_s: float = 30.0):
        self.max_calls = max_calls
        self.reservation_s = reservation_s
        self._held: dict[int, Ticket] = {}
        self._ids = itertools.count()
        self.refused = 0

    @property
    def active(self) -> int:
        """Lines taken now (calls in progress and reservations still waiting)."""
        self._expire()
        return len(self._held)

    @property
    def load(self) -> float:
        """Lines taken / lines there are."""
        return self.active / self.max_calls

    def by_transport(self) -> dict[str, int]:
        self._expire()
        counts: dict[str, int] = {}
        for ticket in self._held.values():
            counts[ticket.transport] = counts.get(ticket.transport, 0) + 1
        return counts

    def admit(self, transport: str, call_id: str = "", *, reserve: bool = False) -> Ticket | None:
        """Take a line for a call, or None when every line is taken."""
        self._expire()
        if len(self._held) >= self.max_calls:
            self.refused += 1
            logger.warning(f"busy: refused a {transport} call, {len(self._held)}/{self.max_calls} lines taken")
            return None
        ticket = Ticket(self, transport, call_id, key=next(self._ids))
        if reserve:
            ticket.reserved_until = ticket.taken_at + self.reservation_s
        self._held[ticket.key] = ticket
        return ticket

    def _release(self, ticket: Ticket):
        self._held.pop(ticket.key, None)

    def _expire(self):
        now = time.monotonic()
        for ticket in [t for t in self._held.values() if t.reserved_until is not None and t.reserved_until < now]:
            logger.info(f"{ticket.transport} call {ticket.call_id}: its media never came; line freed")
            ticket.release()
