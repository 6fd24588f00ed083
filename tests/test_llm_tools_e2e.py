"""An LLM that calls tools well is offered them and calls them itself; the embedded one is not.

Over a real WebRTC call (aiortc caller, the real server and models) with
``tests/fakes/tool_calling_llm.py`` as an OpenAI-compatible LLM elsewhere (``BRISK_LLM_TOOLS``
auto: offered), which answers the caller's question with a ``lookup_order`` call and then with
text once the tool's result is in the messages.
"""

import json
import os

import pytest
import pytest_asyncio

from agent.caller.call import place_call
from agent.caller.loopback import serve_app
from tests.fakes.business_api import BusinessApiStandIn
from tests.fakes.slow_store import SlowStore
from tests.fakes.tool_calling_llm import ToolCallingLLM
from tests.servers import brisk_with_llm
from tests.speech import synthesize_speech

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

ANSWER = "Your helmet is on its way and should arrive by the third of December."


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def served():
    llm = ToolCallingLLM(ttft_s=0.2, tokens_per_s=40.0, answer_for=lambda _messages: ANSWER,
                         tool_name="lookup_order", arguments='{"order_number": "4572"}')
    # The intents would route this question themselves: the LLM's own call is under test.
    async with brisk_with_llm(llm.app(), fast_path=False) as (base_url, app):
        yield base_url, app, llm


async def test_an_llm_that_calls_tools_looks_up_the_order_and_says_the_result(served):
    base_url, app, llm = served
    calls = []
    app.state.calls.listeners.append(lambda _pc_id, call: calls.append(call))
    question = synthesize_speech("Could you check on my order for me?", tail_silence=1.0)
    asked_before = len(llm.requests)

    result = await place_call(base_url, app, question.samples, question.sample_rate)

    [call] = calls
    requests = [r for r in llm.requests[asked_before:] if r.messages and r.messages[-1].get("role") in ("user", "tool")]
    # The warm-up offers the same tools: a chat template renders them into the cached prefix.
    assert all(r.tools for r in llm.requests[asked_before:])

    # Offered the business's tools, it called one; its result went back to it, then it answered.
    assert {t["function"]["name"] for t in requests[0].tools} == {"lookup_order", "book_rental", "transfer_to_human", "end_call"}
    [lookup] = call.tools.calls
    assert lookup["name"] == "lookup_order" and lookup["result"]["found"]
    tool_message = next(m for r in requests for m in r.messages if m.get("role") == "tool")
    assert json.loads(tool_message["content"])["status"] == "shipped"
    # The answer to a tool's result is the result's to back, not the business file's: it is said.
    [turn] = [t for t in result.summary["turns"] if t.get("bot_text")]
    assert turn["bot_text"].strip() == ANSWER
    assert result.caller.first_audible_after(result.utterance_ends[0]) is not None


async def test_a_slow_lookup_is_one_turn_filler_then_answer_and_the_call_waits_for_it(served):
    base_url, app, llm = served
    resources = app.state.calls.runtime.resources
    store = resources.store
    resources.store = SlowStore(store, delay_s=6.0)
    calls = []
    app.state.calls.listeners.append(lambda _pc_id, call: calls.append(call))
    question = synthesize_speech("Could you check on my order for me?", tail_silence=1.0)
    try:
        result = await place_call(base_url, app, question.samples, question.sample_rate)
    finally:
        resources.store = store

    # The filler was heard and went quiet long before the lookup came back: the caller stayed on.
    [call] = calls
    [lookup] = call.tools.calls
    assert call.filler.fillers == 1 and lookup["result"]["found"]
    # One turn holds both, the filler and the answer that came after it: neither is lost.
    [turn] = [t for t in result.summary["turns"] if t.get("bot_text")]
    filler = app.state.calls.runtime.config.business_definition.filler
    assert turn["bot_text"].split() == f"{filler} {ANSWER}".split()
    assert not turn["interrupted"]


async def test_an_llm_that_calls_tools_calls_the_business_api_and_phrases_its_reply(monkeypatch):
    """The plumbing example's HTTP tool, called by the LLM itself: the stand-in API gets the signed
    request, and the reply goes back to the LLM to phrase."""
    api = BusinessApiStandIn(os.environ["BRISK_TOOL_SECRET"])
    llm = ToolCallingLLM(ttft_s=0.2, tokens_per_s=40.0, answer_for=lambda _messages: "Yes, Friday from 1 pm works.",
                         tool_name="check_availability", arguments='{"day": "friday"}')
    question = synthesize_speech("Would somebody be able to pop round at the end of the week?", tail_silence=1.0)
    async with serve_app(api.app()) as api_url:
        monkeypatch.setenv("BRIGHTWATER_API_URL", api_url)
        async with brisk_with_llm(llm.app(), fast_path=False,
                                  business="agent/business/examples/brightwater_plumbing.yaml") as (base_url, app):
            calls = []
            app.state.calls.listeners.append(lambda _pc_id, call: calls.append(call))
            result = await place_call(base_url, app, question.samples, question.sample_rate)

    offered = {t["function"]["name"]: t["function"] for t in llm.requests[-1].tools}
    assert {"check_availability", "book_visit"} <= set(offered)
    assert "ask" not in offered["check_availability"]["parameters"]["properties"]["day"]
    [request] = api.received
    assert request.query == {"day": "friday"} and request.signed
    [made] = calls[0].tools.calls
    assert made["name"] == "check_availability" and made["http"]["outcome"] == "ok"
    tool_message = next(m for m in llm.requests[-1].messages if m.get("role") == "tool")
    assert json.loads(tool_message["content"])["said"] == "An engineer is free on Friday from 1 pm."
    [turn] = [t for t in result.summary["turns"] if t.get("bot_text")]
    assert turn["bot_text"].strip() == "Yes, Friday from 1 pm works."
