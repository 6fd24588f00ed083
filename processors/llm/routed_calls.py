"""Function calls the LLM did not make, run the way pipecat runs the LLM's own.

Mixed into the LLM service. Consumes ``frames.tools.RunFunctionCallFrame`` (the fast path's
request, when the caller's words are a tool's intent: "Where is my order 4572?") and runs it
with ``LLMService.run_function_calls``: the handler registered for that function, pipecat's
``FunctionCallsStartedFrame``, in-progress and result frames, and the call and its result in the
context, exactly as for a call in the model's answer. The frame itself goes no further.

``offer_tools=False`` keeps the tools out of the LLM's requests while their handlers stay
registered: the embedded 0.5B model offered tools writes their JSON as its spoken answer
(docs/benchmarks.md, the agent acting), so with it every tool is reached by intent only.
"""

from __future__ import annotations

from loguru import logger
from pipecat.frames.frames import Frame, FunctionCallFromLLM
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from frames.tools import RunFunctionCallFrame


class RoutedCallsMixin:
    """Mix into an ``LLMService`` (before it in the bases); see the module docstring."""

    def __init__(self, *args, offer_tools: bool = True, **kwargs):
        """Args: offer_tools: whether the LLM's requests carry the context's tools."""
        super().__init__(*args, **kwargs)
        self._offer_tools = offer_tools
        self.routed_calls = 0

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        if isinstance(frame, RunFunctionCallFrame):
            # The processor's own bookkeeping, without the LLM service passing the frame on.
            await FrameProcessor.process_frame(self, frame, direction)
            self.routed_calls += 1
            # pipecat registers the handlers a context's tools carry (a Flows node's functions)
            # when a context reaches the service; a routed call comes before any has.
            if frame.context is not None:
                self._sync_registered_tool_handlers(frame.context.tools)
            logger.debug(f"{self}: running {frame.function_name}({dict(frame.arguments)}) by intent")
            await self.run_function_calls([
                FunctionCallFromLLM(
                    function_name=frame.function_name,
                    tool_call_id=frame.tool_call_id,
                    arguments=dict(frame.arguments),
                    context=frame.context,
                )
            ])
            return
        await super().process_frame(frame, direction)

    def build_chat_completion_params(self, params_from_context) -> dict:
        params = super().build_chat_completion_params(params_from_context)
        if not self._offer_tools:
            for key in ("tools", "tool_choice"):
                params.pop(key, None)
        return params
