"""A real Brisk server for a test module, on the embedded ASR and voice and an LLM server of the test's."""

import asyncio
from contextlib import asynccontextmanager

from agent.call.pipeline import BuildCall, build_call
from agent.caller.call import running_server
from agent.caller.loopback import serve_app
from agent.config import load_config
from agent.runtime.runtime import Runtime


@asynccontextmanager
async def brisk_with_llm(llm_app, build: BuildCall = build_call, **settings):
    """Serve ``llm_app`` (an OpenAI-compatible stand-in) and a Brisk server that uses it, its calls
    assembled by ``build``; yields (base_url, app)."""
    async with serve_app(llm_app) as llm_url:
        config = load_config(llm_base_url=f"{llm_url}/v1", llm_model="scripted", **settings)
        runtime = Runtime(config)
        await runtime.start()
        try:
            async with running_server(config, runtime, build) as served:
                yield served
        finally:
            await runtime.stop()


async def calls_ended(app, timeout: float = 30.0) -> None:
    """Wait until every WebRTC call on ``app`` has ended, its record closed (a hang-up is not the
    end: the server still cancels the pipeline and writes the record's status after it)."""
    async with asyncio.timeout(timeout):
        while app.state.calls.tasks:
            await asyncio.sleep(0.05)
