"""Waiting in tests on what happens, not for a while: a condition polled until it holds, and a
pipeline's own events.

The timeouts only stop a test that would otherwise hang; nothing is asserted about speed.
"""

import asyncio
import time
from collections.abc import Awaitable, Callable

from pipecat.frames.frames import Frame
from pipecat.pipeline.worker import PipelineWorker


async def until(condition: Callable[[], bool | Awaitable[bool]], what: str | Callable[[], object] = "the condition",
                timeout: float = 30.0) -> None:
    """Return as soon as ``condition()`` holds (awaited when it returns an awaitable). ``what``
    names it in the timeout's message; a callable is asked then (a server's status, say)."""
    deadline = time.monotonic() + timeout
    while True:
        held = condition()
        if asyncio.iscoroutine(held) or isinstance(held, asyncio.Future):
            held = await held
        if held:
            return
        assert time.monotonic() < deadline, f"timed out waiting for {what() if callable(what) else what}"
        await asyncio.sleep(0.01)


def started(worker: PipelineWorker) -> asyncio.Event:
    """Set once ``worker``'s pipeline has started (pipecat's ``on_pipeline_started``)."""
    event = asyncio.Event()

    @worker.event_handler("on_pipeline_started")
    async def on_started(_worker, _frame):
        event.set()

    return event


def reaching_the_end(worker: PipelineWorker, *frame_types: type[Frame]) -> list[Frame]:
    """The frames of ``frame_types`` that went all the way through ``worker``'s pipeline, as they do."""
    reached: list[Frame] = []
    worker.add_reached_downstream_filter(frame_types)

    @worker.event_handler("on_frame_reached_downstream")
    async def on_reached(_worker, frame):
        if isinstance(frame, frame_types):
            reached.append(frame)

    return reached
