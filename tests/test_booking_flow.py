"""The bike shop's rental, a tool its file declares (``store: bookings``), booked through the
generic form (agent/tools/form.py) in a real pipeline on a real FlowManager: a caller who cuts
in over a step's question still finds the step to answer, the opening request, continued, opens
it again, the read-back says what was asked for, and a yes writes the booking to a real store.
The same over a real call: tests/test_tools_e2e.py and tests/test_turn_end_e2e.py."""

import asyncio
from contextlib import asynccontextmanager
from datetime import datetime
from zoneinfo import ZoneInfo

from pipecat.flows import FlowManager
from pipecat.frames.frames import EndFrame, InterruptionFrame, TTSSpeakFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.workers.runner import WorkerRunner

from agent.business.facts import FactIndex
from agent.business.intents import IntentMatcher
from agent.business.model import load_business
from agent.call.call_control import CallControl
from agent.tools.form import Form
from agent.tools.functions import CallTools
from agent.tools.router import ToolRouter
from agent.tools.store import ShopStore
from tests.fakes.broken_store import BrokenStore
from tests.fakes.delay_processor import DelayProcessor
from tests.fakes.scripted_llm_service import ScriptedLLMService
from tests.waiting import reaching_the_end, started, until

TUESDAY = datetime(2026, 12, 1, 10, 30, tzinfo=ZoneInfo("Europe/London"))
BUSINESS = load_business()
RENTAL = BUSINESS.declared_tools["book_rental"]


@asynccontextmanager
async def booking_call(business=BUSINESS, now=TUESDAY, store=None):
    """A call's form, whose questions take a second to say (a TTS at work): (form, worker, the
    questions said, the interruptions that went through the call)."""
    tools = CallTools(business, store, CallControl("CA1"), clock=lambda: now)
    aggregators = LLMContextAggregatorPair(LLMContext())
    llm = ScriptedLLMService([])
    said: list[str] = []
    tts = DelayProcessor(1.0, delay_types=(TTSSpeakFrame,),
                         on_frame=lambda f: said.append(f.text) if isinstance(f, TTSSpeakFrame) else None)
    worker = PipelineWorker(Pipeline([aggregators.user(), llm, tts, aggregators.assistant()]),
                            params=PipelineParams(), cancel_on_idle_timeout=False, app_resources=tools)
    tools.form = Form(FlowManager(worker=worker, llm=llm, context_aggregator=aggregators), tools)
    running = started(worker)
    cuts = reaching_the_end(worker, InterruptionFrame)
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    run = asyncio.create_task(runner.run())
    await asyncio.wait_for(running.wait(), 10)
    try:
        yield tools.form, worker, said, cuts
    finally:
        await worker.queue_frame(EndFrame())
        await asyncio.wait_for(run, 10)


async def answer(form: Form, text: str) -> None:
    """The caller's words run the step's function, as the fast path's function call does, and
    the flow goes where it says."""
    function, arguments = form.route(text)
    [schema] = [f for f in form._nodes[form.flow_manager.current_node]["functions"] if f.name == function]
    _, node = await schema.handler(arguments, form.flow_manager)
    await form.flow_manager.set_node_from_config(node)


async def test_cutting_in_over_a_steps_question_leaves_the_booking_at_that_step():
    async with booking_call() as (form, worker, said, cuts):
        # The node is set up without waiting for its question to be said.
        await asyncio.wait_for(form.start(RENTAL, {"day": "2026-12-05", "count": 2},
                                          request="I want to rent two bikes for Saturday."), 0.5)
        await until(lambda: said, "the step's question to be said")
        await worker.queue_frame(InterruptionFrame())  # the caller cuts in while it is being said
        await until(lambda: cuts, "the cut to go through the call")
        assert form.step == "give_bike"
        assert form.route("A city bike, please.") == ("give_bike", {"bike": "city bike"})
        assert form.route("An e-bike.") == ("give_bike", {"bike": "electric bike"})
        assert said == ["Which bike would you like: a city bike or an electric bike?"]


async def test_the_opening_request_gone_on_is_a_new_request_and_a_step_answer_is_not():
    async with booking_call() as (form, worker, said, _):
        await form.start(RENTAL, {"day": "2026-12-05", "count": 2}, request="I would like to rent two bikes for Saturday.")
        await until(lambda: said, "the step's question to be said")
        assert form.continues_request("I would like to rent two bikes for Saturday, and a child seat if you have one.")
        assert not form.continues_request("I would like to rent two bikes for Saturday.")
        assert not form.continues_request("A city bike.")
        await form.start(RENTAL, {"bike": "city bike"}, request="")  # begun again with nothing said: nothing to go on
        assert not form.continues_request("I would like to rent two bikes for Saturday, and a child seat.")


