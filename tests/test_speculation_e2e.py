"""Speculation end to end: a real WebRTC caller speaks to a real Brisk server.

Real Silero VAD, streaming tiny.en and hibari; the LLM is the scripted OpenAI-compatible
server (real HTTP + SSE), so every request and every closed stream is on record. The
speculative stop strategy is put in place by replacing ``agent.call.pipeline.make_turn_strategies``
(the wiring proposed in /tmp/proposals/speculation.diff does the same in build_call).
"""

import contextlib
from collections.abc import Callable

import numpy as np
import pytest
import pytest_asyncio

import agent.call.pipeline
from agent.caller.call import place_call, running_server
from agent.config import load_config
from agent.caller.loopback import serve_app
from agent.runtime.runtime import Runtime
from agent.bench.scripted_llm import ScriptedLLM
from pipecat.turns.user_turn_strategies import UserTurnStrategies
from processors.llm.context_window import normalize_history_text
from processors.llm.prefix_warmer import WARM_UP_USER_TURN
from processors.speculation.speculation_stats import DraftOutcome
from processors.speculation.similarity_match import SimilarityMatch
from processors.speculation.speculative_user_turn_stop import SpeculativeUserTurnStopStrategy
from processors.speculation.stable_partials import StabilityConfig
from processors.stt.streaming_whisper import StreamingWhisperSTTService
from tests.fakes.cartesia_server import CartesiaStandIn
from tests.speech import normalize_text, synthesize_speech

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

SATURDAY_ANSWER = (
    "Yes. On Saturday we open at ten in the morning and close at four in the afternoon, "
    "and the workshop takes walk in repairs until two."
)
SUNDAY_ANSWER = "Sorry, we are closed on Sunday."


def answer_by_day(messages: list[dict]) -> str:
    user = [m for m in messages if m.get("role") == "user"][-1]["content"].lower()
    return SUNDAY_ANSWER if "sunday" in user else SATURDAY_ANSWER


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def scripted_llm():
    llm = ScriptedLLM(answer_for=answer_by_day)
    async with serve_app(llm.app()) as url:
        yield llm, f"{url}/v1"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def brisk(scripted_llm):
    """(base_url, app, runtime) of a Brisk server whose LLM is the scripted one."""
    _, llm_url = scripted_llm
    # The LLM's drafts are under test: no question may be answered by the fast path instead,
    # nor refused by the answer check (the workshop's "walk in repairs until two" is no fact of
    # the shop's; tests/test_answer_check.py holds answers to the facts).
    async with serving(llm_url) as server:
        yield server


@contextlib.asynccontextmanager
async def serving(llm_url: str, **settings):
    """(base_url, app) of a Brisk server on the scripted LLM, with ``settings`` on top."""
    config = load_config(llm_base_url=llm_url, llm_model="scripted", fast_path=False, llm_answer_check=False,
                         **settings)
    runtime = Runtime(config)
    await runtime.start()
    try:
        async with running_server(config, runtime) as (base_url, app):
            yield base_url, app
    finally:
        await runtime.stop()


@pytest.fixture
def llm(scripted_llm):
    server, _ = scripted_llm
    server.requests.clear()
    server.answer_for = answer_by_day
    return server


@pytest.fixture
def speculate(monkeypatch) -> Callable[..., list[SpeculativeUserTurnStopStrategy]]:
    """Make every new call use the speculative strategy; returns the strategies made."""

    def install(**kwargs) -> list[SpeculativeUserTurnStopStrategy]:
        made: list[SpeculativeUserTurnStopStrategy] = []

        def make_turn_strategies(config, speculation=None, audio_check=None):
            # ``speculation``: the call's stats once build_call makes them (the proposed wiring).
            strategy = SpeculativeUserTurnStopStrategy(
                **{"user_speech_timeout": config.turn_stop_timeout_secs, "stats": speculation, **kwargs}
            )
            made.append(strategy)
            return UserTurnStrategies(stop=[strategy])

        monkeypatch.setattr(agent.call.pipeline, "make_turn_strategies", make_turn_strategies)
        return made

    return install


