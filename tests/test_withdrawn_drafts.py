"""A draft overtaken by its own cancel is never answered, and the turn's real request is, once.

pipecat's ``EagerEndOfTurnCancelFrame`` and ``UserStoppedSpeakingFrame`` are system frames: at
a turn end whose final differs from the draft they can overtake the draft's context on its way
to the LLM. Here the frames are sent in that overtaken order (the draft made first, arriving
after its cancel and the turn end) to the LLM service, through the fact grounding that copies
the context, to the fast path, and under the latency observer; and with two calls at once.
"""

import asyncio

from pipecat.frames.frames import (
    EagerEndOfTurnCancelFrame,
    Frame,
    LLMContextFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.tests.utils import SleepFrame, run_test

from processors.llm.fact_grounding import FactGrounding
from processors.fast_path import FastAnswer, FastPathResponder
from processors.observers.latency import LatencyObserver
from processors.speculation.withdrawn_drafts import WithdrawnDraftsMixin
from tests.fakes.delay_processor import DelayedLLMService, DelayedTTSService, InstantOutputTransport
from tests.fakes.scripted_llm_service import ScriptedLLMService


class ScriptedLLM(WithdrawnDraftsMixin, ScriptedLLMService):
    """The scripted LLM with Brisk's rule for drafts withdrawn before they arrive."""


class DelayedLLM(WithdrawnDraftsMixin, DelayedLLMService):
    """The delayed LLM with the same rule, for the latency observer's pipeline."""


def context(text: str, *, speculation: bool = False) -> LLMContextFrame:
    return LLMContextFrame(LLMContext(messages=[{"role": "user", "content": text}]), speculation=speculation)


def overtaken_turn(draft: LLMContextFrame) -> list[Frame]:
    """A turn whose ``draft`` (made before now) arrives after its cancel and the turn end, then the real request."""
    return [UserStartedSpeakingFrame(), SleepFrame(0.05),
            EagerEndOfTurnCancelFrame(), UserStoppedSpeakingFrame(), draft,
            context("what time do you open on saturday"), SleepFrame(0.2)]


def answers(frames: list[Frame]) -> list[str]:
    """The answers in ``frames``, each as its text."""
    said: list[str] = []
    for frame in frames:
        if isinstance(frame, LLMFullResponseStartFrame):
            said.append("")
        elif isinstance(frame, LLMTextFrame):
            said[-1] += frame.text
    return said


async def test_a_draft_that_arrives_after_its_cancel_is_not_answered_and_the_real_request_is_once():
    draft = context("what time do you open", speculation=True)
    llm = ScriptedLLM(["the draft's answer.", "the real answer."])

    down, _ = await run_test(llm, frames_to_send=overtaken_turn(draft))

    assert answers(down) == ["the draft's answer."]  # the first script line went to the real request
    assert llm.withdrawn_late == 1


async def test_the_grounded_copy_of_an_overtaken_draft_is_still_known_as_that_draft():
    draft = context("what time do you open", speculation=True)
    llm = ScriptedLLM(["one answer.", "a second answer."])
    grounding = FactGrounding(lambda text: "Saturday: 10 to 4.")

    down, _ = await run_test(Pipeline([grounding, llm]), frames_to_send=overtaken_turn(draft))

    assert grounding.grounded == 2 and llm.withdrawn_late == 1
    assert answers(down) == ["one answer."]


async def test_a_draft_made_after_the_cancel_is_held_and_released_at_the_turn_end():
    cancel = EagerEndOfTurnCancelFrame()  # withdrew an older draft
    llm = ScriptedLLM(["the newer draft's answer."])
    frames = [UserStartedSpeakingFrame(), cancel, context("what time do you open", speculation=True),
              SleepFrame(0.1), UserStoppedSpeakingFrame(), SleepFrame(0.1)]

    down, _ = await run_test(llm, frames_to_send=frames)

    assert answers(down) == ["the newer draft's answer."] and llm.withdrawn_late == 0
    started = next(i for i, f in enumerate(down) if isinstance(f, LLMFullResponseStartFrame))
    assert any(isinstance(f, UserStoppedSpeakingFrame) for f in down[:started])  # held until the turn end


async def test_the_fast_path_does_not_speak_a_draft_that_arrives_after_its_cancel():
    draft = context("what are your hours", speculation=True)
    responder = FastPathResponder(lambda text, **_: FastAnswer("hours", f"Answer to: {text}."))

    down, _ = await run_test(responder, frames_to_send=overtaken_turn(draft))

    assert answers(down) == ["Answer to: what time do you open on saturday."]


async def test_the_turn_record_has_the_real_request_not_the_overtaken_draft():
    draft = context("what time is it", speculation=True)
    observer = LatencyObserver()
    pipeline = Pipeline([DelayedLLM(tokens=["It is ", "ten."], delay_s=0.05),
                         DelayedTTSService(delay_s=0.02), InstantOutputTransport()])
    frames = [VADUserStartedSpeakingFrame(), *overtaken_turn(draft)[:2],
              VADUserStoppedSpeakingFrame(stop_secs=0.2), *overtaken_turn(draft)[2:], SleepFrame(0.4)]

    await run_test(pipeline, frames_to_send=frames, observers=[observer])

    (record,) = observer.turns
    assert record["bot_text"] == "It is ten."
    assert record["speculative"] is False  # answered by the request made at the turn end
    assert record["stages_ms"]["llm_request"] is not None


async def test_one_calls_cancel_never_withdraws_another_calls_draft():
    other_draft = context("do you rent bikes", speculation=True)  # made first, in the other call
    overtaken = context("what time do you open", speculation=True)
    this_call, other_call = ScriptedLLM(["this call's answer."]), ScriptedLLM(["the other call's answer."])
    other_frames = [UserStartedSpeakingFrame(), SleepFrame(0.1), other_draft,  # after this call's cancel
                    SleepFrame(0.1), UserStoppedSpeakingFrame(), SleepFrame(0.1)]

    (this_down, _), (other_down, _) = await asyncio.gather(
        run_test(this_call, frames_to_send=overtaken_turn(overtaken)),
        run_test(other_call, frames_to_send=other_frames))

    assert answers(this_down) == ["this call's answer."] and this_call.withdrawn_late == 1
    assert answers(other_down) == ["the other call's answer."] and other_call.withdrawn_late == 0
