"""The real page in headless Chromium: Call pressed, fake mic from a WAV, a spoken answer back.

Chromium is Debian's (/usr/bin/chromium, installed by .ci/run), driven by playwright without
`playwright install`. The screenshot is kept in artifacts/ as the test's evidence.
"""

from urllib.parse import quote

import httpx
import pytest

from agent.caller.call import running_server
from tests.browser import needs_chromium, page_with_mic
from tests.speech import synthesize_speech
from tests.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session"), needs_chromium]


async def closed_record(base_url: str, call_id: str) -> dict:
    records = []
    async with httpx.AsyncClient(base_url=base_url) as http:
        async def closed() -> bool:
            records.append((await http.get(f"/api/calls/{quote(call_id, safe='')}")).json())
            return records[-1].get("status") != "in_progress"

        await until(closed, "the call's record to close", timeout=10)
    return records[-1]


async def test_the_page_places_a_call_and_shows_the_answer_and_its_latency_chart(server, tmp_path, artifacts_dir):
    base_url, app = server
    calls: list = []
    app.state.calls.listeners.append(lambda _pc_id, call: calls.append(call))
    question = "What are your opening hours on Saturday?"
    clip = synthesize_speech(question, tmp_path / "question.wav", lead_silence=1.5, tail_silence=8.0)

    async with page_with_mic(tmp_path, clip.path, base_url) as (page, errors):
        await page.click("#call")
        await page.wait_for_function("window.brisk && window.brisk.state === 'connected'", timeout=30_000)

        # Bot audio detected in the page (WebAudio on the remote stream), then a turn's chart drawn.
        await page.wait_for_function("window.brisk.maxRemoteAudioLevel > 0.01", timeout=60_000)
        await page.wait_for_function("window.brisk.turns.length >= 1", timeout=60_000)
        await page.wait_for_selector("#latency .turn-chart .bar")

        turn = await page.evaluate("window.brisk.turns[0]")
        bars = await page.locator("#latency .turn-chart").first.locator(".bar").count()
        transcript = await page.inner_text("#transcript")
        await page.screenshot(path=str(artifacts_dir / "browser-call.png"), full_page=True)

        await page.click("#call")  # hang up
        await page.wait_for_function("window.brisk.state === 'idle'", timeout=10_000)

    assert not errors, errors
    assert "saturday" in turn["user_text"].lower()
    assert turn["bot_text"].strip()
    assert turn["stages_ms"]["first_audio_out"] is not None
    assert bars >= 5  # one bar per measured stage
    assert "saturday" in transcript.lower()
    # The page asks for echo cancellation: the bot's own voice must never interrupt it.
    [call] = calls
    assert call.barge_in.interruptions == []
    # The call is on the records page's API, with its turn and waterfall.
    record = await closed_record(base_url, call.control.call_id)
    assert record["transport"] == "webrtc" and record["status"] == "completed"
    assert "saturday" in record["turns"][0]["user_text"].lower() and record["turns"][0]["bot_text"]
    assert record["turns"][0]["latency_ms"]["first_audio_out"] is not None


async def test_with_credentials_configured_the_page_calls_with_its_own_single_use_token(e2e_config, runtime, tmp_path):
    # A deployment: calls need a credential. The page gets its token from /api/session and the
    # offer spends it; a script without one is refused.
    closed = e2e_config.model_copy(update={"api_key": "server-key", "allowed_origins": ["https://shop.example"]})
    assert not closed.calls_open
    clip = synthesize_speech("Where is your shop?", tmp_path / "where.wav", lead_silence=1.5, tail_silence=6.0)
    async with running_server(closed, runtime) as (base_url, app):
        async with httpx.AsyncClient(base_url=base_url) as http:
            refused = await http.post("/api/offer", json={"sdp": "v=0 m=audio", "type": "offer"})
        async with page_with_mic(tmp_path, clip.path, base_url) as (page, errors):
            await page.click("#call")
            await page.wait_for_function("window.brisk && window.brisk.state === 'connected'", timeout=30_000)
            await page.wait_for_function("window.brisk.maxRemoteAudioLevel > 0.01", timeout=60_000)
            await page.click("#call")
            await page.wait_for_function("window.brisk.state === 'idle'", timeout=10_000)
        outstanding = app.state.access.tokens.outstanding

    assert refused.status_code == 401
    assert not errors, errors
    assert outstanding == 0  # the page's token was spent by its offer
