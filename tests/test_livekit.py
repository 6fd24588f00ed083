"""LiveKit: caller tokens, and the worker's room dispatch, load, termination and drain.

No LiveKit server can be installed here, so the worker is tested against
``tests/fakes/livekit_server.py`` (LiveKit's worker protocol over a real WebSocket), with a
room runner that stands in for the pipeline. The end-to-end test, a caller in a real room
hearing Brisk answer, runs when LIVEKIT_URL, LIVEKIT_API_KEY and LIVEKIT_API_SECRET point at
a LiveKit server, and is skipped otherwise.
"""

import asyncio
import os
import secrets
import signal
import subprocess
import sys
import time

import httpx
import jwt
import numpy as np
import pytest
from fastapi import FastAPI
from livekit import api
from livekit.protocol import agent as agent_pb

from agent.config import load_config
from agent.transports.livekit import (
    LiveKitWorker,
    RoomJob,
    agent_url,
    participant_token,
    run_room,
    token_router,
    worker_app,
)
from agent.caller.loopback import serve_app
from agent.metrics import BriskMetrics
from agent.runtime import Runtime
from tests.fakes.livekit_server import FakeLiveKitServer

KEY, SECRET = "devkey", "devsecret-devsecret-devsecret-00"


class Rooms:
    """A room runner that holds each room open until the test ends it."""

    def __init__(self, fail_with: Exception | None = None):
        self.jobs: list[RoomJob] = []
        self.ended: dict[str, asyncio.Event] = {}
        self.cancelled: list[str] = []
        self.started = asyncio.Condition()
        self.fail_with = fail_with

    async def __call__(self, job: RoomJob) -> None:
        self.ended[job.room] = asyncio.Event()
        async with self.started:
            self.jobs.append(job)
            self.started.notify_all()
        if self.fail_with is not None:
            raise self.fail_with
        try:
            await self.ended[job.room].wait()
        except asyncio.CancelledError:
            self.cancelled.append(job.room)
            raise

    async def wait_for(self, count: int, timeout: float = 5.0) -> None:
        async def enough():
            async with self.started:
                await self.started.wait_for(lambda: len(self.jobs) >= count)

        await asyncio.wait_for(enough(), timeout)

    def end(self, room: str) -> None:
        self.ended[room].set()