async def test_two_calls_book_at_once_each_at_its_own_step_and_with_its_own_opening():
    async with booking_call() as (first, first_worker, _, first_cuts), booking_call() as (second, _, _, _):
        await first.start(RENTAL, {"day": "2026-12-05", "count": 2}, request="I would like to rent two bikes for Saturday.")
        await second.start(RENTAL, {"bike": "city bike", "day": "2026-12-04"}, request="A city bike for Friday, please.")
        await first_worker.queue_frame(InterruptionFrame())  # only the first caller cuts in
        await until(lambda: first_cuts, "the cut to go through the first call")
        assert (first.step, second.step) == ("give_bike", "give_count")
        assert first.continues_request("I would like to rent two bikes for Saturday. And a child seat.")
        assert not second.continues_request("I would like to rent two bikes for Saturday. And a child seat.")


async def test_a_rental_is_asked_for_read_back_in_the_plural_and_written_to_the_store_on_a_yes(tmp_path):
    store = ShopStore.in_dir(tmp_path)
    await store.start()
    try:
        async with booking_call(store=store) as (form, _, said, _):
            await form.start(RENTAL, {"count": 2}, request="Can I rent two bikes?")
            await answer(form, "City bikes, please.")
            assert form.ask_again("On Sunday.") == "Sorry, we're closed on Sundays. Which day would you like it for?"
            await answer(form, "Saturday.")
            await answer(form, "It's under Anna Lee.")
            assert form.question() == "So that's 2 city bikes on Saturday 5 December for Anna Lee. Shall I book it?"
            await answer(form, "Yes, please.")
            await until(lambda: len(said) == 5, "the booking to be said")
        [booking] = await store.bookings()
        assert (booking.tool, booking.details, booking.call_id) == (
            "book_rental", {"count": 2, "bike": "city bike", "day": "2026-12-05", "name": "Anna Lee"}, "CA1")
        assert said == ["Which bike would you like: a city bike or an electric bike?", "Which day would you like it for?",
                        "And what name should I put the booking under?",
                        "So that's 2 city bikes on Saturday 5 December for Anna Lee. Shall I book it?",
                        f"You're booked: 2 city bikes on Saturday 5 December for Anna Lee, booking number {booking.id}. "
                        "Please bring a photo ID. Anything else?"]
        [call] = form._tools.calls
        assert call["store"]["outcome"] == "ok" and call["result"]["response"] == {"booking_id": booking.id}
    finally:
        await store.close()


async def test_a_booking_the_store_can_not_write_is_not_said_to_be_booked():
    broken = BrokenStore()
    async with booking_call(store=broken) as (form, _, said, _):
        await form.start(RENTAL, {"bike": "electric bike", "day": "2026-12-04", "count": 1, "name": "Anna"})
        assert form.question() == "So that's 1 electric bike on Friday 4 December for Anna. Shall I book it?"
        await answer(form, "Yes.")
        await until(lambda: len(said) == 2, "the failure to be said")
    assert broken.failed == 1
    assert said[-1] == RENTAL.failed and "nothing is booked" in said[-1]
    [call] = form._tools.calls
    assert call["result"] == {"ok": False, "error": call["store"]["error"]} and "unable to open" in call["store"]["error"]


async def test_a_no_at_the_read_back_books_nothing(tmp_path):
    store = ShopStore.in_dir(tmp_path)
    await store.start()
    try:
        async with booking_call(store=store) as (form, _, said, _):
            await form.start(RENTAL, {"bike": "city bike", "day": "2026-12-05", "count": 3, "name": "Anna"})
            await answer(form, "No, that's wrong.")
            await until(lambda: len(said) == 2, "the answer to be said")
            assert form.step is None and said[-1].startswith("Okay, I haven't done anything.")
        assert await store.bookings() == []
    finally:
        await store.close()


async def test_during_a_rental_the_step_is_answered_a_question_too_and_anything_else_asks_again():
    async with booking_call() as (form, _, said, _):
        router = ToolRouter(IntentMatcher(BUSINESS, facts=FactIndex(BUSINESS), clock=lambda: TUESDAY), form._tools)
        await form.start(RENTAL, {"bike": "city bike"}, request="I'd like to rent a city bike.")
        assert (router("On Saturday.").tool, router("On Saturday.").arguments) == ("give_day", {"day": "2026-12-05"})
        opening = router("What time do you open on Saturday?")
        assert opening.intent == "hours" and opening.text.endswith("Which day would you like it for?")
        assert router("Purple.").text == "Sorry, I didn't catch that. Which day would you like it for?"
        assert router("Can I talk to a person, please?").tool == "transfer_to_human" and form.step is None


async def test_the_request_that_opened_a_rental_gone_on_is_routed_again_whole():
    async with booking_call() as (form, _, said, _):
        router = ToolRouter(IntentMatcher(BUSINESS, facts=FactIndex(BUSINESS), clock=lambda: TUESDAY), form._tools)
        opened = "I would like to rent two bikes for Saturday."
        await form.start(RENTAL, {"day": "2026-12-05", "count": 2}, request=opened)
        again = router(f"{opened} And a child seat if you have one.")
        assert (again.tool, again.arguments) == ("book_rental", {"day": "2026-12-05", "count": 2})
        assert again.text == "I'm sorry, I don't know about a child seat; I can put you through to a person for that."
