"""OpenAI-compatible LLM service that reuses one HTTP client and never leaves the caller in silence.

Consumes: ``LLMContextFrame`` (like pipecat's ``OpenAILLMService``, which it extends).
Emits: the usual LLM frames; when a completion fails (server down, timeout, HTTP 5xx) it
also pushes one ``TTSSpeakFrame`` with a short apology downstream, so the caller hears
something sensible while the error goes upstream as pipecat's ``ErrorFrame``.
Measures: pipecat's TTFB / processing metrics (inherited).

Why a subclass: pipecat builds an ``AsyncOpenAI`` client per service instance, and so per
call. Brisk shares one long-lived client (keep-alive, ``max_retries=0``, short connect
timeout) across every call of the process, which saves a TCP/TLS handshake per turn.
"""

from __future__ import annotations

import httpx
from loguru import logger
from openai import AsyncOpenAI
from pipecat.frames.frames import Frame, LLMContextFrame, TTSSpeakFrame
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.openai.llm import OpenAILLMService


def make_openai_client(
    *, base_url: str, api_key: str | None, connect_timeout: float, total_timeout: float
) -> AsyncOpenAI:
    """One long-lived client for a process: keep-alive pool, no retries (a retry doubles the wait)."""
    timeout = httpx.Timeout(total_timeout, connect=connect_timeout)
    return AsyncOpenAI(
        base_url=base_url,
        api_key=api_key or "not-needed",
        max_retries=0,
        timeout=timeout,
        http_client=httpx.AsyncClient(
            timeout=timeout,
            # Below the 5 s idle timeout of uvicorn-based servers (llama-cpp-python, vLLM): reusing a
            # connection the server is closing fails the request, and with no retries the caller
            # would hear the apology.
            limits=httpx.Limits(max_keepalive_connections=16, keepalive_expiry=4),
        ),
    )


class ResilientOpenAILLMService(OpenAILLMService):
    """``OpenAILLMService`` on a shared client, with a spoken apology when a completion fails."""

    def __init__(
        self,
        *,
        client: AsyncOpenAI,
        apology_text: str,
        supports_developer_role: bool = True,
        **kwargs,
    ):
        # Set before super().__init__, which calls create_client().
        self._shared_client = client
        self._apology_text = apology_text
        self._apologized_this_turn = False
        # llama.cpp's server answers HTTP 500 to the "developer" role; pipecat then converts it to "user".
        self.supports_developer_role = supports_developer_role
        super().__init__(api_key=client.api_key, base_url=str(client.base_url), **kwargs)

    def create_client(self, *args, **kwargs) -> AsyncOpenAI:
        """Return the process-wide client instead of building one per call."""
        return self._shared_client

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        if isinstance(frame, LLMContextFrame):
            self._apologized_this_turn = False
        await super().process_frame(frame, direction)

    async def push_error(self, error_msg: str, exception: Exception | None = None, **kwargs):
        await super().push_error(error_msg, exception=exception, **kwargs)
        if not self._apologized_this_turn:
            self._apologized_this_turn = True
            logger.warning(f"{self}: LLM failed ({error_msg}); speaking an apology instead")
            await self.push_frame(TTSSpeakFrame(self._apology_text))
