"""A business tool's form in a real pipeline (pipecat Flows on a real FlowManager): it asks for
what the request left out, refuses a day the business is closed, answers a question and asks
again, and lets the caller leave, by words or by another request.
Spoken calls through whole forms: tests/test_business_api_e2e.py."""

from contextlib import asynccontextmanager
from datetime import datetime
from zoneinfo import ZoneInfo


from agent.business.embedder import load_embedder
from agent.business.facts import FactIndex
from agent.business.intents import IntentMatcher
from agent.business.model import load_business
from agent.tools.form import LEFT
from agent.tools.router import ToolRouter
from tests.waiting import until
from tests.test_booking_flow import booking_call

FRIDAY = datetime(2026, 12, 4, 10, 30, tzinfo=ZoneInfo("Europe/London"))
PLUMBING = load_business("agent/business/examples/brightwater_plumbing.yaml")


@asynccontextmanager
async def form_call():
    """A call's form for the plumbing example's tools, on the booking test's pipeline: (form, said,
    the call's fast path)."""
    async with booking_call(PLUMBING, FRIDAY) as (form, worker, said, _cuts):
        matcher = IntentMatcher(PLUMBING, facts=FactIndex(PLUMBING, embedder=load_embedder(None)), clock=lambda: FRIDAY)
        yield form, said, ToolRouter(matcher, form._tools)


async def test_a_booking_asks_for_what_the_request_left_out_one_thing_at_a_time():
    async with form_call() as (form, said, router):
        await form.start(PLUMBING.declared_tools["book_visit"], {"name": "Anna Lee"}, request="Book me in, I'm Anna Lee.")
        assert form.step == "give_day" and form.question() == "Which day would you like the engineer to come?"
        assert form.route("Tuesday would be great.") == ("give_day", {"day": "tuesday"})
        assert form.route("Whenever, really.") is None
        assert form.ask_again("Whenever, really.") == "Sorry, I didn't catch that. Which day would you like the engineer to come?"


async def test_a_closed_day_is_refused_and_asked_again():
    async with form_call() as (form, said, router):
        await form.start(PLUMBING.declared_tools["book_visit"], {})
        assert form.route("Sunday, please.") is None
        assert form.ask_again("Sunday, please.") == "Sorry, we're closed on Sundays. Which day would you like the engineer to come?"
        assert form.route("Saturday, please.") == ("give_day", {"day": "saturday"})


async def test_never_mind_leaves_the_form_and_its_steps_route_no_more():
    async with form_call() as (form, said, router):
        await form.start(PLUMBING.declared_tools["book_visit"], {"day": "monday"})
        assert form.step == "give_name"
        assert form.leaves("Oh, never mind, I'll call back.") and not form.leaves("Anna Lee.")
        assert form.leave() == LEFT
        assert form.step is None and form.route("Anna Lee.") is None


async def test_what_the_request_gave_is_read_back_before_a_tool_that_changes_something():
    async with form_call() as (form, said, router):
        await form.start(PLUMBING.declared_tools["book_visit"], {"day": "monday", "name": "Anna Lee", "phone": "07700900123"})
        assert form.step == "confirm_book_visit"
        assert form.question() == "So that's a visit on Monday for Anna Lee, on 0 7 7 0 0 9 0 0 1 2 3. Shall I book it?"
        assert form.route("Yes, that's right.") == ("confirm_book_visit", {"confirmed": True})
        assert form.route("DTMF: 2#") == ("confirm_book_visit", {"confirmed": False})


async def test_a_form_never_traps_the_caller_a_question_is_answered_and_another_request_leaves_it():
    async with form_call() as (form, said, router):
        await form.start(PLUMBING.declared_tools["book_visit"], {}, request="I'd like to book a visit.")
        question = "Which day would you like the engineer to come?"

        answered = router("Sorry, what time do you open on Saturday?")
        assert answered.tool is None and "9 in the morning" in answered.text and answered.text.endswith(question)
        assert form.step == "give_day"

        for step in (router("Monday, please."), router("Is Monday OK?")):
            assert (step.tool, step.arguments) == ("give_day", {"day": "monday"})

        lost = router("Erm, the thing is, well.")
        assert lost.text == f"Sorry, I didn't catch that. {question}"

        elsewhere = router("Actually, is anyone free on Tuesday?")
        assert (elsewhere.tool, elsewhere.arguments) == ("check_availability", {"day": "tuesday"})
        assert form.step is None

        await form.start(PLUMBING.declared_tools["book_visit"], {"day": "monday"})
        person = router("Could you put me through to someone in the office?")
        assert person.tool == "transfer_to_human" and form.step is None


async def test_leaving_shows_an_llm_no_step_and_the_same_turn_routed_again_is_still_left():
    async with form_call() as (form, said, router):
        await form.start(PLUMBING.declared_tools["book_visit"], {}, request="I'd like to book a visit.")
        # A speculative draft of the turn leaves the form ...
        assert router("Oh, never mind.", earlier="Hello.").intent == "form:left"
        await until(lambda: form.flow_manager.current_node == "book_visit.left", "the flow to leave the step")
        assert "functions" not in form._nodes["book_visit.left"]  # an LLM is offered no step's function
        # ... and the turn's final, which differs, is routed again: still left, not the LLM's.
        again = router("Oh, never mind, I'll ring back.", earlier="Hello.")
        assert (again.intent, again.text) == ("form:left", LEFT)
        # A later turn is a turn of its own.
        later = router("Never mind.", earlier="Oh, never mind, I'll ring back.")
        assert later is None or later.intent != "form:left"
