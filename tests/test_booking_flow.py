"""The rental booking's pipecat Flow in a real pipeline: a caller who cuts in over a step's
question still finds the step to answer, and the opening request, continued, opens it again.
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

from agent.business.model import load_business
from agent.call.call_control import CallControl
from agent.tools.booking import RentalBooking
from agent.tools.functions import CallTools
from tests.fakes.delay_processor import DelayProcessor
from tests.fakes.scripted_llm_service import ScriptedLLMService
from tests.waiting import reaching_the_end, started, until

TUESDAY = datetime(2026, 12, 1, 10, 30, tzinfo=ZoneInfo("Europe/London"))
BUSINESS = load_business()


@asynccontextmanager
async def booking_call():
    """A call's booking flow, whose questions take a second to say (a TTS at work): (booking, worker,
    the questions said, the interruptions that went through the call)."""
    tools = CallTools(BUSINESS, None, CallControl("CA1"), clock=lambda: TUESDAY)
    aggregators = LLMContextAggregatorPair(LLMContext())
    llm = ScriptedLLMService([])
    said: list[str] = []
    tts = DelayProcessor(1.0, delay_types=(TTSSpeakFrame,),
                         on_frame=lambda f: said.append(f.text) if isinstance(f, TTSSpeakFrame) else None)
    worker = PipelineWorker(Pipeline([aggregators.user(), llm, tts, aggregators.assistant()]),
                            params=PipelineParams(), cancel_on_idle_timeout=False, app_resources=tools)
    tools.booking = RentalBooking(FlowManager(worker=worker, llm=llm, context_aggregator=aggregators),
                                  BUSINESS.flows["rental_booking"], tools)
    running = started(worker)
    cuts = reaching_the_end(worker, InterruptionFrame)
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    run = asyncio.create_task(runner.run())
    await asyncio.wait_for(running.wait(), 10)
    try:
        yield tools.booking, worker, said, cuts
    finally:
        await worker.queue_frame(EndFrame())
        await asyncio.wait_for(run, 10)


async def test_cutting_in_over_a_steps_question_leaves_the_booking_at_that_step():
    async with booking_call() as (booking, worker, said, cuts):
        # The node is set up without waiting for its question to be said.
        await asyncio.wait_for(booking.start({"day": "2026-12-05", "count": 2},
                                             request="I want to rent two bikes for Saturday."), 0.5)
        await until(lambda: said, "the step's question to be said")
        await worker.queue_frame(InterruptionFrame())  # the caller cuts in while it is being said
        await until(lambda: cuts, "the cut to go through the call")
        assert booking.step == "choose_bike"
        assert booking.route("A city bike, please.") == ("choose_bike", {"bike": "city bike"})
        assert said == ["Which bike would you like: a city bike or an electric bike?"]


async def test_the_opening_request_gone_on_is_a_new_request_and_a_step_answer_is_not():
    async with booking_call() as (booking, worker, said, _):
        await booking.start({"day": "2026-12-05", "count": 2}, request="I would like to rent two bikes for Saturday.")
        await until(lambda: said, "the step's question to be said")
        assert booking.continues_request("I would like to rent two bikes for Saturday, and a child seat if you have one.")
        assert not booking.continues_request("I would like to rent two bikes for Saturday.")
        assert not booking.continues_request("A city bike.")
        await booking.start({"bike": "city bike"}, request="")  # begun again with nothing said: nothing to go on
        assert not booking.continues_request("I would like to rent two bikes for Saturday, and a child seat.")


async def test_two_calls_book_at_once_each_at_its_own_step_and_with_its_own_opening():
    async with booking_call() as (first, first_worker, _, first_cuts), booking_call() as (second, _, _, _):
        await first.start({"day": "2026-12-05", "count": 2}, request="I would like to rent two bikes for Saturday.")
        await second.start({"bike": "city bike", "day": "2026-12-04"}, request="A city bike for Friday, please.")
        await first_worker.queue_frame(InterruptionFrame())  # only the first caller cuts in
        await until(lambda: first_cuts, "the cut to go through the first call")
        assert (first.step, second.step) == ("choose_bike", "choose_count")
        assert first.continues_request("I would like to rent two bikes for Saturday. And a child seat.")
        assert not second.continues_request("I would like to rent two bikes for Saturday. And a child seat.")
