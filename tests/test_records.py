"""Call records: every call and each completed turn kept, a crash's calls marked failed, the API
closed to anyone without the operator key, and real calls appearing in it."""

import asyncio
import re

import httpx
import pytest

from agent.bench.scripted_llm import ScriptedLLM
from agent.caller.call import place_call
from agent.records.api import records_router
from agent.records.store import CallRecords
from tests.servers import brisk_with_llm, calls_ended
from tests.speech import synthesize_speech


def turn(n, text="What time do you open?"):
    return {"turn": n, "user_text": text, "bot_text": "At nine.", "interrupted": n == 2, "speculative": True,
            "fast_path": None, "stages_ms": {"first_audio_out": 700.0 + n}, "tool_calls": []}


async def test_a_call_keeps_every_completed_turn_and_a_crash_leaves_it_failed(records_url):
    records = CallRecords(records_url)
    assert await records.start() == 0
    await records.open_call("CA1", transport="twilio")
    for n in (1, 2):
        await records.add_turn("CA1", turn(n))
    await records.close()  # as a kill -9 would: the call never closed

    again = CallRecords(records_url)
    assert await again.start() == 1
    call = await again.call("CA1")
    await again.close()
    assert call["status"] == "failed" and call["ended_by"] == "crash" and call["ended_at"]
    assert [t["n"] for t in call["turns"]] == [1, 2] and call["turn_count"] == 2
    assert call["turns"][1]["interrupted"] and call["turns"][0]["latency_ms"] == {"first_audio_out": 701.0}


async def test_three_calls_write_at_once_with_no_lock_errors_and_page_newest_first(records_url):
    records = CallRecords(records_url)
    await records.start()

    async def one_call(i):
        await records.open_call(f"C{i}", transport="webrtc")
        await asyncio.gather(*[records.add_turn(f"C{i}", turn(n)) for n in range(1, 6)])
        await records.close_call(f"C{i}", status="completed")

    await asyncio.gather(*[one_call(i) for i in range(3)])
    first, cursor = await records.calls(limit=2)
    rest, end = await records.calls(limit=2, cursor=cursor)
    await records.close()
    assert [c["turn_count"] for c in first + rest] == [5, 5, 5] and end is None
    assert len({c["id"] for c in first + rest}) == 3
    assert first[0]["started_at"] >= first[1]["started_at"] >= rest[0]["started_at"]


async def test_the_api_refuses_requests_without_the_operator_key(records_url):
    from fastapi import FastAPI
    from types import SimpleNamespace

    records = CallRecords(records_url)
    await records.start()
    await records.open_call("CA9", transport="webrtc")
    runtime = SimpleNamespace(resources=SimpleNamespace(records=records))
    keyed, open_ = FastAPI(), FastAPI()
    keyed.include_router(records_router(runtime, "s3cret"))
    open_.include_router(records_router(runtime, None))
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=keyed), base_url="http://brisk") as http:
            missing = await http.get("/api/calls")
            wrong = await http.get("/api/calls", headers={"Authorization": "Bearer nope"})
            right = await http.get("/api/calls/CA9", headers={"Authorization": "Bearer s3cret"})
            bad_cursor = await http.get("/api/calls?cursor=xyz", headers={"Authorization": "Bearer s3cret"})
        remote = httpx.ASGITransport(app=open_, client=("203.0.113.7", 5000))
        local = httpx.ASGITransport(app=open_, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=remote, base_url="http://brisk") as http:
            from_elsewhere = await http.get("/api/calls")
        async with httpx.AsyncClient(transport=local, base_url="http://brisk") as http:
            from_here = await http.get("/api/calls")
    finally:
        await records.close()
    assert [missing.status_code, wrong.status_code] == [401, 401]
    assert right.status_code == 200 and right.json()["id"] == "CA9" and right.json()["turns"] == []
    assert bad_cursor.status_code == 400
    assert from_elsewhere.status_code == 401 and from_here.status_code == 200


@pytest.mark.e2e
async def test_two_calls_at_once_are_recorded_with_their_turns_and_read_back_through_the_api(tmp_path):
    llm = ScriptedLLM(ttft_s=0.2, tokens_per_s=40.0, answer_for=lambda _m: "We rent bikes by the day.")
    bikes = synthesize_speech("Do you rent electric bikes?", tail_silence=1.0)
    trails = synthesize_speech("Which trails do you recommend near Portsmouth?", voice="en-gb", tail_silence=1.0)
    # A database of this test's own: the session's holds every other test's calls.
    async with brisk_with_llm(llm.app(), max_calls=2, operator_key="ops-key", data_dir=tmp_path) as (base_url, app):
        results = await asyncio.gather(place_call(base_url, app, bikes.samples, bikes.sample_rate),
                                       place_call(base_url, app, trails.samples, trails.sample_rate))
        await calls_ended(app)
        async with httpx.AsyncClient(base_url=base_url, headers={"Authorization": "Bearer ops-key"}) as http:
            listed = (await http.get("/api/calls")).json()["calls"]
            # A call id goes into a URL as it is: no quoting.
            assert all(re.fullmatch(r"[A-Za-z0-9_-]+", c["id"]) for c in listed)
            assert {c["id"] for c in listed} == {r.caller.call_id for r in results}
            details = [(await http.get(f"/api/calls/{c['id']}")).json() for c in listed]
            refused = (await httpx.AsyncClient(base_url=base_url).get("/api/calls")).status_code

    assert refused == 401
    assert len(listed) == 2 and {c["status"] for c in listed} == {"completed"}
    assert {c["transport"] for c in listed} == {"webrtc"}
    said = sorted(t["user_text"].lower() for d in details for t in d["turns"] if t["bot_text"])
    assert len(said) == 2 and "bike" in said[0] + said[1] and "trail" in said[0] + said[1]
    for d in details:
        answered = [t for t in d["turns"] if t["bot_text"]]
        assert answered and answered[0]["latency_ms"]["first_audio_out"] is not None
    assert all(r.summary["turns"] for r in results)