async def eventually(condition, timeout: float = 5.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


@pytest.fixture
async def livekit():
    server = FakeLiveKitServer(KEY, SECRET)
    async with serve_app(server.app()) as url:
        server.url = url
        yield server


def make_worker(server: FakeLiveKitServer, rooms, **kwargs) -> LiveKitWorker:
    kwargs.setdefault("status_interval_s", 0.1)
    return LiveKitWorker(server.url, KEY, SECRET, rooms, **kwargs)


async def stop(worker: LiveKitWorker, task: asyncio.Task):
    await worker.close()
    await asyncio.wait_for(task, 5)


# -- caller tokens -------------------------------------------------------------------------


def token_app(**kwargs) -> FastAPI:
    app = FastAPI()
    app.include_router(token_router("wss://livekit.example.com", KEY, SECRET, **kwargs))
    return app


async def get_token(app: FastAPI, params: dict | None = None) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://brisk") as http:
        return await http.get("/api/livekit/token", params=params)


async def test_a_caller_token_joins_one_room_to_talk_and_listen_and_nothing_else():
    response = await get_token(token_app(ttl_secs=300), {"room": "front-desk"})

    assert response.status_code == 200
    body = response.json()
    assert (body["url"], body["room"]) == ("wss://livekit.example.com", "front-desk")
    claims = api.TokenVerifier(KEY, SECRET).verify(body["token"])
    assert claims.identity == body["identity"]
    video = claims.video
    assert (video.room_join, video.room) == (True, "front-desk")
    assert video.can_publish_sources == ["microphone"]
    assert video.can_subscribe is True
    assert video.can_publish_data is False
    for admin_grant in ("room_create", "room_list", "room_admin", "room_record", "agent", "ingress_admin"):
        assert not getattr(video, admin_grant), admin_grant
    assert not claims.room_config


async def test_a_caller_token_expires_after_its_ttl():
    body = (await get_token(token_app(ttl_secs=300))).json()
    payload = jwt.decode(body["token"], SECRET, algorithms=["HS256"], issuer=KEY)
    assert payload["exp"] - payload["nbf"] == 300


async def test_each_caller_gets_a_room_and_identity_of_their_own_unless_a_room_is_named():
    first, second = [(await get_token(token_app())).json() for _ in range(2)]
    assert first["room"] != second["room"] and first["identity"] != second["identity"]

    bad = await get_token(token_app(), {"room": "../admin"})
    assert bad.status_code == 400


async def test_a_token_names_the_agent_to_dispatch_when_workers_use_explicit_dispatch():
    body = (await get_token(token_app(agent_name="brisk"), {"room": "r1"})).json()

    claims = api.TokenVerifier(KEY, SECRET).verify(body["token"])
    assert [a.agent_name for a in claims.room_config.agents] == ["brisk"]


async def test_the_token_route_says_what_to_set_when_livekit_is_not_configured():
    app = FastAPI()
    app.include_router(token_router(None, None, None))

    response = await get_token(app)

    assert response.status_code == 503
    assert "BRISK_LIVEKIT_API_KEY" in response.json()["detail"]


def test_the_worker_endpoint_is_agent_under_the_server_url():
    assert agent_url("http://127.0.0.1:7880") == "ws://127.0.0.1:7880/agent"
    assert agent_url("wss://lk.example.com/") == "wss://lk.example.com/agent"
    assert agent_url("https://lk.example.com/base") == "wss://lk.example.com/base/agent"


# -- worker dispatch -----------------------------------------------------------------------


async def test_a_worker_without_an_agent_grant_signed_by_the_secret_is_refused(livekit):
    worker = LiveKitWorker(livekit.url, KEY, "not-the-secret-not-the-secret-00", Rooms(), max_retries=0)

    with pytest.raises(ConnectionError):
        await asyncio.wait_for(worker.run(), 10)
    assert livekit.rejected_connections == 1
    assert livekit.workers == []


async def test_a_worker_runs_one_room_per_assignment_with_the_servers_token(livekit):
    rooms = Rooms()
    worker = make_worker(livekit, rooms, agent_name="brisk")
    task = asyncio.create_task(worker.run())
    [seen] = await livekit.wait_for_workers(1)
    assert seen.agent_name == "brisk"

    (_, job1), (_, job2) = [await livekit.dispatch(name) for name in ("room-a", "room-b")]
    await rooms.wait_for(2)

    assert [j.room for j in rooms.jobs] == ["room-a", "room-b"]
    for job in rooms.jobs:
        claims = api.TokenVerifier(KEY, SECRET).verify(job.token)
        assert (claims.video.room, claims.identity) == (job.room, job.identity)
        assert job.url == livekit.url
    await eventually(lambda: seen.status is not None and seen.status.job_count == 2)
    assert seen.status.load == pytest.approx(0.5)

    rooms.end("room-a")
    await eventually(lambda: agent_pb.JobStatus.JS_SUCCESS in livekit.job_statuses(job1.id))
    assert livekit.job_statuses(job1.id)[0] == agent_pb.JobStatus.JS_RUNNING
    assert agent_pb.JobStatus.JS_SUCCESS not in livekit.job_statuses(job2.id)
    await eventually(lambda: seen.status.job_count == 1)
    await stop(worker, task)


async def test_a_worker_at_its_load_threshold_declines_and_another_worker_takes_the_room(livekit):
    rooms_a, rooms_b = Rooms(), Rooms()
    worker_a = make_worker(livekit, rooms_a, max_rooms=2, load_threshold=0.5)
    task_a = asyncio.create_task(worker_a.run())
    await livekit.wait_for_workers(1)
    worker_b = make_worker(livekit, rooms_b, max_rooms=2, load_threshold=0.5)
    task_b = asyncio.create_task(worker_b.run())
    seen_a, seen_b = await livekit.wait_for_workers(2)

    first = await livekit.dispatch("first")
    second = await livekit.dispatch("second")
    third = await livekit.dispatch("third")

    assert first[0] is seen_a and second[0] is seen_b
    assert [a.available for a in seen_a.answers] == [True, False, False]
    assert [a.available for a in seen_b.answers] == [True, False]
    assert third is None
    await eventually(lambda: seen_a.status.status == agent_pb.WorkerStatus.WS_FULL)

    rooms_a.end("first")
    await eventually(lambda: seen_a.status.status == agent_pb.WorkerStatus.WS_AVAILABLE)
    assert (await livekit.dispatch("fourth"))[0] is seen_a
    await stop(worker_a, task_a)
    await stop(worker_b, task_b)


async def test_the_server_ending_a_job_ends_its_room(livekit):
    rooms = Rooms()
    worker = make_worker(livekit, rooms)
    task = asyncio.create_task(worker.run())
    [seen] = await livekit.wait_for_workers(1)
    _, job = await livekit.dispatch("to-end")
    await rooms.wait_for(1)

    await livekit.terminate(seen, job.id)

    await eventually(lambda: livekit.job_statuses(job.id)[-1:] == [agent_pb.JobStatus.JS_SUCCESS])
    assert rooms.cancelled == ["to-end"]
    assert worker.rooms == {}
    await stop(worker, task)


async def test_a_room_that_fails_is_reported_failed_with_its_error(livekit):
    rooms = Rooms(fail_with=RuntimeError("no audio device"))
    worker = make_worker(livekit, rooms)
    task = asyncio.create_task(worker.run())
    await livekit.wait_for_workers(1)

    _, job = await livekit.dispatch("broken")

    await eventually(lambda: agent_pb.JobStatus.JS_FAILED in livekit.job_statuses(job.id))
    [update] = [u for u in livekit.job_updates if u.status == agent_pb.JobStatus.JS_FAILED]
    assert "no audio device" in update.error
    assert worker.rooms == {}
    await stop(worker, task)


async def test_a_worker_reconnects_after_the_server_drops_it_and_keeps_its_rooms(livekit):
    rooms = Rooms()
    worker = make_worker(livekit, rooms)
    task = asyncio.create_task(worker.run())
    [first] = await livekit.wait_for_workers(1)
    await livekit.dispatch("ongoing")
    await rooms.wait_for(1)

    await livekit.drop(first)

    [again] = await livekit.wait_for_workers(1)
    assert again is not first and not first.connected
    await eventually(lambda: again.status is not None and again.status.job_count == 1)
    assert rooms.cancelled == []
    await stop(worker, task)


# -- drain ---------------------------------------------------------------------------------


async def test_a_draining_worker_takes_no_new_room_and_leaves_once_its_rooms_end(livekit):
    rooms = Rooms()
    worker = make_worker(livekit, rooms)
    task = asyncio.create_task(worker.run())
    [seen] = await livekit.wait_for_workers(1)
    _, job = await livekit.dispatch("in-progress")
    await rooms.wait_for(1)

    drain = asyncio.create_task(worker.drain())
    await eventually(lambda: seen.status.draining)

    assert seen.status.status == agent_pb.WorkerStatus.WS_FULL
    assert await livekit.dispatch("too-late") is None
    await asyncio.sleep(0.2)
    assert not drain.done() and not task.done()

    rooms.end("in-progress")
    await asyncio.wait_for(drain, 5)
    await asyncio.wait_for(task, 5)
    assert rooms.cancelled == []
    assert livekit.job_statuses(job.id)[-1] == agent_pb.JobStatus.JS_SUCCESS
    await eventually(lambda: not seen.connected)


async def test_a_drain_ends_rooms_still_in_progress_after_its_timeout(livekit):
    rooms = Rooms()
    worker = make_worker(livekit, rooms, drain_timeout_s=0.3)
    task = asyncio.create_task(worker.run())
    await livekit.wait_for_workers(1)
    await livekit.dispatch("endless")
    await rooms.wait_for(1)

    await asyncio.wait_for(worker.drain(), 5)
    await asyncio.wait_for(task, 5)

    assert rooms.cancelled == ["endless"]


async def test_sigterm_drains_the_worker(livekit):
    rooms = Rooms()
    worker = make_worker(livekit, rooms)
    loop = asyncio.get_running_loop()
    worker.install_signal_handlers(loop)
    try:
        task = asyncio.create_task(worker.run())
        [seen] = await livekit.wait_for_workers(1)
        await livekit.dispatch("call")
        await rooms.wait_for(1)

        os.kill(os.getpid(), signal.SIGTERM)

        await eventually(lambda: worker.draining)
        assert not task.done()
        rooms.end("call")
        await asyncio.wait_for(task, 5)
        assert rooms.cancelled == []
        assert any(s.draining for s in seen.statuses)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


async def test_a_second_signal_while_draining_leaves_the_rooms_at_once(livekit):
    rooms = Rooms()
    worker = make_worker(livekit, rooms)
    loop = asyncio.get_running_loop()
    worker.install_signal_handlers(loop)
    try:
        task = asyncio.create_task(worker.run())
        await livekit.wait_for_workers(1)
        await livekit.dispatch("long-call")
        await rooms.wait_for(1)

        os.kill(os.getpid(), signal.SIGTERM)
        await eventually(lambda: worker.draining)
        os.kill(os.getpid(), signal.SIGINT)

        await asyncio.wait_for(task, 5)
        assert rooms.cancelled == ["long-call"]
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


# -- the worker process ---------------------------------------------------------------------


async def test_the_worker_reports_its_livekit_state_on_healthz_and_serves_metrics(livekit):
    rooms = Rooms()
    worker = make_worker(livekit, rooms)
    app = worker_app(Runtime(load_config()), worker, BriskMetrics())
    task = asyncio.create_task(worker.run())
    await livekit.wait_for_workers(1)
    await livekit.dispatch("r1")
    await rooms.wait_for(1)

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://worker") as http:
        health = await http.get("/healthz")
        scrape = await http.get("/metrics")

    assert health.status_code == 503  # the runtime here never loaded its models
    assert health.json()["livekit"] == {
        "registered": True,
        "worker_id": worker.worker_id,
        "rooms": 1,
        "load": 0.25,
        "draining": False,
    }
    assert scrape.status_code == 200 and "brisk_calls_total" in scrape.text
    await stop(worker, task)


def test_the_worker_command_says_what_to_set_when_livekit_is_not_configured():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BRISK_LIVEKIT", "LIVEKIT_"))}
    result = subprocess.run(
        [sys.executable, "-m", "agent", "livekit-worker"], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2
    assert "BRISK_LIVEKIT_URL" in result.stderr


# -- end to end, against a real LiveKit server ---------------------------------------------

LIVEKIT_ENV = [os.environ.get(name) for name in ("LIVEKIT_URL", "LIVEKIT_API_KEY", "LIVEKIT_API_SECRET")]


@pytest.mark.e2e
@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.skipif(
    not all(LIVEKIT_ENV),
    reason="LIVEKIT_URL, LIVEKIT_API_KEY and LIVEKIT_API_SECRET are not set: no LiveKit server to test against",
)
async def test_a_caller_in_a_livekit_room_hears_brisk_answer(runtime, tmp_path):
    from livekit import rtc

    from tests.speech import synthesize_speech

    url, key, secret = LIVEKIT_ENV
    metrics = BriskMetrics()
    track_call = metrics.listener("livekit")
    agent_name = f"brisk-test-{secrets.token_hex(3)}"  # explicit dispatch: only this worker

    async def brisk_room(job: RoomJob) -> None:
        await run_room(runtime.resources, job, listeners=(track_call,))

    worker = LiveKitWorker(url, key, secret, brisk_room, agent_name=agent_name)
    worker_task = asyncio.create_task(worker.run())
    await asyncio.wait_for(worker.registered.wait(), 20)

    room_name = f"brisk-e2e-{secrets.token_hex(4)}"
    token = participant_token(key, secret, room=room_name, identity="caller", agent_name=agent_name)
    received: list[tuple[float, np.ndarray]] = []
    readers: list[asyncio.Task] = []

    async def record(track):
        async for event in rtc.AudioStream(track, sample_rate=16000, num_channels=1):
            received.append((time.monotonic(), np.frombuffer(event.frame.data, dtype=np.int16).copy()))

    caller = rtc.Room()

    @caller.on("track_subscribed")
    def on_track_subscribed(track, _publication, _participant):
        if track.kind == rtc.TrackKind.KIND_AUDIO:
            readers.append(asyncio.create_task(record(track)))

    await caller.connect(url, token)
    try:
        await eventually(lambda: len(caller.remote_participants) > 0, timeout=20)
        source = rtc.AudioSource(16000, 1)
        microphone = rtc.LocalAudioTrack.create_audio_track("microphone", source)
        await caller.local_participant.publish_track(
            microphone, rtc.TrackPublishOptions(source=rtc.TrackSource.SOURCE_MICROPHONE)
        )
        clip = synthesize_speech("What time do you open on Saturday?", tmp_path / "q.wav", tail_silence=4.0)
        frame_samples = 160
        t0 = time.monotonic()
        for i, offset in enumerate(range(0, len(clip.samples), frame_samples)):
            chunk = clip.samples[offset : offset + frame_samples]
            chunk = np.pad(chunk, (0, frame_samples - len(chunk)))
            await source.capture_frame(rtc.AudioFrame(chunk.tobytes(), 16000, 1, frame_samples))
            await asyncio.sleep(max(0.0, t0 + (i + 1) * 0.01 - time.monotonic()))
        speech_end = t0 + clip.speech_end_s

        def answered():
            return any(t > speech_end and np.sqrt(np.mean(pcm.astype(float) ** 2)) > 300 for t, pcm in received)

        await eventually(answered, timeout=30)
    finally:
        await caller.disconnect()
        for reader in readers:
            reader.cancel()
        await worker.drain()
        await asyncio.wait_for(worker_task, 30)
    scrape = (await metrics.scrape()).body.decode()
    assert 'brisk_calls_total{transport="livekit"} 1.0' in scrape