def answer_requests(llm: ScriptedLLM) -> list:
    """The requests for answers: not the prefix warm-ups (once the proposed wiring sends them)."""
    return [r for r in llm.requests if r.messages[-1] != WARM_UP_USER_TURN]


def spoken_bot_texts(caller) -> str:
    texts = [m["data"].get("text", "") for m in caller.messages_of("bot-tts-text")]
    texts += [m["data"].get("text", "") for m in caller.messages_of("bot-output")]
    return " ".join(texts)


def stt_of(app, caller) -> StreamingWhisperSTTService:
    call = app.state.calls.calls[caller.pc_id]
    return next(p for p in call.processors if isinstance(p, StreamingWhisperSTTService))


def at(record: dict, stage: str) -> float:
    """A stage of a turn record on the time.monotonic() clock."""
    return record["t0_monotonic"] + record["stages_ms"][stage] / 1000


async def test_a_stable_question_is_answered_by_its_draft_with_no_llm_wait_after_the_turn_ends(
    brisk, llm, speculate, tmp_path
):
    base_url, app = brisk
    # The draft needs its TTFT of head start to have its answer ready when the turn ends:
    # a 1.5 s pause tolerance gives it that, with room to spare, at a 0.6 s TTFT.
    llm.ttft_s, llm.tokens_per_s = 0.6, 100.0
    llm.answer_for = lambda _messages: SATURDAY_ANSWER
    # The silence gate keeps tiny.en's mid-word repeats ("...open on set?") from starting a
    # draft that the next stable partial supersedes: this test pins the single-draft path.
    made = speculate(user_speech_timeout=1.5, stability=StabilityConfig(min_silence_s=0.1))
    clip = synthesize_speech("What time do you open on Saturday?", tmp_path / "q.wav", tail_silence=2.0)

    result = await place_call(base_url, app, clip.samples, clip.sample_rate)

    [strategy] = made
    [record] = result.summary["turns"]
    # The draft was the only LLM request, and it asked what the user finally said.
    assert len(answer_requests(llm)) == 1, [d.text for d in strategy.stats.drafts]
    [request] = answer_requests(llm)
    assert SimilarityMatch().matches(request.last_user_text, record["user_text"])
    assert record["speculative"] is True
    turn_end, first_audio = at(record, "turn_end"), at(record, "first_audio_out")
    assert request.received_at < request.first_token_at < turn_end
    # The first bot audio left the server after the turn was confirmed, and before a request
    # sent at that moment could have had even its first token back.
    assert turn_end < first_audio < turn_end + llm.ttft_s
    assert result.caller.first_audible_after(result.utterance_ends[0]) is not None
    assert "ten in the morning" in spoken_bot_texts(result.caller)
    stats = strategy.stats.as_dict()
    assert (stats["drafts_started"], stats["committed"], stats["hit_rate"]) == (1, 1, 1.0)


async def test_a_user_who_goes_on_after_a_stable_partial_never_hears_the_draft(
    brisk, llm, speculate, tmp_path
):
    base_url, app = brisk
    # Slow tokens: the first draft is still streaming when the user goes on. A pause
    # tolerance longer than the pause keeps both halves in one turn.
    llm.ttft_s, llm.tokens_per_s = 0.2, 6.0
    made = speculate(user_speech_timeout=1.2)
    first = synthesize_speech("What time do you open on Saturday?", tmp_path / "a.wav", tail_silence=0.6)
    second = synthesize_speech("Or are you open on Sunday instead?", tmp_path / "b.wav", tail_silence=2.0)
    lead = round(second.speech_start_s * second.sample_rate)
    samples = np.concatenate([first.samples, second.samples[lead:]])  # a 0.6 s pause

    result = await place_call(base_url, app, samples, first.sample_rate, max_wait_s=40)

    [strategy] = made
    # A draft answered the first question during the pause, and was still streaming when the
    # user went on: its stream was closed mid-answer, and the server saw the disconnect.
    pause_draft = next(
        d for d in strategy.stats.drafts if "saturday" in d.text.lower() and "sunday" not in d.text.lower()
    )
    assert pause_draft.outcome in (DraftOutcome.SUPERSEDED, DraftOutcome.CANCELLED)
    # (Once wired after a ContextWindow, the request carries the text with fillers stripped.)
    sent_text = normalize_history_text(pause_draft.text, role="user")
    [pause_request] = [r for r in answer_requests(llm) if r.last_user_text in (pause_draft.text, sent_text)]
    assert pause_request.tokens_sent >= 1
    assert pause_request.disconnected and not pause_request.completed
    [record] = [r for r in result.summary["turns"] if r["user_text"]]
    assert "sunday" in normalize_text(record["user_text"])
    # The request whose answer was spoken carries what the user finally said.
    assert SimilarityMatch().matches(answer_requests(llm)[-1].last_user_text, record["user_text"])
    # Not one word of the first draft's answer was spoken or sent to the client.
    heard = spoken_bot_texts(result.caller) + " " + record["bot_text"]
    assert "Sunday" in heard
    assert "ten in the morning" not in heard and "Saturday" not in heard


