"""LiveKit: caller tokens, and the worker's room dispatch, load, termination and drain.

The worker is livekit-agents' ``AgentServer`` running Brisk's rooms. No LiveKit server can be
installed here, so it is tested against ``tests/fakes/livekit_server.py`` (LiveKit's worker
protocol over a real WebSocket), with a room runner that stands in for the pipeline: the
library runs each room on a job thread with an event loop of its own, so the stand-in is
ended through that loop and watched by polling. The end-to-end test, a caller in a real room
hearing Brisk answer, runs when LIVEKIT_URL, LIVEKIT_API_KEY and LIVEKIT_API_SECRET point at
a LiveKit server, and is skipped otherwise.
"""

import asyncio
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from types import SimpleNamespace
from unittest import mock

import httpx
import jwt
import numpy as np
import pytest
from fastapi import FastAPI
from livekit import api
from livekit.agents import worker as agents_worker
from livekit.protocol import agent as agent_pb
from loguru import logger
from openai import AsyncOpenAI

from agent.caller.loopback import serve_app
from agent.config import load_config
from agent.metrics import BriskMetrics
from agent.call.resources import Resources
from agent.runtime.runtime import Runtime
from agent.transports.livekit import RoomJob, job_resources, participant_token, run_room, token_router
from agent.transports.livekit_worker import LiveKitWorker, worker_app
from tests.fakes.livekit_rooms import Rooms, bare_call, offer
from tests.fakes.livekit_server import FakeLiveKitServer
from tests.waiting import until

KEY, SECRET = "devkey", "devsecret-devsecret-devsecret-00"


@pytest.fixture
async def livekit(monkeypatch):
    # The library reports its status every 2.5 s; the tests watch it change, so sooner.
    monkeypatch.setattr(agents_worker, "UPDATE_STATUS_INTERVAL", 0.1)
    monkeypatch.setattr(agents_worker, "UPDATE_LOAD_INTERVAL", 0.1)
    server = FakeLiveKitServer(KEY, SECRET)
    # The library exports its URL and keys to the environment, for its job processes.
    with mock.patch.dict(os.environ):
        # Under a path, as a LiveKit behind a proxy would be: workers must find <url>/agent.
        async with serve_app(server.app(prefix="/lk")) as url:
            server.url = f"{url}/lk/"
            yield server


@pytest.fixture
async def make_worker(livekit):
    """Start workers on the fake server: (worker, its run() task). After the test each one
    still running is closed, and must then stop cleanly."""
    made: list[tuple[LiveKitWorker, asyncio.Task]] = []

    def make(rooms, **kwargs) -> tuple[LiveKitWorker, asyncio.Task]:
        worker = LiveKitWorker(livekit.url, KEY, SECRET, rooms, **kwargs)
        made.append((worker, asyncio.create_task(worker.run())))
        return made[-1]

    yield make
    for worker, task in made:
        await worker.close()
        await asyncio.wait_for(task, 10)


@pytest.fixture
async def with_signals():
    """Install a worker's signal handlers on the test's loop; they are removed after the test."""
    loop = asyncio.get_running_loop()
    yield lambda worker: worker.install_signal_handlers(loop)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.remove_signal_handler(sig)


# -- caller tokens -------------------------------------------------------------------------


def token_app(**kwargs) -> FastAPI:
    app = FastAPI()
    app.include_router(token_router("wss://livekit.example.com", KEY, SECRET, **kwargs))
    return app


async def get_token(app: FastAPI, params: dict | None = None) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://brisk") as http:
        return await http.get("/api/livekit/token", params=params)


async def test_a_caller_token_joins_one_room_to_talk_and_listen_and_nothing_else():
    response = await get_token(token_app(ttl_secs=300))

    assert response.status_code == 200
    body = response.json()
    assert body["url"] == "wss://livekit.example.com" and body["room"].startswith("brisk-")
    claims = api.TokenVerifier(KEY, SECRET).verify(body["token"])
    assert claims.identity == body["identity"]
    video = claims.video
    assert (video.room_join, video.room) == (True, body["room"])
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


async def test_each_caller_gets_a_room_and_identity_of_their_own_and_cannot_name_another_room():
    first, second = [(await get_token(token_app())).json() for _ in range(2)]
    assert first["room"] != second["room"] and first["identity"] != second["identity"]

    # Another caller's room, by name: the server chooses rooms, so no token joins it.
    for room in (first["room"], "../admin"):
        refused = await get_token(token_app(), {"room": room})
        assert refused.status_code == 400 and "server chooses the room" in refused.json()["detail"]


