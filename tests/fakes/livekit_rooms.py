"""Stand-ins for what a LiveKit worker runs in each room, and the waits that go with them.

livekit-agents runs each room on a job thread with an event loop of its own, so ``Rooms`` keeps
each room's loop, ends a room through it (``end``), and is watched by polling (``tests.waiting.until``)
rather than with asyncio primitives of the test's loop. ``bare_call`` stands in for
``agent.call.pipeline.build_call`` where only the room's transport matters.
"""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineWorker

from agent.transports.livekit import RoomJob
from tests.fakes.livekit_server import FakeLiveKitServer
from tests.waiting import until


class Rooms:
    """A room runner that holds each room open until the test ends it (or fails at once)."""

    def __init__(self, fail_with: Exception | None = None):
        self.jobs: list[RoomJob] = []
        self.cancelled: list[str] = []
        self.threads: list[threading.Thread] = []
        self.fail_with = fail_with
        self._rooms: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Event]] = {}

    async def __call__(self, job: RoomJob) -> None:
        ended = asyncio.Event()
        self._rooms[job.room] = (asyncio.get_running_loop(), ended)
        self.threads.append(threading.current_thread())
        self.jobs.append(job)
        if self.fail_with is not None:
            raise self.fail_with
        try:
            await ended.wait()
        except asyncio.CancelledError:
            self.cancelled.append(job.room)
            raise

    @property
    def loops(self) -> list[asyncio.AbstractEventLoop]:
        return [loop for loop, _ in self._rooms.values()]

    def started(self, room: str) -> bool:
        return room in self._rooms

    async def wait_for(self, count: int, timeout: float = 10.0) -> None:
        await until(lambda: len(self.jobs) >= count, timeout=timeout)

    def end(self, room: str) -> None:
        loop, ended = self._rooms[room]
        loop.call_soon_threadsafe(ended.set)


async def offer(livekit: FakeLiveKitServer, rooms: Rooms, name: str):
    """Dispatch a room and wait until it runs: (worker, job), or None if every worker declined.

    A worker with no room yet takes one at a time: livekit-agents counts a room it is still
    starting as its whole load threshold then.
    """
    taken = await livekit.dispatch(name)
    if taken is not None:
        await until(lambda: rooms.started(name))
    return taken


def bare_call(_resources, transport, **_kwargs) -> SimpleNamespace:
    """A call whose pipeline is the transport alone: joining the room is all it does."""
    pipeline = Pipeline([transport.input(), transport.output()])
    return SimpleNamespace(worker=PipelineWorker(pipeline, idle_timeout_secs=None), recorder=None, control=None)
