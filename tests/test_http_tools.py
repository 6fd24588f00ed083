"""A business's own HTTP tools: declared in its file, checked at start-up, their arguments read
from callers' words by type, and their requests sent, signed, to a real HTTP server on loopback
(tests/fakes/business_api.py). Spoken calls that use them: tests/test_business_api_e2e.py."""

import asyncio
import copy
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
import yaml

from agent.business.model import BusinessError, load_business
from agent.business.tool_spec import DeclaredTool
from agent.caller.loopback import serve_app
from agent.config import ConfigError, load_config
from agent.security.signing import verify
from agent.tools import arguments
from agent.tools.http_tool import BusinessApi
from tests.fakes.business_api import BusinessApiStandIn

PLUMBING = "agent/business/examples/brightwater_plumbing.yaml"
SECRET = "tool-secret-for-tests"
SUNDAY = datetime(2026, 12, 6, 12, 0, tzinfo=ZoneInfo("Europe/London"))

# A restaurant's tool, written here rather than taken from a shipped file: the arguments of a
# business Brisk does not ship.
TABLE = {
    "name": "check_table",
    "description": "Check whether a table is free for a party on a weekday.",
    "parameters": {
        "type": "object",
        "properties": {
            "party_size": {"type": "integer", "description": "how many people", "minimum": 1, "maximum": 20},
            "day": {"type": "string", "description": "the weekday, lower case"},
            "time": {"type": "string", "format": "time"},
            "seating": {"type": "string", "enum": ["inside", "terrace"]},
            "high_chair": {"type": "boolean"},
        },
        "required": ["party_size", "day"],
    },
    "http": {"url": "http://127.0.0.1:9/tables", "headers": {"Authorization": "Bearer ${TABLE_API_KEY}"}},
    "response": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
    "say": "{message}",
}


def business_with(tmp_path, tool: dict, **more) -> str:
    """The plumbing example's file with ``tool`` among its tools; the path written."""
    data = yaml.safe_load(open(PLUMBING))
    data["tools"] = ["transfer_to_human", "end_call", tool]
    data["intents"] = {k: v for k, v in data["intents"].items() if v.get("tool") in (None, "transfer_to_human", "end_call")}
    data.update(more)
    path = tmp_path / "business.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def table_tool(**changes) -> DeclaredTool:
    """The restaurant's tool, without the header that needs its key in the environment."""
    return DeclaredTool.model_validate({**copy.deepcopy(TABLE), "http": {"url": TABLE["http"]["url"]}, **changes})


# --- the business file ------------------------------------------------------------------------

@pytest.mark.parametrize("change, named", [
    (lambda t: t["parameters"]["properties"]["party_size"].update(type="count"), "party_size"),
    (lambda t: t["parameters"].update(type="array"), "parameters: must be a JSON Schema of type object"),
    (lambda t: t["parameters"]["properties"]["party_size"].update(minimum="one"), "properties.party_size.minimum"),
    (lambda t: t["parameters"].update(required=["party"]), "required: 'party'"),
    (lambda t: t.update(say="{mesage}"), "say: {mesage}"),
    (lambda t: t.update(say="Free at {slot.time}"), "say: {slot.time}"),
    (lambda t: t.update(confirm="A table for {people}?"), "confirm: {people}"),
    (lambda t: t["http"].update(headers={"Authorization": "Bearer ${NOT_SET_ANYWHERE_KEY}"}),
     "http.headers: Authorization: the environment variable NOT_SET_ANYWHERE_KEY is not set"),
    (lambda t: t["http"].update(url="ftp://example.com/tables"), "http.url: 'ftp://example.com/tables' is not"),
    (lambda t: t.update(name="end_call"), "'end_call' is a built-in tool"),
    (lambda t: t.update(colour="blue"), "colour: not a field a tool has"),
    (lambda t: t["parameters"]["properties"]["party_size"].update(open_days_only=True),
     "properties.party_size.open_days_only: only a weekday or a date is a day"),
    (lambda t: t.pop("http"), "either http (its API) or store (a booking Brisk keeps)"),
    (lambda t: t.update(store="bookings"), "either http (its API) or store (a booking Brisk keeps)"),
    (lambda t: (t.pop("http"), t.update(store="diary")), "store: Input should be 'bookings'"),
    (lambda t: (t.pop("http"), t.pop("response"), t.update(store="bookings", say="Booked, {reference}.")),
     "say: {reference} is neither an argument nor what store: bookings gives (booking_id)"),
    (lambda t: (t.pop("http"), t.update(store="bookings")), "response: a store tool's reply is Brisk's own"),
    (lambda t: t.update(failed="Sorry {people}."), "failed: {people} is not an argument"),
])
def test_a_malformed_tool_stops_start_up_naming_the_tool_and_the_field(tmp_path, monkeypatch, change, named):
    monkeypatch.setenv("TABLE_API_KEY", "k")
    tool = copy.deepcopy(TABLE)
    change(tool)
    with pytest.raises(BusinessError) as error:
        load_business(business_with(tmp_path, tool))
    assert "tools: check_table" in str(error.value) or "'end_call'" in str(error.value)
    assert named in str(error.value)


