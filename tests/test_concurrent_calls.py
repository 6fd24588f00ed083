"""Many callers at once: every call gets its own whole answer, the limit holds, nothing lingers.

Real WebRTC calls from aiortc callers to a real Brisk server on loopback, placed at the same
moment. The scripted LLM (a real OpenAI-compatible server) answers each question with a text of
its own, so a call that got another's answer, or half of one, shows; the embedded tests run the
packaged Qwen on llama.cpp's llama-server, where a second request used to end the first one's
stream mid-sentence.
"""

import asyncio
import gc
import threading
import weakref

import httpx
import pytest
import pytest_asyncio

from agent.bench.scripted_llm import ScriptedLLM
from agent.caller.aiortc_caller import WavMicrophone, WebRTCCaller
from agent.caller.call import place_call, running_server
from agent.caller.loopback import serve_app
from agent.config import load_config
from agent.runtime.runtime import Runtime
from tests.speech import synthesize_speech
from tests.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

ANSWERS = {
    "hours": "We are open from nine to six on weekdays, and from ten to four on Saturday.",
    "helmet": "Yes, every rental comes with a free helmet and a lock.",
    "electric": "An electric bike costs thirty dollars a day, and the battery lasts all day long.",
}
QUESTIONS = {
    "hours": "What are your opening hours?",
    "helmet": "Do I get a helmet with the bike?",
    "electric": "How much is an electric bike?",
}


# tiny.en sometimes mishears an espeak voice ("Do I get to help with the bike?"): each question
# is told apart by any of its cue words, which no other question shares.
CUES = {"hours": ("hours", "open"), "helmet": ("helmet", "help"), "electric": ("electric", "much")}


def answer_for(messages: list[dict]) -> str:
    question = str(messages[-1].get("content", "")).lower()
    return next((ANSWERS[key] for key, cues in CUES.items() if any(c in question for c in cues)), "Sorry, say that again?")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def scripted():
    """(runtime, config, llm) on the scripted LLM, shared by this module's servers."""
    llm = ScriptedLLM(ttft_s=0.3, tokens_per_s=30.0, answer_for=answer_for)
    async with serve_app(llm.app()) as llm_url:
        # The LLM's answers under load are under test; "opening hours" is also the fast path's,
        # and the scripted answers are not the shop's facts (free helmets, 30 dollars), which the
        # answer check would rightly refuse (tests/test_answer_check.py).
        config = load_config(llm_base_url=f"{llm_url}/v1", llm_model="scripted", max_calls=3, fast_path=False,
                             llm_answer_check=False)
        runtime = Runtime(config)
        await runtime.start()
        try:
            yield runtime, config, llm
        finally:
            await runtime.stop()


def speech(key: str, voice: str = "en-us"):
    return synthesize_speech(QUESTIONS[key], voice=voice, tail_silence=1.0)


async def ask_together(base_url, app, keys: list[str]):
    """Place one call per question at the same moment; their results, in the same order."""
    clips = [speech(key, voice) for key, voice in zip(keys, ("en-us", "en-gb", "en-us+f3"))]
    return await asyncio.gather(*(place_call(base_url, app, c.samples, c.sample_rate) for c in clips))


@pytest.mark.parametrize("callers", [2, 3])
async def test_callers_at_once_each_hear_their_own_whole_answer(scripted, callers):
    runtime, config, llm = scripted
    keys = list(ANSWERS)[:callers]
    async with running_server(config, runtime) as (base_url, app):
        results = await ask_together(base_url, app, keys)

    for key, result in zip(keys, results):
        [end] = result.utterance_ends
        assert result.caller.first_audible_after(end) is not None, f"the {key} caller heard nothing"
        answered = [t for t in result.summary["turns"] if t.get("bot_text")]
        assert [t["bot_text"].strip() for t in answered] == [ANSWERS[key]], result.summary["turns"]
        assert not any(t.get("interrupted") for t in answered)


