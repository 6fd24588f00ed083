"""The fast path over a real call: two callers at once, one asks a frequent question and hears the
business's own answer with no LLM request, the other asks something else and the LLM answers."""

import asyncio

import pytest
import pytest_asyncio

from agent.bench.scripted_llm import ScriptedLLM
from agent.caller.call import place_call
from tests.servers import brisk_with_llm
from tests.speech import synthesize_speech

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

LLM_ANSWER = "Yes, we rent electric bikes by the day."


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def served():
    llm = ScriptedLLM(ttft_s=0.3, tokens_per_s=30.0, answer_for=lambda _messages: LLM_ANSWER)
    async with brisk_with_llm(llm.app(), max_calls=2) as (base_url, app):
        yield base_url, app, llm


async def test_a_frequent_question_is_answered_from_the_facts_while_another_call_asks_the_llm(served):
    base_url, app, llm = served
    calls = []
    app.state.calls.listeners.append(lambda _pc_id, call: calls.append(call))
    # tiny.en hears this espeak question word for word (tests/test_call_e2e.py relies on it);
    # "What is your phone number?" it heard as "What is your fault?", which the LLM then got.
    hours = synthesize_speech("What time do you open on Saturday?", tail_silence=1.0)
    # Not a question the file answers by itself: the LLM's ("Do you rent electric bikes?" is the prices').
    other = synthesize_speech("I have a question about renting bikes.", voice="en-gb", tail_silence=1.0)
    asked_before = len(llm.requests)

    fast, slow = await asyncio.gather(
        place_call(base_url, app, hours.samples, hours.sample_rate),
        place_call(base_url, app, other.samples, other.sample_rate),
    )

    [fast_turn] = [t for t in fast.summary["turns"] if t.get("bot_text")]
    assert fast_turn["bot_text"] == "On Saturday we're open from 10 in the morning to 4 in the afternoon."
    assert fast_turn["fast_path"] == "hours" and fast_turn["stages_ms"]["llm_request"] is None
    assert fast.caller.first_audible_after(fast.utterance_ends[0]) is not None
    [slow_turn] = [t for t in slow.summary["turns"] if t.get("bot_text")]
    assert slow_turn["bot_text"].strip() == LLM_ANSWER and slow_turn["fast_path"] is None
    # The LLM was asked about the bikes (drafts, the answer); never about the hours.
    asked = [r.last_user_text.lower() for r in llm.requests[asked_before:]]
    assert any("bike" in text for text in asked)
    assert not any("saturday" in text for text in asked), asked
    assert sorted(hit.intent for call in calls for hit in call.fast_path.hits) == ["hours"]
