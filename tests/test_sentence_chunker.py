"""Sentence-first chunking: where `SentenceFirstAggregator` cuts streamed LLM text, and hibari
speaking the first clause while the LLM is still writing the sentence."""

import asyncio
import re

import pytest

from pipecat.frames.frames import (
    AggregatedTextFrame,
    DataFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSAudioRawFrame,
    TTSTextFrame,
)
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_text_processor import LLMTextProcessor
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.tests.utils import run_test
from processors.tts.hibari_tts import HibariTTSService, load_voice
from processors.tts.sentence_chunker import SentenceChunker, SentenceFirstAggregator, SentenceFirstConfig

# -- streaming like an LLM ----------------------------------------------------------------------

# GPT-2-style pre-tokens: a leading space joins the word, digits come in runs of up to three,
# punctuation runs stand alone.
_PRE_TOKEN = re.compile(r"'(?:s|t|re|ve|m|ll|d)\b| ?[^\W\d_]+| ?\d{1,3}| ?[^\s\w]+|\s+(?!\S)|\s+")


def llm_tokens(text: str) -> list[str]:
    """Split text the way a BPE LLM streams it: " $", "4", ".", "99"; " mec", "han", "ic"."""
    tokens = []
    for match in _PRE_TOKEN.finditer(text):
        token = match.group()
        word = token.lstrip(" ")
        if word[:1].isalpha() and len(word) > 4:
            pieces = [word[k : k + 3] for k in range(0, len(word), 3)]
            pieces[0] = token[: len(token) - len(word)] + pieces[0]
            tokens.extend(pieces)
        else:
            tokens.append(token)
    assert "".join(tokens) == text
    return tokens


def characters(text: str) -> list[str]:
    return list(text)


def whole(text: str) -> list[str]:
    return [text]


async def chunk(tokens, config: SentenceFirstConfig | None = None) -> list[str]:
    """Stream tokens through a fresh aggregator, then end the answer, as LLMTextProcessor does."""
    aggregator = SentenceFirstAggregator(config)
    chunks = []
    for token in tokens:
        chunks += [a.text async for a in aggregator.aggregate(token)]
    tail = await aggregator.flush()
    return chunks + ([tail.text] if tail else [])


# -- the table ------------------------------------------------------------------------------------