async def test_a_partial_covering_the_speech_end_is_the_final_without_a_second_transcription(
    brisk, llm, speculate, tmp_path
):
    base_url, app = brisk
    llm.ttft_s, llm.tokens_per_s = 0.3, 50.0
    # The pause tolerance gives the draft its time whatever the machine: where the covering
    # partial is done before the VAD stop a stable partial starts it, on a slower one (a partial
    # finished after the VAD stop is the final, never pushed as a partial) the final does.
    made = speculate(user_speech_timeout=1.0)
    clip = synthesize_speech("Where is your shop?", tmp_path / "q.wav", tail_silence=2.0)

    result = await place_call(base_url, app, clip.samples, clip.sample_rate)

    stt = stt_of(app, result.caller)
    assert stt.partial_stats.reused_finals == 1
    assert stt.partial_stats.transcribed_finals == 0
    # The final is the last partial's text, word for word.
    [record] = result.summary["turns"]
    assert record["user_text"] == stt.partial_stats.jobs[-1].text
    [strategy] = made
    assert strategy.stats.count(DraftOutcome.COMMITTED) == 1
    assert record["speculative"] is True and record["bot_text"].strip()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def cartesia():
    async with CartesiaStandIn() as server:
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def brisk_on_cartesia(scripted_llm, cartesia):
    """(base_url, app) of a Brisk server like ``brisk`` whose voice is the Cartesia stand-in."""
    _, llm_url = scripted_llm
    async with serving(llm_url, cartesia_api_key="test", cartesia_url=cartesia.url) as server:
        yield server


async def test_a_drafts_first_words_are_at_cartesia_before_the_turn_ends_and_the_answer_continues_them(
    brisk_on_cartesia, cartesia, llm, speculate, tmp_path
):
    base_url, app = brisk_on_cartesia
    llm.ttft_s, llm.tokens_per_s = 0.3, 100.0
    llm.answer_for = lambda _messages: SATURDAY_ANSWER
    speculate(user_speech_timeout=1.5, stability=StabilityConfig(min_silence_s=0.1))
    cartesia.contexts.clear()
    clip = synthesize_speech("What time do you open on Saturday?", tmp_path / "q.wav", tail_silence=2.0)

    result = await place_call(base_url, app, clip.samples, clip.sample_rate)

    [record] = result.summary["turns"]
    assert record["speculative"] is True
    # One Cartesia context spoke the answer: the draft's, opened before the turn was confirmed
    # and continued by it to its flush.
    [(context_id, context)] = cartesia.contexts.items()
    assert context_id.startswith("draft-") and context.done and not context.cancelled
    assert "".join(context.transcripts).split() == SATURDAY_ANSWER.split()
    assert context.opened_at < at(record, "turn_end") < at(record, "first_audio_out")
    assert result.caller.first_audible_after(result.utterance_ends[0]) is not None
    assert "ten in the morning" in spoken_bot_texts(result.caller)
    prefetch = app.state.calls.calls[result.caller.pc_id].speculative_audio.stats
    assert (prefetch.started, prefetch.used, prefetch.missed) == (1, 1, 0)