async def test_a_token_names_the_agent_to_dispatch_when_workers_use_explicit_dispatch():
    body = (await get_token(token_app(agent_name="brisk"))).json()

    claims = api.TokenVerifier(KEY, SECRET).verify(body["token"])
    assert [a.agent_name for a in claims.room_config.agents] == ["brisk"]


async def test_the_token_route_says_what_to_set_when_livekit_is_not_configured():
    app = FastAPI()
    app.include_router(token_router(None, None, None))

    response = await get_token(app)

    assert response.status_code == 503
    assert "BRISK_LIVEKIT_API_KEY" in response.json()["detail"]


# -- worker dispatch -----------------------------------------------------------------------


async def test_a_worker_without_an_agent_grant_signed_by_the_secret_is_refused(livekit):
    worker = LiveKitWorker(livekit.url, KEY, "not-the-secret-not-the-secret-00", Rooms(), max_retries=0)

    with pytest.raises(RuntimeError, match="failed to connect"):
        await asyncio.wait_for(worker.run(), 10)
    assert livekit.rejected_connections == 1
    assert livekit.workers == []


async def test_the_worker_registers_at_agent_under_the_server_url(livekit, make_worker):
    worker, _ = make_worker(Rooms(), agent_name="brisk")

    [seen] = await livekit.wait_for_workers(1)  # at <url>/lk/agent: see the livekit fixture

    assert seen.agent_name == "brisk"
    await asyncio.wait_for(worker.registered.wait(), 10)
    assert worker.worker_id == seen.worker_id and worker.connected


async def test_a_worker_runs_one_room_per_assignment_with_the_servers_token(livekit, make_worker):
    rooms = Rooms()
    make_worker(rooms)
    [seen] = await livekit.wait_for_workers(1)

    (_, job1), (_, job2) = [await offer(livekit, rooms, name) for name in ("room-a", "room-b")]

    assert [j.room for j in rooms.jobs] == ["room-a", "room-b"]
    for job in rooms.jobs:
        claims = api.TokenVerifier(KEY, SECRET).verify(job.token)
        assert (claims.video.room, claims.identity) == (job.room, job.identity)
        assert job.url == livekit.url
    # The load is sampled apart from the job count: both reach the server, not always together.
    await until(lambda: seen.status is not None and (seen.status.job_count, seen.status.load) == (2, 0.5))

    rooms.end("room-a")
    await until(lambda: agent_pb.JobStatus.JS_SUCCESS in livekit.job_statuses(job1.id))
    assert livekit.job_statuses(job1.id)[0] == agent_pb.JobStatus.JS_RUNNING
    assert agent_pb.JobStatus.JS_SUCCESS not in livekit.job_statuses(job2.id)
    await until(lambda: seen.status.job_count == 1)


async def test_rooms_run_on_threads_of_the_worker_process_each_with_its_own_loop(livekit, make_worker):
    rooms = Rooms()
    make_worker(rooms)
    await livekit.wait_for_workers(1)

    for name in ("one", "two"):
        await offer(livekit, rooms, name)

    # Same process, so one Runtime's models serve every room; not the test's thread or loop.
    first, second = rooms.threads
    assert threading.main_thread() not in (first, second) and first is not second
    assert len(set(rooms.loops)) == 2 and asyncio.get_running_loop() not in rooms.loops


async def test_a_worker_at_its_load_threshold_declines_and_another_worker_takes_the_room(livekit, make_worker):
    rooms_a, rooms_b = Rooms(), Rooms()
    make_worker(rooms_a, max_rooms=2, load_threshold=0.5)
    await livekit.wait_for_workers(1)
    make_worker(rooms_b, max_rooms=2, load_threshold=0.5)
    seen_a, seen_b = await livekit.wait_for_workers(2)

    first = await offer(livekit, rooms_a, "first")
    second = await offer(livekit, rooms_b, "second")
    third = await livekit.dispatch("third")

    assert first[0] is seen_a and second[0] is seen_b
    assert [a.available for a in seen_a.answers] == [True, False, False]
    assert [a.available for a in seen_b.answers] == [True, False]
    assert third is None
    await until(lambda: seen_a.status.status == agent_pb.WorkerStatus.WS_FULL)

    rooms_a.end("first")
    await until(lambda: seen_a.status.status == agent_pb.WorkerStatus.WS_AVAILABLE)
    assert (await offer(livekit, rooms_a, "fourth"))[0] is seen_a