ROWS = [
    # The first chunk ends at the first clause boundary holding >= 3 words.
    ("Yes, the shop is open today, from nine to six.",
     ["Yes, the shop is open today,", "from nine to six."]),
    ("The tune-up costs 45 dollars; it takes one day.",
     ["The tune-up costs 45 dollars;", "it takes one day."]),
    ("Here is the answer: we close at six.", ["Here is the answer:", "we close at six."]),
    ("The repair is quick — about twenty minutes.",
     ["The repair is quick —", "about twenty minutes."]),
    ("Bring a photo ID—a passport works too.", ["Bring a photo ID—", "a passport works too."]),
    ("We can fix it today - just bring it in before noon.",
     ["We can fix it today -", "just bring it in before noon."]),
    ("Don't worry, it's an easy fix, and it's cheap.",
     ["Don't worry, it's an easy fix,", "and it's cheap."]),
    ("Well, yes, we can fix that today.", ["Well, yes, we can fix that today."]),
    # A sentence end always qualifies, however short.
    ("Sure. The shop opens at nine.", ["Sure.", "The shop opens at nine."]),
    ("No. We are closed on Sunday.", ["No.", "We are closed on Sunday."]),
    ("Really?! That's great news.", ["Really?!", "That's great news."]),
    # Later chunks keep their clauses: whole sentences.
    ("Sure, I can help with that. First, bring the bike in, and we will look at it.",
     ["Sure, I can help with that.", "First, bring the bike in, and we will look at it."]),
    ("The shop opens at nine, closes at six, and is closed on Sunday. "
     "Rentals cost 20 dollars, paid in advance.",
     ["The shop opens at nine,", "closes at six, and is closed on Sunday.",
      "Rentals cost 20 dollars, paid in advance."]),
    # No boundary: the word cap, at a gap that strands no function word, number or abbreviation.
    ("The shop on Harbor Lane fixes flat tyres while you wait every single day",
     ["The shop on Harbor Lane fixes flat tyres", "while you wait every single day"]),
    ("City bikes and electric bikes can both be rented by the day at the front desk.",
     ["City bikes and electric bikes can both be rented", "by the day at the front desk."]),
    ("Flat tyre repairs at our shop take about 15 minutes while you wait.",
     ["Flat tyre repairs at our shop take about 15 minutes", "while you wait."]),
    ("The codes are 11 22 33 44 55 66 77 88 99 and 12 too",
     ["The codes are 11 22 33 44 55 66 77 88 99", "and 12 too"]),
    ('He said "we will be glad to help you with that repair today" and smiled.',
     ['He said "we will be glad to help you with that repair today"', "and smiled."]),
    # Abbreviations.
    ("Dr. Smith, our mechanic, can see you today.", ["Dr. Smith, our mechanic,", "can see you today."]),
    ("We open at 10 a.m. Please bring your receipt.",
     ["We open at 10 a.m.", "Please bring your receipt."]),
    ("The library opens at 10 a.m.", ["The library opens at 10 a.m."]),
    ("We open at 10 a.m. and close at 6 p.m. on weekdays.",
     ["We open at 10 a.m. and close at 6 p.m. on weekdays."]),
    ("Many cities, e.g. Paris and Rome, have bike lanes.",
     ["Many cities, e.g. Paris and Rome,", "have bike lanes."]),
    ("We ship to the U.S. and Canada.", ["We ship to the U.S. and Canada."]),
    ("It was made in the U.S. The frame is steel.", ["It was made in the U.S.", "The frame is steel."]),
    ("Mr. and Mrs. Lee booked a repair.", ["Mr. and Mrs. Lee booked a repair."]),
    ("Ask for St. John at the desk.", ["Ask for St. John at the desk."]),
    ("Helmets, locks, lights, etc. are in aisle two.",
     ["Helmets, locks, lights,", "etc. are in aisle two."]),
    ("We sell helmets, locks, etc. Ask us anything.",
     ["We sell helmets,", "locks, etc.", "Ask us anything."]),
    ("J. R. R. Tolkien wrote it.", ["J. R. R. Tolkien wrote it."]),
    ("See item No. 5 on the list.", ["See item No. 5 on the list."]),
    ("The answer is no. We are closed.", ["The answer is no.", "We are closed."]),
    # Decimals, prices, times, thousands, versions.
    ("A tune-up costs $45.50, and it takes a day.", ["A tune-up costs $45.50,", "and it takes a day."]),
    ("It costs $4.99. That includes tax.", ["It costs $4.99.", "That includes tax."]),
    ("The ratio is 3.5 to 1.", ["The ratio is 3.5 to 1."]),
    ("We open at 10:30 on Saturday.", ["We open at 10:30 on Saturday."]),
    ("Opening time: 10:30, closing time: 4:15.", ["Opening time: 10:30,", "closing time: 4:15."]),
    ("We sold 1,250 bikes last year.", ["We sold 1,250 bikes last year."]),
    ("Version 2.0.1 is out.", ["Version 2.0.1 is out."]),
    ("Our well-known 3-5 day service is popular.", ["Our well-known 3-5 day service is popular."]),
    # URLs and e-mail addresses.
    ("Visit https://harbor-lane.example/rentals?day=sat for details.",
     ["Visit https://harbor-lane.example/rentals?day=sat for details."]),
    ("Email help@harbor.example. We reply within a day.",
     ["Email help@harbor.example.", "We reply within a day."]),
    ("Our site is www.harbor.example, and it lists prices.",
     ["Our site is www.harbor.example,", "and it lists prices."]),
    # Ellipses.
    ("Well... let me check that for you.", ["Well... let me check that for you."]),
    ("Hmm… That part is out of stock.", ["Hmm…", "That part is out of stock."]),
    ("Let me see... The part arrives Monday.", ["Let me see...", "The part arrives Monday."]),
    # Quoted text.
    ('The sign says "Back in 5 min. Ring the bell." so please wait.',
     ['The sign says "Back in 5 min. Ring the bell."', "so please wait."]),
    ('"Is it open?" she asked. Yes, it is.', ['"Is it open?" she asked.', "Yes, it is."]),
    ("He said, “We close at six. Come early.” Then he left.",
     ["He said, “We close at six. Come early.”", "Then he left."]),
    # CJK punctuation; a CJK character counts half a word.
    ("好的，我们明天早上九点开门，欢迎光临。", ["好的，我们明天早上九点开门，", "欢迎光临。"]),
    ("可以！自行车租金是每天二十美元。需要带身份证吗？需要。",
     ["可以！", "自行车租金是每天二十美元。", "需要带身份证吗？", "需要。"]),
    ("はい、営業しています。午前九時からです。", ["はい、営業しています。", "午前九時からです。"]),
    ("营业时间：周一到周五；周日休息。", ["营业时间：周一到周五；", "周日休息。"]),
    ("他说：「我们六点关门。请早点来。」然后他走了。", ["他说：「我们六点关门。请早点来。」", "然后他走了。"]),
    ("我们的商店每天早上九点开门晚上六点关门", ["我们的商店每天早上九点开门晚上六", "点关门"]),
    # Line breaks end a chunk.
    ("Hours:\nMonday to Friday, 9 to 6\nSaturday, 10 to 4",
     ["Hours:", "Monday to Friday, 9 to 6", "Saturday, 10 to 4"]),
]

