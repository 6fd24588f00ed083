"""A request that makes the LLM server read a prompt into its cache and answer nothing.

Consumes: an ``LLMContext``. Sends it to the OpenAI-compatible server exactly as the LLM service
would (pipecat's OpenAI adapter, the service's system instruction, its tools) as a completion
of one token, so the server's prefix cache then holds the prompt's tokens and the next request
that starts the same way reads only what follows them (the prefix cache: docs/architecture.md).
Emits: nothing into a pipeline; it is a helper the prompt processors share (the prefix
warmer, the facts prefill). Measures: nothing itself; ``warm`` returns how long the server took.
"""

from __future__ import annotations

import time

from loguru import logger
from openai import AsyncOpenAI
from pipecat.adapters.llm.services.open_ai_adapter import OpenAILLMAdapter
from pipecat.processors.aggregators.llm_context import LLMContext


class PromptCache:
    """Warms the LLM server's prompt cache with a context, rendered as the LLM service renders it."""

    def __init__(self, *, client: AsyncOpenAI, model: str, system_prompt: str,
                 convert_developer_to_user: bool = False):
        """Args:
            client: The process-wide OpenAI-compatible client the LLM service uses.
            model: The model name the LLM service requests.
            system_prompt: The LLM service's system instruction, byte for byte.
            convert_developer_to_user: As the LLM service does (``not supports_developer_role``).
        """
        self._client = client
        self._model = model
        self._system_prompt = system_prompt
        self._convert_developer_to_user = convert_developer_to_user
        self._adapter = OpenAILLMAdapter()

    async def warm(self, context: LLMContext, *, why: str = "prompt") -> float | None:
        """Have the server read ``context``'s prompt; the seconds it took, or None when it failed.

        A chat template puts the tools in the prompt's prefix, so ``context`` must offer the ones
        the call's real requests offer.
        """
        params = await self._adapter.get_llm_invocation_params(
            context,
            system_instruction=self._system_prompt,
            convert_developer_to_user=self._convert_developer_to_user,
        )
        started = time.monotonic()
        try:
            extra = {"tools": params["tools"]} if context.tools else {}
            await self._client.chat.completions.create(
                model=self._model, messages=params["messages"], max_tokens=1, stream=False, **extra
            )
        except Exception as e:  # a failed warm-up only costs the next request its cache hit
            logger.warning(f"{why} warm-up failed: {e}")
            return None
        return time.monotonic() - started
