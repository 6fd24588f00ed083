"""The business's tools as pipecat functions: their schemas for the LLM, and their handlers.

``register_tools`` registers a handler on the call's LLM service for each tool the business
file lists (``tools:``): the built-in ones here, and the business's own declared tools (its API,
agent/tools/http_tool.py, or a booking Brisk keeps, agent/tools/booking.py; asked for by a form,
agent/tools/form.py); ``tools_schema`` is what an LLM that calls tools well is offered
(``BRISK_LLM_TOOLS``). A handler gets the call's ``CallTools`` as pipecat's
``FunctionCallParams.app_resources``. A tool that fails (its store or API down, a bad reply)
says the business's ``tool_failed_text`` and the call goes on.

A call the LLM made gets its result back for the LLM to say. A call routed by intent (its id
starts with ``frames.tools.ROUTED_CALL_PREFIX``) has its result kept in the context and its
answer said from the data, word for word, with no LLM (``run_llm=False``): the 0.5B model
reads back a status line wrongly more often than not.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from loguru import logger

from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import (
    EndWorkerFrame,
    FunctionCallResultProperties,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
)
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.llm_service import FunctionCallParams

from agent.business.model import Business
from agent.business.tool_spec import DeclaredTool
from agent.call.call_control import CallControl
from agent.tools import words
from agent.tools.arguments import read_back
from agent.tools.booking import book
from agent.tools.form import Form
from agent.tools.http_tool import BusinessApi, Outcome
from agent.tools.mcp_tools import McpCalls, McpTool
from agent.tools.store import OrderStatus, ShopStore
from frames.tools import ROUTED_CALL_PREFIX
from frames.turn import FAST_PATH
from processors.fast_path import last_user_words


@dataclass
class CallTools:
    """What one call's tool handlers work with (pipecat's ``app_resources`` of its worker)."""

    business: Business
    store: ShopStore | None
    control: CallControl
    clock: Callable[[], datetime] | None = None
    api: BusinessApi | None = None  # the business's HTTP tools' sender, shared by every call
    form: Form | None = None  # once the worker exists (a business with declared tools)
    mcp_tools: dict[str, McpTool] = field(default_factory=dict)  # found at start-up
    mcp: McpCalls | None = None  # this call's connections to the business's MCP servers
    calls: list[dict] = field(default_factory=list)  # each tool call: name, arguments, result (and http)

    def now(self) -> datetime:
        return (self.clock() if self.clock else datetime.now(self.business.zone)).astimezone(self.business.zone)

    async def run(self, tool: DeclaredTool | McpTool, arguments: dict) -> tuple[Outcome, dict]:
        """Run one of the business's own tools (declared, or its MCP server's): its outcome, and what
        the call's record keeps of it (``http``: the request and reply; ``store``: the booking
        written; ``mcp``: the server's call)."""
        if isinstance(tool, McpTool):
            outcome = await self.mcp.call(tool, arguments, call_id=self.control.call_id)
            return outcome, {"mcp": outcome.record()}
        if tool.http is None:
            outcome = await book(self.store, tool, arguments, call_id=self.control.call_id)
            return outcome, {"store": outcome.record()}
        if self.api is None:
            raise RuntimeError(f"the HTTP tool {tool.name} runs without the runtime's BusinessApi")
        outcome = await self.api.call(tool, arguments, call_id=self.control.call_id)
        return outcome, {"http": outcome.record()}

    def heard(self, tool: DeclaredTool | McpTool, outcome: Outcome, arguments: dict) -> str:
        """What the caller hears of a declared tool's ``outcome``: its reply, its ``failed`` line,
        or the business's ``tool_failed_text``."""
        if outcome.ok:
            return outcome.said
        try:
            return read_back(tool, tool.failed, arguments) if tool.failed else self.business.tool_failed_text
        except KeyError:  # an argument the line names was not given
            return self.business.tool_failed_text


def spaced(number: str) -> str:
    """Digits said one by one ("4572" -> "4 5 7 2"), as people read order numbers."""
    return " ".join(number)


