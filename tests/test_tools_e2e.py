"""The agent acts, over a real phone call: order lookups said and keyed, a filler, the rental's form,
a hand-over to a person through Twilio's REST API, and a goodbye that hangs up.

Each call is ``agent/caller/twilio_caller.py`` (Twilio's Media Streams side, espeak-ng speech at
8 kHz) against a real Brisk server on the embedded default: Silero, tiny.en, Qwen 0.5B on
llama-server, hibari. Twilio's REST API is ``tests/fakes/twilio_rest.py`` on loopback.
"""

import asyncio
import time
from datetime import datetime, timedelta
from types import SimpleNamespace

import numpy as np
import pytest
import pytest_asyncio
from pipecat.transports.base_transport import TransportParams

from agent.caller.aiortc_caller import WavMicrophone, WebRTCCaller
from agent.caller.call import running_server
from agent.caller.loopback import serve_app
from agent.config import load_config
from agent.runtime.runtime import Runtime
from agent.transports.twilio import STREAM_PATH
from agent.transports.twilio_transfer import TRANSFER_MARK
from tests.fakes.broken_store import BrokenStore
from tests.fakes.slow_store import SlowStore
from agent.caller.twilio_caller import SAMPLE_RATE, TwilioMediaStreamClient
from tests.fakes.twilio_rest import TwilioRestStandIn
from tests.speech import synthesize_speech
from tests.waiting import until
from tests.browser import needs_chromium, page_with_mic
from tests.test_twilio import phone_server, sign, speech_8k, stream_of, wait_until_quiet

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.e2e]

AUTH_TOKEN = "twilio-auth-token-for-tests"
ACCOUNT_SID = "AC0123456789abcdef0123456789abcdef"
PERSON = "+15550100"


@pytest.fixture(scope="module")
def twilio_rest() -> TwilioRestStandIn:
    return TwilioRestStandIn(ACCOUNT_SID, AUTH_TOKEN)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def agent(twilio_rest):
    """The embedded default, two lines, transfers through the REST stand-in."""
    async with serve_app(twilio_rest.app()) as rest_url:
        config = load_config(max_calls=2, transfer_number=PERSON, twilio_account_sid=ACCOUNT_SID, twilio_api_url=rest_url)
        runtime = Runtime(config)
        await runtime.start()
        yield runtime
        await runtime.stop()


def with_settings(runtime, **changes):
    """The same models and store under changed settings (greeting, silence), for one server."""
    config = runtime.config.model_copy(update=changes)
    resources = SimpleNamespace(**{**vars(runtime.resources), "config": config})
    return SimpleNamespace(config=config, resources=resources)


async def dial(server, call_sid: str) -> TwilioMediaStreamClient:
    """Twilio's webhook, signed, then its media stream with the token the TwiML gave."""
    form = {"CallSid": call_sid, "AccountSid": ACCOUNT_SID, "From": "+15550123", "To": "+15550199"}
    signature = sign(AUTH_TOKEN, "http://brisk.test/twilio/voice", form)
    _, parameters = stream_of((await server.incoming_call(form, {"X-Twilio-Signature": signature})).text)
    client = TwilioMediaStreamClient(f"ws://{server.host}{STREAM_PATH}", call_sid=call_sid,
                                     stream_sid=f"MZ{call_sid[2:]}", custom_parameters=parameters)
    await client.connect()
    return client


def serving(runtime):
    return phone_server(runtime, auth_token=AUTH_TOKEN, public_url="http://brisk.test")


async def say(client, text, tmp_path, name):
    samples, _, speech_end = speech_8k(text, tmp_path, name)
    spoken = await client.say(samples)
    return spoken.time_of_sample(speech_end)


def tool_calls(call, name):
    return [c for c in call.tools.calls if c["name"] == name]


async def test_a_spoken_order_number_is_looked_up_and_read_back(agent, tmp_path):
    async with serving(agent) as server:
        client = await dial(server, "CA1001")
        end = await say(client, "Where is my order number four five seven two?", tmp_path, "order")
        [call] = server.calls
        # A pause may end the turn before the number (then the bot asks for it, and the number
        # that follows is looked up): either way the order is found.
        await until(lambda: any(c["result"].get("found") for c in tool_calls(call, "lookup_order")), timeout=40)
        await wait_until_quiet(client)
        await client.hang_up()

    found = [c for c in tool_calls(call, "lookup_order") if c["result"].get("found")]
    assert [c["result"]["order_number"] for c in found] == ["4572"]
    assert found[0]["result"]["status"] == "shipped"
    # The caller heard the answer, and the call's context keeps the tool call and its result.
    assert len(client.audio_between(end, time.monotonic())) / SAMPLE_RATE > 2.0
    roles = [m.get("role") for m in call.context.get_messages()]
    assert "tool" in roles
    assert any("4 5 7 2" in str(m.get("content", "")) for m in call.context.get_messages() if m.get("role") == "assistant")
    # Its turn's record says the tool answered it, with no LLM request.
    [record] = [t for t in call.latency.turns if t["fast_path"] == "lookup_order" and "4 5 7 2" in t["bot_text"]]
    assert record["stages_ms"]["llm_request"] is None and record["stages_ms"]["first_audio_out"] is not None
    # The call's record keeps the turn, the tool call, and the caller's number masked.
    kept = await agent.resources.records.call("CA1001")
    assert kept["transport"] == "twilio" and kept["caller"] == "+****0123" and kept["status"] == "completed"
    assert any(c["name"] == "lookup_order" and c["result"].get("found") for t in kept["turns"] for c in t["tool_calls"])


