"""Sentence-first chunking of streamed LLM text for TTS: every answer's first clause goes out early.

Consumes: `LLMTextFrame`s of an answer (`SentenceChunker`, pipecat's `LLMTextProcessor` running a
`SentenceFirstAggregator`, placed between the LLM and the TTS service).
Emits: one `AggregatedTextFrame` (type SENTENCE, stripped) per chunk, which the TTS speaks as one
unit, and the answer's tail at `LLMFullResponseEndFrame`; nothing for an interrupted answer.
  - The first chunk of an answer ends at its first clause boundary (, ; : — and CJK ，；：) that
    holds `min_first_words` words, or at its first sentence end, or, when neither comes, at a
    word gap after `first_chunk_word_cap` words.
  - Later chunks end at sentence ends (. ! ? … 。！？, or a line break).
  - A chunk that reaches `max_chunk_chars` is cut at the best boundary inside it.
  - Never inside abbreviations (Dr., e.g., U.S. before a lowercase word), decimals and prices
    (3.5, $4.99), times (10:30), thousands (1,250), URLs and e-mail addresses, ellipses, or
    quoted text.
Measures: nothing itself; the latency observer's `tts_first_text` marks the first chunk reaching
the TTS, so `tts_first_text - llm_first_token` is the time spent waiting for it.

Lookahead: a boundary is decided only by the text after it ("$4" "." waits for "99"; "10 a.m."
waits for the next word's first letter: lowercase continues the sentence), so a chunk leaves with
the token after its boundary token, one LLM inter-token interval (~10-40 ms) after the punctuation.
Every decision depends only on the text, never on how it was split into tokens, so streamed and
whole text chunk identically.
"""

from collections.abc import AsyncIterator
from dataclasses import dataclass
from enum import Enum, auto

from pipecat.frames.frames import (
    Frame,
    InterruptionFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
)
from pipecat.processors.aggregators.llm_text_processor import LLMTextProcessor
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.utils.string import UNAMBIGUOUS_SENTENCE_ENDING_PUNCTUATION
from pipecat.utils.text.base_text_aggregator import Aggregation, BaseTextAggregator, TextType


@dataclass(frozen=True)
class SentenceFirstConfig:
    """Where `SentenceFirstAggregator` cuts. Counts are words; a CJK character counts half a word.

    Parameters:
        min_first_words: A clause boundary ends an answer's first chunk only once the chunk holds
            this many words, so it is a speakable phrase ("Yes," alone is not). A sentence end
            always does ("Sure.").
        first_chunk_word_cap: With no boundary, the first chunk ends at the first word gap after
            this many words that does not strand an article, preposition, conjunction, number or
            abbreviation ("... for the | whole" is skipped for "... rented | by the day").
        cap_slack_words: This many words past the cap, any gap outside quotes will do.
        max_chunk_chars: No chunk is longer: one that gets here is cut at its last clause
            boundary, else inside quotes, else at a word gap, else here.
    """

    min_first_words: int = 3
    first_chunk_word_cap: int = 8
    cap_slack_words: int = 4
    max_chunk_chars: int = 250

    def __post_init__(self):
        if self.min_first_words < 1:
            raise ValueError("min_first_words must be at least 1")
        if self.first_chunk_word_cap < self.min_first_words:
            raise ValueError("first_chunk_word_cap must be at least min_first_words")
        if self.cap_slack_words < 0:
            raise ValueError("cap_slack_words must not be negative")
        if self.max_chunk_chars < 40:
            raise ValueError("max_chunk_chars must be at least 40")


class _Kind(Enum):
    SENTENCE = auto()
    CLAUSE = auto()


# A boundary whose lookahead has not arrived yet: nothing at or after it can be decided.
_UNDECIDED = object()

# Text this far past max_chunk_chars settles every boundary before it (the lookahead of a boundary
# is its closing quotes, whitespace and one more character), so a forced cut sees what a cut on
# the whole text would.
_FORCE_MARGIN = 16

