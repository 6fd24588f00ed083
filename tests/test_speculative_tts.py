"""Speculative TTS: a held draft's first chunk is synthesised before the turn is confirmed.

The pipeline under test is the real chain LLM (draft accounting mixin, pipecat's speculation
gate) -> SentenceChunker -> HibariTTSService, with a scripted in-process LLM and a counting voice.
"""

import threading

import numpy as np
from pipecat.frames.frames import (
    EagerEndOfTurnCancelFrame,
    InterruptionFrame,
    LLMContextFrame,
    TTSAudioRawFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.tests.utils import SleepFrame, run_test
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from frames.transcription import FinalTranscriptionFrame, PartialTranscriptionFrame
from processors.tts.hibari_tts import HibariTTSService
from processors.tts.sentence_chunker import SentenceChunker, SentenceFirstConfig
from processors.speculation.draft_accounting import DraftAccountingMixin
from processors.speculation.speculation_stats import SpeculationStats
from processors.speculation.speculative_user_turn_stop import SpeculativeUserTurnStopStrategy
from processors.speculation.speculative_tts import SpeculativeAudioCache
from tests.fakes.counting_voice import CountingVoice
from tests.fakes.scripted_llm_service import ScriptedLLMService

ANSWER = "Yes, we open at ten. On Sunday we stay closed all day."
FIRST_CHUNK = "Yes, we open at ten."
SETTLE_S = 0.5  # long enough for the draft to stream and its first chunk to be synthesised


class PrefetchingLLM(DraftAccountingMixin, ScriptedLLMService):
    """The scripted LLM with Brisk's mixin, as BriskLLMService mixes it into the real one."""


class Rig:
    def __init__(self, answers: list[str], chunking: SentenceFirstConfig | None = None):
        self.voice = CountingVoice()
        self.cache = SpeculativeAudioCache(chunking)
        self.llm = PrefetchingLLM(answers, speculative_audio=self.cache)
        self.tts = HibariTTSService(voice=self.voice, speculative_audio=self.cache)
        self.events: list[str] = []
        self.use_chunker(chunking)

    def use_chunker(self, chunking: SentenceFirstConfig | None, *, upstream: tuple = ()):
        self.pipeline = Pipeline([*upstream, self.llm, TurnEndMark(self), SentenceChunker(chunking), self.tts])

    async def run(self, *frames):
        down, _ = await run_test(self.pipeline, frames_to_send=list(frames))
        return down

    def audio_levels(self, down) -> list[int]:
        """The level of every pushed audio frame (the counting voice's mark of its text)."""
        return [int(np.frombuffer(f.audio, "<i2")[0]) for f in down if isinstance(f, TTSAudioRawFrame)]


class TurnEndMark(FrameProcessor):
    """Right after the LLM: notes how many syntheses had started when the turn end came through,
    and what the cache held when a cancel or an interruption came through.

    System frames are handled ahead of the data frames queued behind them, so nothing the gate
    released with the turn end has reached the TTS yet.
    """

    def __init__(self, rig: Rig):
        super().__init__()
        self._rig = rig

    async def process_frame(self, frame, direction):
        await super().process_frame(frame, direction)
        if isinstance(frame, UserStoppedSpeakingFrame):
            self._rig.events.append(f"confirmed after {len(self._rig.voice.synthesised)} syntheses")
        elif isinstance(frame, (EagerEndOfTurnCancelFrame, InterruptionFrame)):
            self._rig.events.append(f"{type(frame).__name__}, cached: {self._rig.cache.pending_text}")
        await self.push_frame(frame, direction)


def draft() -> LLMContextFrame:
    return LLMContextFrame(context=LLMContext(), speculation=True)


def answer() -> LLMContextFrame:
    return LLMContextFrame(context=LLMContext(), speculation=False)


async def test_a_confirmed_drafts_first_chunk_is_synthesised_once_before_the_turn_end_and_spoken():
    rig = Rig([ANSWER])
    loop_thread = threading.get_ident()

    down = await rig.run(draft(), SleepFrame(SETTLE_S), UserStoppedSpeakingFrame(), SleepFrame(SETTLE_S))

    # Synthesised while held, off the event loop; only the rest of the answer after the turn end.
    assert rig.voice.synthesised[0] == FIRST_CHUNK
    assert rig.events == ["confirmed after 1 syntheses"]
    assert rig.voice.synthesised == [FIRST_CHUNK, "On Sunday we stay closed all day."]
    assert loop_thread not in rig.voice.threads
    # The cached audio was spoken, in order, ahead of the live rest.
    levels = rig.audio_levels(down)
    first, rest = rig.voice.level_of(FIRST_CHUNK), rig.voice.level_of("On Sunday we stay closed all day.")
    assert levels and set(levels) == {first, rest}
    assert levels.index(rest) > max(i for i, level in enumerate(levels) if level == first)
    assert rig.cache.stats.as_dict() == {"started": 1, "used": 1, "discarded": 0, "missed": 0}


async def test_a_turn_confirmed_while_the_prefetch_synthesises_waits_for_it_instead_of_starting_again():
    rig = Rig([ANSWER])
    gate = rig.voice.hold(FIRST_CHUNK)
    in_flight_when_taken: list[bool] = []
    take = rig.cache.take

    def take_then_let_synthesis_finish(text):
        task = take(text)
        if task is not None:
            in_flight_when_taken.append(not task.done())
        gate.set()
        return task

    rig.cache.take = take_then_let_synthesis_finish
    try:
        down = await rig.run(draft(), SleepFrame(0.2), UserStoppedSpeakingFrame(), SleepFrame(SETTLE_S))
    finally:
        gate.set()

    assert in_flight_when_taken == [True]
    assert rig.voice.synthesised.count(FIRST_CHUNK) == 1
    assert rig.voice.level_of(FIRST_CHUNK) in rig.audio_levels(down)
    assert rig.cache.stats.used == 1


async def test_a_cancelled_drafts_prefetched_audio_is_never_pushed_even_for_the_same_first_chunk():
    real = "Yes, we open at ten. On Saturday we open at noon."
    rig = Rig([ANSWER, real])

    down = await rig.run(
        draft(),
        SleepFrame(SETTLE_S),
        EagerEndOfTurnCancelFrame(),
        SleepFrame(0.1),
        UserStoppedSpeakingFrame(),
        answer(),
        SleepFrame(SETTLE_S),
    )

    assert rig.events[0] == "EagerEndOfTurnCancelFrame, cached: None"
    # The real answer's identical first chunk was synthesised again, not taken from the draft.
    assert rig.voice.synthesised == [FIRST_CHUNK, FIRST_CHUNK, "On Saturday we open at noon."]
    assert rig.voice.level_of("On Sunday we stay closed all day.") not in rig.audio_levels(down)
    assert rig.cache.stats.as_dict() == {"started": 1, "used": 0, "discarded": 1, "missed": 0}
    assert rig.cache.pending_text is None


async def test_an_interruption_drops_the_prefetched_audio():
    rig = Rig([ANSWER, ANSWER])

    down = await rig.run(
        draft(),
        SleepFrame(SETTLE_S),
        InterruptionFrame(),
        SleepFrame(0.1),
        UserStoppedSpeakingFrame(),
        answer(),
        SleepFrame(SETTLE_S),
    )

    assert rig.events[0] == "InterruptionFrame, cached: None"
    assert rig.cache.stats.discarded == 1 and rig.cache.stats.used == 0
    assert rig.voice.synthesised.count(FIRST_CHUNK) == 2
    assert rig.audio_levels(down)  # the real answer was spoken, synthesised live


async def test_a_live_cut_that_differs_from_the_prefetched_chunk_is_a_miss_spoken_from_fresh_audio():
    rig = Rig(["Yes, we open at ten, and we close at six. See you soon."])
    # The cache cuts at the first clause, the live chunker feeding the TTS only at the sentence end.
    rig.use_chunker(SentenceFirstConfig(min_first_words=6, first_chunk_word_cap=20))

    down = await rig.run(draft(), SleepFrame(SETTLE_S), UserStoppedSpeakingFrame(), SleepFrame(SETTLE_S))

    assert rig.voice.synthesised[0] == "Yes, we open at ten,"
    assert rig.cache.stats.missed == 1 and rig.cache.stats.used == 0
    assert rig.voice.level_of("Yes, we open at ten,") not in rig.audio_levels(down)
    assert rig.voice.level_of("Yes, we open at ten, and we close at six.") in rig.audio_levels(down)


async def test_an_answer_that_was_never_held_is_not_prefetched():
    rig = Rig([ANSWER])

    down = await rig.run(UserStoppedSpeakingFrame(), answer(), SleepFrame(SETTLE_S))

    assert rig.cache.stats.started == 0
    assert rig.voice.synthesised == [FIRST_CHUNK, "On Sunday we stay closed all day."]
    assert rig.audio_levels(down)


async def test_a_draft_committed_by_the_speculative_stop_strategy_is_spoken_from_prefetched_audio():
    rig = Rig([ANSWER])
    stats = SpeculationStats()
    strategy = SpeculativeUserTurnStopStrategy(stats=stats, user_speech_timeout=0.3)
    user = LLMContextAggregatorPair(
        LLMContext(), user_params=LLMUserAggregatorParams(user_turn_strategies=UserTurnStrategies(stop=[strategy]))
    ).user()
    rig.use_chunker(None, upstream=(user,))
    heard = dict(user_id="", timestamp="", utterance_id=1)

    down = await rig.run(
        VADUserStartedSpeakingFrame(),
        SleepFrame(0.05),
        PartialTranscriptionFrame(text="what time do you open on saturday", audio_end_s=0.0, **heard),
        SleepFrame(0.05),
        PartialTranscriptionFrame(text="what time do you open on saturday", audio_end_s=0.0, **heard),
        SleepFrame(SETTLE_S),
        VADUserStoppedSpeakingFrame(stop_secs=0.3),
        FinalTranscriptionFrame(text="What time do you open on Saturday?", **heard),
        SleepFrame(1.0),
    )

    assert (stats.as_dict()["committed"], rig.cache.stats.used) == (1, 1)
    # The user's turn start interrupted (nothing cached yet); the draft was synthesised before the end.
    assert rig.events == ["InterruptionFrame, cached: None", "confirmed after 1 syntheses"]
    assert rig.voice.synthesised.count(FIRST_CHUNK) == 1
    assert rig.voice.level_of(FIRST_CHUNK) in rig.audio_levels(down)
