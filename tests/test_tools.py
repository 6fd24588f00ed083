"""The tools' parts on their own: reading the caller's words, routing, the filler's timing, the business file's tool declarations and the store under several calls.
The rental's form: tests/test_booking_flow.py; the same tools over a real phone call: tests/test_tools_e2e.py."""

import asyncio
from datetime import date, datetime
from zoneinfo import ZoneInfo

import pytest
from pipecat.frames.frames import (
    FunctionCallFromLLM,
    FunctionCallsStartedFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSSpeakFrame,
)
from pipecat.tests.utils import SleepFrame, run_test

from agent.business.facts import FactIndex
from agent.business.intents import IntentMatcher
from agent.business.model import BusinessError, default_business_path, load_business
from agent.call.call_control import CallControl
from agent.tools import arguments, words
from agent.tools.functions import CallTools, order_sentence, schemas
from agent.tools.router import ToolRouter
from agent.tools.store import ShopStore
from processors.llm.tool_filler import ToolFiller

LONDON = ZoneInfo("Europe/London")
TUESDAY = datetime(2026, 12, 1, 10, 30, tzinfo=LONDON)
BUSINESS = load_business()


def router() -> ToolRouter:
    tools = CallTools(BUSINESS, None, CallControl(), clock=lambda: TUESDAY)
    return ToolRouter(IntentMatcher(BUSINESS, facts=FactIndex(BUSINESS), clock=lambda: TUESDAY), tools)


@pytest.mark.parametrize("said, number", [
    ("Where is my order? The number is 4572.", "4572"),
    ("My order number is four five seven two, and I want to know where it is.", "4572"),
    ("It's 45 72.", "4572"),
    ("Where is my order number 4, 5, 7, 2?", "4572"),  # base's transcript of the phone test, once
    ("I ordered 2, 3 days ago, order 4572.", "4572"),
    ("DTMF: 1234#", "1234"),
    ("I ordered 2 helmets.", None),
])
def test_an_order_number_is_read_said_digit_by_digit_or_keyed(said, number):
    assert words.order_number(said) == number


def test_a_booking_request_holds_the_bike_day_and_count_it_names():
    rental = BUSINESS.declared_tools["book_rental"]
    assert arguments.from_request(rental, "I want to rent two city bikes for Saturday.", TUESDAY) == {
        "bike": "city bike", "day": "2026-12-05", "count": 2}
    assert arguments.from_request(rental, "Can I book a bike?", TUESDAY) == {}
    assert arguments.from_request(rental, "I'd like to hire an e-bike on Friday.", TUESDAY) == {
        "bike": "electric bike", "day": "2026-12-04"}
    assert arguments.from_answer(rental, "bike", "An electric one.", TUESDAY) == "electric bike"
    assert [arguments.from_answer(rental, "count", said, TUESDAY) for said in ("Just one.", "Two bikes.")] == [1, 2]
    assert words.day("tomorrow, please", TUESDAY) == date(2026, 12, 2)
    assert words.name("My name is Anna Lee.") == "Anna Lee"
    # A name a request states, however the caller puts it; a request without one states none.
    assert [words.stated_name(said) for said in (
        "Book it for Saturday, my name's Anna Lee.", "Thursday please. The name's Sam Hill.",
        "Put it under the name of Jo Bloggs", "Can I book a bike for Saturday?")] == ["Anna Lee", "Sam Hill", "Jo Bloggs", None]
    assert (words.yes_or_no("Yes, please."), words.yes_or_no("No, that's wrong."), words.yes_or_no("Hmm.")) == (True, False, None)


@pytest.mark.parametrize("said, tool, arguments", [
    ("Where is my order? The number is 4572.", "lookup_order", {"order_number": "4572"}),
    ("Has my order shipped?", "lookup_order", {"order_number": ""}),
    ("DTMF: 9001#", "lookup_order", {"order_number": "9001"}),
    ("Can I talk to a person, please?", "transfer_to_human", {}),
    ("Okay, thank you, goodbye.", "end_call", {}),
    ("I would like to rent two city bikes for Saturday.", "book_rental", {"bike": "city bike", "day": "2026-12-05", "count": 2}),
])
def test_requests_are_routed_to_their_tool_with_what_the_words_hold(said, tool, arguments):
    answer = router()(said)
    assert (answer.tool, answer.arguments) == (tool, arguments)


@pytest.mark.parametrize("said", [
    "Do you rent electric bikes?",  # about the offer, not a booking
    "What does an electric bike cost to rent for a day?",  # a price
    "Do I need ID to rent a bike?",
])
def test_questions_about_the_offer_are_not_bookings(said):
    answer = router()(said)
    assert answer is None or answer.tool is None


def test_a_number_said_after_the_bot_asked_for_one_is_the_order_number():
    r = router()
    assert r("Four five seven two.") is None or r("Four five seven two.").tool is None
    r.tools.calls.append({"name": "lookup_order", "arguments": {}, "result": {"found": False}})
    assert r("Four five seven two.").arguments == {"order_number": "4572"}


