"""A business's MCP server over a real phone call: the caller's words routed to the server's tool
(tests/fakes/mcp_diary.py, started over stdio for the call), its reply said; the call's record
keeps the request and outcome; the server's process ends with the call."""

import pytest
import pytest_asyncio

from agent.config import load_config
from agent.runtime.runtime import Runtime
from tests.test_business_api_e2e import answers, ask, placed
from tests.test_mcp_tools import STDIO, SLOT_INTENT
from tests.test_tools_e2e import serving, tool_calls
from tests.waiting import until

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.e2e]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def agent(tmp_path_factory):
    import yaml

    data = yaml.safe_load(open("agent/business/examples/brightwater_plumbing.yaml"))
    data["tools"] = ["transfer_to_human", "end_call"]
    data["intents"] = {**{k: v for k, v in data["intents"].items() if v.get("tool") in (None, "transfer_to_human", "end_call")},
                       "slot": SLOT_INTENT}
    data["mcp_servers"] = {"diary": STDIO}
    path = tmp_path_factory.mktemp("mcp") / "business.yaml"
    path.write_text(yaml.safe_dump(data))
    runtime = Runtime(load_config(business=str(path), max_calls=2))
    await runtime.start()
    yield runtime
    await runtime.stop()


async def test_a_spoken_question_reaches_the_mcp_servers_tool_and_its_reply_is_said(agent, tmp_path):
    async with serving(agent) as server:
        client, call = await placed(server, "CA4311")
        await ask(client, call, "When is the next free slot on Thursday?", tmp_path, "slot",
                  heard="The next free slot on Thursday is at 10 am.")
        await client.hang_up()
        await until(lambda: not call.tools.mcp.connected, "the call's MCP connection to close")

    [made] = tool_calls(call, "next_free_slot")
    assert made["arguments"] == {"day": "thursday"} and made["mcp"]["outcome"] == "ok"
    assert any("10 am" in a for a in answers(call))
    kept = await agent.resources.records.call("CA4311")
    assert any(c["name"] == "next_free_slot" and c["mcp"]["outcome"] == "ok" for t in kept["turns"] for c in t["tool_calls"])
