"""processors/llm/facts_prefill.py: a question's facts reach the LLM server's cache while it is asked.

Real pipecat pipelines (facts prefill -> context window -> fact grounding -> the OpenAI LLM
service) against the scripted OpenAI-compatible server on loopback, which records every request.
A prefill is a one-token completion; the request that follows must start exactly as it does.
"""

import asyncio
import functools
from contextlib import asynccontextmanager

import pytest
from pipecat.frames.frames import LLMContextFrame, VADUserStartedSpeakingFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.tests.utils import SleepFrame, run_test

from agent.bench.scripted_llm import ScriptedLLM
from agent.business.facts import FactIndex
from agent.business.model import load_business
from agent.caller.loopback import serve_app
from frames.transcription import PartialTranscriptionFrame
from processors.llm.context_window import ContextWindow
from processors.llm.fact_grounding import FactGrounding
from processors.llm.facts_prefill import FactsPrefill
from processors.llm.openai_llm import ResilientOpenAILLMService, make_openai_client
from processors.llm.prompt_cache import PromptCache

pytestmark = pytest.mark.asyncio

SYSTEM_PROMPT = "You answer the phone for a bicycle shop."
FACTS = FactIndex(load_business())
RENT_QUESTION = "How much is it to rent an electric bike for a day?"


@asynccontextmanager
async def scripted(server: ScriptedLLM):
    async with serve_app(server.app()) as url:
        client = make_openai_client(base_url=f"{url}/v1", api_key=None, connect_timeout=2.0, total_timeout=10.0)
        try:
            yield client
        finally:
            await client.close()


def call_pipeline(client, context: LLMContext) -> tuple[FactsPrefill, Pipeline]:
    """One call's prompt path, wired the way agent/call/pipeline.py wires it."""
    window = ContextWindow()
    prefill = FactsPrefill(cache=PromptCache(client=client, model="scripted", system_prompt=SYSTEM_PROMPT),
                           context=context, grounding_for=FACTS.grounding,
                           layout=functools.partial(window.apply, count_drops=False))
    llm = ResilientOpenAILLMService(
        client=client, apology_text="sorry",
        settings=OpenAILLMService.Settings(model="scripted", system_instruction=SYSTEM_PROMPT),
    )
    return prefill, Pipeline([prefill, window, FactGrounding(FACTS.grounding), llm])


def asking(question: str, context: LLMContext, *, pause_s: float = 0.2) -> list:
    """The caller saying ``question`` (a partial per word), then the request at the turn end."""
    words = question.split()
    frames = [VADUserStartedSpeakingFrame()]
    for n in range(1, len(words) + 1):
        frames += [PartialTranscriptionFrame(text=" ".join(words[:n]), user_id="", timestamp=""), SleepFrame(pause_s)]
    turn = LLMContext(messages=[*context.get_messages(), {"role": "user", "content": question}])
    return [*frames, LLMContextFrame(context=turn), SleepFrame(0.5)]


def prefills_and_answers(server: ScriptedLLM, question: str):
    mine = [r for r in server.requests if question.startswith(r.last_user_text)]
    return [r for r in mine if r.max_tokens == 1], [r for r in mine if r.max_tokens != 1]


async def test_the_facts_are_read_while_the_question_is_asked_and_the_answer_shares_that_prompt():
    server = ScriptedLLM(ttft_s=0.0, tokens_per_s=1000)
    async with scripted(server) as client:
        context = LLMContext()
        prefill, pipeline = call_pipeline(client, context)
        await run_test(pipeline, frames_to_send=asking(RENT_QUESTION, context))

    prefills, [answer] = prefills_and_answers(server, RENT_QUESTION)
    # A partial of fewer than 3 words reads nothing; each change of facts is read once, and the
    # partials that name the same facts again send nothing.
    assert [r.last_user_text for r in prefills] == ["How much is", "How much is it to rent", "How much is it to rent an electric"]
    assert prefill.prefills == 3 and prefill.failures == 0
    assert all(p.received_at < answer.received_at for p in prefills)
    # The answer's prompt is the last prefill's, up to the caller's words: only those are new.
    assert answer.messages[:-1] == prefills[-1].messages[:-1]
    assert answer.messages[-2] == {"role": "system", "content": FACTS.grounding(RENT_QUESTION)}
    assert answer.messages[0] == {"role": "system", "content": SYSTEM_PROMPT}


async def test_two_calls_at_once_each_read_their_own_conversation_and_facts():
    server = ScriptedLLM(ttft_s=0.05, tokens_per_s=1000)
    history = [{"role": "user", "content": "Hi, I'm Ana."}, {"role": "assistant", "content": "Hello Ana!"}]
    sunday = "Are you open on Sunday at all?"
    async with scripted(server) as client:
        contexts = LLMContext(messages=list(history)), LLMContext()
        (first, one), (second, two) = (call_pipeline(client, c) for c in contexts)
        await asyncio.gather(run_test(one, frames_to_send=asking(RENT_QUESTION, contexts[0])),
                             run_test(two, frames_to_send=asking(sunday, contexts[1])))

    for question, had_history in ((RENT_QUESTION, True), (sunday, False)):
        prefills, [answer] = prefills_and_answers(server, question)
        assert prefills and answer.messages[:-1] == prefills[-1].messages[:-1]
        assert (answer.messages[1:3] == history) is had_history
    assert first.prefills >= 1 and second.prefills >= 1


async def test_facts_overtaken_while_a_prefill_is_read_are_skipped_and_the_latest_are_read_next():
    # Each prefill takes 0.5 s; a partial comes every 0.1 s.
    server = ScriptedLLM(ttft_s=0.5, tokens_per_s=1000)
    async with scripted(server) as client:
        context = LLMContext()
        prefill, pipeline = call_pipeline(client, context)
        await run_test(pipeline, frames_to_send=[*asking(RENT_QUESTION, context, pause_s=0.1), SleepFrame(0.6)])

    prefills, [answer] = prefills_and_answers(server, RENT_QUESTION)
    # Never two at once: the next starts when the one before has been read.
    for before, after in zip(prefills, prefills[1:]):
        assert after.received_at >= before.received_at + 0.45
    assert prefill.skipped >= 1
    assert prefills[-1].messages[-2] == answer.messages[-2]  # the latest facts were read in the end


async def test_a_new_utterance_reads_its_facts_again_and_a_dead_server_costs_only_the_prefill():
    server = ScriptedLLM(ttft_s=0.0, tokens_per_s=1000)
    async with scripted(server) as client:
        context = LLMContext()
        prefill, pipeline = call_pipeline(client, context)
        words = [PartialTranscriptionFrame(text=RENT_QUESTION, user_id="", timestamp=""), SleepFrame(0.2)]
        await run_test(pipeline, frames_to_send=[VADUserStartedSpeakingFrame(), *words, VADUserStartedSpeakingFrame(), *words])
    assert prefill.prefills == 2

    dead = make_openai_client(base_url="http://127.0.0.1:9/v1", api_key=None, connect_timeout=0.5, total_timeout=1.0)
    prefill = FactsPrefill(cache=PromptCache(client=dead, model="scripted", system_prompt=SYSTEM_PROMPT),
                           context=LLMContext(), grounding_for=FACTS.grounding)
    partial = PartialTranscriptionFrame(text=RENT_QUESTION, user_id="", timestamp="")
    received, _ = await run_test(Pipeline([prefill]), frames_to_send=[partial, SleepFrame(1.5)])
    await dead.close()
    assert prefill.failures == 1 and prefill.prefills == 0
    assert [f for f in received if isinstance(f, PartialTranscriptionFrame)] == [partial]  # it passes on
