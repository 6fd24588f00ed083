"""A booking Brisk keeps: a tool the business file declares with ``store: bookings``.

Consumes a ``DeclaredTool`` with ``store: bookings`` (agent/business/tool_spec.py) and the
arguments its form gathered (agent/tools/form.py); writes them as one booking in the shop's
store (agent/tools/store.py: the tool's name, the arguments as JSON, the call's id) and returns
an ``Outcome`` like an HTTP tool's: the tool's ``say`` filled from the arguments and the
``{booking_id}``, or, when the store cannot be written, why (the caller hears the tool's
``failed`` line, and nothing is said to be booked). The bike shop's rentals are such a tool.
Measures the write's ``elapsed_ms``, in the outcome.
"""

from __future__ import annotations

import time

from loguru import logger

from agent.business.tool_spec import DeclaredTool
from agent.tools.arguments import read_back
from agent.tools.http_tool import Outcome, elapsed_since


async def book(store, tool: DeclaredTool, arguments: dict, *, call_id: str = "") -> Outcome:
    """Write the booking ``arguments`` describe; logged here, once, whichever way it went."""
    request = {"store": tool.store, "arguments": arguments}
    started = time.monotonic()
    try:
        if store is None:
            raise RuntimeError("this process has no store (BRISK_DATA_DIR)")
        booking_id = await store.book(tool.name, arguments, call_id=call_id)
    except Exception as error:  # the caller hears that nothing was booked; the log says why
        logger.exception(f"call {call_id}: tool {tool.name}: the booking could not be written")
        return Outcome(None, error=f"the booking could not be written: {type(error).__name__}: {error}",
                       request=request, elapsed_ms=elapsed_since(started))
    reply = {"booking_id": booking_id}
    logger.info(f"call {call_id}: tool {tool.name}: booking {booking_id} written")
    return Outcome(read_back(tool, tool.say, arguments, reply), response=reply, request=request,
                   elapsed_ms=elapsed_since(started))
