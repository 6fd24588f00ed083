"""pipecat's CartesiaTTSService fed by the sentence chunker, against a local stand-in that speaks
Cartesia's websocket protocol (tests/fakes/cartesia_server.py)."""

import asyncio

import pytest

from pipecat.frames.frames import (
    ErrorFrame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.services.cartesia.tts import CartesiaTTSService
from pipecat.tests.utils import run_test
from processors.tts.sentence_chunker import SentenceChunker
from tests.fakes.cartesia_server import CartesiaStandIn
from tests.test_sentence_chunker import (
    ANSWER,
    ANSWER_CHUNKS,
    AnswerCue,
    FrameScript,
    HoldFrameUntil,
    SetOnPush,
    answer_frames,
    token_frame,
)

VOICE = "standin-voice"


def cartesia_tts(server: CartesiaStandIn, **kwargs) -> CartesiaTTSService:
    kwargs.setdefault("settings", CartesiaTTSService.Settings(voice=VOICE))
    kwargs.setdefault("append_trailing_space", True)
    return CartesiaTTSService(url=server.url, api_key=kwargs.pop("api_key", "test"), **kwargs)


@pytest.fixture
async def cartesia():
    async with CartesiaStandIn() as server:
        yield server


def only_context(server: CartesiaStandIn):
    assert len(server.contexts) == 1
    return next(iter(server.contexts.values()))


async def test_each_chunk_is_a_continuation_of_one_context_and_its_audio_comes_back_in_order(
    cartesia,
):
    down, up = await run_test(
        Pipeline([SentenceChunker(), cartesia_tts(cartesia)]), frames_to_send=answer_frames(ANSWER)
    )
    assert not [f for f in up if isinstance(f, ErrorFrame)]
    assert cartesia.handshakes == [
        {"path": "/tts/websocket", "api_key": "test", "version": cartesia.handshakes[0]["version"]}
    ]
    assert cartesia.handshakes[0]["version"]

    context = only_context(cartesia)
    # One input per chunk, then pipecat's flush closes the context.
    assert context.transcripts == [chunk + " " for chunk in ANSWER_CHUNKS] + [""]
    inputs = [m for m in cartesia.messages if m["context_id"] == context.context_id]
    assert [m["continue"] for m in inputs] == [True] * len(ANSWER_CHUNKS) + [False]
    assert context.settings["voice"] == {"mode": "id", "id": VOICE}
    assert context.settings["output_format"] == {
        "container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000
    }
    # Each chunk was spoken whole when it arrived: nothing waited for the next one.
    assert context.spoken == [chunk.split() for chunk in ANSWER_CHUNKS] + [[]]
    assert context.done

    audio = [f for f in down if isinstance(f, TTSAudioRawFrame)]
    assert b"".join(f.audio for f in audio) == cartesia.audio(context.context_id)
    assert {(f.sample_rate, f.num_channels, f.context_id) for f in audio} == {
        (24000, 1, context.context_id)
    }
    # Cartesia's word timestamps come back as the words of the answer, in order.
    assert [f.text for f in down if isinstance(f, TTSTextFrame)] == ANSWER.split()

    speech = [f for f in down if isinstance(f, (TTSStartedFrame, TTSAudioRawFrame, TTSStoppedFrame))]
    assert isinstance(speech[0], TTSStartedFrame) and isinstance(speech[-1], TTSStoppedFrame)
    assert isinstance(down[-1], LLMFullResponseEndFrame)


async def test_cartesia_speaks_the_first_clause_before_the_llm_ends_the_sentence(cartesia):
    tts = cartesia_tts(cartesia)
    frames = answer_frames(ANSWER)
    first_audio = asyncio.Event()
    hold = HoldFrameUntil(token_frame(frames, after=" six"), first_audio, timeout_s=60.0)
    await run_test(
        Pipeline([hold, SentenceChunker(), tts]),
        frames_to_send=frames,
        observers=[SetOnPush(tts, TTSAudioRawFrame, first_audio)],
    )
    assert hold.released_in_time
    assert only_context(cartesia).spoken[0] == ANSWER_CHUNKS[0].split()


async def test_without_a_trailing_space_cartesia_runs_the_chunks_together(cartesia):
    # Cartesia joins a context's inputs verbatim; stripped chunks need append_trailing_space.
    await run_test(
        Pipeline([SentenceChunker(), cartesia_tts(cartesia, append_trailing_space=False)]),
        frames_to_send=answer_frames(ANSWER),
    )
    context = only_context(cartesia)
    assert "today,from" in context.words
    assert context.spoken[0] == ANSWER_CHUNKS[0].split()[:-1]  # "today," waited for the next input


async def test_an_interruption_cancels_the_cartesia_context_and_its_audio_stops():
    long_answer = " ".join([ANSWER] * 4)
    # Real-time pacing: the interruption lands while the context's audio is still streaming.
    async with CartesiaStandIn(chunk_interval_s=0.04) as cartesia:
        tts = cartesia_tts(cartesia)
        first_audio = asyncio.Event()
        llm = FrameScript([*answer_frames(long_answer), first_audio, InterruptionFrame()])
        down, _ = await run_test(
            Pipeline([llm, SentenceChunker(), tts]),
            frames_to_send=[AnswerCue()],
            observers=[SetOnPush(tts, TTSAudioRawFrame, first_audio)],
        )
        context = only_context(cartesia)
        assert {"context_id": context.context_id, "cancel": True} in cartesia.messages
        assert context.cancelled and not context.done
        spoken_words = len(long_answer.split())
        sent_seconds = len(cartesia.audio(context.context_id)) / 2 / 24000
        assert sent_seconds < spoken_words * 0.12
        assert not [f for f in down if isinstance(f, TTSStoppedFrame)]


async def test_a_request_cartesia_rejects_comes_back_as_an_error(cartesia):
    # No voice: Cartesia answers the input with an error message.
    tts = cartesia_tts(cartesia, settings=CartesiaTTSService.Settings(voice=None))
    _, up = await run_test(Pipeline([SentenceChunker(), tts]), frames_to_send=answer_frames(ANSWER))
    errors = [f for f in up if isinstance(f, ErrorFrame)]
    assert errors and "voice" in errors[0].error
    assert not cartesia.contexts


async def test_the_stand_in_refuses_a_wrong_api_key(cartesia):
    _, up = await run_test(
        Pipeline([SentenceChunker(), cartesia_tts(cartesia, api_key="wrong")]), frames_to_send=[]
    )
    assert cartesia.handshakes[0]["api_key"] == "wrong"
    assert any(isinstance(f, ErrorFrame) for f in up)
    assert not cartesia.contexts
