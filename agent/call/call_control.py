"""What the conversation may do to the call itself: hand the caller to a person, or hang up.

One ``CallControl`` per call, made by the transport that carries it and given to the tools
(``FunctionCallParams.app_resources``). The base class is what every transport can do: end the
call after the bot's last words, by pipecat's ``EndWorkerFrame`` (the output plays out, then
the pipeline, the transport and so the WebRTC peer, Twilio stream or LiveKit room close).
A transport that can hand over overrides ``transfer``: Twilio redirects the call to
``BRISK_TRANSFER_NUMBER`` (agent/transports/twilio.py), the browser page shows that a person is
being connected (agent/transports/webrtc.py).
"""

from __future__ import annotations

from typing import Literal

from uuid import uuid4

from loguru import logger

Outcome = Literal["completed", "transferred", "abandoned"]


def mask_number(number: str) -> str:
    """A phone number with all but its last four digits hidden ("+15550100123" -> "+*******0123"):
    what records and logs keep of a caller."""
    digits = sum(ch.isdigit() for ch in number)
    seen, masked = 0, []
    for ch in number:
        if ch.isdigit():
            seen += 1
            masked.append(ch if seen > digits - 4 else "*")
        else:
            masked.append(ch)
    return "".join(masked)


class CallControl:
    """The call's own controls; see the module docstring."""

    transport = "unknown"

    def __init__(self, call_id: str = ""):
        self.call_id = call_id or f"call-{uuid4().hex[:12]}"
        self.worker = None  # the call's PipelineWorker, set once it is built
        self.caller = ""  # who called, masked (mask_number), when the transport knows
        self.outcome: Outcome | None = None  # set when the bot ended or handed over the call
        self.ended_by: str | None = None  # "end_call", "idle", "transfer"

    @property
    def can_transfer(self) -> bool:
        """Whether a person can take this call now."""
        return False

    async def transfer(self, worker, *, failed_text: str) -> None:
        """Hand the caller to a person once what was said before has played; when that fails,
        the caller hears ``failed_text`` and the call goes on. Returns at once."""
        raise NotImplementedError(f"{self.transport} calls cannot be handed over")

    async def ending(self, by: str, outcome: Outcome = "completed") -> None:
        """Note why the bot is ending the call (its record keeps it); a transport may tell its client."""
        logger.info(f"call {self.call_id}: the bot ends the call ({by})")
        self.ended_by, self.outcome = by, outcome