_LATIN_SENTENCE_MARKS = frozenset(".!?…")
_LATIN_CLAUSE_MARKS = frozenset(",;:")
_WIDE_CLAUSE_MARKS = frozenset("，；：؛")
# pipecat's list of unambiguous marks counts the semicolons as sentence ends; here they are clauses.
_WIDE_SENTENCE_MARKS = UNAMBIGUOUS_SENTENCE_ENDING_PUNCTUATION - _WIDE_CLAUSE_MARKS - {"၊"}
_ALL_MARKS = _LATIN_SENTENCE_MARKS | _WIDE_SENTENCE_MARKS
_OPENING_QUOTES = frozenset("“«「『")
_CLOSING_QUOTES = frozenset("”»」』")
# Quotes and brackets that close right after a mark belong to the chunk it ends.
_CLOSERS = frozenset("\"'”’»」』)]}）】")
# Where a straight double quote opens rather than closes.
_BEFORE_OPENING_QUOTE = frozenset("([{—:")

# Words before a period that never end a sentence: titles, "e.g.", "vs." ...
_NEVER_FINAL = frozenset(
    "mr mrs ms mx dr prof rev hon st mt ft gen col capt lt sgt gov sen rep pres "
    "e.g i.e vs cf viz approx dept".split()
)
# Abbreviations before a number: "No. 5", "p. 12"; "no." before a word is the word "no".
_BEFORE_NUMBER = frozenset("no nos nr vol ch pp pg art sec tel ph ext op fig".split())
# Words a capped first chunk must not end on: they lean on the word after them.
_CLINGING = frozenset(
    "a an the to of in on at by for from with into onto about as and or but nor if than that "
    "my your our their his her its this these those is are was were be been will would can "
    "could should shall may might must not very".split()
)


def _is_cjk(ch: str) -> bool:
    """Han and kana: written without spaces, so each character is a word position."""
    code = ord(ch)
    return (
        0x3040 <= code <= 0x30FF  # hiragana, katakana
        or 0x3400 <= code <= 0x4DBF
        or 0x4E00 <= code <= 0x9FFF
        or 0xF900 <= code <= 0xFAFF
        or 0x20000 <= code <= 0x2FA1F
    )


def _quote_step(text: str, i: int, depth: int) -> int:
    """Quote depth after text[i]; a straight quote opens after a space, else it closes."""
    ch = text[i]
    if ch == "\n":
        return 0  # quotes in LLM output do not span lines; an unclosed one must not hold the rest
    if ch in _OPENING_QUOTES:
        return depth + 1
    if ch in _CLOSING_QUOTES:
        return max(0, depth - 1)
    if ch == '"':
        prev = text[i - 1] if i else " "
        if prev.isspace() or prev in _BEFORE_OPENING_QUOTE:
            return depth + 1
        return max(0, depth - 1)
    return depth


def _absorb_closers(text: str, j: int, depth: int) -> tuple[int, int]:
    while j < len(text) and text[j] in _CLOSERS:
        depth = _quote_step(text, j, depth)
        j += 1
    return j, depth


def _word_before(text: str, i: int) -> str:
    """The word ending at text[i] (exclusive), lowercased, without opening quotes or brackets."""
    start = i
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    return text[start:i].lstrip("\"'“‘«([{$").lower()


def _is_abbreviation(text: str, i: int, next_char: str) -> bool:
    """Whether the period at text[i] closes an abbreviation rather than a sentence."""
    word = _word_before(text, i)
    if word in _NEVER_FINAL:
        return True
    if word in _BEFORE_NUMBER and next_char.isdigit():
        return True
    # Initials ("J. R. R. Tolkien").
    return len(word) == 1 and word.isalpha()


