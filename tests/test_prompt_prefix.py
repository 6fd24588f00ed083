"""A prompt prefix the LLM server can keep cached: the context window (session data, then a
normalised history cut in whole batches) and the prefix warm-up at call start and when idle.
"""

from contextlib import asynccontextmanager

import pytest
from pipecat.frames.frames import LLMContextFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.tests.utils import SleepFrame, run_test

from agent.caller.loopback import serve_app
from agent.bench.scripted_llm import ScriptedLLM
from processors.llm.context_window import ContextWindow, normalize_history_text, window_turns
from processors.llm.openai_llm import ResilientOpenAILLMService, make_openai_client
from processors.llm.prefix_warmer import PrefixWarmer

SYSTEM_PROMPT = "You are a test assistant for a bicycle shop."


@asynccontextmanager
async def scripted(server: ScriptedLLM):
    async with serve_app(server.app()) as base_url:
        yield f"{base_url}/v1"


@pytest.mark.parametrize(
    "role, text, expected",
    [
        ("user", "Um, what time do you open?", "what time do you open?"),
        ("user", "I, you know, want a bike", "I want a bike"),
        ("user", "Do you know the address?", "Do you know the address?"),
        ("user", "那个，几点开门？", "几点开门？"),
        ("user", "那个人是谁", "那个人是谁"),
        ("user", "[12:03:44] can I come at 10:30?", "can I come at 10:30?"),
        ("assistant", "2026-11-29T10:00:00Z Um, sure.", "Um, sure."),
    ],
)
def test_history_loses_fillers_and_timestamps_but_not_words(role, text, expected):
    assert normalize_history_text(text, role=role) == expected
    assert normalize_history_text(expected, role=role) == expected  # idempotent: stays byte-identical


def _turns(n: int, start: int = 0) -> list[dict]:
    return [
        m
        for i in range(start, start + n)
        for m in ({"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"})
    ]


def test_history_is_cut_in_whole_batches_so_the_prefix_changes_once_per_batch():
    kept_first = []
    for total in range(1, 20):
        kept, _ = window_turns(_turns(total), max_turns=8, trim_batch=4)
        history = [m for m in kept if m["role"] == "user"][:-1]
        assert len(history) <= 8
        kept_first.append(kept[0]["content"])
    # The first kept turn only moves when a whole batch is dropped.
    assert kept_first == ["q0"] * 9 + ["q4"] * 4 + ["q8"] * 4 + ["q12"] * 2


def test_windowing_an_already_windowed_history_cuts_at_the_same_turn():
    # The real context was windowed at turn 9; a speculative copy of an untrimmed context
    # (or the real one, later) must still be cut where the untrimmed history is cut.
    trimmed, dropped = window_turns(_turns(10), max_turns=8, trim_batch=4)
    assert dropped == 4
    later = _turns(3, start=10) + [{"role": "user", "content": "now"}]
    from_trimmed, _ = window_turns(trimmed + later, max_turns=8, trim_batch=4)
    from_full, _ = window_turns(_turns(10) + later, max_turns=8, trim_batch=4)
    assert from_trimmed == from_full
    assert from_full[0] == {"role": "user", "content": "q8"}


async def test_the_context_window_lays_out_session_data_then_normalised_windowed_history():
    session = [{"role": "developer", "content": "The caller is Ana."}]
    window = ContextWindow(max_turns=2, trim_batch=1, session_messages=session)
    current = {"role": "user", "content": "Um, and [10:00:01] on Sunday?"}
    context = LLMContext(messages=[*_turns(3), current])

    await run_test(window, frames_to_send=[LLMContextFrame(context=context)], expected_down_frames=[LLMContextFrame])

    assert context.get_messages() == [
        *session, *_turns(3)[2:], {"role": "user", "content": "and on Sunday?"},
    ]
    # Replaced, never mutated: a speculative copy of a context shares its message dicts.
    assert current == {"role": "user", "content": "Um, and [10:00:01] on Sunday?"}
    assert window.dropped_turns == 1


async def test_warm_up_at_call_start_sends_the_same_prefix_as_a_real_request_and_rewarms_when_idle():
    server = ScriptedLLM(ttft_s=0.0, tokens_per_s=1000)
    session = [{"role": "user", "content": "(The caller's name is Ana.)"}]
    async with scripted(server) as url:
        client = make_openai_client(base_url=url, api_key=None, connect_timeout=2.0, total_timeout=10.0)
        warmer = PrefixWarmer(
            client=client, model="scripted", system_prompt=SYSTEM_PROMPT,
            session_messages=session, rewarm_after_s=0.6,
        )
        llm = ResilientOpenAILLMService(
            client=client, apology_text="sorry",
            settings=OpenAILLMService.Settings(model="scripted", system_instruction=SYSTEM_PROMPT),
        )
        context = LLMContext(messages=[*session, {"role": "user", "content": "What time do you open?"}])
        frames = [SleepFrame(0.2)]
        # Requests every 0.2 s keep the cache warm: no re-warm while they flow.
        frames += [LLMContextFrame(context=context), SleepFrame(0.2)] * 4
        frames += [SleepFrame(1.5)]  # idle: re-warms
        await run_test(Pipeline([warmer, llm]), frames_to_send=frames)
        await client.close()

    warm_requests = [r for r in server.requests if r.last_user_text == "Hi"]
    real = [r for r in server.requests if r.last_user_text == "What time do you open?"]
    assert server.requests[0] is warm_requests[0]
    assert len(real) == 4
    # Everything before the user's words is byte-identical.
    assert warm_requests[0].messages[:-1] == real[0].messages[:-1]
    assert real[0].messages[0] == {"role": "system", "content": SYSTEM_PROMPT}
    between = [r for r in warm_requests if real[0].received_at < r.received_at < real[-1].received_at]
    assert between == []
    assert len(warm_requests) >= 2
    assert warmer.warmups == len(warm_requests) and warmer.failures == 0
