"""A business's MCP servers, declared in its file and reached through pipecat's MCPClient: a real
MCP server (tests/fakes/mcp_diary.py) over stdio, started as a process the way the file's
``command`` says, and over streamable HTTP on loopback."""

import asyncio
import sys
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
import yaml

from agent.business.embedder import load_embedder
from agent.business.facts import FactIndex
from agent.business.intents import IntentMatcher
from agent.business.model import BusinessError, load_business
from agent.call.call_control import CallControl
from agent.caller.loopback import serve_app
from agent.tools.functions import CallTools, schemas
from agent.tools.mcp_tools import McpCalls, McpStartError, discover
from agent.tools.router import ToolRouter
from tests.fakes import mcp_diary
from tests.test_booking_flow import answer, booking_call
from tests.waiting import until

PLUMBING = "agent/business/examples/brightwater_plumbing.yaml"
STDIO = {"command": sys.executable, "args": ["-m", "tests.fakes.mcp_diary"], "tools": ["next_free_slot", "broken_day"]}
SLOT_INTENT = {"keywords": ["slot", "free"], "examples": ["When is your next free slot on Tuesday?"],
               "tool": "next_free_slot"}
SUNDAY = datetime(2026, 12, 6, 12, 0, tzinfo=ZoneInfo("Europe/London"))


def business_with(tmp_path, servers: dict, intents: dict | None = None):
    """The plumbing example with these MCP servers (and no HTTP tools), loaded."""
    data = yaml.safe_load(open(PLUMBING))
    data["tools"] = ["transfer_to_human", "end_call"]
    data["intents"] = {**{k: v for k, v in data["intents"].items() if v.get("tool") in (None, "transfer_to_human", "end_call")},
                       **(intents or {})}
    data["mcp_servers"] = servers
    path = tmp_path / "business.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_business(path)


@pytest.mark.parametrize("server, named", [
    ({**STDIO, "url": "http://127.0.0.1:9/mcp"}, "either a command (stdio) or a url"),
    ({"tools": ["next_free_slot"]}, "either a command (stdio) or a url"),
    ({**STDIO, "tools": []}, "tools"),
    ({**STDIO, "tools": ["end_call"]}, "mcp_servers.diary.tools: 'end_call' is already a tool"),
    ({**STDIO, "env": {"KEY": "${NOT_SET_ANYWHERE_KEY}"}}, "env.KEY: the environment variable NOT_SET_ANYWHERE_KEY"),
])
def test_a_malformed_mcp_server_stops_start_up_naming_it(tmp_path, server, named):
    with pytest.raises(BusinessError, match="mcp_servers") as error:
        business_with(tmp_path, {"diary": server})
    assert named in str(error.value)


async def test_start_up_finds_each_named_tool_with_its_schema_and_refuses_one_the_server_lacks(tmp_path):
    found = await discover(business_with(tmp_path, {"diary": STDIO}))
    assert set(found) == {"next_free_slot", "broken_day"}
    slot = found["next_free_slot"]
    assert slot.server == "diary" and slot.required == ["day"] and slot.argument_kind("day") == "weekday"
    with pytest.raises(McpStartError, match="mcp_servers.diary.tools: the server offers no tool 'book_slot'"):
        await discover(business_with(tmp_path, {"diary": {**STDIO, "tools": ["next_free_slot", "book_slot"]}}))
    with pytest.raises(McpStartError, match="mcp_servers.diary: cannot list its tools"):
        await discover(business_with(tmp_path, {"diary": {"url": "http://127.0.0.1:9/mcp", "tools": ["next_free_slot"],
                                                          "timeout_secs": 3}}))


async def test_over_streamable_http_a_reply_is_said_and_a_failed_call_is_a_failure(tmp_path):
    async with serve_app(mcp_diary.app()) as url:
        business = business_with(tmp_path, {"diary": {"url": f"{url}/mcp", "tools": ["next_free_slot", "broken_day"]}})
        found = await discover(business)
        calls = McpCalls(business)
        try:
            said = await calls.call(found["next_free_slot"], {"day": "thursday"}, call_id="CA1")
            broken = await calls.call(found["broken_day"], {"day": "thursday"})
        finally:
            await calls.close()
    assert said.ok and said.said == "The next free slot on Thursday is at 10 am."
    assert said.record()["request"] == {"mcp_server": "diary", "tool": "next_free_slot", "arguments": {"day": "thursday"}}
    # The server's error is not an answer: the caller hears the failure line (agent/tools/functions.py).
    assert not broken.ok and "Error executing tool broken_day" in broken.error


async def test_two_calls_each_have_their_own_server_process_and_a_routed_request_reads_its_arguments(tmp_path):
    business = business_with(tmp_path, {"diary": STDIO}, {"slot": SLOT_INTENT})
    found = await discover(business)
    first, second = McpCalls(business), McpCalls(business)
    try:
        monday, friday = await asyncio.gather(first.call(found["next_free_slot"], {"day": "monday"}),
                                              second.call(found["next_free_slot"], {"day": "friday"}))
    finally:
        await asyncio.gather(first.close(), second.close())
    assert "Monday is at 9 am" in monday.said and "Friday is at 3 pm" in friday.said

    tools = CallTools(business, None, CallControl(), clock=lambda: SUNDAY, mcp_tools=found)
    router = ToolRouter(IntentMatcher(business, facts=FactIndex(business, embedder=load_embedder(None))), tools)
    routed = router("Have you got a free slot on Wednesday?")
    assert (routed.tool, routed.arguments) == ("next_free_slot", {"day": "wednesday"})
    # An LLM that calls tools is offered them as the server describes them.
    [offered] = [s for s in schemas(business, found) if s.name == "next_free_slot"]
    assert offered.required == ["day"] and "next free engineer slot" in offered.description


async def test_a_request_that_does_not_say_the_day_is_asked_for_it_and_the_answer_runs_the_tool(tmp_path):
    business = business_with(tmp_path, {"diary": STDIO}, {"slot": SLOT_INTENT})
    found = await discover(business)
    async with booking_call(business, SUNDAY) as (form, _, said, _):
        tools = form._tools
        tools.mcp_tools, tools.mcp = found, McpCalls(business)
        router = ToolRouter(IntentMatcher(business, facts=FactIndex(business, embedder=load_embedder(None))), tools)
        try:
            routed = router("When is your next free slot?")
            assert (routed.tool, routed.arguments) == ("next_free_slot", {})
            await form.start(found["next_free_slot"], routed.arguments, request="When is your next free slot?")
            assert form.step == "give_day" and form.question().startswith("Could you tell me")
            await answer(form, "Wednesday, please.")
            await until(lambda: len(said) == 2, "the server's reply to be said")
        finally:
            await tools.mcp.close()
    assert "Wednesday is at" in said[-1]
    [call] = tools.calls
    assert call["arguments"] == {"day": "wednesday"} and call["mcp"]["outcome"] == "ok"