def _boundary_at(text: str, i: int, depth: int):
    """Judge text[i] as a boundary.

    Returns None (not one), _UNDECIDED (the text after it has not arrived), or
    (kind, end, depth) with the cut index after any closing quotes and the quote depth there.
    """
    ch = text[i]
    n = len(text)
    if ch in _WIDE_SENTENCE_MARKS or ch in _WIDE_CLAUSE_MARKS:
        # CJK text needs no space after a mark; wait one character for closing quotes or a "！！".
        j, after = _absorb_closers(text, i + 1, depth)
        if j == n:
            return _UNDECIDED
        if text[j] in _ALL_MARKS:
            return None
        return (_Kind.SENTENCE if ch in _WIDE_SENTENCE_MARKS else _Kind.CLAUSE), j, after
    if ch in _LATIN_SENTENCE_MARKS:
        if i + 1 == n:
            return _UNDECIDED
        if text[i + 1] in _ALL_MARKS:
            return None  # "...", "?!": the run's last mark decides
        j, after = _absorb_closers(text, i + 1, depth)
        if j == n:
            return _UNDECIDED
        if not text[j].isspace():
            return None  # 3.5, e.g, U.S, example.com, ?q=1
        k = j
        while k < n and text[k].isspace():
            k += 1
        if k == n:
            return _UNDECIDED
        next_char = text[k]
        if next_char.islower():
            return None  # "10 a.m. and", "etc. are", '"Open?" she asked'
        if ch == "." and text[i - 1 : i] != "." and _is_abbreviation(text, i, next_char):
            return None
        return _Kind.SENTENCE, j, after
    if ch in _LATIN_CLAUSE_MARKS:
        if i == 0 or text[i - 1].isspace():
            return None
        j, after = _absorb_closers(text, i + 1, depth)
        if j == n:
            return _UNDECIDED
        if not text[j].isspace():
            return None  # 1,250 and 10:30 and https://
        return _Kind.CLAUSE, j, after
    if ch == "—":
        if i + 1 == n:
            return _UNDECIDED
        prev, nxt = text[i - 1 : i] or " ", text[i + 1]
        if nxt.isspace() or (prev.isalpha() and nxt.isalpha()):
            return _Kind.CLAUSE, i + 1, depth
        return None
    if ch in "–-":
        # Only a spaced dash is a pause; "well-known" and "3-5" are words.
        if i == 0 or not text[i - 1].isspace():
            return None
        if i + 1 == n:
            return _UNDECIDED
        return (_Kind.CLAUSE, i + 1, depth) if text[i + 1].isspace() else None
    if ch == "\n":
        if i == 0 or text[i - 1].isspace():
            return None
        k = i
        while k < n and text[k].isspace():
            k += 1
        if k == n:
            return _UNDECIDED
        return _Kind.SENTENCE, i, 0
    return None


@dataclass
class _Cut:
    end: int
    depth: int


