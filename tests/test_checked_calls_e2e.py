"""The answer check over real calls: what the caller hears is what the call's record keeps.

The check is a processor after the LLM (processors/llm/answer_check.py), so the record must take
the bot's words from what the check let go, not from the LLM's own; and the fast path's and the
tools' words, which pass it untouched, must be kept even when the call ends right after them (a
hand-over). Real WebRTC calls to a real server; the LLM is a scripted stand-in that says
something the business file does not hold.
"""

import pytest
import pytest_asyncio

from agent.bench.scripted_llm import ScriptedLLM
from agent.business.model import load_business
from agent.caller.call import place_call
from tests.servers import brisk_with_llm, calls_ended
from tests.speech import synthesize_speech

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

BUSINESS = load_business()
INVENTED = "We also repair electric scooters on Sundays."


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def served():
    llm = ScriptedLLM(ttft_s=0.2, tokens_per_s=40.0, answer_for=lambda _messages: INVENTED)
    async with brisk_with_llm(llm.app()) as (base_url, app):
        yield base_url, app


async def a_call(served, question: str):
    base_url, app = served
    calls = []
    app.state.calls.listeners.append(lambda _pc_id, call: calls.append(call))
    clip = synthesize_speech(question, tail_silence=1.0)
    result = await place_call(base_url, app, clip.samples, clip.sample_rate)
    [call] = calls
    return result, call


async def test_an_answer_the_file_does_not_hold_is_never_heard_nor_kept(served):
    result, call = await a_call(served, "He turned sharply, and faced Gregson across the table.")
    [turn] = [t for t in result.summary["turns"] if t.get("bot_text")]
    assert INVENTED not in turn["bot_text"] and "scooters" not in turn["bot_text"]
    assert turn["bot_text"].startswith(BUSINESS.unknown_answer.split(".")[0])
    [checker] = [p for p in call.processors if type(p).__name__ == "AnswerChecker"]
    assert checker.refusals == 1


async def test_a_hand_over_is_kept_in_the_record_with_the_words_said_before_it(served):
    _, call = await a_call(served, "Can I speak to a person, please?")
    await calls_ended(served[1])
    # The server's own record of the turn: the call ended at the hand-over, before the page was
    # sent the turn's waterfall.
    [turn] = [t for t in call.latency.turns if t.get("bot_text")]
    assert turn["fast_path"] == "transfer_to_human" and turn["bot_text"] == BUSINESS.transfer_text
    assert call.control.ended_by == "transfer"
