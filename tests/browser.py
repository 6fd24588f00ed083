"""The real page in Debian's headless Chromium (playwright, no `playwright install`), its mic a WAV."""

import shutil
from contextlib import asynccontextmanager

import pytest
from playwright.async_api import async_playwright

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

needs_chromium = pytest.mark.skipif(not shutil.which("chromium"), reason="Debian chromium is not installed (.ci/run installs it)")


@asynccontextmanager
async def page_with_mic(tmp_path, wav_path, base_url: str):
    """The page at ``base_url``, its microphone playing ``wav_path`` once; yields (page, errors)."""
    async with async_playwright() as pw:
        browser = await pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path="/usr/bin/chromium",
            headless=True,
            args=[*CHROMIUM_FLAGS, f"--use-file-for-fake-audio-capture={wav_path}%noloop"],
        )
        try:
            page = browser.pages[0] if browser.pages else await browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            # localhost: a secure context, so the page may open the microphone.
            await page.goto(base_url.replace("127.0.0.1", "localhost") + "/")
            yield page, errors
        finally:
            await browser.close()