async def test_asked_for_the_number_the_caller_keys_it_and_it_is_looked_up(agent, tmp_path):
    async with serving(agent) as server:
        client = await dial(server, "CA1002")
        await say(client, "Where is my order, please?", tmp_path, "check")
        [call] = server.calls
        await until(lambda: tool_calls(call, "lookup_order"), timeout=30)
        await wait_until_quiet(client)
        keyed_at = time.monotonic()
        await client.press("1234#")
        await until(lambda: any(c["result"].get("found") for c in tool_calls(call, "lookup_order")), timeout=20)
        await until(lambda: client.first_audible_after(keyed_at) is not None, timeout=15)
        await wait_until_quiet(client)
        await client.hang_up()

    asked, keyed = tool_calls(call, "lookup_order")
    assert asked["arguments"] == {"order_number": ""} and not asked["result"]["found"]
    assert keyed["arguments"] == {"order_number": "1234"} and keyed["result"]["status"] == "processing"
    assert client.first_audible_after(keyed_at) is not None


async def test_two_callers_at_once_each_get_their_own_order(agent, tmp_path):
    async with serving(agent) as server:
        first, second = await dial(server, "CA1003"), await dial(server, "CA1004")
        await asyncio.gather(say(first, "My order number is four five seven two.", tmp_path, "first"),
                             second.press("9001#"))
        calls = {c.control.call_id: c for c in server.calls}
        await until(lambda: all(tool_calls(c, "lookup_order") for c in calls.values()), timeout=40)
        await asyncio.gather(wait_until_quiet(first), wait_until_quiet(second))
        await asyncio.gather(first.hang_up(), second.hang_up())

    assert tool_calls(calls["CA1003"], "lookup_order")[0]["result"]["order_number"] == "4572"
    assert tool_calls(calls["CA1004"], "lookup_order")[0]["result"]["order_number"] == "9001"


async def test_a_slow_lookup_gets_one_filler_before_the_answer(agent):
    store = agent.resources.store
    agent.resources.store = SlowStore(store, delay_s=2.0)
    try:
        async with serving(agent) as server:
            client = await dial(server, "CA1005")
            await until(lambda: server.calls, "the call's pipeline")
            pressed = time.monotonic()
            await client.press("4572#")
            [call] = server.calls
            await until(lambda: tool_calls(call, "lookup_order"), timeout=20)
            answered = time.monotonic()
            await wait_until_quiet(client)
            await client.hang_up()
    finally:
        agent.resources.store = store

    assert call.filler.fillers == 1
    # The filler was heard while the lookup ran, before the answer; it is not in the context.
    filler_at = client.first_audible_after(pressed)
    assert filler_at is not None and filler_at < answered
    assert not any(m.get("content") == agent.config.business_definition.filler for m in call.context.get_messages())


async def test_with_the_store_down_a_lookup_is_apologised_for_and_the_call_goes_on(agent):
    store = agent.resources.store
    agent.resources.store = broken = BrokenStore()
    try:
        async with serving(agent) as server:
            client = await dial(server, "CA1009")
            await until(lambda: server.calls, "the call's pipeline")
            pressed = time.monotonic()
            await client.press("4572#")
            [call] = server.calls
            await until(lambda: tool_calls(call, "lookup_order"), timeout=20)
            await until(lambda: client.first_audible_after(pressed) is not None, timeout=15)
            await wait_until_quiet(client)
            await client.hang_up()
    finally:
        agent.resources.store = store

    [looked_up] = tool_calls(call, "lookup_order")
    assert broken.failed == 1 and looked_up["result"]["error"] and not looked_up["result"]["found"]
    # The caller heard that it can't be checked now and was offered a person; no order was made up.
    said = [t["bot_text"] for t in call.latency.turns if t["fast_path"] == "lookup_order"]
    assert said == [agent.config.business_definition.tool_failed_text]
    kept = await agent.resources.records.call("CA1009")
    assert kept["status"] == "completed" and kept["turns"][-1]["tool_calls"][0]["result"]["error"]