def order_sentence(order: OrderStatus) -> str:
    what = f"Order {spaced(order.number)}, {order.item},"
    if order.status == "delivered":
        return f"{what} was delivered on {order.updated_on.day} {order.updated_on:%B}."
    arrives = f" and should arrive by {order.arrives_by.day} {order.arrives_by:%B}" if order.arrives_by else ""
    if order.status == "shipped":
        return f"{what} shipped on {order.updated_on.day} {order.updated_on:%B}{arrives}."
    return f"{what} is being prepared{arrives}."


ASK_ORDER_NUMBER = "What's your order number? You can say it, or type it on your keypad followed by the pound key."


async def say(params: FunctionCallParams, text: str) -> None:
    """Say ``text`` as the turn's answer, the way the fast path does: as an LLM response tagged
    with the tool (``frames.turn.FAST_PATH``), so the chunker, barge-in, the context and the
    turn's latency record treat it like any answer and the answer check leaves it alone."""
    for frame in (LLMFullResponseStartFrame(), LLMTextFrame(text), LLMFullResponseEndFrame()):
        frame.metadata[FAST_PATH] = params.function_name
        await params.llm.push_frame(frame)


async def _finish(params: FunctionCallParams, result: dict, said: str | None = None, **kept) -> None:
    """Give the result back; a routed call's answer is ``said`` as is, an LLM's call is the LLM's to
    say. ``kept``: more for the call's record (an HTTP tool's request and outcome)."""
    tools: CallTools = params.app_resources
    tools.calls.append({"name": params.function_name, "arguments": dict(params.arguments), "result": result, **kept})
    routed = params.tool_call_id.startswith(ROUTED_CALL_PREFIX)
    if routed:
        await params.result_callback(result, properties=FunctionCallResultProperties(run_llm=False))
        if said:
            await say(params, said)
    else:
        await params.result_callback(result)


async def lookup_order(params: FunctionCallParams) -> None:
    tools: CallTools = params.app_resources
    number = words.order_number(str(params.arguments.get("order_number", "")))
    if number is None:
        await _finish(params, {"found": False, "error": "no order number given"}, ASK_ORDER_NUMBER)
        return
    try:
        order = await tools.store.order(number) if tools.store else None
    except Exception:  # the caller hears it can't be checked now, and is offered a person
        logger.exception(f"call {tools.control.call_id}: order {number} could not be looked up")
        await _finish(params, {"found": False, "order_number": number, "error": "the order store is unavailable"},
                      tools.business.tool_failed_text)
        return
    if order is None:
        await _finish(params, {"found": False, "order_number": number},
                      f"I can't find an order numbered {spaced(number)}. Could you say it again, "
                      "or type it on your keypad followed by the pound key?")
        return
    result = {"found": True, "order_number": order.number, "item": order.item, "status": order.status,
              "updated_on": order.updated_on.isoformat(),
              "arrives_by": order.arrives_by.isoformat() if order.arrives_by else None}
    await _finish(params, result, order_sentence(order))


async def transfer_to_human(params: FunctionCallParams) -> None:
    tools: CallTools = params.app_resources
    control = tools.control
    if not control.can_transfer:
        await _finish(params, {"transferred": False}, tools.business.no_transfer_text)
        return
    await _finish(params, {"transferred": True}, tools.business.transfer_text)
    await control.ending("transfer", "transferred")
    # The hand-over runs on its own (it waits for the words above to be heard): talking over
    # them must not cancel it, as it would cancel this call.
    await control.transfer(params.pipeline_worker, failed_text=tools.business.no_transfer_text)


async def end_call(params: FunctionCallParams) -> None:
    tools: CallTools = params.app_resources
    await _finish(params, {"ended": True}, tools.business.goodbye)
    await tools.control.ending("end_call")
    # Upstream to the worker, which ends the pipeline once the goodbye has played.
    await params.llm.push_frame(EndWorkerFrame(reason="the bot ended the call"), FrameDirection.UPSTREAM)


def _given(params: FunctionCallParams) -> dict:
    """The arguments a call gives, without the empty ones an LLM or the router fills in."""
    return {k: v for k, v in params.arguments.items() if v not in (None, "")}