def test_a_well_formed_tool_loads_beside_the_built_in_ones_and_an_intent_may_route_to_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TABLE_API_KEY", "k")
    intents = {"table": {"keywords": ["table"], "examples": ["Have you got a table for two on Friday?"],
                         "tool": "check_table"}}
    business = load_business(business_with(tmp_path, copy.deepcopy(TABLE), intents=intents))
    assert business.tool_names == ["transfer_to_human", "end_call", "check_table"]
    assert business.http_tools["check_table"].required == ["party_size", "day"]
    assert "${TABLE_API_KEY}" in business.http_tools["check_table"].http.headers["Authorization"]


def test_an_intent_naming_a_tool_the_file_does_not_declare_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("TABLE_API_KEY", "k")
    intents = {"table": {"keywords": ["table"], "examples": ["A table for two?"], "tool": "check_tables"}}
    with pytest.raises(BusinessError, match="intents.table.tool: 'check_tables' is not one of this file's tools"):
        load_business(business_with(tmp_path, copy.deepcopy(TABLE), intents=intents))


def test_http_tools_without_the_signing_secret_stop_start_up(monkeypatch):
    monkeypatch.delenv("BRISK_TOOL_SECRET", raising=False)
    with pytest.raises(ConfigError, match="check_availability, book_visit.*BRISK_TOOL_SECRET"):
        load_config(business=PLUMBING)
    assert load_config(business=PLUMBING, tool_secret="s").business_definition.http_tools


# --- arguments from the caller's words ----------------------------------------------------------

@pytest.mark.parametrize("said, read", [
    ("Have you got a table for four people on Friday at 7pm?", {"party_size": 4, "day": "friday", "time": "19:00"}),
    ("Is there room for 2 tomorrow at 19:30", {"party_size": 2, "day": "monday", "time": "19:30"}),
    ("Could we sit out on the terrace on Saturday, there's six of us",
     {"party_size": 6, "day": "saturday", "seating": "terrace"}),
    ("Can we come at 8 on the 12th?", {}),  # two numbers, neither next to the party's words: not guessed
    ("I ordered 3 pizzas last week, now I want a table for five people on Thursday",
     {"party_size": 5, "day": "thursday"}),
    ("Any chance of a table tonight at noon?", {"day": "sunday", "time": "12:00"}),
])
def test_a_whole_request_gives_only_what_it_states_unmistakably(said, read):
    assert arguments.from_request(table_tool(), said, SUNDAY) == read


@pytest.mark.parametrize("name, said, value", [
    ("party_size", "Four.", 4),
    ("party_size", "There'll be 5 of us.", 5),
    ("party_size", "Just me.", 1),
    ("party_size", "Forty.", None),  # above the schema's maximum: asked again, not booked for 40
    ("party_size", "DTMF: 3#", 3),
    ("day", "Next Tuesday, please.", "tuesday"),
    ("day", "Whenever suits you.", None),
    ("time", "Half seven.", None),  # not read rather than guessed
    ("time", "8:15 pm", "20:15"),
    ("seating", "Inside, please.", "inside"),
    ("seating", "Out on the terrace if we can.", "terrace"),
    ("seating", "Either is fine, inside or the terrace.", None),
    ("seating", "A table, please.", None),
    ("high_chair", "Yes please.", True),
    ("high_chair", "No, we're fine.", False),
])
def test_an_answer_to_its_own_question_gives_that_argument_typed(name, said, value):
    assert arguments.from_answer(table_tool(), name, said, SUNDAY) == value


def test_a_count_said_before_what_it_counts_agrees_with_it_in_the_read_back():
    order = DeclaredTool.model_validate({
        "name": "order_food", "description": "Order food for collection.", "store": "bookings",
        "parameters": {"type": "object", "required": ["quantity", "dish"], "properties": {
            "quantity": {"type": "integer", "minimum": 1}, "dish": {"type": "string", "enum": ["large pizza", "glass of wine", "box of fries"]}}},
        "say": "Ordered: {quantity} {dish}, number {booking_id}.", "changes": True,
        "confirm": "So {quantity} {dish}, and {dish} is right?"})
    assert arguments.read_back(order, order.confirm, {"quantity": 2, "dish": "large pizza"}) == \
        "So 2 large pizzas, and large pizza is right?"
    assert [arguments.read_back(order, order.say, {"quantity": n, "dish": dish}, {"booking_id": 9}) for n, dish in
            ((1, "large pizza"), (3, "glass of wine"), (2, "box of fries"))] == [
        "Ordered: 1 large pizza, number 9.", "Ordered: 3 glasses of wine, number 9.", "Ordered: 2 boxes of fries, number 9."]


