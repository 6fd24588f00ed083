"""End to end over real WebRTC: an aiortc caller speaks to a real Brisk server on loopback.

Real models throughout (Silero, tiny.en, the packaged Qwen on llama.cpp, hibari). Each test
places its own call against the session's shared runtime and server (tests/conftest.py).
"""

import asyncio
import os
import signal

import httpx
import numpy as np
import pytest
from loguru import logger

from agent.caller.call import place_call, report
from agent.caller.aiortc_caller import WebRTCCaller
from processors.observers.latency import STAGES
from tests.speech import normalize_text, synthesize_speech
from tests.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]


def spoken_bot_texts(caller) -> str:
    """Everything the bot said aloud, as the client was told over RTVI."""
    texts = [m["data"].get("text", "") for m in caller.messages_of("bot-tts-text")]
    texts += [m["data"].get("text", "") for m in caller.messages_of("bot-output")]
    return " ".join(texts)


async def test_healthz_reports_every_component_ready(server):
    base_url, _ = server
    async with httpx.AsyncClient() as http:
        r = await http.get(f"{base_url}/healthz")
    assert r.status_code == 200
    body = r.json()
    assert body["ready"] is True
    assert set(body["components"]) == {"models", "asr", "tts", "llm"}
    assert all(c["ready"] for c in body["components"].values())


async def test_a_spoken_question_gets_a_spoken_answer_with_a_complete_waterfall(server, tmp_path):
    base_url, app = server
    question = "What time do you open on Saturday?"
    clip = synthesize_speech(question, tmp_path / "q.wav", tail_silence=1.0)

    result = await place_call(base_url, app, clip.samples, clip.sample_rate)

    [end] = result.utterance_ends
    assert result.caller.first_audible_after(end) is not None, "no bot audio came back"
    [record] = result.summary["turns"]
    assert normalize_text(record["user_text"]) == normalize_text(question)
    assert record["bot_text"].strip()
    stages = record["stages_ms"]
    assert all(stages[s] is not None for s in STAGES if s != "speech_end"), stages
    # A speculative draft may start the LLM before the VAD stops, so only causal chains are ordered.
    answer = ["llm_request", "llm_first_token", "tts_first_audio", "first_audio_out"]
    assert [stages[s] for s in answer] == sorted(stages[s] for s in answer), stages
    assert stages["vad_stop"] <= stages["first_audio_out"] and stages["stt_final"] <= stages["first_audio_out"]
    # The browser gets the same record over the data channel.
    assert [r["turn"] for r in result.caller.turn_records()] == [record["turn"]]

    out = report(result)
    assert out["turns"][0]["latency_ms"]["v2v"] > 0
    assert out["processors"], "per-processor latency missing"


@pytest.mark.parametrize(
    "body, status",
    [
        (b"not json at all", 400),
        (b'["sdp", "offer"]', 400),
        (b'{"type": "offer"}', 400),
        (b'{"sdp": "hello", "type": "offer"}', 400),
        (b'{"sdp": "v=0\\r\\no=- 1 1 IN IP4 0.0.0.0\\r\\ns=-\\r\\nt=0 0\\r\\n", "type": "answer"}', 400),
        (b'{"sdp": "v=0\\r\\no=- 1 1 IN IP4 0.0.0.0\\r\\ns=-\\r\\nt=0 0\\r\\nm=audio 9 UDP/TLS/RTP/SAVPF 111\\r\\n", "type": "offer"}', 400),
        (b'{"sdp": "v=0' + b"x" * 200_000 + b'", "type": "offer"}', 413),
    ],
    ids=["not-json", "not-an-object", "no-sdp", "not-sdp", "answer-not-offer", "garbage-sdp", "oversized"],
)
async def test_a_bad_offer_gets_a_4xx_and_the_server_keeps_serving(server, body, status):
    base_url, app = server
    # An offer that parses as SDP takes a line first; the call before it must have let its line
    # go (it ends a moment after the caller hangs up), or this is a fair 503.
    await until(lambda: not app.state.calls.tasks, "the call before to let its line go", timeout=10)
    async with httpx.AsyncClient() as http:
        r = await http.post(f"{base_url}/api/offer", content=body, headers={"content-type": "application/json"})
        assert r.status_code == status, r.text
        assert r.json()["detail"]
        assert (await http.get(f"{base_url}/healthz")).status_code == 200


async def test_a_killed_llm_server_gets_a_spoken_apology_and_the_call_goes_on(server, runtime, tmp_path):
    base_url, app = server
    first = synthesize_speech("Where is your shop?", tmp_path / "a.wav", tail_silence=0.0)
    second = synthesize_speech("What are your opening hours?", tmp_path / "b.wav", tail_silence=1.0)
    # Long enough between questions for the supervisor to restart and re-warm the LLM server.
    gap = np.zeros(first.sample_rate * 14, dtype=np.int16)
    samples = np.concatenate([first.samples, gap, second.samples])

    logs: list[str] = []
    sink = logger.add(lambda m: logs.append(str(m)), level="WARNING")
    restarts_before = runtime.llm_server.status()["restarts"]
    caller = WebRTCCaller(base_url)

    async def kill_llm_server_once_the_first_answer_starts():
        await until(lambda: caller.messages_of("bot-llm-started"), "the first answer to start", timeout=60)
        os.kill(runtime.llm_server.pid, signal.SIGKILL)

    killer = asyncio.create_task(kill_llm_server_once_the_first_answer_starts())
    try:
        result = await place_call(base_url, app, samples, first.sample_rate, max_wait_s=90, caller=caller)
    finally:
        logger.remove(sink)
        killer.cancel()

    spoken = spoken_bot_texts(result.caller)
    assert "trouble answering" in spoken, spoken
    first_end, second_end = result.utterance_ends
    assert result.caller.first_audible_after(first_end) is not None, "the caller heard silence"
    assert any("LLM failed" in line for line in logs), "the log does not say why"
    # The call survived: the supervisor restarted the server and the next question got a real answer.
    assert runtime.llm_server.status()["restarts"] > restarts_before
    later = [t for t in result.summary["turns"] if "hours" in t["user_text"].lower()]
    assert later and later[-1]["bot_text"].strip(), result.summary["turns"]
    assert result.caller.first_audible_after(second_end) is not None
