"""The LLM's answers held to the facts, and the facts put next to the question.

On pipecat's ``run_test``: a scripted LLM service between the answer check's two processors, as
the pipeline puts them (its words stream token by token), with the real check over the shipped
business file; and ``FactGrounding`` in front of an LLM, looking at the
context the LLM is given. Two calls at once keep their own questions and verdicts.
"""

import asyncio
from datetime import datetime

from pipecat.frames.frames import (
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.tests.utils import run_test

from agent.business.facts import FactIndex
from agent.business.model import load_business
from frames.turn import FAST_PATH
from processors.llm.answer_check import AnswerChecker, checked_answer
from processors.llm.fact_grounding import FactGrounding
from tests.fakes.scripted_llm_service import ScriptedLLMService

BUSINESS = load_business()
UNKNOWN = BUSINESS.unknown_answer


class CheckedLLM:
    """A scripted LLM with the answer check around it, as ``build_call`` puts it; reads as the
    checker (its counters)."""

    def __init__(self, answers: list[str], **check):
        self.llm = ScriptedLLMService(answers)
        self.checker = AnswerChecker(**check)

    def pipeline(self) -> Pipeline:
        return Pipeline([self.checker.reader(), self.llm, self.checker])

    def __getattr__(self, name):
        return getattr(self.checker, name)


def checked_llm(*answers: str) -> CheckedLLM:
    return CheckedLLM(list(answers), answer_check=FactIndex(BUSINESS).supports, unsupported_text=UNKNOWN,
                      person_offer=BUSINESS.person_offer)


def ask(text: str) -> LLMContextFrame:
    return LLMContextFrame(context=LLMContext(messages=[{"role": "user", "content": text}]))


def spoken(down) -> str:
    return "".join(frame.text for frame in down if isinstance(frame, LLMTextFrame))


async def answer(llm: CheckedLLM, question: str) -> list:
    down, _ = await run_test(llm.pipeline(), frames_to_send=[ask(question)],
                             expected_down_frames=None)
    return [frame for frame in down if isinstance(frame, (LLMFullResponseStartFrame, LLMTextFrame, LLMFullResponseEndFrame))]


async def test_an_answer_the_facts_hold_is_spoken_word_for_word_in_order():
    llm = checked_llm("The price of an electric bike rental is 45 dollars a day.")
    down = await answer(llm, "What does an electric bike cost to rent?")
    assert isinstance(down[0], LLMFullResponseStartFrame) and isinstance(down[-1], LLMFullResponseEndFrame)
    assert spoken(down) == "The price of an electric bike rental is 45 dollars a day."
    assert llm.refusals == 0


async def test_a_yes_that_only_echoes_the_question_is_never_heard():
    llm = checked_llm("Yes, we repair electric scooters. Bring it in any time.")
    down = await answer(llm, "Do you repair electric scooters?")
    assert spoken(down) == UNKNOWN
    assert "scooters" not in spoken(down)
    assert isinstance(down[-1], LLMFullResponseEndFrame)
    assert llm.refusals == 1


async def test_a_yes_opening_is_judged_with_the_sentence_after_it():
    llm = checked_llm("Sure! We are open Monday to Friday 9 in the morning to 6 in the evening.")
    down = await answer(llm, "Should you tell me your opening times?")
    assert spoken(down) == "Sure! We are open Monday to Friday 9 in the morning to 6 in the evening."
    assert llm.refusals == 0


async def test_a_wrong_number_later_in_the_answer_is_cut_there():
    llm = checked_llm("A basic tune-up is 45 dollars, and a helmet is 30 dollars.")
    down = await answer(llm, "How much is a basic tune-up and a helmet?")
    text = spoken(down)
    assert text.startswith("A basic tune-up is 45 dollars,")
    assert "30" not in text and text.endswith(UNKNOWN)


async def test_a_refusal_after_the_opening_of_the_unknown_answer_does_not_say_that_opening_twice():
    assert UNKNOWN.startswith("I'm sorry, ")
    llm = checked_llm("I'm sorry, a helmet is 30 dollars.")
    down = await answer(llm, "How much is a helmet?")
    assert spoken(down) == UNKNOWN
    assert llm.refusals == 1


async def test_an_answer_that_cannot_help_and_offers_no_one_is_followed_by_the_offer_of_a_person():
    # Both from the embedded bench, 2026-12-03: the model's own don't-knows, with no one offered.
    assert BUSINESS.person_offer == "Would you like me to put you through to a person?"
    for said in ("I'm sorry, but I can't assist with that.", "Sorry, I don't know how to help with that."):
        llm = checked_llm(said)
        down = await answer(llm, "I was charged twice for the same order.")
        assert spoken(down) == f"{said} {BUSINESS.person_offer}"
        assert llm.offers_added == 1 and llm.refusals == 0


async def test_a_dont_know_that_already_offers_someone_or_an_answer_that_helps_gets_no_offer():
    for said, question in ((UNKNOWN, "Do you sell unicorns?"),
                           ("The price of an electric bike rental is 45 dollars a day.", "What does an electric bike cost to rent?")):
        llm = checked_llm(said)
        assert spoken(await answer(llm, question)) == said
        assert llm.offers_added == 0


async def test_fast_path_answers_are_not_the_llms_and_pass_unchecked():
    llm = checked_llm()
    frames = [LLMFullResponseStartFrame(), LLMTextFrame("Yes, we're open now, until 6 in the evening."),
              LLMFullResponseEndFrame()]
    for frame in frames:
        frame.metadata[FAST_PATH] = "hours"
    down, _ = await run_test(llm.pipeline(), frames_to_send=frames, expected_down_frames=None)
    assert spoken(down) == "Yes, we're open now, until 6 in the evening."


async def test_two_calls_at_once_are_checked_each_against_its_own_question():
    honest = checked_llm("Our phone number is 555 0142.")
    echo = checked_llm("Yes, you can pay with cash.")
    phone, cash = await asyncio.gather(
        answer(honest, "What number should I ring?"), answer(echo, "Can I pay with cash?")
    )
    assert spoken(phone) == "Our phone number is 555 0142."
    assert spoken(cash) == UNKNOWN
    assert (honest.refusals, echo.refusals) == (0, 1)


class ContextRecorder(ScriptedLLMService):
    """Answers, and keeps the context each inference was given."""

    def __init__(self):
        super().__init__(["Fine."] * 4)
        self.contexts: list[LLMContextFrame] = []

    async def process_frame(self, frame, direction):
        if isinstance(frame, LLMContextFrame):
            self.contexts.append(frame)
        await super().process_frame(frame, direction)


async def test_the_llm_is_given_the_facts_right_before_the_question_and_the_call_context_is_untouched():
    history = [{"role": "user", "content": "Hi."}, {"role": "assistant", "content": "Hello."},
               {"role": "user", "content": "How much is a basic tune-up?"}]
    context = LLMContext(messages=list(history))
    grounding, llm = FactGrounding(FactIndex(BUSINESS).grounding), ContextRecorder()
    await run_test(Pipeline([grounding, llm]), frames_to_send=[LLMContextFrame(context=context, speculation=True)],
                   expected_down_frames=None)
    given = llm.contexts[0]
    messages = given.context.get_messages()
    assert given.speculation is True
    assert messages[:2] == history[:2] and messages[-1] == history[-1]
    assert messages[-2]["role"] == "system"
    assert messages[-2]["content"].startswith("A basic tune-up is 45 dollars, ready in one day.")
    # What the call remembers is only what was said.
    assert context.get_messages() == history
    assert grounding.grounded == 1


def llm_with_instead(answer_text: str, instead) -> CheckedLLM:
    return CheckedLLM([answer_text], answer_check=FactIndex(BUSINESS).supports, unsupported_text=UNKNOWN,
                      person_offer=BUSINESS.person_offer, instead=instead)


def file_has(text: str):
    """An ``instead`` that has ``text`` for any question, and records what it was asked."""
    def instead(question: str, said: str) -> str | None:
        instead.asked.append((question, said))
        return text
    instead.asked = []
    return instead


async def test_a_refused_answer_becomes_what_the_file_has_when_nothing_was_said_yet():
    instead = file_has("The file's own sentence.")
    llm = llm_with_instead("Yes, we repair electric scooters.", instead)
    assert spoken(await answer(llm, "Do you repair electric scooters?")) == "The file's own sentence."
    assert instead.asked == [("Do you repair electric scooters?", "")]
    assert llm.refusals == 1


async def test_a_refusal_later_in_the_answer_asks_with_what_was_said_and_follows_it():
    instead = file_has("Worked out.")
    llm = llm_with_instead("A basic tune-up is 45 dollars, and a helmet is 30 dollars.", instead)
    said = spoken(await answer(llm, "How much is a basic tune-up and a helmet?"))
    assert said == "A basic tune-up is 45 dollars, Worked out."
    assert instead.asked == [("How much is a basic tune-up and a helmet?", "A basic tune-up is 45 dollars,")]


async def test_a_model_that_gives_up_is_replaced_by_what_the_file_has_and_its_apology_is_never_heard():
    llm = llm_with_instead("I'm sorry, I don't know that.", file_has("The file's own sentence."))
    assert spoken(await answer(llm, "Do you do anything about late cancellations?")) == "The file's own sentence."
    assert llm.instead_said == 1 and llm.refusals == 0


async def test_with_nothing_better_in_the_file_the_dont_know_stands():
    for said in ("I'm sorry, I don't know that.", "Yes, we repair electric scooters."):
        llm = llm_with_instead(said, lambda question, said: None)
        assert spoken(await answer(llm, "Do you repair electric scooters?")) in (f"{said} {BUSINESS.person_offer}", UNKNOWN)
        assert llm.instead_said == 0


async def test_a_broken_instead_never_silences_the_turn():
    def broken(question, said):
        raise RuntimeError("boom")
    llm = llm_with_instead("Yes, we repair electric scooters.", broken)
    assert spoken(await answer(llm, "Do you repair electric scooters?")) == UNKNOWN


def test_a_whole_answer_checked_at_once_gets_the_same_replacements():
    check = FactIndex(BUSINESS).supports
    sentence = file_has("The file's own sentence.")
    for question, said, heard in (
            ("Do you repair electric scooters?", "Yes, we repair electric scooters.", "The file's own sentence."),
            ("Do you repair electric scooters?", "I'm sorry, I don't know that.", "The file's own sentence."),
            ("How much is a basic tune-up and a helmet?", "A basic tune-up is 45 dollars, and a helmet is 30 dollars.",
             "A basic tune-up is 45 dollars, The file's own sentence.")):
        assert checked_answer(check, question, said, unsupported_text=UNKNOWN, instead=sentence) == heard



def test_an_order_said_to_come_to_another_amount_than_the_file_works_out_is_replaced_by_the_worked_out_sum():
    # Each number may be a price the file holds ("21 dollars" is the large pepperoni): said as the
    # sum, it is another total than the worked-out one, and the caller must never hear two.
    pizza = FactIndex(load_business("agent/business/examples/corner_slice_pizza.yaml"))
    question = "So one large pepperoni pizza and one large cheese, what's that gonna come to?"
    worked_out = "A large pepperoni pizza and a large cheese pizza come to 39 dollars."
    for wrong in ("A large pepperoni pizza and a large cheese pizza come to 21 dollars.", "The total is 18 dollars.",
                  "That's 21 dollars altogether."):
        assert not pizza.supports(question, wrong)
        assert checked_answer(pizza.supports, question, wrong, unsupported_text=UNKNOWN, instead=pizza.instead,
                              lacking=pizza.lacking) == worked_out
    for right in (worked_out, "The large pepperoni is 21 dollars and the large cheese 18, so 39 dollars altogether."):
        assert pizza.supports(question, right)
    # On the 7th of a month, so the hours' date line ("Today is Monday, 7 December 2026") holds
    # the 7 said below: the wall clock made this pass on the 7th alone.
    bikes = FactIndex(BUSINESS, clock=lambda: datetime(2026, 12, 7, 10, 0, tzinfo=BUSINESS.zone))
    question = "How much would it be to rent two city bikes for three days?"
    assert bikes.supports(question, "That comes to 120 dollars.")
    assert not bikes.supports(question, "That comes to 20 dollars a day.")
    # No order to work out: a sum of anything else is the other checks' to judge.
    assert bikes.supports("When are you open on Saturday?", "We're open 9 to 4 on Saturday, 7 hours in all.")

async def test_an_answer_that_lacks_what_the_file_works_out_is_followed_by_it():
    def lacking(question, said):
        return None if "120" in said else "2 city bike rentals for 3 days come to 120 dollars."
    llm = CheckedLLM(["20 dollars a day, three days.", "That comes to 120 dollars."],
                     answer_check=lambda question, text: True, unsupported_text=UNKNOWN, lacking=lacking)
    question = "What would two city bikes for three days cost?"
    assert spoken(await answer(llm, question)) == "20 dollars a day, three days. 2 city bike rentals for 3 days come to 120 dollars."
    assert spoken(await answer(llm, question)) == "That comes to 120 dollars."
    assert llm.completed == 1
    assert checked_answer(lambda question, text: True, question, "20 dollars a day, three days.",
                          unsupported_text=UNKNOWN, lacking=lacking).endswith("come to 120 dollars.")