async def test_rooms_offered_at_once_are_taken_only_up_to_the_load_threshold(livekit, make_worker):
    rooms = Rooms()
    worker, _ = make_worker(rooms, max_rooms=4, load_threshold=0.75)
    [seen] = await livekit.wait_for_workers(1)

    await offer(livekit, rooms, "first")

    # Offered together: rooms promised count towards the load as much as rooms running.
    taken = await asyncio.gather(*(livekit.dispatch(f"burst-{i}") for i in range(4)))

    assert sum(t is not None for t in taken) == 2
    assert sorted(a.available for a in seen.answers) == [False, False, True, True, True]
    await rooms.wait_for(3)
    await until(lambda: worker.load == pytest.approx(0.75))


async def test_the_server_ending_a_job_ends_its_room(livekit, make_worker):
    rooms = Rooms()
    worker, _ = make_worker(rooms)
    [seen] = await livekit.wait_for_workers(1)
    _, job = await offer(livekit, rooms, "to-end")

    await livekit.terminate(seen, job.id)

    await until(lambda: livekit.job_statuses(job.id)[-1:] == [agent_pb.JobStatus.JS_SUCCESS])
    assert rooms.cancelled == ["to-end"]
    await until(lambda: worker.rooms == {})


async def test_a_room_that_fails_ends_its_job_logs_its_error_and_frees_its_place(livekit, make_worker):
    failures: list[str] = []
    sink = logger.add(failures.append, level="ERROR", format="{message}\n{exception}")
    try:
        rooms = Rooms(fail_with=RuntimeError("no audio device"))
        worker, _ = make_worker(rooms, max_rooms=1, load_threshold=1.0)
        [seen] = await livekit.wait_for_workers(1)

        _, job = await livekit.dispatch("broken")

        # livekit-agents reports every job that ends, failed or not, as JS_SUCCESS, without its error.
        await until(lambda: livekit.job_statuses(job.id)[-1:] == [agent_pb.JobStatus.JS_SUCCESS])
        assert any("room broken failed" in f and "no audio device" in f for f in failures)
        await until(lambda: worker.rooms == {})
        assert (await offer(livekit, rooms, "next"))[0] is seen
    finally:
        logger.remove(sink)


async def test_a_worker_reconnects_after_the_server_drops_it_and_keeps_its_rooms(livekit, make_worker):
    rooms = Rooms()
    worker, _ = make_worker(rooms)
    [first] = await livekit.wait_for_workers(1)
    _, job = await offer(livekit, rooms, "ongoing")

    await livekit.drop(first)

    [again] = await livekit.wait_for_workers(1)
    assert again is not first and not first.connected
    await until(lambda: again.migrated == [job.id])  # "these rooms are still mine"
    await until(lambda: again.status is not None and again.status.job_count == 1)
    await until(lambda: worker.connected and worker.worker_id == again.worker_id)
    assert rooms.cancelled == []


# -- drain ---------------------------------------------------------------------------------


async def test_a_draining_worker_takes_no_new_room_and_leaves_once_its_rooms_end(livekit, make_worker):
    rooms = Rooms()
    worker, task = make_worker(rooms)
    [seen] = await livekit.wait_for_workers(1)
    _, job = await offer(livekit, rooms, "in-progress")
    await until(lambda: seen.status is not None and seen.status.status == agent_pb.WorkerStatus.WS_AVAILABLE)

    drain = asyncio.create_task(worker.drain())
    await until(lambda: worker.draining and seen.status.status == agent_pb.WorkerStatus.WS_FULL)

    assert await livekit.dispatch("too-late") is None
    await asyncio.sleep(0.2)
    assert not drain.done() and not task.done()

    rooms.end("in-progress")
    await asyncio.wait_for(drain, 10)
    await asyncio.wait_for(task, 10)
    assert rooms.cancelled == []
    assert livekit.job_statuses(job.id)[-1] == agent_pb.JobStatus.JS_SUCCESS
    await until(lambda: not seen.connected)