# What the caller says at each step of the rental's form; it asks only what is still open.
ANSWERS = {"give_bike": "A city bike, please.", "give_day": "On Saturday.", "give_count": "Two bikes.",
           "give_name": "My name is Anna.", "confirm_book_rental": "Yes, please."}


async def test_a_rental_is_booked_step_by_step_and_written_to_the_store(agent, tmp_path):
    before = len(await agent.resources.store.bookings())
    async with serving(agent) as server:
        client = await dial(server, "CA1006")
        await say(client, "I would like to rent two city bikes for Saturday.", tmp_path, "request")
        [call] = server.calls
        form = call.tools.form
        await until(lambda: form.step is not None, timeout=30)
        asked = []
        for turn in range(8):
            await wait_until_quiet(client)
            if form.flow_manager.current_node == "book_rental.done":
                break
            asked.append(form.step)
            await say(client, ANSWERS[form.step], tmp_path, f"answer-{turn}")
            await until(lambda: form.flow_manager.current_node == "book_rental.done" or form.step != asked[-1]
                             or call.fast_path.hits[-1].intent == "form:ask_again", timeout=30)
        await client.hang_up()

    assert form.flow_manager.current_node == "book_rental.done", asked
    # Steps the request already answered were not asked (tiny.en at 8 kHz may miss one of them).
    assert "give_name" in asked and "confirm_book_rental" in asked and len(set(asked)) < len(ANSWERS)
    bookings = await agent.resources.store.bookings()
    assert len(bookings) == before + 1
    booking = bookings[-1]
    now = datetime.now(agent.config.business_definition.zone).date()
    saturday = now + timedelta(days=(5 - now.weekday()) % 7)
    assert booking.tool == "book_rental" and booking.call_id == "CA1006"
    assert {k: booking.details[k] for k in ("bike", "count", "day")} == {"bike": "city bike", "count": 2,
                                                                          "day": saturday.isoformat()}
    assert booking.details["name"]
    [made] = [c for c in call.tools.calls if c["name"] == "book_rental" and "store" in c]
    assert made["result"]["response"] == {"booking_id": booking.id}
    assert any("2 city bikes on Saturday" in t.get("bot_text", "") and f"booking number {booking.id}" in t["bot_text"]
               for t in call.latency.turns), [t.get("bot_text") for t in call.latency.turns]


async def test_asking_for_a_person_hands_the_call_to_the_transfer_number_after_saying_so(agent, twilio_rest, tmp_path):
    async with serving(agent) as server:
        client = await dial(server, "CA1007")
        end = await say(client, "Can I talk to a person, please?", tmp_path, "person")
        await until(lambda: twilio_rest.updates, timeout=40)
        await asyncio.wait_for(client.closed.wait(), 10)
        [call] = server.calls

    [update] = twilio_rest.updates
    assert update.call_sid == "CA1007"
    assert f"<Dial>{PERSON}</Dial>" in update.form["Twiml"]
    # The caller heard the bot say so first: the redirect came once the phone had played it.
    heard = client.audio_between(end, update.at)
    assert len(heard) / SAMPLE_RATE > 1.5
    [(echoed_at, _)] = [m for m in client.marks_echoed if m[1] == TRANSFER_MARK]
    assert echoed_at <= update.at
    assert call.control.outcome == "transferred"


async def test_goodbye_ends_the_call_from_the_bots_side_after_it_is_said(agent, tmp_path):
    async with serving(agent) as server:
        client = await dial(server, "CA1008")
        end = await say(client, "Okay, thank you, goodbye.", tmp_path, "bye")
        await asyncio.wait_for(client.closed.wait(), 30)
        [call] = server.calls

    assert call.control.ended_by == "end_call" and call.control.outcome == "completed"
    assert len(client.audio_between(end, time.monotonic())) / SAMPLE_RATE > 1.0


async def test_the_bot_greets_first_then_asks_once_if_the_caller_is_there_then_hangs_up(agent):
    quiet = with_settings(agent, greet_first=True, user_idle_secs=2.0, user_idle_hangup_secs=2.0)
    async with serving(quiet) as server:
        client = await dial(server, "CA1009")
        opened = time.monotonic()
        await asyncio.wait_for(client.closed.wait(), 40)
        [call] = server.calls

    assert call.idle.prompts == 1
    assert call.control.ended_by == "idle" and call.control.outcome == "abandoned"
    # Three things were said, with the caller's silence between them: greeting, question, goodbye.
    audible = [m.t for m in client.media if m.rms >= 300]
    assert audible and audible[0] - opened < 5.0
    gaps = [b - a for a, b in zip(audible, audible[1:]) if b - a > 1.5]
    assert len(gaps) == 2, gaps
    business = agent.config.business_definition
    assert call.context.get_messages()[0]["content"] == business.greeting


