"""Call recordings: with BRISK_RECORD_AUDIO each call is a stereo WAV (caller left, bot right),
served behind the operator key, and deleted after BRISK_RETENTION_DAYS."""

import asyncio
import io
import re
import wave
from datetime import datetime, timedelta, timezone
from urllib.parse import quote

import httpx
import numpy as np
import pytest

from agent.bench.scripted_llm import ScriptedLLM
from agent.caller.call import place_call
from agent.records.recording import recording_path
from agent.records.retention import RecordingRetention
from agent.records.store import CallRecords
from tests.servers import brisk_with_llm, calls_ended
from tests.speech import synthesize_speech


def loudness(channel: np.ndarray, rate: int) -> np.ndarray:
    """RMS of each 100 ms."""
    step = rate // 10
    frames = channel[: len(channel) // step * step].astype(np.float64).reshape(-1, step)
    return np.sqrt((frames ** 2).mean(axis=1))


@pytest.mark.e2e
async def test_two_calls_at_once_are_each_recorded_caller_left_bot_right(tmp_path):
    llm = ScriptedLLM(ttft_s=0.2, tokens_per_s=40.0, answer_for=lambda _m: "We rent city bikes by the day.")
    bikes = synthesize_speech("Do you rent electric bikes?", tail_silence=1.0)
    trails = synthesize_speech("Which trails do you recommend?", voice="en-gb", tail_silence=1.0)
    async with brisk_with_llm(llm.app(), max_calls=2, operator_key="ops-key", data_dir=tmp_path,
                              record_audio=True) as (base_url, app):
        await asyncio.gather(place_call(base_url, app, bikes.samples, bikes.sample_rate),
                             place_call(base_url, app, trails.samples, trails.sample_rate))
        await calls_ended(app)
        async with httpx.AsyncClient(base_url=base_url, headers={"Authorization": "Bearer ops-key"}) as http:
            listed = (await http.get("/api/calls")).json()["calls"]
            audio = [await http.get(f"/api/calls/{quote(c['id'], safe='')}/audio") for c in listed]
            missing = await http.get("/api/calls/no-such-call/audio")
        refused = await httpx.AsyncClient(base_url=base_url).get(f"/api/calls/{quote(listed[0]['id'], safe='')}/audio")

    assert refused.status_code == 401 and missing.status_code == 404
    assert len(listed) == 2 and all(c["has_audio"] for c in listed)
    for response in audio:
        assert response.status_code == 200 and response.headers["content-type"] == "audio/wav"
        with wave.open(io.BytesIO(response.content)) as wav:
            assert (wav.getnchannels(), wav.getframerate(), wav.getsampwidth()) == (2, 16000, 2)
            samples = np.frombuffer(wav.readframes(wav.getnframes()), dtype=np.int16).reshape(-1, 2)
        caller, bot = loudness(samples[:, 0], 16000), loudness(samples[:, 1], 16000)
        assert len(samples) / 16000 >= 2.5  # the question, then the answer
        # The caller speaks first, on the left; the bot answers after, on the right.
        first_caller, first_bot = np.argmax(caller > 300), np.argmax(bot > 300)
        assert caller.max() > 300 and bot.max() > 300 and first_caller < first_bot


async def test_recordings_older_than_the_retention_are_deleted_and_the_calls_kept(tmp_path):
    records = CallRecords.for_config(None, tmp_path)
    await records.start()
    files = {}
    for call_id in ("old", "new"):
        await records.open_call(call_id, transport="webrtc")
        path = recording_path(tmp_path / "recordings", call_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"RIFF")
        await records.set_recording(call_id, str(path))
        files[call_id] = path
    retention = RecordingRetention(records, days=30)
    kept_today = await retention.sweep()
    # Swept as of 30 days after "new" started, less a microsecond: "old", opened a moment
    # earlier, is past the retention; "new" is not.
    new_started = datetime.fromisoformat((await records.call("new"))["started_at"])
    gone = await retention.sweep(now=new_started + timedelta(days=30) - timedelta(microseconds=1))
    old, new = await records.call("old"), await records.call("new")
    await records.close()
    assert kept_today == 0
    assert gone == 1 and not files["old"].exists() and files["new"].exists()
    assert old is not None and not old["has_audio"] and new["has_audio"]


def test_a_recording_path_is_safe_for_any_call_id(tmp_path):
    when = datetime(2026, 12, 1, tzinfo=timezone.utc)
    a = recording_path(tmp_path, "SmallWebRTCConnection#0-ab/../../etc", when)
    b = recording_path(tmp_path, "SmallWebRTCConnection#0-ab_.._.._etc", when)
    assert a.parent == tmp_path / "2026-12-01" and a.suffix == ".wav"
    assert re.fullmatch(r"[A-Za-z0-9._-]+\.wav", a.name) and a.resolve().parent == (tmp_path / "2026-12-01").resolve()
    assert a != b  # two ids that make the same safe form still get their own files
