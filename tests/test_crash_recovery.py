"""A crash mid-call loses nothing that was finished: kill -9 a real Brisk server during a call,
start it again, and the call's record is there, failed, with every completed turn, its audio
up to the crash, and the webhook delivered."""

import asyncio
import io
import os
import signal
import sys
import time
import wave
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from agent.bench.scripted_llm import ScriptedLLM
from agent.caller.aiortc_caller import WebRTCCaller
from agent.caller.loopback import free_port, serve_app
from tests.fakes.scripted_microphone import ScriptedMicrophone
from tests.fakes.webhook_receiver import WebhookReceiver
from tests.speech import synthesize_speech
from tests.waiting import until

REPO = Path(__file__).resolve().parent.parent
SECRET = "whsec-crash"
pytestmark = pytest.mark.e2e


async def start_server(port: int, env: dict) -> asyncio.subprocess.Process:
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agent", "serve", "--port", str(port), cwd=REPO, env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    async with httpx.AsyncClient() as http:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert child.returncode is None, "the server exited while starting"
            try:
                if (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                    return child
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.3)
    child.kill()
    raise AssertionError("the server did not become ready")


async def record_of(base_url: str, call_id: str) -> dict | None:
    async with httpx.AsyncClient(base_url=base_url) as http:
        response = await http.get(f"/api/calls/{quote(call_id, safe='')}")
        return response.json() if response.status_code == 200 else None


async def test_kill_9_mid_call_leaves_the_call_failed_with_every_completed_turn(tmp_path):
    llm = ScriptedLLM(ttft_s=0.2, tokens_per_s=40.0, answer_for=lambda _m: "We rent bikes by the day.")
    receiver = WebhookReceiver(SECRET)
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    first = synthesize_speech("Do you rent electric bikes?", tail_silence=0.2)
    second = synthesize_speech("Which trails do you recommend?", voice="en-gb", tail_silence=0.2)
    async with serve_app(llm.app()) as llm_url, serve_app(receiver.app()) as hook_url:
        env = {**os.environ, "BRISK_LLM_BASE_URL": f"{llm_url}/v1", "BRISK_LLM_MODEL": "scripted",
               "BRISK_DATA_DIR": str(tmp_path), "BRISK_RECORD_AUDIO": "true", "BRISK_INSTANCE_ID": "brisk-test",
               "BRISK_WEBHOOK_URL": f"{hook_url}/hooks/calls", "BRISK_WEBHOOK_SECRET": SECRET,
               "BRISK_WEBHOOK_RETRY_SECS": "0.2"}
        server = await start_server(port, env)
        caller = WebRTCCaller(base_url)
        mic = ScriptedMicrophone(first.sample_rate)
        try:
            await caller.connect(mic)
            call_id = caller.call_id
            mic.say(first.samples)
            await until(lambda: turns_recorded(base_url, call_id, 1), "the first turn's record", timeout=60)
            mic.say(second.samples)
            await until(lambda: turns_recorded(base_url, call_id, 2), "the second turn's record", timeout=60)
            server.send_signal(signal.SIGKILL)  # mid-call: the caller is still on the line
            await server.wait()
        finally:
            await caller.close()
            if server.returncode is None:
                server.kill()
        assert receiver.deliveries == []  # the call never ended while the server ran

        restarted = await start_server(port, env)
        try:
            record = await record_of(base_url, call_id)
            async with httpx.AsyncClient(base_url=base_url) as http:
                audio = await http.get(f"/api/calls/{quote(call_id, safe='')}/audio")
            await until(lambda: receiver.deliveries, "the webhook's delivery", timeout=20)
        finally:
            restarted.send_signal(signal.SIGTERM)
            await restarted.wait()

    assert record["status"] == "failed" and record["ended_by"] == "crash"
    said = [t["user_text"].lower() for t in record["turns"]]
    assert len(said) == 2 and "bike" in said[0] and "trail" in said[1]
    assert all(t["bot_text"] for t in record["turns"]), record["turns"]
    assert all(t["latency_ms"]["first_audio_out"] is not None for t in record["turns"])
    # The recording holds the call up to the crash: both questions and both answers.
    assert audio.status_code == 200
    with wave.open(io.BytesIO(audio.content)) as wav:
        assert wav.getnchannels() == 2 and wav.getnframes() / wav.getframerate() >= 3.0
    [delivery] = receiver.deliveries
    assert delivery.signed and delivery.body["call"]["id"] == call_id and delivery.body["call"]["status"] == "failed"
    assert len(delivery.body["call"]["turns"]) == 2


async def turns_recorded(base_url: str, call_id: str, n: int) -> bool:
    record = await record_of(base_url, call_id)
    return record is not None and len([t for t in record["turns"] if t["bot_text"]]) >= n