async def test_an_offer_over_the_limit_is_told_to_retry_while_the_call_in_progress_goes_on(scripted):
    runtime, config, llm = scripted
    one_line = config.model_copy(update={"max_calls": 1})
    clip = speech("helmet")
    async with running_server(one_line, runtime) as (base_url, app):
        first = asyncio.create_task(place_call(base_url, app, clip.samples, clip.sample_rate))
        await until(lambda: app.state.admission.active > 0, "the first call to take the line")
        second = WebRTCCaller(base_url)
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await second.connect(WavMicrophone(clip.samples, clip.sample_rate))
        await second.close()
        result = await first

    assert refused.value.response.status_code == 503
    assert int(refused.value.response.headers["retry-after"]) > 0
    assert [t["bot_text"].strip() for t in result.summary["turns"] if t.get("bot_text")] == [ANSWERS["helmet"]]
    assert app.state.admission.active == 0 and app.state.admission.refused == 1


async def test_thirty_calls_one_after_another_leave_no_call_task_or_thread_behind(scripted):
    runtime, config, llm = scripted
    clip = synthesize_speech("Hello.", tail_silence=0.3)
    calls = []
    async with running_server(config, runtime) as (base_url, app):
        app.state.calls.listeners.append(lambda _pc_id, call: calls.append(weakref.ref(call.worker)))
        threads_before = None
        for n in range(30):
            caller = WebRTCCaller(base_url)
            mic = WavMicrophone(clip.samples, clip.sample_rate)
            await caller.connect(mic)
            await asyncio.wait_for(mic.finished.wait(), 30)
            await caller.close()
            await until(lambda: not app.state.calls.tasks, "the call to end")
            if n == 4:  # after the first few: pools and caches that are made once are there by now
                threads_before = threading.active_count()
        gc.collect()

        assert len(calls) == 30
        assert app.state.calls.calls == {} and app.state.calls.tasks == {}
        assert app.state.admission.active == 0
        assert threading.active_count() <= threads_before
        assert [ref for ref in calls if ref() is not None] == []


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def embedded():
    """A runtime on the packaged Qwen with three slots, answers long enough to end on their own."""
    config = load_config(max_calls=3, llm_max_tokens=120, fast_path=False)
    runtime = Runtime(config)
    await runtime.start()
    try:
        yield runtime, config
    finally:
        await runtime.stop()


async def test_three_callers_at_once_on_the_embedded_llm_each_hear_a_whole_answer(embedded):
    runtime, config = embedded
    keys = list(ANSWERS)
    async with running_server(config, runtime) as (base_url, app):
        results = await ask_together(base_url, app, keys)

    for key, result in zip(keys, results):
        [end] = result.utterance_ends
        assert result.caller.first_audible_after(end) is not None, f"the {key} caller heard nothing"
        [turn] = [t for t in result.summary["turns"] if t.get("bot_text")]
        # A stream another request ended stops mid-sentence ("We're open until").
        assert turn["bot_text"].strip()[-1] in ".!?", turn["bot_text"]
        assert not turn.get("interrupted")


async def test_a_caller_who_goes_silent_without_hanging_up_is_ended_and_frees_the_line(scripted):
    _, config, llm = scripted
    # The idle timeout is the pipeline's (pipecat's worker idle machinery): a runtime of its own.
    idle = config.model_copy(update={"call_idle_timeout_secs": 1.0})
    runtime = Runtime(idle)
    await runtime.start()
    clip = synthesize_speech("Hello.", tail_silence=0.3)
    async with running_server(idle, runtime) as (base_url, app):
        caller = WebRTCCaller(base_url)
        mic = WavMicrophone(clip.samples, clip.sample_rate)
        await caller.connect(mic)
        await asyncio.wait_for(mic.finished.wait(), 30)
        assert app.state.admission.active == 1
        mic.stop()  # no more audio, and no goodbye: the peer connection stays up

        await until(lambda: app.state.admission.active == 0 and not app.state.calls.calls, "the idle call to end", timeout=30)
        await caller.close()
    await runtime.stop()


async def test_a_call_that_reaches_the_maximum_duration_is_ended(scripted):
    runtime, config, llm = scripted
    short = config.model_copy(update={"call_max_duration_secs": 2.0})
    clip = synthesize_speech("Hello.", tail_silence=5.0)
    async with running_server(short, runtime) as (base_url, app):
        caller = WebRTCCaller(base_url)
        await caller.connect(WavMicrophone(clip.samples, clip.sample_rate))
        assert app.state.admission.active == 1

        await until(lambda: app.state.admission.active == 0 and not app.state.calls.calls, "the long call to end", timeout=30)
        await caller.close()
