"""A LiveKit room's call has the same life as a browser's or a phone's: recorded, limited, ended.

The LiveKit stand-in (tests/fakes/livekit_server.py) dispatches each room to a real
``LiveKitWorker``, which runs it on a job thread with an event loop of its own, as in production;
the room's audio is a caller of the test's (tests/fakes/room_transport.py) in place of a LiveKit
media server. The call itself is Brisk's whole pipeline on the embedded models, its record
written to the runtime's records store from the job's loop.
"""

import asyncio
import dataclasses
import os
import re
from unittest import mock

import pytest
import pytest_asyncio
from livekit.agents import worker as agents_worker

from agent.bench.scripted_llm import ScriptedLLM
from agent.caller.loopback import serve_app
from agent.config import load_config
from agent.runtime.runtime import Runtime
from agent.transports.livekit import RoomJob, call_id_of, job_resources, run_room
from agent.transports.livekit_worker import LiveKitWorker
from tests.fakes.livekit_server import FakeLiveKitServer
from tests.fakes.room_transport import RoomTransport
from tests.speech import synthesize_speech
from tests.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

KEY, SECRET = "devkey", "devsecret-devsecret-devsecret-00"
ANSWER = "Yes, we rent electric bikes by the day."


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def runtime():
    llm = ScriptedLLM(ttft_s=0.2, tokens_per_s=40.0, answer_for=lambda _messages: ANSWER)
    async with serve_app(llm.app()) as llm_url:
        rt = Runtime(load_config(llm_base_url=f"{llm_url}/v1", llm_model="scripted"))
        await rt.start()
        try:
            yield rt
        finally:
            await rt.stop()


@pytest_asyncio.fixture(loop_scope="module")
async def livekit():
    server = FakeLiveKitServer(KEY, SECRET)
    with mock.patch.object(agents_worker, "UPDATE_STATUS_INTERVAL", 0.1), \
            mock.patch.object(agents_worker, "UPDATE_LOAD_INTERVAL", 0.1), mock.patch.dict(os.environ):
        async with serve_app(server.app(prefix="/lk")) as url:
            server.url = f"{url}/lk/"
            yield server


class Room:
    """One dispatched room: its job, its transport, and whether ``run_room`` has returned."""

    def __init__(self):
        self.job: RoomJob | None = None
        self.transport: RoomTransport | None = None
        self.over = False


async def a_room_call(livekit, runtime, clip, room: Room, **settings) -> tuple[LiveKitWorker, asyncio.Task]:
    """A worker on the stand-in whose rooms run Brisk with ``settings``, and one room dispatched."""

    async def brisk_room(job: RoomJob) -> None:
        async with job_resources(runtime.resources) as resources:
            resources = dataclasses.replace(resources, config=resources.config.model_copy(update=settings))

            def join(_url, _token, _room, _audio_in_filter):
                room.transport = RoomTransport(clip.samples, clip.sample_rate)
                return room.transport

            room.job = job
            try:
                await run_room(resources, job, join=join)
            finally:
                room.over = True

    worker = LiveKitWorker(livekit.url, KEY, SECRET, brisk_room)
    task = asyncio.create_task(worker.run())
    await asyncio.wait_for(worker.registered.wait(), 20)
    assert await livekit.dispatch("shop-line") is not None
    return worker, task


async def test_a_room_call_is_recorded_turn_by_turn_and_its_record_closed_when_the_caller_leaves(livekit, runtime):
    records = runtime.resources.records
    room = Room()
    clip = synthesize_speech("I have a question about renting bikes.", tail_silence=1.0)
    worker, task = await a_room_call(livekit, runtime, clip, room)
    try:
        async def answered():
            return room.job is not None and bool((await records.call(call_id_of(room.job)) or {}).get("turns"))

        await until(answered, "the turn in the record", timeout=60)
        room.transport.leave()
        await until(lambda: room.over, "the room to be over")
        call_id = call_id_of(room.job)
        record = await records.call(call_id)
    finally:
        await worker.close()
        await asyncio.wait_for(task, 10)

    assert re.fullmatch(r"[A-Za-z0-9_-]+", call_id) and call_id.startswith("livekit-")
    assert (record["transport"], record["caller"], record["status"]) == ("livekit", "shop-line", "completed")
    [turn] = record["turns"]
    assert "bike" in turn["user_text"].lower() and turn["bot_text"].strip() == ANSWER
    assert len(room.transport.heard) > 0  # the answer went out to the room


async def test_a_room_call_that_reaches_the_maximum_duration_is_ended_and_its_record_says_so(livekit, runtime):
    records = runtime.resources.records
    room = Room()
    clip = synthesize_speech("Hello.", tail_silence=0.5)  # then the caller stays, silent
    worker, task = await a_room_call(livekit, runtime, clip, room, call_max_duration_secs=2.0)
    try:
        await until(lambda: room.over, "the limit to end the room")
        record = await records.call(call_id_of(room.job))
    finally:
        await worker.close()
        await asyncio.wait_for(task, 10)

    assert room.transport.participants == ["caller"]  # nobody left: the limit ended it
    assert (record["status"], record["ended_by"]) == ("completed", "max_duration")
