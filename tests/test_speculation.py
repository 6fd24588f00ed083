"""Speculative drafts: the commit-or-cancel rule, counters, and the draft's life in a real pipecat
pipeline (real user aggregator, real OpenAI LLM service, a real HTTP + SSE server on loopback).
When a partial is stable enough to draft from is tests/test_stable_partials.py.
"""

import asyncio
import math
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass

import numpy as np
import pytest
from loguru import logger
from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import (
    DataFrame,
    EndFrame,
    Frame,
    InputAudioRawFrame,
    LLMFullResponseEndFrame,
    LLMTextFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import FunctionCallParams
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.turns.user_start import VADUserTurnStartStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies
from pipecat.workers.runner import WorkerRunner

from agent.caller.loopback import serve_app
from agent.bench.scripted_llm import ScriptedLLM
from frames.transcription import FinalTranscriptionFrame, PartialTranscriptionFrame
from processors.llm.openai_llm import ResilientOpenAILLMService, make_openai_client
from processors.speculation.draft_accounting import DraftAccountingMixin
from processors.speculation.speculation_stats import Draft, DraftOutcome, SpeculationStats, merge_reports
from processors.speculation.similarity_match import SimilarityMatch
from processors.speculation.speculative_user_turn_stop import SpeculativeUserTurnStopStrategy
from processors.speculation.stable_partials import StabilityConfig
from tests.fakes.slow_turn_reset import SlowTurnReset
from tests.fakes.tool_calling_llm import ToolCallingLLM
from tests.waiting import until

SYSTEM_PROMPT = "You are a test assistant for a bicycle shop."
WAIT_S = 10.0  # upper bound for a condition that normally holds within a second


# --- the commit-or-cancel rule -------------------------------------------------------------


@pytest.mark.parametrize(
    "draft, final, keeps",
    [
        ("what time do you open on saturday", "What time do you open on Saturday?", True),
        ("um what time do you open on saturday", "What time do you open on Saturday?", True),
        ("whats your address", "What's your address?", True),
        ("what time do you open on saturday", "What time do you open on Saturday, please?", True),
        ("what time do you open on saturday", "What time do you open on Sunday?", False),
        ("what time do you open", "What time do you open on Saturday and do you rent bikes?", False),
        ("can i rent an electric bike", "Can I rent an electric bike?", True),
    ],
)
def test_a_draft_is_kept_only_when_the_final_is_92_percent_alike_word_for_word(draft, final, keeps):
    policy = SimilarityMatch()
    assert policy.threshold == 0.92
    assert policy.matches(draft, final) is keeps
    assert 0.0 <= policy.score(draft, final) <= 1.0


def test_the_similarity_threshold_is_configurable_and_checked():
    assert SimilarityMatch(0.5).matches("what time do you open on saturday", "what time do you open on sunday")
    with pytest.raises(ValueError):
        SimilarityMatch(1.5)


# --- counters ------------------------------------------------------------------------------


def _draft(outcome, *, started=0.0, request=0.01, first_token=None, resolved=None, prompt=0, completion=0):
    return Draft(
        text="t", trigger="repeated_tail", started_at=started, request_at=request,
        first_token_at=first_token, prompt_tokens=prompt, completion_tokens=completion,
        outcome=outcome, resolved_at=resolved,
    )


def test_counters_report_hits_waste_and_time_saved_per_hit():
    stats = SpeculationStats()
    stats.drafts.extend(
        [
            # Answering 0.3 s after its request, confirmed 0.5 s after it: the whole TTFT saved.
            _draft(DraftOutcome.COMMITTED, request=1.0, first_token=1.3, resolved=1.5),
            # Confirmed 0.1 s after its request, first token only later: the head start saved.
            _draft(DraftOutcome.COMMITTED, request=2.0, first_token=2.3, resolved=2.1),
            _draft(DraftOutcome.SUPERSEDED, prompt=100, completion=5),
            _draft(DraftOutcome.CANCELLED, prompt=120, completion=7),
        ]
    )
    out = stats.as_dict()
    assert (out["drafts_started"], out["committed"], out["cancelled"], out["superseded"]) == (4, 2, 1, 1)
    assert out["hit_rate"] == round(2 / 3, 3)
    assert out["waste_rate"] == 0.5
    assert (out["wasted_prompt_tokens"], out["wasted_completion_tokens"]) == (220, 12)
    assert out["tokens_estimated"] is True
    assert out["time_saved_ms"] == [300.0, 100.0]
    assert out["time_saved_ms_per_hit"] == 200.0

    merged = merge_reports([out, SpeculationStats().as_dict(), out])
    assert (merged["drafts_started"], merged["committed"], merged["hit_rate"]) == (8, 4, round(4 / 6, 3))
    assert merged["wasted_completion_tokens"] == 24
    assert merged["time_saved_ms_p50"] == 200.0 and len(merged["time_saved_ms"]) == 4


def test_without_accounting_on_the_llm_token_waste_is_unknown_not_zero():
    stats = SpeculationStats()
    stats.drafts.append(_draft(DraftOutcome.CANCELLED, request=None))
    assert stats.as_dict()["wasted_prompt_tokens"] is None
    assert SpeculationStats().as_dict()["hit_rate"] is None


# --- a real pipeline: user aggregator + OpenAI LLM service + HTTP server ---------------------


class AccountedLLMService(DraftAccountingMixin, ResilientOpenAILLMService):
    """Brisk's LLM service with draft accounting, as the proposed wiring builds it."""


class Recorder(FrameProcessor):
    """Notes every downstream frame with the time it passed; passes everything on."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.frames: list[tuple[float, Frame]] = []

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if direction == FrameDirection.DOWNSTREAM:
            self.frames.append((time.monotonic(), frame))
        await self.push_frame(frame, direction)

    def first(self, frame_type: type, after: float = 0.0) -> float | None:
        return next((t for t, f in self.frames if isinstance(f, frame_type) and t >= after), None)

    def text(self) -> str:
        return "".join(f.text for _, f in self.frames if isinstance(f, LLMTextFrame))


@dataclass
class Rig:
    worker: PipelineWorker
    heard: Recorder  # what left the user aggregator
    recorder: Recorder  # what left the LLM service
    strategy: SpeculativeUserTurnStopStrategy
    llm: AccountedLLMService
    context: LLMContext

    async def send(self, *frames: Frame, gap_s: float = 0.05):
        for frame in frames:
            await self.worker.queue_frame(frame)
            await asyncio.sleep(gap_s)

    async def say(self, text: str, times: int = 2, audio_end_s: float = 0.0):
        """Partials of the same text, as the STT sends them while the user pauses."""
        await self.send(*(partial(text, audio_end_s) for _ in range(times)))

    async def end_utterance(self, final_text: str):
        await self.send(VADUserStoppedSpeakingFrame(stop_secs=0.3), final(final_text))

    async def flush(self):
        """Return once every frame sent so far has been through the user aggregator."""
        mark = Mark()
        await self.worker.queue_frame(mark)
        await until(lambda: any(f is mark for _, f in self.heard.frames), "the frames sent to pass")


class Mark(DataFrame):
    """Queued behind data frames and, being data, behind the system frames sent before it."""


def partial(text: str, audio_end_s: float = 0.0) -> PartialTranscriptionFrame:
    return PartialTranscriptionFrame(text=text, user_id="", timestamp="", utterance_id=1, audio_end_s=audio_end_s)


def final(text: str) -> FinalTranscriptionFrame:
    return FinalTranscriptionFrame(text=text, user_id="", timestamp="", utterance_id=1)



@asynccontextmanager
async def scripted(server: ScriptedLLM):
    async with serve_app(server.app()) as base_url:
        yield f"{base_url}/v1"


@asynccontextmanager
async def speculative_pipeline(
    base_url: str,
    *,
    stability: StabilityConfig | None = None,
    user_speech_timeout: float = 0.3,
    tools: ToolsSchema | None = None,
    start: list | None = None,
):
    stats = SpeculationStats()
    strategy = SpeculativeUserTurnStopStrategy(
        stability=stability, stats=stats, user_speech_timeout=user_speech_timeout
    )
    context = LLMContext(tools=tools) if tools else LLMContext()
    pair = LLMContextAggregatorPair(
        context, user_params=LLMUserAggregatorParams(user_turn_strategies=UserTurnStrategies(start=start, stop=[strategy]))
    )
    client = make_openai_client(base_url=base_url, api_key=None, connect_timeout=2.0, total_timeout=30.0)
    llm = AccountedLLMService(
        speculation_stats=stats,
        client=client,
        apology_text="Sorry, something went wrong.",
        settings=OpenAILLMService.Settings(model="scripted", system_instruction=SYSTEM_PROMPT),
    )
    heard, recorder = Recorder(), Recorder()
    worker = PipelineWorker(
        Pipeline([pair.user(), heard, llm, recorder, pair.assistant()]),
        params=PipelineParams(),
        cancel_on_idle_timeout=False,
    )
    started = asyncio.Event()

    @worker.event_handler("on_pipeline_started")
    async def _started(_worker, _frame):
        started.set()

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    run = asyncio.create_task(runner.run())
    await asyncio.wait_for(started.wait(), WAIT_S)
    try:
        yield Rig(worker, heard, recorder, strategy, llm, context)
    finally:
        await worker.queue_frame(EndFrame())
        await asyncio.wait_for(run, WAIT_S)
        await client.close()


def last_user_text(server: ScriptedLLM, i: int) -> str:
    return server.requests[i].last_user_text


def answer_by_day(messages: list[dict]) -> str:
    user = [m for m in messages if m.get("role") == "user"][-1]["content"].lower()
    if "sunday" in user:
        return "Sorry, we are closed on Sunday."
    return "Yes. On Saturday we open at ten in the morning."


async def test_a_confirmed_draft_is_the_only_request_and_its_answer_follows_the_turn_end_at_once():
    server = ScriptedLLM(ttft_s=0.5, tokens_per_s=200, answer_for=answer_by_day)
    async with scripted(server) as url, speculative_pipeline(url) as rig:
        await rig.send(VADUserStartedSpeakingFrame())
        await rig.say("what time do you open on saturday")
        await until(lambda: server.requests and server.requests[0].completed, "the draft's answer")
        await rig.end_utterance("What time do you open on Saturday?")
        await until(lambda: rig.recorder.first(LLMFullResponseEndFrame) is not None, "the released answer")

    [request] = server.requests
    assert request.last_user_text == "what time do you open on saturday"
    turn_end = rig.recorder.first(UserStoppedSpeakingFrame)
    first_text = rig.recorder.first(LLMTextFrame)
    assert turn_end is not None and first_text is not None
    # Held until the turn was confirmed, then out before a request sent at the turn end
    # could even have had its first token.
    assert request.first_token_at < turn_end < first_text < turn_end + server.ttft_s
    assert rig.recorder.text() == "Yes. On Saturday we open at ten in the morning."
    # The context records what the user finally said, and the answer.
    messages = rig.context.get_messages()
    assert messages[-2] == {"role": "user", "content": "What time do you open on Saturday?"}
    assert messages[-1]["role"] == "assistant"
    out = rig.strategy.stats.as_dict()
    assert (out["drafts_started"], out["committed"], out["hit_rate"]) == (1, 1, 1.0)
    assert out["time_saved_ms_per_hit"] > 0


async def test_a_newer_different_stable_partial_closes_the_old_stream_and_replaces_the_draft():
    server = ScriptedLLM(ttft_s=0.1, tokens_per_s=3, answer_for=answer_by_day)
    async with scripted(server) as url, speculative_pipeline(url) as rig:
        await rig.send(VADUserStartedSpeakingFrame())
        await rig.say("what time do you open on saturday")
        await until(lambda: server.requests and server.requests[0].tokens_sent >= 1, "the first draft streaming")
        await rig.say("what time do you open on saturday or sunday")
        await until(lambda: server.requests[0].disconnected, "the server to see the first stream closed")
        await until(lambda: len(server.requests) == 2 and server.requests[1].tokens_sent >= 1, "the new draft")
        await rig.end_utterance("What time do you open on Saturday or Sunday?")
        await until(lambda: rig.recorder.first(LLMFullResponseEndFrame) is not None, "the answer", timeout=20)

    first, second = server.requests
    assert not first.completed
    assert second.last_user_text == "what time do you open on saturday or sunday"
    assert rig.recorder.text() == "Sorry, we are closed on Sunday."
    out = rig.strategy.stats.as_dict()
    assert (out["drafts_started"], out["superseded"], out["committed"]) == (2, 1, 1)
    assert out["wasted_completion_tokens"] >= 1 and out["wasted_prompt_tokens"] > 0


async def test_a_final_that_changed_the_meaning_cancels_the_draft_and_runs_the_real_request():
    server = ScriptedLLM(ttft_s=0.1, tokens_per_s=3, answer_for=answer_by_day)
    # Only the base rule, so the final does not become a draft of its own.
    stability = StabilityConfig(end_words=None, silence_s=None, question_min_chars=None)
    logs: list[str] = []
    sink = logger.add(lambda m: logs.append(str(m)), level="INFO")
    try:
        async with scripted(server) as url, speculative_pipeline(url, stability=stability) as rig:
            await rig.send(VADUserStartedSpeakingFrame())
            await rig.say("what time do you open on saturday")
            await until(lambda: server.requests and server.requests[0].tokens_sent >= 1, "the draft streaming")
            await rig.end_utterance("What time do you open on Sunday?")
            await until(lambda: server.requests[0].disconnected, "the server to see the draft's stream closed")
            await until(lambda: rig.recorder.first(LLMFullResponseEndFrame) is not None, "the answer", timeout=20)
    finally:
        logger.remove(sink)

    draft, real = server.requests
    assert not draft.completed
    assert real.last_user_text == "What time do you open on Sunday?"
    assert "Saturday" not in rig.recorder.text()
    assert rig.recorder.text() == "Sorry, we are closed on Sunday."
    [decision] = [line for line in logs if "speculation cancelled" in line]
    assert "what time do you open on saturday" in decision and "What time do you open on Sunday?" in decision
    assert "score 0." in decision
    [record] = rig.strategy.stats.drafts
    assert (record.outcome, record.reason) == (DraftOutcome.CANCELLED, "mismatch")
    assert record.score < 0.92


async def test_a_draft_that_reaches_a_tool_call_never_runs_it_and_the_real_turn_runs_it_once():
    server = ToolCallingLLM(ttft_s=0.1, tokens_per_s=50, answer_for=lambda _m: "We open at ten on Saturday.")
    calls: list[float] = []

    async def check_opening_hours(params: FunctionCallParams):
        calls.append(time.monotonic())
        await params.result_callback({"saturday": "10:00-16:00"})

    tools = ToolsSchema(
        standard_tools=[
            FunctionSchema(
                name="check_opening_hours",
                description="Opening hours for a day of the week.",
                properties={"day": {"type": "string"}},
                required=["day"],
            )
        ]
    )
    async with scripted(server) as url, speculative_pipeline(url, tools=tools) as rig:
        rig.llm.register_function("check_opening_hours", check_opening_hours)
        await rig.send(VADUserStartedSpeakingFrame())
        await rig.say("what time do you open on saturday")
        await until(
            lambda: rig.strategy.stats.count(DraftOutcome.CANCELLED) == 1, "the LLM to withdraw the draft"
        )
        await rig.say("what time do you open on saturday")  # stable again: no second draft
        await rig.end_utterance("What time do you open on Saturday?")
        await until(lambda: "ten on Saturday" in rig.recorder.text(), "the answer after the tool", timeout=20)

    turn_end = rig.recorder.first(UserStoppedSpeakingFrame)
    assert len(calls) == 1 and calls[0] > turn_end
    [draft] = rig.strategy.stats.drafts
    assert draft.reason == "withdrawn by the LLM (tool call)"
    # The draft, the real request (tool call), the request with the tool result.
    assert len(server.requests) == 3
    assert server.requests[2].messages[-1]["role"] == "tool"


def audio(seconds: float, *, loud: bool) -> list[InputAudioRawFrame]:
    """20 ms frames of a 220 Hz tone (speech stand-in) or digital silence."""
    n = round(seconds / 0.02)
    t = np.arange(320) / 16000
    chunk = (np.sin(2 * math.pi * 220 * t) * 8000).astype(np.int16) if loud else np.zeros(320, np.int16)
    return [InputAudioRawFrame(audio=chunk.tobytes(), sample_rate=16000, num_channels=1) for _ in range(n)]


@pytest.mark.parametrize("heard_until_s, drafts", [(0.52, 1), (0.3, 0)], ids=["covers-silence", "older-audio"])
async def test_250ms_of_silence_after_a_partial_that_heard_it_starts_a_draft(heard_until_s, drafts):
    server = ScriptedLLM(ttft_s=0.1, tokens_per_s=100)
    async with scripted(server) as url, speculative_pipeline(url, user_speech_timeout=5.0) as rig:
        await rig.send(VADUserStartedSpeakingFrame(), *audio(0.5, loud=True), gap_s=0)
        # One partial (not stable by the two-partial rule) that heard up to heard_until_s.
        await rig.send(*audio(0.1, loud=False), partial("what time do you open", heard_until_s), gap_s=0)
        await rig.send(*audio(0.12, loud=False), gap_s=0)
        await rig.flush()
        assert len(rig.strategy.stats.drafts) == 0  # 0.22 s of silence
        await rig.send(*audio(0.04, loud=False), gap_s=0)
        await rig.flush()
        assert len(rig.strategy.stats.drafts) == drafts  # 0.26 s of silence
        if drafts:
            assert rig.strategy.stats.drafts[0].trigger == "silence"


async def test_words_pushed_while_their_final_is_reviewed_are_drafted_and_the_same_final_commits_the_draft():
    server = ScriptedLLM(ttft_s=0.3, tokens_per_s=200, answer_for=answer_by_day)
    async with scripted(server) as url, speculative_pipeline(url) as rig:
        await rig.send(VADUserStartedSpeakingFrame(), *audio(0.5, loud=True), gap_s=0)
        await rig.send(*audio(0.44, loud=False), VADUserStoppedSpeakingFrame(stop_secs=0.3), gap_s=0)
        await rig.flush()
        assert not rig.strategy.stats.drafts  # no partial had heard the pause
        # The streaming STT's first words, heard up to the pause, while the second opinion listens.
        await rig.send(partial("are you open on sundays", 0.7))
        await until(lambda: server.requests and server.requests[0].completed, "the draft's answer")
        await rig.send(final("Are you open on Sundays?"))
        await until(lambda: rig.recorder.first(LLMFullResponseEndFrame) is not None, "the released answer")

    [request] = server.requests  # the draft, committed: no second request after the turn end
    assert request.last_user_text == "are you open on sundays"
    assert rig.strategy.stats.drafts[0].trigger == "silence"
    assert rig.recorder.text() == "Sorry, we are closed on Sunday."


@pytest.mark.parametrize("revised, committed", [(False, True), (True, False)], ids=["first-words", "revised"])
async def test_a_draft_on_words_the_second_opinion_revised_is_kept_only_for_the_very_same_words(revised, committed):
    # 13 words: one changed word still scores 0.92, which keeps a draft on ordinary words.
    heard = "hi there could you tell me if you are open on saturday this week"
    said = "hi there could you tell me if you are open on sunday this week"
    server = ScriptedLLM(ttft_s=0.1, tokens_per_s=200, answer_for=answer_by_day)
    async with scripted(server) as url, speculative_pipeline(url) as rig:
        await rig.send(VADUserStartedSpeakingFrame(), *audio(0.5, loud=True), gap_s=0)
        await rig.send(*audio(0.44, loud=False), VADUserStoppedSpeakingFrame(stop_secs=0.3), gap_s=0)
        await rig.send(partial(heard, 0.7))
        await until(lambda: server.requests and server.requests[0].completed, "the draft's answer")
        await rig.send(FinalTranscriptionFrame(text=said, user_id="", timestamp="", utterance_id=1, revised=revised))
        await until(lambda: rig.recorder.first(LLMFullResponseEndFrame) is not None, "an answer")
        await until(lambda: len(server.requests) == 1 + (not committed), "the real request")

    [draft] = rig.strategy.stats.drafts
    assert draft.outcome == (DraftOutcome.COMMITTED if committed else DraftOutcome.CANCELLED)
    assert rig.recorder.text().endswith("Saturday we open at ten in the morning." if committed
                                        else "Sorry, we are closed on Sunday.")


async def test_a_transcript_processed_while_pipecat_settles_a_committed_turn_end_neither_ends_it_again_nor_drafts():
    # On a busy machine the final's own processing went on while pipecat told the strategies
    # the turn had ended: it ended the turn again, drafted on the same words, and the turn end
    # then withdrew that draft, which stopped the committed answer (docs/testing.md).
    slow = SlowTurnReset()
    server = ScriptedLLM(ttft_s=0.2, tokens_per_s=200, answer_for=answer_by_day)
    async with (scripted(server) as url,
                speculative_pipeline(url, start=[VADUserTurnStartStrategy(), slow]) as held,
                speculative_pipeline(url) as other):
        await held.send(VADUserStartedSpeakingFrame())
        await held.say("are you open on sunday")
        await until(lambda: server.requests, "the draft's request")
        await held.end_utterance("Are you open on Sunday?")
        await asyncio.wait_for(slow.entered.wait(), WAIT_S)  # the draft is committed; pipecat settles the end
        await held.send(final("Are you open on Sunday?"))
        await held.flush()
        # Another call, meanwhile, has a whole turn of its own on the same LLM server.
        await other.send(VADUserStartedSpeakingFrame())
        await other.say("what time do you open on saturday")
        await other.end_utterance("What time do you open on Saturday?")
        await until(lambda: other.recorder.first(LLMFullResponseEndFrame) is not None, "the other call's answer")
        slow.release.set()
        await until(lambda: held.recorder.first(LLMFullResponseEndFrame) is not None, "the committed answer")

    for rig in (held, other):
        [draft] = rig.strategy.stats.drafts
        assert draft.outcome == DraftOutcome.COMMITTED
    assert len(server.requests) == 2  # each call's draft, and nothing asked again
    assert held.recorder.text() == "Sorry, we are closed on Sunday."
    assert other.recorder.text() == "Yes. On Saturday we open at ten in the morning."
