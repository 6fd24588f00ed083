"""A request to run one of the LLM service's functions, made by something other than the LLM.

pipecat runs a function when the LLM's answer calls it (``LLMService.run_function_calls``). A
small local model calls tools unreliably, so Brisk also routes a caller's words to a tool by
intent (agent/business/intents.py) and asks the LLM service to run that call exactly as if the
model had made it: the same handlers, ``FunctionCallsStartedFrame``/``FunctionCallResultFrame``
and the tool call kept in the context. pipecat has no frame that asks for this, hence
``RunFunctionCallFrame``.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from pipecat.frames.frames import DataFrame

# Tool call ids of routed calls start with this, so a handler can tell them from the LLM's.
ROUTED_CALL_PREFIX = "brisk-routed-"


@dataclass
class RunFunctionCallFrame(DataFrame):
    """Run ``function_name(**arguments)`` through the LLM service's function calling.

    Parameters:
        function_name: A function registered on the LLM service.
        arguments: Its arguments, as the LLM would give them.
        context: The call's LLM context (the tool call and its result are added to it).
    """

    function_name: str = ""
    arguments: Mapping[str, Any] = field(default_factory=dict)
    context: Any = None
    tool_call_id: str = field(default_factory=lambda: f"{ROUTED_CALL_PREFIX}{uuid4().hex[:12]}")