async def test_a_drain_ends_rooms_still_in_progress_after_its_timeout(livekit, make_worker):
    rooms = Rooms()
    worker, task = make_worker(rooms, drain_timeout_s=0.3)
    await livekit.wait_for_workers(1)
    await offer(livekit, rooms, "endless")

    await asyncio.wait_for(worker.drain(), 10)
    await asyncio.wait_for(task, 10)

    assert rooms.cancelled == ["endless"]


async def test_sigterm_drains_the_worker(livekit, make_worker, with_signals):
    rooms = Rooms()
    worker, task = make_worker(rooms)
    with_signals(worker)
    [seen] = await livekit.wait_for_workers(1)
    await offer(livekit, rooms, "call")
    statuses_before = len(seen.statuses)

    os.kill(os.getpid(), signal.SIGTERM)

    await until(lambda: worker.draining)
    assert not task.done()
    rooms.end("call")
    await asyncio.wait_for(task, 10)
    assert rooms.cancelled == []
    assert any(s.status == agent_pb.WorkerStatus.WS_FULL for s in seen.statuses[statuses_before:])


async def test_a_second_signal_while_draining_leaves_the_rooms_at_once(livekit, make_worker, with_signals):
    rooms = Rooms()
    worker, task = make_worker(rooms)
    with_signals(worker)
    await livekit.wait_for_workers(1)
    await offer(livekit, rooms, "long-call")

    os.kill(os.getpid(), signal.SIGTERM)
    await until(lambda: worker.draining)
    os.kill(os.getpid(), signal.SIGINT)

    await asyncio.wait_for(task, 10)
    assert rooms.cancelled == ["long-call"]


# -- the worker process ---------------------------------------------------------------------


async def test_the_worker_reports_its_livekit_state_on_healthz_and_serves_metrics(livekit, make_worker):
    rooms = Rooms()
    worker, _ = make_worker(rooms)
    app = worker_app(Runtime(load_config()), worker, BriskMetrics())
    await livekit.wait_for_workers(1)
    await offer(livekit, rooms, "r1")

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://worker") as http:
        health = await http.get("/healthz")
        scrape = await http.get("/metrics")

    assert health.status_code == 503  # the runtime here never loaded its models
    assert health.json()["livekit"] == {
        "registered": True, "worker_id": worker.worker_id, "rooms": 1, "load": 0.25, "draining": False
    }
    assert scrape.status_code == 200 and "brisk_calls_total" in scrape.text
    # From another machine: ready or not, and nothing about the process.
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=("203.0.113.9", 1)),
                                 base_url="http://worker") as http:
        public = await http.get("/healthz")
    assert (public.status_code, public.json()) == (503, {"ready": False})


async def test_a_room_that_cannot_be_joined_ends_with_an_error(livekit):
    token = api.AccessToken(KEY, SECRET).with_identity("brisk-agent-AJ_9").to_jwt()
    job = RoomJob("AJ_9", "nowhere", livekit.url, token, "brisk-agent-AJ_9")

    # The fake serves no room signalling: pipecat's transport tries, gives up, and the room ends.
    with pytest.raises(ConnectionError, match="could not join room nowhere"):
        await asyncio.wait_for(run_room(SimpleNamespace(config=load_config()), job, build=bare_call), 60)


async def test_each_room_gets_an_llm_client_of_its_own_on_the_same_server(tmp_path):
    shared = AsyncOpenAI(base_url="http://llm:8080/v1", api_key="sk-test")
    resources = Resources(load_config(), tmp_path, shared, "model", whisper_engine=object())

    async with job_resources(resources) as mine:
        assert mine.llm_client is not shared
        assert (str(mine.llm_client.base_url), mine.llm_client.api_key) == ("http://llm:8080/v1/", "sk-test")
        assert (mine.whisper_engine, mine.llm_model) == (resources.whisper_engine, "model")
    assert mine.llm_client.is_closed()
    await shared.close()


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
        async with job_resources(runtime.resources) as resources:
            await run_room(resources, job, listeners=(track_call,))

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
        await until(lambda: len(caller.remote_participants) > 0, timeout=20)
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

        await until(answered, timeout=30)
    finally:
        await caller.disconnect()
        for reader in readers:
            reader.cancel()
        await worker.drain()
        await asyncio.wait_for(worker_task, 30)
    scrape = (await metrics.scrape()).body.decode()
    assert 'brisk_calls_total{transport="livekit"} 1.0' in scrape