@needs_chromium
async def test_in_the_browser_the_page_shows_a_person_is_being_connected(agent, tmp_path, artifacts_dir):
    clip = synthesize_speech("Can I talk to a person, please?", tmp_path / "person.wav", lead_silence=1.5, tail_silence=10.0)
    async with running_server(agent.config, agent) as (base_url, app):
        calls = []
        app.state.calls.listeners.append(lambda _pc_id, call: calls.append(call))
        async with page_with_mic(tmp_path, clip.path, base_url) as (page, errors):
            await page.click("#call")
            await page.wait_for_function("window.brisk.handover !== ''", timeout=60_000)
            # The bot says so, then its side of the call ends and the page says why.
            await page.wait_for_function("window.brisk.state === 'idle'", timeout=30_000)
            status = await page.inner_text("#status")
            transcript = await page.inner_text("#transcript")
            await page.screenshot(path=str(artifacts_dir / "browser-handover.png"), full_page=True)

    assert not errors, errors
    assert "handed over to a person" in status
    assert "A person is being connected." in transcript
    assert agent.config.business_definition.transfer_text in transcript
    [call] = calls
    assert call.control.outcome == "transferred" and call.control.transport == "webrtc"


async def test_a_caller_who_hangs_up_as_they_are_handed_over_frees_the_line_at_once(agent, tmp_path):
    # The hand-over ends the call with an EndFrame that plays its words out; the caller who hangs
    # up then must not hold the line until the output's write to them times out (10 s), and the
    # other line's call goes on.
    clip = synthesize_speech("Can I talk to a person, please?", tmp_path / "person.wav", lead_silence=1.0,
                             tail_silence=0.5)
    write_timeout_s = TransportParams().audio_out_write_timeout_secs
    async with running_server(agent.config, agent) as (base_url, app):
        other = WebRTCCaller(base_url)
        await other.connect(WavMicrophone(np.zeros(16000 * 60, dtype=np.int16), 16000))
        caller = WebRTCCaller(base_url)
        mic = WavMicrophone(clip.samples, 16000)
        await caller.connect(mic)
        call, task = app.state.calls.calls[caller.pc_id], app.state.calls.tasks[caller.pc_id]
        other_task = app.state.calls.tasks[other.pc_id]
        await asyncio.wait_for(mic.finished.wait(), 30)
        await caller.wait_until_quiet(time.monotonic(), quiet_secs=1.5, max_secs=30)
        assert call.control.outcome == "transferred" and not task.done()
        hung_up = time.monotonic()
        await caller.close()
        await asyncio.wait_for(task, write_timeout_s * 2)
        freed_after_s = time.monotonic() - hung_up
        still_talking = not other_task.done()
        await other.close()

    assert freed_after_s < write_timeout_s / 2
    assert still_talking
    assert call.latency.turns and call.latency.turns[0]["user_text"]  # the record kept the turn


async def test_over_webrtc_goodbye_and_silence_end_the_call_from_the_bots_side(agent, tmp_path):
    bye = synthesize_speech("Okay, thank you, goodbye.", tmp_path / "bye.wav", tail_silence=0.5)
    ended = {}
    for name, samples, settings in (
        ("end_call", bye.samples, {}),
        # Silence is counted from the bot's last words: here, its greeting.
        ("idle", np.zeros(16000, dtype=np.int16), {"greet_first": True, "user_idle_secs": 2.0, "user_idle_hangup_secs": 2.0}),
    ):
        served = with_settings(agent, **settings)
        async with running_server(served.config, served) as (base_url, app):
            caller = WebRTCCaller(base_url)
            await caller.connect(WavMicrophone(samples, 16000))
            call, task = app.state.calls.calls[caller.pc_id], app.state.calls.tasks[caller.pc_id]
            # The server ends the call by itself; the caller never hangs up.
            await asyncio.wait_for(task, 40)
            await until(lambda: caller.pc.connectionState in ("closed", "failed", "disconnected")
                             or caller.channel.readyState == "closed", timeout=10)
            ended[name] = (call.control.ended_by, caller.messages_of("server-message"))
            await caller.close()

    assert ended["end_call"][0] == "end_call" and ended["idle"][0] == "idle"
    # The page is told why, so it can say so.
    for name, (_, messages) in ended.items():
        assert {"type": "call-ending", "by": name} in [
            {k: m["data"][k] for k in ("type", "by")} for m in messages if m["data"].get("type") == "call-ending"]
