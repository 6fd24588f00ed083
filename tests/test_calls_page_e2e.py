"""The call records page in headless Chromium: a real call placed, then listed on /calls with its
transcript, each turn's latency waterfall and its recording; with an operator key set, the page
asks for it."""

import pytest
from playwright.async_api import async_playwright

from agent.bench.scripted_llm import ScriptedLLM
from agent.caller.call import place_call
from tests.browser import CHROMIUM_FLAGS, needs_chromium
from tests.servers import brisk_with_llm
from tests.speech import synthesize_speech

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module"), needs_chromium]

ANSWER = "We rent city bikes and electric bikes by the day."


async def test_a_call_appears_on_the_calls_page_with_its_transcript_and_waterfall(tmp_path, artifacts_dir):
    llm = ScriptedLLM(ttft_s=0.2, tokens_per_s=40.0, answer_for=lambda _m: ANSWER)
    question = synthesize_speech("I have a question about renting bikes.", tail_silence=1.0)  # the LLM's to answer
    async with brisk_with_llm(llm.app(), operator_key="ops-key", data_dir=tmp_path,
                              record_audio=True) as (base_url, app):
        await place_call(base_url, app, question.samples, question.sample_rate)
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=CHROMIUM_FLAGS)
            try:
                page = await browser.new_page()
                errors: list[str] = []
                page.on("pageerror", lambda e: errors.append(str(e)))
                await page.goto(f"{base_url}/calls")
                # The records are behind the key: the page asks for it, then lists the call.
                await page.wait_for_selector("#key-form:not([hidden])", timeout=10_000)
                await page.fill("#operator-key", "ops-key")
                await page.click("#key-form button")
                await page.wait_for_selector("#calls tbody tr", timeout=10_000)
                row = await page.inner_text("#calls tbody tr")
                await page.click("#calls tbody tr")
                await page.wait_for_selector("#call-turns .waterfall .bar.v2v", timeout=10_000)
                turns = await page.inner_text("#call-turns")
                await page.wait_for_selector("#call-audio:not([hidden])", timeout=10_000)
                audio_bytes = await page.evaluate("window.briskCalls.audioBytes")
                playable = await page.evaluate(
                    "new Promise(ok => { const a = document.getElementById('call-audio');"
                    " if (a.readyState >= 1) ok(a.duration); else a.onloadedmetadata = () => ok(a.duration); })")
                await page.screenshot(path=str(artifacts_dir / "calls-page.png"), full_page=True)
            finally:
                await browser.close()

    assert not errors, errors
    assert "webrtc" in row and "completed" in row and " ms" in row
    assert ANSWER in turns and "bike" in turns.lower() and "voice-to-voice" in turns
    assert audio_bytes > 44 and playable > 2.0  # the browser decoded the WAV: seconds of the call
