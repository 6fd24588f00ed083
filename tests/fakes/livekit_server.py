"""The agent-dispatch side of a LiveKit server, for testing workers without one.

A real WebSocket endpoint at ``<prefix>/agent`` speaking LiveKit's worker protocol (protobuf
``WorkerMessage`` in, ``ServerMessage`` out), as livekit-agents' worker uses it: it checks the
worker's bearer token (an ``agent`` grant signed with the API secret), answers ``register``,
records every status and job update and the jobs a reconnected worker reports as still its
own (``MigrateJobRequest``), and on :meth:`FakeLiveKitServer.dispatch` offers a new room to the
workers in the order they registered until one accepts, then assigns it with a room token
minted for the identity the worker chose. A real server skips workers that reported themselves
full; offering to them anyway is what shows that a full worker declines. No room signalling
or media is served, so no room can be joined here: the tests run rooms with a stand-in.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from dataclasses import dataclass, field

from fastapi import FastAPI, WebSocket, WebSocketDisconnect
from livekit import api
from livekit.protocol import agent as agent_pb
from livekit.protocol import models as models_pb


@dataclass
class WorkerSeen:
    """One worker connection, as the server sees it."""

    worker_id: str
    websocket: WebSocket
    agent_name: str
    statuses: list[agent_pb.UpdateWorkerStatus] = field(default_factory=list)
    answers: list[agent_pb.AvailabilityResponse] = field(default_factory=list)
    migrated: list[str] = field(default_factory=list)  # job ids it reported after reconnecting
    connected: bool = True

    @property
    def status(self) -> agent_pb.UpdateWorkerStatus | None:
        return self.statuses[-1] if self.statuses else None


class FakeLiveKitServer:
    """Dispatches rooms to the workers connected to it; see the module docstring."""

    def __init__(self, api_key: str = "devkey", api_secret: str = "devsecret-devsecret-devsecret-00"):
        self.api_key = api_key
        self.api_secret = api_secret
        self.workers: list[WorkerSeen] = []
        self.job_updates: list[agent_pb.UpdateJobStatus] = []
        self.rejected_connections = 0
        self.url = ""  # set by the test once the app is served: sent in assignments
        self._ids = itertools.count(1)
        self._answers: dict[str, asyncio.Future] = {}
        self.registered = asyncio.Condition()

    def app(self, prefix: str = "") -> FastAPI:
        """The ASGI app; workers connect to ``ws://host:port<prefix>/agent``."""
        app = FastAPI()
        app.add_api_websocket_route(f"{prefix}/agent", self._agent)
        return app

    # -- what tests do -----------------------------------------------------------------------

    async def wait_for_workers(self, count: int, timeout: float = 10.0) -> list[WorkerSeen]:
        async def enough():
            async with self.registered:
                await self.registered.wait_for(lambda: len(self.connected_workers) >= count)

        await asyncio.wait_for(enough(), timeout)
        return self.connected_workers

    @property
    def connected_workers(self) -> list[WorkerSeen]:
        return [w for w in self.workers if w.connected]

    async def dispatch(self, room: str, timeout: float = 5.0) -> tuple[WorkerSeen, agent_pb.Job] | None:
        """Offer a new room to each connected worker in turn; (worker, job) for the one that took it."""
        job = agent_pb.Job(
            # As LiveKit's own: never the same twice, not even across servers (records are kept by it).
            id=f"AJ_{secrets.token_hex(4)}{next(self._ids)}",
            type=agent_pb.JobType.JT_ROOM,
            room=models_pb.Room(sid=f"RM_{room}", name=room),
        )
        for worker in self.connected_workers:
            answer = asyncio.get_running_loop().create_future()
            self._answers[job.id] = answer
            await self._send(worker, agent_pb.ServerMessage(availability=agent_pb.AvailabilityRequest(job=job)))
            try:
                response: agent_pb.AvailabilityResponse = await asyncio.wait_for(answer, timeout)
            finally:
                self._answers.pop(job.id, None)
            if not response.available:
                continue
            token = (
                api.AccessToken(self.api_key, self.api_secret)
                .with_identity(response.participant_identity)
                .with_grants(api.VideoGrants(room_join=True, room=room, agent=True))
                .to_jwt()
            )
            assignment = agent_pb.JobAssignment(job=job, url=self.url, token=token)
            await self._send(worker, agent_pb.ServerMessage(assignment=assignment))
            return worker, job
        return None

    async def terminate(self, worker: WorkerSeen, job_id: str) -> None:
        await self._send(worker, agent_pb.ServerMessage(termination=agent_pb.JobTermination(job_id=job_id)))

    async def drop(self, worker: WorkerSeen) -> None:
        """Close a worker's connection from the server side, as a server restart would."""
        await worker.websocket.close(code=1012)

    def job_statuses(self, job_id: str) -> list[int]:
        return [u.status for u in self.job_updates if u.job_id == job_id]

    # -- the endpoint ------------------------------------------------------------------------

    async def _agent(self, websocket: WebSocket) -> None:
        if not self._authorized(websocket.headers.get("authorization", "")):
            self.rejected_connections += 1
            await websocket.close(code=1008)
            return
        await websocket.accept()
        first = agent_pb.WorkerMessage()
        first.ParseFromString(await websocket.receive_bytes())
        if first.WhichOneof("message") != "register" or first.register.type != agent_pb.JobType.JT_ROOM:
            await websocket.close(code=1008)
            return
        worker = WorkerSeen(f"AW_{next(self._ids)}", websocket, first.register.agent_name)
        registered = agent_pb.RegisterWorkerResponse(worker_id=worker.worker_id)
        await websocket.send_bytes(agent_pb.ServerMessage(register=registered).SerializeToString())
        async with self.registered:
            self.workers.append(worker)
            self.registered.notify_all()
        try:
            while True:
                message = agent_pb.WorkerMessage()
                message.ParseFromString(await websocket.receive_bytes())
                kind = message.WhichOneof("message")
                if kind == "update_worker":
                    worker.statuses.append(message.update_worker)
                elif kind == "update_job":
                    self.job_updates.append(message.update_job)
                elif kind == "migrate_job":
                    worker.migrated.extend(message.migrate_job.job_ids)
                elif kind == "availability":
                    worker.answers.append(message.availability)
                    answer = self._answers.get(message.availability.job_id)
                    if answer is not None and not answer.done():
                        answer.set_result(message.availability)
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            worker.connected = False

    def _authorized(self, header: str) -> bool:
        if not header.startswith("Bearer "):
            return False
        try:
            claims = api.TokenVerifier(self.api_key, self.api_secret).verify(header.removeprefix("Bearer "))
        except Exception:
            return False
        return bool(claims.video and claims.video.agent)

    async def _send(self, worker: WorkerSeen, message: agent_pb.ServerMessage) -> None:
        await worker.websocket.send_bytes(message.SerializeToString())
