"""Speculative TTS for the other engines: espeak-ng runs a held draft's first chunk before the
turn is confirmed, and Cartesia opens the draft's context, which the confirmed turn continues.

The chain is the real one: LLM (draft accounting mixin, pipecat's speculation gate) ->
SentenceChunker -> the TTS service; espeak-ng is the real binary, Cartesia is the local stand-in
that speaks its websocket protocol (tests/fakes/cartesia_server.py).
"""

import asyncio

import pytest
from pipecat.frames.frames import (
    EagerEndOfTurnCancelFrame,
    InterruptionFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSTextFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.tests.utils import SleepFrame, run_test

from processors.tts.cartesia_tts import PrefetchingCartesiaTTSService
from processors.tts.espeak_tts import EspeakTTSService
from processors.tts.sentence_chunker import SentenceChunker
from processors.speculation.speculative_tts import SpeculativeAudioCache
from tests.fakes.cartesia_server import CartesiaStandIn
from tests.test_speculative_tts import ANSWER, FIRST_CHUNK, SETTLE_S, PrefetchingLLM, answer, draft

REST = "On Sunday we stay closed all day."


class CountingEspeak(EspeakTTSService):
    """espeak-ng as it is, noting every text it is run on."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.spoken: list[str] = []

    async def _start_espeak(self, text: str):
        self.spoken.append(text.strip())
        return await super()._start_espeak(text)


class TurnEndMark(FrameProcessor):
    """Right after the LLM: notes what ``seen()`` says when the turn end comes through (before
    anything the gate released with it reaches the TTS: system frames go first)."""

    def __init__(self, seen):
        super().__init__()
        self._seen = seen
        self.at_turn_end: list = []

    async def process_frame(self, frame, direction):
        await super().process_frame(frame, direction)
        if isinstance(frame, UserStoppedSpeakingFrame):
            self.at_turn_end.append(self._seen())
        await self.push_frame(frame, direction)


def audio_of(down) -> bytes:
    return b"".join(f.audio for f in down if isinstance(f, TTSAudioRawFrame))


async def espeak_alone(text: str) -> bytes:
    """What espeak-ng says for ``text`` with no draft involved."""
    down, _ = await run_test(EspeakTTSService(), frames_to_send=[TTSSpeakFrame(text)])
    return audio_of(down)


# -- espeak -----------------------------------------------------------------------------------


async def test_espeak_runs_a_confirmed_drafts_first_chunk_before_the_turn_end_and_speaks_that_audio():
    cache = SpeculativeAudioCache()
    tts = CountingEspeak(speculative_audio=cache)
    mark = TurnEndMark(lambda: list(tts.spoken))
    pipeline = Pipeline([PrefetchingLLM([ANSWER], speculative_audio=cache), mark, SentenceChunker(), tts])

    down, _ = await run_test(
        pipeline, frames_to_send=[draft(), SleepFrame(SETTLE_S), UserStoppedSpeakingFrame(), SleepFrame(1.0)]
    )

    assert mark.at_turn_end == [[FIRST_CHUNK]]
    assert tts.spoken == [FIRST_CHUNK, REST]  # the first chunk once: its audio was kept
    assert cache.stats.as_dict() == {"started": 1, "used": 1, "discarded": 0, "missed": 0}
    # The audio spoken is espeak's for the two chunks, the prefetched one first.
    assert audio_of(down) == await espeak_alone(FIRST_CHUNK) + await espeak_alone(REST)


async def test_espeak_never_speaks_a_cancelled_drafts_audio():
    cache = SpeculativeAudioCache()
    real = "Yes, we open at ten. On Saturday we open at noon."
    tts = CountingEspeak(speculative_audio=cache)
    pipeline = Pipeline([PrefetchingLLM([ANSWER, real], speculative_audio=cache), SentenceChunker(), tts])

    down, _ = await run_test(pipeline, frames_to_send=[
        draft(), SleepFrame(SETTLE_S), EagerEndOfTurnCancelFrame(), SleepFrame(0.1),
        UserStoppedSpeakingFrame(), answer(), SleepFrame(1.0),
    ])

    # The real answer's identical first chunk was run again, not taken from the cancelled draft.
    assert tts.spoken == [FIRST_CHUNK, FIRST_CHUNK, "On Saturday we open at noon."]
    assert cache.stats.as_dict() == {"started": 1, "used": 0, "discarded": 1, "missed": 0}
    assert audio_of(down) == await espeak_alone(FIRST_CHUNK) + await espeak_alone("On Saturday we open at noon.")


# -- Cartesia ---------------------------------------------------------------------------------


@pytest.fixture
async def cartesia():
    async with CartesiaStandIn() as server:
        yield server


def prefetching_cartesia(server: CartesiaStandIn, cache: SpeculativeAudioCache) -> PrefetchingCartesiaTTSService:
    return PrefetchingCartesiaTTSService(
        speculative_audio=cache, url=server.url, api_key="test", append_trailing_space=True,
        settings=PrefetchingCartesiaTTSService.Settings(voice="standin-voice"),
    )


def transcripts(server: CartesiaStandIn) -> dict[str, list[str]]:
    return {cid: list(context.transcripts) for cid, context in server.contexts.items()}


def spoken_words(down) -> list[str]:
    return [f.text.strip() for f in down if isinstance(f, TTSTextFrame)]


async def test_cartesia_opens_the_drafts_context_before_the_turn_end_and_the_turn_continues_it(cartesia):
    cache = SpeculativeAudioCache()
    mark = TurnEndMark(lambda: transcripts(cartesia))
    pipeline = Pipeline([PrefetchingLLM([ANSWER], speculative_audio=cache), mark, SentenceChunker(),
                         prefetching_cartesia(cartesia, cache)])

    down, _ = await run_test(
        pipeline, frames_to_send=[draft(), SleepFrame(SETTLE_S), UserStoppedSpeakingFrame(), SleepFrame(1.0)]
    )

    [(draft_id, context)] = cartesia.contexts.items()
    assert draft_id.startswith("draft-")
    # At the turn end Cartesia had the first chunk; the rest and the flush continued that context.
    assert mark.at_turn_end == [{draft_id: [FIRST_CHUNK + " "]}]
    assert context.transcripts == [FIRST_CHUNK + " ", REST + " ", ""]
    assert context.done and not context.cancelled
    assert audio_of(down) == cartesia.audio(draft_id)
    assert spoken_words(down) == ANSWER.split()
    assert cache.stats.as_dict() == {"started": 1, "used": 1, "discarded": 0, "missed": 0}


async def test_cartesia_cancels_a_cancelled_drafts_context_and_speaks_the_answer_from_its_own(cartesia):
    cache = SpeculativeAudioCache()
    real = "Yes, we open at ten. On Saturday we open at noon."
    pipeline = Pipeline([PrefetchingLLM([ANSWER, real], speculative_audio=cache), SentenceChunker(),
                         prefetching_cartesia(cartesia, cache)])

    down, _ = await run_test(pipeline, frames_to_send=[
        draft(), SleepFrame(SETTLE_S), EagerEndOfTurnCancelFrame(), SleepFrame(0.1),
        UserStoppedSpeakingFrame(), answer(), SleepFrame(1.0),
    ])

    drafts = [c for cid, c in cartesia.contexts.items() if cid.startswith("draft-")]
    turns = [c for cid, c in cartesia.contexts.items() if not cid.startswith("draft-")]
    assert [c.cancelled for c in drafts] == [True]
    assert [c.transcripts for c in turns] == [[FIRST_CHUNK + " ", "On Saturday we open at noon. ", ""]]
    assert audio_of(down) == cartesia.audio(turns[0].context_id)  # none of the draft's audio
    assert cache.stats.as_dict() == {"started": 1, "used": 0, "discarded": 1, "missed": 0}


async def test_cartesia_interrupting_a_continued_draft_cancels_its_context(cartesia):
    cache = SpeculativeAudioCache()
    slow = CartesiaStandIn(chunk_interval_s=0.05)  # real-time-ish, so the answer is still coming
    async with slow:
        pipeline = Pipeline([PrefetchingLLM([ANSWER], speculative_audio=cache), SentenceChunker(),
                             prefetching_cartesia(slow, cache)])
        await run_test(pipeline, frames_to_send=[
            draft(), SleepFrame(SETTLE_S), UserStoppedSpeakingFrame(), SleepFrame(0.3),
            InterruptionFrame(), SleepFrame(0.3),
        ])
        [(draft_id, context)] = slow.contexts.items()
        assert draft_id.startswith("draft-") and context.cancelled
        assert cache.stats.used == 1


async def test_two_calls_at_once_each_continue_their_own_drafts_cartesia_context(cartesia):
    answers = {"a": ANSWER, "b": "Sure, a city bike is 15 dollars a day. We have six left."}

    async def call(name: str):
        cache = SpeculativeAudioCache()
        pipeline = Pipeline([PrefetchingLLM([answers[name]], speculative_audio=cache), SentenceChunker(),
                             prefetching_cartesia(cartesia, cache)])
        down, _ = await run_test(
            pipeline, frames_to_send=[draft(), SleepFrame(SETTLE_S), UserStoppedSpeakingFrame(), SleepFrame(1.0)]
        )
        return cache, down

    (cache_a, down_a), (cache_b, down_b) = await asyncio.gather(call("a"), call("b"))

    by_first = {c.transcripts[0]: c for c in cartesia.contexts.values()}
    assert set(by_first) == {FIRST_CHUNK + " ", "Sure, a city bike is 15 dollars a day. "}
    assert all(c.context_id.startswith("draft-") and c.done for c in by_first.values())
    assert audio_of(down_a) == cartesia.audio(by_first[FIRST_CHUNK + " "].context_id)
    assert audio_of(down_b) == cartesia.audio(by_first["Sure, a city bike is 15 dollars a day. "].context_id)
    assert spoken_words(down_b) == answers["b"].split()
    assert cache_a.stats.used == cache_b.stats.used == 1