def test_names_phones_and_free_text_are_read_from_answers_and_from_requests_only_when_stated():
    tool = table_tool(parameters={"type": "object", "properties": {
        "name": {"type": "string"}, "phone": {"type": "string", "format": "phone"}, "note": {"type": "string"}}})
    assert arguments.from_answer(tool, "name", "It's Anna Lee.", SUNDAY) == "Anna Lee"
    assert arguments.from_answer(tool, "phone", "Oh seven seven hundred, nine double oh one two three", SUNDAY) is None
    assert arguments.from_answer(tool, "phone", "07700 900123", SUNDAY) == "07700900123"
    assert arguments.from_answer(tool, "note", "The tap in the kitchen drips.", SUNDAY) == "The tap in the kitchen drips"
    assert arguments.from_request(tool, "Hi, my name is Anna Lee and my number is 07700 900123.", SUNDAY) == {
        "name": "Anna Lee", "phone": "07700900123"}
    assert arguments.from_request(tool, "I'm looking for a table, my kitchen tap drips.", SUNDAY) == {}


# --- the request, against a real HTTP server ------------------------------------------------------

@pytest.fixture
async def api(monkeypatch):
    """(the stand-in, the plumbing example's tools pointed at it, a BusinessApi)."""
    stand_in = BusinessApiStandIn(SECRET)
    async with serve_app(stand_in.app()) as url:
        monkeypatch.setenv("BRIGHTWATER_API_URL", url)
        monkeypatch.setenv("BRIGHTWATER_API_KEY", "brightwater-key")
        business = load_business(PLUMBING)
        sender = BusinessApi(SECRET)
        yield stand_in, business.http_tools, sender
        await sender.close()


async def test_a_get_sends_the_arguments_as_query_with_the_bearer_from_the_environment_signed(api):
    stand_in, tools, sender = api
    outcome = await sender.call(tools["check_availability"], {"day": "thursday"}, call_id="CA1")
    assert outcome.ok and outcome.said == "An engineer is free on Thursday from 10 am."
    [got] = stand_in.received
    assert (got.method, got.path, got.query) == ("GET", "/availability", {"day": "thursday"})
    assert got.headers["authorization"] == "Bearer brightwater-key"
    assert got.headers["x-brisk-call-id"] == "CA1"
    assert got.signed
    # The record keeps the URL as the file writes it: nothing read from the environment.
    assert outcome.record()["request"]["url"].startswith("${BRIGHTWATER_API_URL")
    assert "brightwater-key" not in str(outcome.record())


async def test_a_post_sends_the_arguments_as_a_signed_json_body_and_say_reads_them_as_said(api):
    stand_in, tools, sender = api
    outcome = await sender.call(tools["book_visit"], {"day": "friday", "name": "Anna Lee", "phone": "07700900123"})
    assert outcome.said == "You're booked in for Friday, reference BW100. Is there anything else I can help with?"
    [got] = stand_in.received
    assert got.method == "POST" and got.body == {"day": "friday", "name": "Anna Lee", "phone": "07700900123"}
    assert got.signed
    assert not verify("another secret", b'{"day":"friday"}', got.headers["x-brisk-signature"])


@pytest.mark.parametrize("mode, error", [
    ("500", "HTTP 500"),
    ("not json", "not JSON"),
    ("no message", "breaks the tool's response schema"),
    ("slow", "no answer within 0.5 s"),
])
async def test_a_failing_api_gives_a_failed_outcome_that_says_why(api, mode, error):
    stand_in, tools, sender = api
    stand_in.mode, stand_in.slow_s = mode, 2.0
    tool = tools["check_availability"].model_copy(
        update={"http": tools["check_availability"].http.model_copy(update={"timeout_secs": 0.5})})
    outcome = await sender.call(tool, {"day": "monday"})
    assert not outcome.ok and outcome.said is None
    assert error in outcome.error
    assert outcome.record()["outcome"] == "failed" and error in outcome.record()["error"]


async def test_a_dead_api_and_arguments_the_schema_refuses_fail_without_a_request(api):
    stand_in, tools, sender = api
    refused = await sender.call(tools["check_availability"], {"day": 4})
    assert not refused.ok and "arguments.day" in refused.error and not stand_in.received
    dead = table_tool(http={"url": "http://127.0.0.1:9/tables", "timeout_secs": 1})
    outcome = await sender.call(dead, {"party_size": 2, "day": "friday"})
    assert not outcome.ok and "the request failed" in outcome.error


async def test_two_calls_at_once_each_get_their_own_answer(api):
    stand_in, tools, sender = api
    monday, friday = await asyncio.gather(
        sender.call(tools["check_availability"], {"day": "monday"}, call_id="CA1"),
        sender.call(tools["check_availability"], {"day": "friday"}, call_id="CA2"))
    assert "Monday from 9 am" in monday.said and "Friday from 1 pm" in friday.said
    assert {(r.headers["x-brisk-call-id"], r.query["day"]) for r in stand_in.received} == {("CA1", "monday"), ("CA2", "friday")}