@pytest.mark.parametrize("said, arguments", [
    ("Where's my order? It's number four five seven two.", {"order_number": "4572"}),
    ("I'd like to rent a bike. Two city bikes for Saturday, please.", {"bike": "city bike", "day": "2026-12-05", "count": 2}),
])
def test_a_request_whose_next_sentence_gives_its_arguments_is_one_request(said, arguments):
    answer = router()(said)
    assert (answer.arguments, answer.text) == (arguments, "")


@pytest.mark.parametrize("said, tool, named", [
    ("I would like to rent two bikes for Saturday. And a child seat if you have one.", "book_rental", "a child seat"),
    ("Where is my order 4572? And do you sell unicorns?", "lookup_order", "unicorns"),
])
def test_a_request_with_more_no_fact_holds_runs_its_tool_after_saying_that_part_is_not_known(said, tool, named):
    answer = router()(said)
    assert answer.tool == tool
    assert answer.text == f"I'm sorry, I don't know about {named}; I can put you through to a person for that."


def test_more_the_facts_speak_of_is_the_llms_and_no_request_first_runs_no_tool():
    assert router()("I want to rent a bike. How much is it?") is None  # the LLM answers the whole, from the facts
    assert router()("What is the weather like? And a child seat if you have one.").tool is None


def test_the_spoken_order_status_reads_digits_one_by_one():
    from agent.tools.store import DEMO_ORDERS, OrderStatus

    order = DEMO_ORDERS[0]
    said = order_sentence(OrderStatus(order.number, order.item, order.status, order.updated_on, order.arrives_by))
    assert said == "Order 4 5 7 2, a city bike helmet, shipped on 28 November and should arrive by 3 December."


def test_an_llm_is_told_the_businesss_tools_only():
    assert [s.name for s in schemas(BUSINESS)] == ["lookup_order", "book_rental", "transfer_to_human", "end_call"]
    fewer = BUSINESS.model_copy(update={"tools": ["end_call"]})
    assert [s.name for s in schemas(fewer)] == ["end_call"]


def test_a_tool_intent_needs_the_tool_and_a_file_of_the_built_in_rental_is_told_to_declare_it(tmp_path):
    text = default_business_path().read_text()
    no_tool = tmp_path / "no_tool.yaml"
    no_tool.write_text(text.replace("tools:\n  - lookup_order\n", "tools:\n"))
    with pytest.raises(BusinessError, match="intents.order_status.tool"):
        load_business(no_tool)
    built_in = tmp_path / "built_in.yaml"
    built_in.write_text(text.replace("tools:\n  - lookup_order\n", "tools:\n  - lookup_order\n  - book_rental\n"))
    with pytest.raises(BusinessError, match="'book_rental' is no longer built in: declare it as a tool with store: bookings"):
        load_business(built_in)
    with_flows = tmp_path / "with_flows.yaml"
    with_flows.write_text(text + "flows:\n  rental_booking: {initial_node: bike, nodes: {}}\n")
    with pytest.raises(BusinessError, match="flows: not a field a business file has .*docs/business-tools.md"):
        load_business(with_flows)


async def test_two_calls_book_and_look_up_at_once_in_one_store(tmp_path):
    store = ShopStore.in_dir(tmp_path)
    await store.start()
    await store.start()  # a restart seeds nothing twice
    try:
        ids = await asyncio.gather(*[
            store.book("book_rental", {"bike": "city bike", "day": "2026-12-05", "count": n, "name": f"caller {n}"},
                       call_id=f"CA{n}")
            for n in range(1, 7)
        ], *[store.order("4572") for _ in range(6)])
        booked, looked_up = ids[:6], ids[6:]
        assert sorted(booked) == list(range(1, 7))
        assert {o.status for o in looked_up} == {"shipped"}
        assert sorted(b.details["count"] for b in await store.bookings()) == list(range(1, 7))
        assert await store.order("0000") is None
    finally:
        await store.close()


def _call_started():
    return FunctionCallsStartedFrame(function_calls=[FunctionCallFromLLM("lookup_order", "id1", {}, None)])


async def test_a_slow_tool_turn_gets_one_filler_and_a_quick_one_none():
    filler = ToolFiller("Let me check that.", after_s=0.2)
    slow = [_call_started(), SleepFrame(0.4), _call_started(), SleepFrame(0.4),
            LLMFullResponseStartFrame(), LLMTextFrame("Order 4 5 7 2 shipped."), LLMFullResponseEndFrame()]
    down, _ = await run_test(filler, frames_to_send=slow)
    spoken = [f.text for f in down if isinstance(f, TTSSpeakFrame)]
    assert spoken == ["Let me check that."]  # two slow calls in a row: one filler
    assert not down[[type(f) for f in down].index(TTSSpeakFrame)].append_to_context
    assert filler.fillers == 1 and filler.calls == 2

    quick = ToolFiller("Let me check that.", after_s=0.3)
    down, _ = await run_test(quick, frames_to_send=[
        _call_started(), SleepFrame(0.05), LLMFullResponseStartFrame(), LLMTextFrame("Done."), LLMFullResponseEndFrame(),
        SleepFrame(0.4)])
    assert not [f for f in down if isinstance(f, TTSSpeakFrame)] and quick.fillers == 0
