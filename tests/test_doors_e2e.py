"""A flood of offers from one client while a real call is in progress: the flood gets 429s with
``Retry-After``, the call hears its whole answer, and nothing is left behind.

A real Brisk server on loopback with the scripted LLM (a real OpenAI-compatible server) and a
real aiortc caller; the flood is 200 offers from the same address, as a script would send them.
"""

import asyncio

import httpx
import pytest

from agent.bench.scripted_llm import ScriptedLLM
from agent.caller.call import place_call, running_server
from agent.caller.loopback import serve_app
from agent.config import load_config
from agent.runtime.runtime import Runtime
from tests.speech import synthesize_speech
from tests.waiting import until

pytestmark = [pytest.mark.e2e]

ANSWER = "Yes, every rental comes with a helmet and a lock."
OFFER = {"sdp": "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n", "type": "offer"}


async def test_a_flood_of_offers_gets_429s_while_the_call_in_progress_goes_on_unharmed():
    llm = ScriptedLLM(ttft_s=0.3, tokens_per_s=30.0, answer_for=lambda messages: ANSWER)
    async with serve_app(llm.app()) as llm_url:
        config = load_config(llm_base_url=f"{llm_url}/v1", llm_model="scripted", max_calls=1, fast_path=False,
                             llm_answer_check=False, rate_limit_per_minute=30, rate_limit_burst=10)
        runtime = Runtime(config)
        await runtime.start()
        try:
            clip = synthesize_speech("Do I get a helmet with the bike?", tail_silence=1.0)
            async with running_server(config, runtime) as (base_url, app):
                call = asyncio.create_task(place_call(base_url, app, clip.samples, clip.sample_rate))
                await until(lambda: app.state.admission.active > 0, "the call to take a line")
                async with httpx.AsyncClient(base_url=base_url) as http:
                    flood = [await http.post("/api/offer", json=OFFER) for _ in range(200)]
                result = await call
                # The hung-up call's pipeline ends, and its line is free again.
                await until(lambda: app.state.admission.active == 0 and not app.state.calls.calls, "the line to be free")
        finally:
            await runtime.stop()

    codes = [r.status_code for r in flood]
    assert codes.count(429) >= 185, codes
    assert set(codes) <= {429, 503}  # the rest: the one line is busy with the call
    assert all(int(r.headers["retry-after"]) >= 1 for r in flood)
    answered = [t for t in result.summary["turns"] if t.get("bot_text")]
    assert [t["bot_text"].strip() for t in answered] == [ANSWER]
    assert not any(t.get("interrupted") for t in answered)
