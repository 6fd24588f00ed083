"""The business's own systems over a real phone call: the plumbing example's HTTP tools against a
stand-in of its API (tests/fakes/business_api.py, a real HTTP server on loopback).

Each call is ``agent/caller/twilio_caller.py`` (Twilio's Media Streams side, espeak-ng speech at
8 kHz) against a real Brisk server on the embedded default, with the plumbing business. The
caller's words are routed to a tool by intent, its arguments read from them; what is missing is
asked for by the tool's form, one question at a time, and read back before a booking is made.
"""

import asyncio
import os
import time

import pytest
import pytest_asyncio

from agent.caller.loopback import serve_app
from agent.config import load_config
from agent.runtime.runtime import Runtime
from tests.fakes.business_api import BusinessApiStandIn
from tests.test_tools_e2e import dial, say, serving, tool_calls, with_settings
from tests.test_twilio import wait_until_quiet
from tests.waiting import until

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.e2e]

PLUMBING = "agent/business/examples/brightwater_plumbing.yaml"


@pytest.fixture(scope="module")
def stand_in() -> BusinessApiStandIn:
    return BusinessApiStandIn(os.environ["BRISK_TOOL_SECRET"])


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def agent(stand_in):
    """The plumbing business on the embedded default, its API the stand-in."""
    async with serve_app(stand_in.app()) as api_url:
        before = os.environ.get("BRIGHTWATER_API_URL")
        os.environ["BRIGHTWATER_API_URL"] = api_url  # read by the tools' ${BRIGHTWATER_API_URL} at each request
        try:
            runtime = Runtime(load_config(business=PLUMBING, max_calls=2))
            await runtime.start()
            yield runtime
            await runtime.stop()
        finally:
            if before is None:
                os.environ.pop("BRIGHTWATER_API_URL", None)
            else:
                os.environ["BRIGHTWATER_API_URL"] = before


@pytest.fixture(autouse=True)
def api_well(stand_in):
    stand_in.mode = "ok"
    stand_in.received.clear()


def answers(call) -> list[str]:
    """What the bot said, turn by turn."""
    return [t["bot_text"] for t in call.latency.turns if t.get("bot_text")]


async def placed(server, call_sid: str):
    """(the caller, the call) of a phone call dialled to ``server``, once its pipeline is built."""
    client = await dial(server, call_sid)
    await until(lambda: any(c.control.call_id == call_sid for c in server.calls), "the call's pipeline")
    return client, next(c for c in server.calls if c.control.call_id == call_sid)


def bot_said(call) -> list[str]:
    """What the bot said into the call's context, in order (the idle prompts among it)."""
    return [str(m.get("content")) for m in call.context.get_messages() if m.get("role") == "assistant"]


async def ask(client, call, text, tmp_path, name, *, heard):
    """Say ``text`` and wait until the bot has answered with something holding ``heard``."""
    await say(client, text, tmp_path, name)
    await until(lambda: any(heard in a for a in answers(call)),
                lambda: f"{heard!r} in {answers(call)}, heard {[t.get('user_text') for t in call.latency.turns]}",
                timeout=40)
    await wait_until_quiet(client)


async def test_a_spoken_question_reaches_the_api_with_typed_arguments_and_the_caller_hears_its_message(
        agent, stand_in, tmp_path):
    async with serving(agent) as server:
        client, call = await placed(server, "CA4301")
        started = time.monotonic()
        await ask(client, call, "Have you got anybody free to come out on Thursday?", tmp_path, "free",
                  heard="An engineer is free on Thursday from 10 am.")
        await client.hang_up()

    [request] = stand_in.received
    assert (request.method, request.path, request.query) == ("GET", "/availability", {"day": "thursday"})
    assert request.headers["authorization"] == f"Bearer {os.environ['BRIGHTWATER_API_KEY']}"
    assert request.signed and request.headers["x-brisk-call-id"] == "CA4301"
    [made] = tool_calls(call, "check_availability")
    assert made["arguments"] == {"day": "thursday"} and made["http"]["outcome"] == "ok"
    assert client.first_audible_after(started) is not None
    # The call's record keeps the request and its outcome.
    kept = await agent.resources.records.call("CA4301")
    [recorded] = [c for t in kept["turns"] for c in t["tool_calls"] if c["name"] == "check_availability"]
    assert recorded["http"]["status"] == 200 and recorded["http"]["request"]["method"] == "GET"


async def test_with_the_api_down_the_caller_hears_the_failure_line_and_the_next_question_is_answered(
        agent, stand_in, tmp_path):
    stand_in.mode = "500"
    failed = agent.config.business_definition.tool_failed_text
    async with serving(agent) as server:
        client, call = await placed(server, "CA4302")
        await ask(client, call, "Have you got anybody free on Monday?", tmp_path, "down", heard=failed)
        await ask(client, call, "What time do you open on Saturday?", tmp_path, "hours", heard="9 in the morning")
        await client.hang_up()

    [made] = tool_calls(call, "check_availability")
    assert made["http"]["outcome"] == "failed" and "HTTP 500" in made["http"]["error"]
    kept = await agent.resources.records.call("CA4302")
    assert kept["status"] == "completed"
    assert any(c["http"]["outcome"] == "failed" for t in kept["turns"] for c in t["tool_calls"])