async def declared_tool(params: FunctionCallParams, tool: DeclaredTool | McpTool) -> None:
    """One of the business's own tools: its reply said through the file's ``say`` (an MCP tool's:
    its text). A call that lacks a required argument, or of a tool that changes something, opens
    the tool's form (agent/tools/form.py), which asks, reads back and then runs it."""
    tools: CallTools = params.app_resources
    given = _given(params)
    missing = [name for name in tool.required if name not in given]
    if (missing or tool.changes) and tools.form is not None:
        await _finish(params, {"form": True, "asking": missing, **given})
        await tools.form.start(tool, given, request=last_user_words(params.context) if params.context else "")
        return
    outcome, kept = await tools.run(tool, given)
    await _finish(params, outcome.result(), tools.heard(tool, outcome, given), **kept)


async def mcp_tool(params: FunctionCallParams, name: str) -> None:
    """A tool of the business's MCP server, as found at start-up: as a declared tool's call."""
    tools: CallTools = params.app_resources
    await declared_tool(params, tools.mcp_tools[name])


# Calls that do nothing lasting (a lookup): a turn the caller continued takes them back and is
# routed again whole (processors/turns/turn_continuation.py).
REDO_CALLS = frozenset({"lookup_order"})


def redo_calls(business: Business) -> frozenset[str]:
    """``REDO_CALLS`` and the business's declared tools: a call of one either reads (an
    availability check) or opens its form (a booking's opening: it starts again from the words),
    which asks before anything is changed. An MCP tool may change anything, so its call is never
    taken back to be made again."""
    return REDO_CALLS | frozenset(business.declared_tools)

HANDLERS = {"lookup_order": lookup_order, "transfer_to_human": transfer_to_human, "end_call": end_call}


def schemas(business: Business, mcp_tools: dict | None = None) -> list[FunctionSchema]:
    """The function schemas of the business's tools, as an LLM is told them (``mcp_tools``: its
    MCP servers' tools as found at start-up, agent/tools/mcp_tools.py)."""
    known = {
        "lookup_order": FunctionSchema(
            name="lookup_order", description="Look up the status of the caller's online order by its order number.",
            properties={"order_number": {"type": "string", "description": "The order number, digits only."}},
            required=["order_number"],
        ),
        "transfer_to_human": FunctionSchema(
            name="transfer_to_human", description="Put the caller through to a person.", properties={}, required=[]
        ),
        "end_call": FunctionSchema(
            name="end_call", description="End the call, when the caller says goodbye.", properties={}, required=[]
        ),
    }
    own = {name: FunctionSchema(name=name, description=tool.description,
                                properties=tool.llm_parameters().get("properties", {}), required=tool.required)
           for name, tool in business.declared_tools.items()}
    served = {name: FunctionSchema(name=name, description=tool.description, properties=tool.parameters["properties"],
                                   required=tool.required)
              for name, tool in (mcp_tools or {}).items()}
    return [{**known, **own, **served}[name] for name in business.tool_names]


def tools_schema(business: Business, mcp_tools: dict | None = None) -> ToolsSchema | None:
    listed = schemas(business, mcp_tools)
    return ToolsSchema(standard_tools=listed) if listed else None


def register_tools(llm, business: Business) -> None:
    """Register a handler for each of the business's tools on the call's LLM service.

    With pipecat's default ``cancel_on_interruption``: a tool that must outlive an interruption
    (the hand-over) runs its lasting part in a task of its own. pipecat treats a tool registered
    with ``cancel_on_interruption=False`` as an async tool and tells the LLM so in its system
    instruction, which would change the prompt's cached prefix."""
    for name in business.tool_names:
        tool = business.declared_tools.get(name)
        if tool is not None:
            llm.register_function(name, functools.partial(declared_tool, tool=tool))
        elif name in business.mcp_tool_servers:
            llm.register_function(name, functools.partial(mcp_tool, name=name))
        else:
            llm.register_function(name, HANDLERS[name])
