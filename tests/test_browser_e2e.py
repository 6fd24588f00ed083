"""The real page in headless Chromium: Call pressed, fake mic from a WAV, a spoken answer back.

Chromium is Debian's (/usr/bin/chromium, installed by .ci/run), driven by playwright without
`playwright install`. The screenshot is kept in artifacts/ as the test's evidence.
"""

import shutil

import pytest
from playwright.async_api import async_playwright

from tests.speech import synthesize_speech

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.asyncio(loop_scope="session"),
    pytest.mark.skipif(not shutil.which("chromium"), reason="Debian chromium is not installed (.ci/run installs it)"),
]

CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--use-fake-ui-for-media-stream",
    "--use-fake-device-for-media-stream",
    "--autoplay-policy=no-user-gesture-required",
    "--disable-features=WebRtcHideLocalIpsWithMdns",
]


async def test_the_page_places_a_call_and_shows_the_answer_and_its_latency_chart(server, tmp_path, artifacts_dir):
    base_url, app = server
    calls: list = []
    app.state.calls.listeners.append(lambda _pc_id, call: calls.append(call))
    question = "What are your opening hours on Saturday?"
    clip = synthesize_speech(question, tmp_path / "question.wav", lead_silence=1.5, tail_silence=8.0)

    async with async_playwright() as pw:
        browser = await pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path="/usr/bin/chromium",
            headless=True,
            args=[*CHROMIUM_FLAGS, f"--use-file-for-fake-audio-capture={clip.path}%noloop"],
        )
        try:
            page = browser.pages[0] if browser.pages else await browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            await page.goto(base_url.replace("127.0.0.1", "localhost") + "/")
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
        finally:
            await browser.close()

    assert not errors, errors
    assert "saturday" in turn["user_text"].lower()
    assert turn["bot_text"].strip()
    assert turn["stages_ms"]["first_audio_out"] is not None
    assert bars >= 5  # one bar per measured stage
    assert "saturday" in transcript.lower()
    # The page asks for echo cancellation: the bot's own voice must never interrupt it.
    [call] = calls
    assert call.barge_in.interruptions == []