async def test_a_slow_api_gets_one_filler_before_its_answer(agent, stand_in, tmp_path):
    stand_in.mode, stand_in.slow_s = "slow", 2.5
    async with serving(agent) as server:
        client, call = await placed(server, "CA4307")
        await ask(client, call, "Have you got anybody free on Wednesday?", tmp_path, "slow",
                  heard="An engineer is free on Wednesday from 11 am.")
        await client.hang_up()

    assert call.filler.fillers == 1
    [made] = tool_calls(call, "check_availability")
    assert made["http"]["outcome"] == "ok" and made["http"]["elapsed_ms"] >= 2500


async def test_a_booking_with_missing_details_is_asked_for_read_back_confirmed_and_made(agent, stand_in, tmp_path):
    async with serving(agent) as server:
        client, call = await placed(server, "CA4303")
        await ask(client, call, "Could I get someone booked in to look at my boiler?", tmp_path, "book",
                  heard="Which day would you like the engineer to come?")
        await ask(client, call, "Thursday, please.", tmp_path, "day", heard="what name should the booking be under")
        # A question mid-form is answered, and the step asked again.
        await ask(client, call, "Sorry, how much is your call-out fee?", tmp_path, "fee",
                  heard="60 pounds")
        assert "what name should the booking be under" in answers(call)[-1]
        await ask(client, call, "John Smith.", tmp_path, "name", heard="best phone number")
        keyed_at = time.monotonic()
        await client.press("07700900123#")
        await until(lambda: any("Shall I book it?" in a for a in answers(call)), lambda: answers(call), timeout=30)
        await wait_until_quiet(client)
        assert not stand_in.received  # nothing is booked before the caller says yes
        await ask(client, call, "Yes, that's right.", tmp_path, "yes", heard="reference BW")
        await client.hang_up()

    assert client.first_audible_after(keyed_at) is not None
    readback = next(a for a in answers(call) if "Shall I book it?" in a)
    assert "Thursday" in readback and "0 7 7 0 0 9 0 0 1 2 3" in readback
    # The name as Whisper heard it over the phone line (8 kHz espeak is not always "John Smith"):
    # what was read back and confirmed is what the API gets.
    name = call.tools.form.arguments["name"]
    assert f"for {name}, on" in readback
    [request] = stand_in.received
    assert request.method == "POST" and request.signed
    assert request.body == {"day": "thursday", "name": name, "phone": "07700900123"}
    [booked] = [c for c in tool_calls(call, "book_visit") if "http" in c]
    assert booked["http"]["outcome"] == "ok" and booked["result"]["response"]["reference"].startswith("BW")


async def test_a_caller_silent_in_a_form_is_asked_again_once_then_offered_a_person(agent, stand_in, tmp_path):
    quiet = with_settings(agent, user_idle_secs=2.0, user_idle_hangup_secs=30.0)
    async with serving(quiet) as server:
        client, call = await placed(server, "CA4304")
        await ask(client, call, "I'd like to get a plumber booked in, please.", tmp_path, "book",
                  heard="Which day would you like the engineer to come?")
        offer = "I'll leave that for now."
        await until(lambda: any(offer in said for said in bot_said(call)), lambda: bot_said(call), timeout=30)
        await client.hang_up()

    said = bot_said(call)
    question = "Which day would you like the engineer to come?"
    assert said.count(question) == 2 and said.index(question) < said.index(next(s for s in said if offer in s))
    assert call.tools.form.step is None and call.idle.prompts == 0  # not "Are you still there?"
    assert not stand_in.received


async def test_never_mind_leaves_a_form_and_two_callers_at_once_each_get_their_own_answer(agent, stand_in, tmp_path):
    async with serving(agent) as server:
        first, second = await dial(server, "CA4305"), await dial(server, "CA4306")
        await until(lambda: len(server.calls) == 2, "both calls' pipelines")
        one, two = sorted(server.calls, key=lambda c: c.control.call_id)
        await asyncio.gather(
            ask(first, one, "Could I get someone booked in to look at my boiler?", tmp_path, "book1",
                heard="Which day would you like the engineer to come?"),
            ask(second, two, "Have you got an engineer free on Friday?", tmp_path, "free2",
                heard="free on Friday from 1 pm"))
        await ask(first, one, "Actually, never mind.", tmp_path, "leave", heard="I've left that")
        await first.hang_up()
        await second.hang_up()

    assert one.tools.form.step is None and not tool_calls(two, "book_visit")
    assert [(r.method, r.query, r.headers["x-brisk-call-id"]) for r in stand_in.received] == [
        ("GET", {"day": "friday"}, "CA4306")]