class SentenceFirstAggregator(BaseTextAggregator):
    """Cuts an answer's first clause for TTS as soon as it is speakable, then whole sentences.

    A pipecat text aggregator; `SentenceChunker` runs it in the pipeline.
    """

    def __init__(self, config: SentenceFirstConfig | None = None, *, language: str | None = None):
        """Create the aggregator.

        Args:
            config: Where to cut; defaults to `SentenceFirstConfig()`.
            language: Sentence tokenizer language, kept for pipecat's interface; the rules here
                are English plus CJK punctuation.
        """
        super().__init__(aggregation_type=TextType.SENTENCE, language=language)
        self._config = config or SentenceFirstConfig()
        self._buffer = ""
        self._first = True
        # Quote depth at the start of the buffer: only a forced cut can leave a quote open.
        self._depth = 0

    @property
    def config(self) -> SentenceFirstConfig:
        """The cutting rules in use."""
        return self._config

    @property
    def text(self) -> Aggregation:
        """The text held back so far."""
        return Aggregation(text=self._buffer.strip(), type=TextType.SENTENCE)

    async def aggregate(self, text: str) -> AsyncIterator[Aggregation]:
        """Add a token and yield every chunk it completes."""
        self._buffer += text
        while (cut := self._next_cut()) is not None:
            chunk = self._buffer[: cut.end].strip()
            self._buffer = self._buffer[cut.end :].lstrip()
            self._depth = cut.depth
            if chunk:
                self._first = False
                yield Aggregation(text=chunk, type=TextType.SENTENCE)

    async def flush(self) -> Aggregation | None:
        """Return the answer's tail at its end, and start the next answer clause-first."""
        tail = self._buffer.strip()
        await self.reset()
        return Aggregation(text=tail, type=TextType.SENTENCE) if tail else None

    async def handle_interruption(self):
        """Drop the interrupted answer's unspoken text; the next answer starts clause-first."""
        await self.reset()

    async def reset(self):
        """Forget the buffered text and start the next answer clause-first."""
        self._buffer = ""
        self._first = True
        self._depth = 0

    def _next_cut(self) -> _Cut | None:
        config = self._config
        text = self._buffer
        n = len(text)
        depth = self._depth
        words = 0.0  # complete words before position i
        run_start = -1  # start of the current non-space, non-CJK run, or -1
        run_has_alnum = False
        has_letter = False
        # Forced-cut candidates: rank, end, depth.
        best: tuple[int, int, int] | None = None

        def consider(rank: int, end: int, at_depth: int):
            nonlocal best
            if end > 0 and (best is None or rank >= best[0]):
                best = (rank, end, at_depth)

        for i in range(n):
            if i == config.max_chunk_chars:
                if n <= config.max_chunk_chars + _FORCE_MARGIN:
                    return None
                if best is None:
                    return _Cut(i, depth)
                return _Cut(best[1], best[2])

            ch = text[i]
            words_here = words + (1 if run_has_alnum else 0)

            verdict = _boundary_at(text, i, depth)
            if verdict is _UNDECIDED:
                if n <= config.max_chunk_chars + _FORCE_MARGIN:
                    return None
            elif verdict is not None:
                kind, end, end_depth = verdict
                if end_depth == 0 and has_letter:
                    if kind is _Kind.SENTENCE:
                        return _Cut(end, end_depth)
                    if self._first and words_here >= config.min_first_words:
                        return _Cut(end, end_depth)
                consider(4 if end_depth == 0 else 3 if kind is _Kind.SENTENCE else 2, end, end_depth)

            gap_after_run = ch.isspace() and run_start >= 0
            gap_in_cjk = _is_cjk(ch) and i > 0 and _is_cjk(text[i - 1])
            if gap_after_run or gap_in_cjk:
                previous = text[run_start:i] if gap_after_run else ""
                good = depth == 0 and not self._leans_on_next(previous)
                consider(1 if good else 0, i, depth)
                if self._first and depth == 0 and has_letter and not previous.endswith("."):
                    if (good and words_here >= config.first_chunk_word_cap) or (
                        words_here >= config.first_chunk_word_cap + config.cap_slack_words
                    ):
                        return _Cut(i, depth)

            depth = _quote_step(text, i, depth)
            has_letter = has_letter or ch.isalpha()
            if ch.isspace() or _is_cjk(ch):
                if run_has_alnum:
                    words += 1
                if _is_cjk(ch):
                    words += 0.5
                run_start, run_has_alnum = -1, False
            else:
                if run_start < 0:
                    run_start = i
                run_has_alnum = run_has_alnum or ch.isalnum()
        return None

    @staticmethod
    def _leans_on_next(word: str) -> bool:
        """Whether a word should not end a capped chunk: it belongs with the word after it."""
        bare = word.lower().strip("\"'“”‘’()[]")
        return bare in _CLINGING or bare[-1:].isdigit() or word.endswith(".")


class SentenceChunker(LLMTextProcessor):
    """pipecat's `LLMTextProcessor` with a `SentenceFirstAggregator`, deaf to interrupted answers.

    Goes between the LLM and the TTS service (pipecat 1.14 TTS services take no aggregator; a
    `text_aggregator=` keyword is silently ignored). The TTS speaks each `AggregatedTextFrame` it
    pushes as it comes, without aggregating again.

    An `InterruptionFrame` jumps ahead of the data frames still queued here, so tokens of the
    interrupted answer can be handled after it, and the cancelled LLM still ends that answer with
    an `LLMFullResponseEndFrame`: text between an interruption and the next answer's start is
    dropped instead of being flushed into speech.
    """

    def __init__(self, config: SentenceFirstConfig | None = None, **kwargs):
        """Create the processor.

        Args:
            config: Where to cut; defaults to `SentenceFirstConfig()`.
            **kwargs: Passed to `LLMTextProcessor` (e.g. `text_transforms`).
        """
        super().__init__(text_aggregator=SentenceFirstAggregator(config), **kwargs)
        self._interrupted = False

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Chunk an answer's text; drop what is left of an interrupted one."""
        if direction == FrameDirection.DOWNSTREAM:
            if isinstance(frame, InterruptionFrame):
                self._interrupted = True
            elif isinstance(frame, LLMFullResponseStartFrame):
                self._interrupted = False
            elif self._interrupted and isinstance(frame, LLMTextFrame):
                await FrameProcessor.process_frame(self, frame, direction)
                return
        await super().process_frame(frame, direction)