SHORT = SentenceFirstConfig(max_chunk_chars=60)
CONFIG_ROWS = [
    # max_chunk_chars: the last clause boundary inside the limit...
    (SHORT, "Yes. The shop offers repairs, rentals and sales, and it also runs weekend group "
     "rides along the harbor.",
     ["Yes.", "The shop offers repairs, rentals and sales,",
      "and it also runs weekend group rides along the harbor."]),
    # ... else the last word gap that strands nothing ...
    (SHORT, "Yes. The shop offers repairs rentals and sales and it also runs weekend group rides "
     "along the harbor every Sunday morning.",
     ["Yes.", "The shop offers repairs rentals and sales and it also runs",
      "weekend group rides along the harbor every Sunday morning."]),
    # ... a sentence end inside quotes before a word gap inside them ...
    (SHORT, 'Sure. The sign says "Back soon. We are out delivering bikes to customers around the '
     'harbor and will return" and that is all.',
     ["Sure.", 'The sign says "Back soon.',
      "We are out delivering bikes to customers around the harbor",
      'and will return" and that is all.']),
    # ... and a hard cut when there is no gap at all.
    (SHORT, "Sure. https://harbor-lane.example/a-very-long-path/that-keeps-going/and-going/forever"
     "/and-ever.html is the page.",
     ["Sure.", "https://harbor-lane.example/a-very-long-path/that-keeps-goin",
      "g/and-going/forever/and-ever.html is the page."]),
    (SentenceFirstConfig(min_first_words=1), "Yes, the shop is open today, from nine to six.",
     ["Yes,", "the shop is open today, from nine to six."]),
    (SentenceFirstConfig(min_first_words=2, first_chunk_word_cap=4),
     "Our electric bikes can be rented for a whole day",
     ["Our electric bikes can be rented", "for a whole day"]),
]


def _row_id(text: str) -> str:
    return text[:40]


@pytest.mark.parametrize("feed", [llm_tokens, characters, whole])
@pytest.mark.parametrize(("text", "expected"), ROWS, ids=[_row_id(t) for t, _ in ROWS])
async def test_text_is_cut_only_at_speakable_boundaries_however_it_is_streamed(text, expected, feed):
    assert await chunk(feed(text)) == expected


@pytest.mark.parametrize("feed", [llm_tokens, characters, whole])
@pytest.mark.parametrize(
    ("config", "text", "expected"), CONFIG_ROWS, ids=[_row_id(t) for _, t, _ in CONFIG_ROWS]
)
async def test_limits_in_the_config_move_the_cuts(config, text, expected, feed):
    chunks = await chunk(feed(text), config)
    assert chunks == expected
    assert max(map(len, chunks)) <= config.max_chunk_chars


def test_the_table_has_forty_tricky_rows_streamed_with_split_words_and_numbers():
    assert len(ROWS) + len(CONFIG_ROWS) >= 40
    tokens = [t for text, _ in ROWS for t in llm_tokens(text)]
    assert {" mec", "han", "ic"} <= set(tokens)  # "mechanic" arrives in three pieces
    assert {" $", "4", ".", "99", " 10", ":", "30"} <= set(tokens)


@pytest.mark.parametrize(
    "tokens",
    [
        ["We", " open", " at", " 10", ":", "30", " on", " Saturday", "."],
        ["It", " costs", " $4", ".", "99", " plus", " tax", "."],
        ["Bring", " ID", ",", " e", ".g", ".", " a", " passport", "."],
        ["We", " open", " at", " 10", " a", ".m", ".", " and", " close", " at", " six", "."],
        ["Visit", " www", ".har", "bor", ".", "example", " today", "."],
        ["Well", ".", ".", ".", " let", " me", " see", "."],
    ],
    ids=["time", "price", "e.g.", "a.m.", "url", "ellipsis"],
)
async def test_a_number_or_abbreviation_split_across_tokens_is_never_cut(tokens):
    aggregator = SentenceFirstAggregator()
    for token in tokens:
        assert [a.text async for a in aggregator.aggregate(token)] == []
    tail = await aggregator.flush()
    assert tail.text == "".join(tokens)


async def test_a_boundary_is_cut_when_the_next_token_arrives_and_not_before():
    tokens = ["Yes", ",", " the", " shop", " is", " open", " today", ",", " from", " nine",
              " to", " six", ".", " Rent", "als", " cost", " 20", " dollars", "."]
    aggregator = SentenceFirstAggregator()
    emitted_at = {}
    for index, token in enumerate(tokens):
        async for aggregation in aggregator.aggregate(token):
            emitted_at[aggregation.text] = index
    # One token of lookahead: the token after the boundary decides it.
    assert emitted_at == {
        "Yes, the shop is open today,": tokens.index(" from"),
        "from nine to six.": tokens.index(" Rent"),
    }
    assert aggregator.text.text == "Rentals cost 20 dollars."


async def test_every_answer_starts_clause_first_again():
    aggregator = SentenceFirstAggregator()
    answers = ["Sure, I can help. The shop opens at nine, and closes at six.",
               "Yes, the shop is open today, from nine to six."]
    chunks = []
    for answer in answers:
        for token in llm_tokens(answer):
            chunks += [a.text async for a in aggregator.aggregate(token)]
        chunks.append((await aggregator.flush()).text)
    assert chunks == ["Sure, I can help.", "The shop opens at nine, and closes at six.",
                      "Yes, the shop is open today,", "from nine to six."]


async def test_an_interruption_drops_the_unspoken_text_and_restarts_clause_first():
    aggregator = SentenceFirstAggregator()
    for token in llm_tokens("Sure. The shop opens at nine in the"):
        _ = [a async for a in aggregator.aggregate(token)]
    await aggregator.handle_interruption()
    assert await aggregator.flush() is None  # the LLM's end of response after the interruption
    chunks = []
    for token in llm_tokens("Yes, the shop is open today, from nine to six."):
        chunks += [a.text async for a in aggregator.aggregate(token)]
    assert chunks == ["Yes, the shop is open today,"]


@pytest.mark.parametrize(
    "settings",
    [{"min_first_words": 0}, {"first_chunk_word_cap": 2}, {"cap_slack_words": -1},
     {"max_chunk_chars": 20}],
)
def test_config_refuses_limits_that_cannot_work(settings):
    with pytest.raises(ValueError):
        SentenceFirstConfig(**settings)


# -- in a pipeline --------------------------------------------------------------------------------


class HoldFrameUntil(FrameProcessor):
    """Passes frames on, holding `frame` until `released` is set or `timeout_s` passes.

    `released_in_time` says which happened, so a test can tell whether something downstream
    happened while the rest of the stream was still held back.
    """

    def __init__(self, frame: Frame, released: asyncio.Event, timeout_s: float):
        super().__init__()
        self._held = frame
        self._released = released
        self._timeout_s = timeout_s
        self.released_in_time: bool | None = None

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if frame is self._held:
            try:
                await asyncio.wait_for(self._released.wait(), self._timeout_s)
                self.released_in_time = True
            except TimeoutError:
                self.released_in_time = False
        await self.push_frame(frame, direction)


class SetOnPush(BaseObserver):
    """Sets `event` when `source` pushes a frame of type `frame_type`."""

    def __init__(self, source: FrameProcessor, frame_type: type, event: asyncio.Event):
        super().__init__()
        self._source, self._frame_type, self._event = source, frame_type, event

    async def on_push_frame(self, data: FramePushed):
        if data.source is self._source and isinstance(data.frame, self._frame_type):
            self._event.set()


def answer_frames(text: str) -> list[Frame]:
    return [LLMFullResponseStartFrame(), *(LLMTextFrame(t) for t in llm_tokens(text)),
            LLMFullResponseEndFrame()]


def token_frame(frames: list[Frame], after: str) -> LLMTextFrame:
    """The LLM token frame that follows the token `after`."""
    texts = [getattr(f, "text", None) for f in frames]
    return frames[texts.index(after) + 1]


def spoken_units(frames: list[Frame]) -> list[tuple[str, int, str]]:
    """(text announced, audio frames after it, text reported spoken) for each TTS request."""
    units = []
    for frame in frames:
        if isinstance(frame, TTSTextFrame):
            units[-1][2] = frame.text
        elif isinstance(frame, AggregatedTextFrame) and frame.will_be_spoken:
            units.append([frame.text, 0, None])
        elif isinstance(frame, TTSAudioRawFrame):
            units[-1][1] += 1
    return [tuple(unit) for unit in units]


ANSWER = "Yes, the shop is open today, from nine to six. Rentals cost 20 dollars a day."
ANSWER_CHUNKS = ["Yes, the shop is open today,", "from nine to six.", "Rentals cost 20 dollars a day."]


async def test_hibari_speaks_each_chunk_as_it_is_cut():
    tts = HibariTTSService(voice=load_voice())
    down, _ = await run_test(Pipeline([SentenceChunker(), tts]), frames_to_send=answer_frames(ANSWER))
    units = spoken_units(down)
    assert [text for text, _, _ in units] == ANSWER_CHUNKS
    assert [spoken for _, _, spoken in units] == ANSWER_CHUNKS
    assert all(audio_frames > 0 for _, audio_frames, _ in units)
    assert isinstance(down[-1], LLMFullResponseEndFrame)


@pytest.mark.parametrize(
    ("chunkers", "timeout_s", "audio_before_sentence_end"),
    [(lambda: [SentenceChunker()], 60.0, True), (lambda: [], 1.5, False)],
    ids=["sentence-first", "pipecat-default"],
)
async def test_hibari_speaks_the_first_clause_before_the_llm_ends_the_sentence(
    chunkers, timeout_s, audio_before_sentence_end
):
    tts = HibariTTSService(voice=load_voice())
    frames = answer_frames(ANSWER)
    first_audio = asyncio.Event()
    # The LLM's "." after "six" waits for the TTS's first audio.
    hold = HoldFrameUntil(token_frame(frames, after=" six"), first_audio, timeout_s)
    down, _ = await run_test(
        Pipeline([hold, *chunkers(), tts]),
        frames_to_send=frames,
        observers=[SetOnPush(tts, TTSAudioRawFrame, first_audio)],
    )
    assert hold.released_in_time is audio_before_sentence_end
    assert any(isinstance(f, TTSAudioRawFrame) for f in down)


class AnswerCue(DataFrame):
    """Starts a `FrameScript`."""


class FrameScript(FrameProcessor):
    """Stands in for an LLM: on an `AnswerCue`, pushes its steps downstream in order.

    A step is a frame to push or an `asyncio.Event` to wait for, so a test can place a frame
    (an interruption, say) exactly after something happened downstream.
    """

    def __init__(self, steps: list[Frame | asyncio.Event]):
        super().__init__()
        self._steps = steps

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if not isinstance(frame, AnswerCue):
            await self.push_frame(frame, direction)
            return
        for step in self._steps:
            if isinstance(step, asyncio.Event):
                await step.wait()
            else:
                await self.push_frame(step)


# Holds a boundary (cut as soon as the tokens are handled) and a tail (cut by the end's flush).
STALE = "Yes. The shop opens at nine in the"


@pytest.mark.parametrize(
    ("make_chunker", "stale_text_spoken"),
    [(SentenceChunker, False),
     (lambda: LLMTextProcessor(text_aggregator=SentenceFirstAggregator()), True)],
    ids=["sentence-chunker", "plain-llm-text-processor"],
)
async def test_text_of_an_interrupted_answer_is_never_passed_on(make_chunker, stale_text_spoken):
    chunker = make_chunker()
    started = asyncio.Event()
    # Once the stale answer has started, its tokens and at once an interruption: the
    # interruption overtakes the tokens still queued in the chunker. The cancelled LLM still
    # ends the stale answer; then the next answer comes.
    llm = FrameScript([
        LLMFullResponseStartFrame(),
        started,
        *(LLMTextFrame(t) for t in llm_tokens(STALE)),
        InterruptionFrame(),
        LLMFullResponseEndFrame(),
        *answer_frames(ANSWER),
    ])
    down, _ = await run_test(
        Pipeline([llm, chunker]),
        frames_to_send=[AnswerCue()],
        observers=[SetOnPush(chunker, LLMFullResponseStartFrame, started)],
    )
    chunks = [f.text for f in down if isinstance(f, AggregatedTextFrame)]
    stale = ["Yes.", "The shop opens at nine in the"] if stale_text_spoken else []
    assert chunks == stale + ANSWER_CHUNKS
