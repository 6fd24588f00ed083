"""Speculative LLM drafts from stable partial transcripts, committed or cancelled at turn end.

Consumes (as a pipecat user turn stop strategy, inside ``LLMUserAggregator``): the frames the
user aggregator sees — ``InputAudioRawFrame`` (for a silence clock), VAD frames, the STT's
``PartialTranscriptionFrame`` (any ``InterimTranscriptionFrame``) and final
``TranscriptionFrame`` — and an upstream ``EagerEndOfTurnCancelFrame`` (the LLM withdrawing a
draft that wanted a tool).
Emits: through pipecat's speculation machinery only. A stable partial fires
``trigger_user_turn_inference_triggered(speculation=UserTurnSpeculation(text))``: the aggregator
pushes ``LLMContextFrame(speculation=True)`` and the LLM service's ``SpeculationGate`` holds the
answer. At the end of the turn the draft is committed (``confirms_speculation=True``: the
``UserStoppedSpeakingFrame`` releases the held answer, no second request) or cancelled
(``EagerEndOfTurnCancelFrame``: the LLM service cancels the inference task, which closes the
HTTP stream, and the real request runs).
Measures: ``SpeculationStats`` — drafts started/committed/cancelled/superseded, hit rate,
wasted prompt and completion tokens, time saved per hit — and one log line per decision with
both texts and the score.

The pieces:

- :class:`StabilityConfig` / :class:`StablePartialDetector`: when a partial is "stable"
  (latency-playbook.md, techniques 1-2). Pure text, unit-tested on tables.
- :class:`SimilarityMatch`: pipecat ``EagerMatchPolicy`` with a normalised similarity score
  (difflib ratio over the words of case-, punctuation- and filler-free text) and a
  threshold (0.92).
- :class:`SpeculativeUserTurnStopStrategy`: pipecat's ``SpeechTimeoutUserTurnStopStrategy``
  (Brisk's end-of-turn rule, unchanged) plus drafting. A subclass rather than a second
  strategy next to it, because the draft has to be settled *at the moment* the turn ends —
  inside ``trigger_user_turn_stopped``, the way pipecat's ``EagerUserTurnStopStrategy`` does —
  and a separate strategy would only learn of the turn end afterwards, when the aggregator has
  already run the second inference.
- :class:`DraftAccountingMixin`: mixed into the LLM service, it sees each draft's frames
  *before* the gate holds or drops them, so it can count what a discarded draft cost, and
  show them to a ``SpeculativeAudioCache`` that synthesises a held draft's first chunk.
"""

from __future__ import annotations

import re
import statistics
import time
import unicodedata
from collections import deque
from dataclasses import dataclass
from difflib import SequenceMatcher
from enum import Enum

import numpy as np
from loguru import logger
from pipecat.frames.frames import (
    EagerEndOfTurnCancelFrame,
    Frame,
    InputAudioRawFrame,
    InterimTranscriptionFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMTextFrame,
    MetricsFrame,
    TranscriptionFrame,
)
from pipecat.metrics.metrics import LLMUsageMetricsData
from pipecat.processors.frame_processor import FrameDirection
from pipecat.turns.speculation_gate import SpeculationState
from pipecat.turns.types import ProcessFrameResult, UserTurnSpeculation
from pipecat.turns.user_stop import EagerMatchPolicy, SpeechTimeoutUserTurnStopStrategy

from processors.context_window import strip_fillers
from processors.speculative_tts import SpeculativeAudioCache

# --- text comparison -----------------------------------------------------------------------

_APOSTROPHES = re.compile(r"['\u2019\u02bc]")
_PUNCTUATION = re.compile(r"[^\w\s]")
_SPACES = re.compile(r"\s+")
# A word, or a single CJK character (CJK text has no spaces between words).
_WORD = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]|\w+")


def comparison_form(text: str) -> str:
    """The text as compared: NFKC, case-folded, no apostrophes, fillers or punctuation."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _APOSTROPHES.sub("", text)
    text = strip_fillers(text, aggressive=True)
    text = _PUNCTUATION.sub(" ", text)
    return _SPACES.sub(" ", text).strip()


def _words(text: str) -> list[str]:
    return _WORD.findall(comparison_form(text))


class SimilarityMatch(EagerMatchPolicy):
    """Keep a draft when its text and the final transcript are at least ``threshold`` alike.

    The score is difflib's ratio (2 * matching / total) over the *words* of the two
    :func:`comparison_form` texts (CJK: characters): 1.0 for texts that differ only in case,
    punctuation or fillers. Words, not characters, because one changed word is one changed
    meaning: "...open on Saturday" vs "...open on Sunday" scores 0.94 on characters but 0.86
    on words, so with 0.92 a short question never survives a changed word, while a long
    one survives a small ASR wobble or an added "please".
    """

    def __init__(self, threshold: float = 0.92):
        """Args: threshold: lowest score that keeps the draft, in [0, 1]."""
        if not 0.0 <= threshold <= 1.0:
            raise ValueError("threshold must be in [0, 1]")
        self.threshold = threshold

    def score(self, eager: str, final: str) -> float:
        """Similarity of the two transcripts in [0, 1]."""
        a, b = _words(eager), _words(final)
        if a == b:
            return 1.0
        return SequenceMatcher(None, a, b, autojunk=False).ratio()

    def matches(self, eager: str, final: str) -> bool:
        """Whether the draft made from ``eager`` still answers ``final``."""
        return self.score(eager, final) >= self.threshold


# --- stable partials -----------------------------------------------------------------------


@dataclass(frozen=True)
class StabilityConfig:
    """When a partial transcript is stable enough to draft an answer from.

    The base rule: the last ``consecutive`` partials end with the same last ``tail_chars``
    characters and the text has at least ``min_chars`` characters. Any extra trigger fires on
    its own (each still needs ``min_chars``); set it to ``None`` (or ``()``) to switch it off.
    Texts are compared in :func:`comparison_form`, so fillers ("um", "uh", "you know", 嗯,
    那个), case and punctuation never make two partials differ.

    ``min_silence_s`` (off by default: the playbook's rules are text-only) additionally makes
    every rule wait until the user has been silent that long after the partial's audio.
    Streaming Whisper often repeats a partial in the middle of a word ("What did your phone?"
    twice, for "What is your phone number?"), and each such draft is superseded — a second
    request; 0.1 s of silence rules those out and still comes ahead of the VAD stop.

    Parameters:
        consecutive: K, partials that must agree (1 = every partial is stable).
        tail_chars: N, trailing characters compared (the whole text when shorter).
        min_chars: M, shortest text worth a draft.
        end_words: Phrases that end a request; one at the end of a partial makes it stable.
            A phrase ending in punctuation ("right?") must end the partial with that
            punctuation; the others are matched as whole words.
        silence_s: A partial heard up to the start of at least this much silence is stable.
        question_min_chars: A partial ending in "?" with at least this many characters is
            stable.
        min_silence_s: Silence every rule also needs after the partial's audio (0 = off).
    """

    consecutive: int = 2
    tail_chars: int = 8
    min_chars: int = 6
    end_words: tuple[str, ...] | None = ("right?", "that's it", "please")
    silence_s: float | None = 0.25
    question_min_chars: int | None = 30
    min_silence_s: float = 0.0

    def __post_init__(self):
        if self.consecutive < 1 or self.tail_chars < 1 or self.min_chars < 0 or self.min_silence_s < 0:
            raise ValueError("consecutive and tail_chars must be >= 1, min_chars and min_silence_s >= 0")

    @property
    def silence_thresholds(self) -> tuple[float, ...]:
        """Silence lengths at which a partial heard before them may become stable."""
        return tuple(t for t in (self.min_silence_s, self.silence_s) if t)


@dataclass(frozen=True)
class Stability:
    """A stable partial: its text and which rule made it stable."""

    text: str
    reason: str  # "repeated_tail" | "end_word" | "silence" | "question"


class StablePartialDetector:
    """Feeds on partial transcripts and says which one is stable (see :class:`StabilityConfig`)."""

    def __init__(self, config: StabilityConfig | None = None):
        """Args: config: the rules; the defaults when None."""
        self.config = config or StabilityConfig()
        self._tails: deque[str] = deque(maxlen=self.config.consecutive)
        self._latest = ""
        end_words = self.config.end_words or ()
        self._punctuated_end_words = tuple(
            _raw_form(w) for w in end_words if w and not w[-1].isalnum()
        )
        self._word_end_words = tuple(
            comparison_form(w) for w in end_words if w and w[-1].isalnum()
        )

    def reset(self):
        """Forget every partial (a new turn)."""
        self._tails.clear()
        self._latest = ""

    def feed(self, text: str, *, silence_s: float = 0.0) -> Stability | None:
        """Take the next partial.

        Args:
            text: The partial transcript.
            silence_s: How much silence followed the audio this partial was made from (0 when
                the audio it heard was still speech).

        Returns:
            The partial as a :class:`Stability` when it is stable, else None.
        """
        self._latest = text
        form = comparison_form(text)
        self._tails.append(form[-self.config.tail_chars :])
        return self._check(text, form, silence_s)

    def on_silence(self, silence_s: float) -> Stability | None:
        """Re-check the latest partial now that ``silence_s`` of silence followed its audio."""
        if not self._latest:
            return None
        return self._check(self._latest, comparison_form(self._latest), silence_s)

    def _check(self, text: str, form: str, silence_s: float) -> Stability | None:
        config = self.config
        if len(form) < max(1, config.min_chars) or silence_s < config.min_silence_s:
            return None
        if (
            len(self._tails) == config.consecutive
            and all(tail == self._tails[-1] for tail in self._tails)
        ):
            return Stability(text, "repeated_tail")
        if self._ends_with_end_word(text, form):
            return Stability(text, "end_word")
        if config.silence_s is not None and silence_s >= config.silence_s:
            return Stability(text, "silence")
        if (
            config.question_min_chars is not None
            and text.rstrip().endswith(("?", "？"))
            and len(form) >= config.question_min_chars
        ):
            return Stability(text, "question")
        return None

    def _ends_with_end_word(self, text: str, form: str) -> bool:
        raw = _raw_form(text)
        if any(_ends_with_words(raw, w) for w in self._punctuated_end_words):
            return True
        return any(_ends_with_words(form, w) for w in self._word_end_words)


def _raw_form(text: str) -> str:
    """Case-folded, apostrophes unified, spaces collapsed; punctuation kept."""
    text = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
    return _SPACES.sub(" ", text).strip()


def _ends_with_words(text: str, phrase: str) -> bool:
    if not phrase or not text.endswith(phrase):
        return False
    before = text[: -len(phrase)]
    return not before or not before[-1].isalnum()


# --- counters ------------------------------------------------------------------------------


class DraftOutcome(Enum):
    """How a draft ended."""

    COMMITTED = "committed"  # the final matched: its answer was released
    CANCELLED = "cancelled"  # the final differed, the LLM withdrew it, or the turn ended unresolved
    SUPERSEDED = "superseded"  # a newer, different stable partial replaced it


_TOKEN = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]|\w+|[^\w\s]")


def estimate_tokens(text: str) -> int:
    """Rough BPE-like count (a word, a CJK character or a punctuation mark each): an estimate."""
    return len(_TOKEN.findall(text))


@dataclass
class Draft:
    """One speculative inference and what became of it. Times are ``time.monotonic()``."""

    text: str
    trigger: str
    started_at: float
    request_at: float | None = None  # the LLM service took the request
    first_token_at: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usage_reported: bool = False  # token counts are the server's, not estimates
    outcome: DraftOutcome | None = None
    reason: str = ""
    compared_with: str | None = None  # the final transcript, or the newer text that replaced it
    score: float | None = None
    resolved_at: float | None = None

    @property
    def time_saved_s(self) -> float | None:
        """For a committed draft, how much earlier its first token was there than a request
        sent at the end of the turn would have had it (same TTFT assumed).

        min(head start, TTFT): the head start when the draft was still waiting for its first
        token at the turn end, the whole TTFT when it was already answering. Without a first
        token time (no accounting on the LLM service) it is the head start, an upper bound.
        """
        if self.outcome is not DraftOutcome.COMMITTED or self.resolved_at is None:
            return None
        sent = self.request_at if self.request_at is not None else self.started_at
        head_start = max(0.0, self.resolved_at - sent)
        if self.first_token_at is None:
            return head_start
        return min(head_start, max(0.0, self.first_token_at - sent))


class SpeculationStats:
    """Counters of one call's drafts; :func:`merge_reports` adds up several calls' reports."""

    def __init__(self, max_drafts: int = 10_000):
        """Args: max_drafts: drafts remembered (the oldest are forgotten past this)."""
        self.drafts: deque[Draft] = deque(maxlen=max_drafts)

    def start(self, text: str, trigger: str) -> Draft:
        """Record a draft started now."""
        draft = Draft(text=text, trigger=trigger, started_at=time.monotonic())
        self.drafts.append(draft)
        return draft

    def resolve(
        self,
        draft: Draft,
        outcome: DraftOutcome,
        *,
        reason: str = "",
        compared_with: str | None = None,
        score: float | None = None,
    ):
        """Record how ``draft`` ended, now."""
        draft.outcome = outcome
        draft.reason = reason
        draft.compared_with = compared_with
        draft.score = score
        draft.resolved_at = time.monotonic()

    def take_request(self) -> Draft | None:
        """The newest draft whose request has not reached the LLM yet, marked as sent now."""
        for draft in reversed(self.drafts):
            if draft.request_at is None:
                if draft.outcome is not None:
                    # Withdrawn before its request got to the LLM: it never runs.
                    return None
                draft.request_at = time.monotonic()
                return draft
            return None
        return None

    def count(self, outcome: DraftOutcome) -> int:
        """Drafts that ended with ``outcome``."""
        return sum(1 for d in self.drafts if d.outcome is outcome)

    def as_dict(self) -> dict:
        """The JSON object reported per call and in the benchmark (``"speculation": {...}``).

        ``hit_rate`` is committed / (committed + cancelled): of the turns that ended with a
        draft in flight, how many kept it (superseded drafts are replaced within their turn
        and are counted as waste instead). ``waste_rate`` is (cancelled + superseded) /
        started. Wasted tokens are those of cancelled and superseded drafts: the server's
        usage when it reported one, else estimates (streamed chunks for completion tokens,
        :func:`estimate_tokens` of the prompt) — ``tokens_estimated`` says whether any
        estimate is in the sum; all three are None when the LLM service has no
        :class:`DraftAccountingMixin` to count them. ``time_saved_ms`` lists each hit's
        :attr:`Draft.time_saved_s`, so reports of several calls can be merged
        (:func:`merge_reports`).
        """
        wasted = [d for d in self.drafts if d.outcome in (DraftOutcome.CANCELLED, DraftOutcome.SUPERSEDED)]
        sent = [d for d in wasted if d.request_at is not None]
        # Wasted drafts and not one request time: nothing on the LLM service counted them.
        accounted = not wasted or any(d.request_at is not None for d in self.drafts)
        return _report(
            started=len(self.drafts),
            committed=self.count(DraftOutcome.COMMITTED),
            cancelled=self.count(DraftOutcome.CANCELLED),
            superseded=self.count(DraftOutcome.SUPERSEDED),
            wasted_prompt_tokens=sum(d.prompt_tokens for d in sent) if accounted else None,
            wasted_completion_tokens=sum(d.completion_tokens for d in sent) if accounted else None,
            tokens_estimated=any(not d.usage_reported for d in sent) if accounted else None,
            time_saved_ms=[round(d.time_saved_s * 1000, 1) for d in self.drafts if d.time_saved_s is not None],
        )


def merge_reports(reports: list[dict]) -> dict:
    """One report over several :meth:`SpeculationStats.as_dict` reports (e.g. a benchmark side)."""

    def total(key: str):
        values = [r[key] for r in reports]
        return None if not values or any(v is None for v in values) else sum(values)

    estimated = [r["tokens_estimated"] for r in reports]
    return _report(
        started=sum(r["drafts_started"] for r in reports),
        committed=sum(r["committed"] for r in reports),
        cancelled=sum(r["cancelled"] for r in reports),
        superseded=sum(r["superseded"] for r in reports),
        wasted_prompt_tokens=total("wasted_prompt_tokens"),
        wasted_completion_tokens=total("wasted_completion_tokens"),
        tokens_estimated=None if not estimated or None in estimated else any(estimated),
        time_saved_ms=[ms for r in reports for ms in r["time_saved_ms"]],
    )


def _report(
    *, started, committed, cancelled, superseded, wasted_prompt_tokens, wasted_completion_tokens,
    tokens_estimated, time_saved_ms: list[float],
) -> dict:
    decided = committed + cancelled
    return {
        "drafts_started": started,
        "committed": committed,
        "cancelled": cancelled,
        "superseded": superseded,
        "hit_rate": round(committed / decided, 3) if decided else None,
        "waste_rate": round((cancelled + superseded) / started, 3) if started else None,
        "wasted_prompt_tokens": wasted_prompt_tokens,
        "wasted_completion_tokens": wasted_completion_tokens,
        "tokens_estimated": tokens_estimated,
        "time_saved_ms_per_hit": round(statistics.fmean(time_saved_ms), 1) if time_saved_ms else None,
        "time_saved_ms_p50": round(statistics.median(time_saved_ms), 1) if time_saved_ms else None,
        "time_saved_ms": time_saved_ms,
    }


# --- silence ---------------------------------------------------------------------------------

# A frame is speech when it is within this many dB of the loudest recent frame and above the
# floor; the reference decays so a loud cough does not mute the next minute.
_SPEECH_WITHIN_DB = 35.0
_SPEECH_FLOOR_DBFS = -60.0
_PEAK_DECAY_DB_PER_S = 6.0


class _SilenceClock:
    """Input-stream time (seconds of audio seen) and where the current silence began.

    It counts the same ``InputAudioRawFrame`` stream the STT counts, so a partial's
    ``audio_end_s`` is on the same clock.
    """

    def __init__(self):
        self.now_s = 0.0
        self.onset_s: float | None = None  # None while the audio is speech
        self._peak_db = _SPEECH_FLOOR_DBFS

    def add(self, frame: InputAudioRawFrame) -> float:
        """Account one frame; returns the silence so far (0 when this frame is speech)."""
        samples = np.frombuffer(frame.audio, dtype=np.int16)
        duration = len(samples) / max(1, frame.num_channels) / frame.sample_rate
        rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64)))) if samples.size else 0.0
        level_db = 20.0 * np.log10(rms / 32768.0 + 1e-9)
        self._peak_db = max(level_db, self._peak_db - _PEAK_DECAY_DB_PER_S * duration)
        speech = level_db > max(_SPEECH_FLOOR_DBFS, self._peak_db - _SPEECH_WITHIN_DB)
        if speech:
            self.onset_s = None
        elif self.onset_s is None:
            self.onset_s = self.now_s
        self.now_s += duration
        return self.silence_s

    @property
    def silence_s(self) -> float:
        return 0.0 if self.onset_s is None else self.now_s - self.onset_s

    def silence_after(self, audio_end_s: float | None) -> float:
        """Silence following audio that ended at ``audio_end_s``: 0 unless it reached the onset."""
        if audio_end_s is None or self.onset_s is None:
            return 0.0
        # One 20 ms frame of slack: the STT's buffer and this clock round differently.
        return self.silence_s if audio_end_s >= self.onset_s - 0.02 else 0.0


# --- the stop strategy ---------------------------------------------------------------------


class SpeculativeUserTurnStopStrategy(SpeechTimeoutUserTurnStopStrategy):
    """Brisk's speech-timeout end of turn, answering stable partials ahead of it.

    End of turn: exactly ``SpeechTimeoutUserTurnStopStrategy`` (VAD stop, then
    ``user_speech_timeout``, with a transcript).

    Drafts: on a stable partial (:class:`StablePartialDetector`; the text is the turn's
    finals so far plus the partial) it starts a speculative inference — at most one in
    flight. A newer stable text replaces the draft only when the draft would not survive it
    (similarity below the threshold): the old inference is withdrawn first, which closes its
    HTTP stream. A final transcript counts as a partial heard up to the VAD's silence, so a
    turn that had no stable partial still gets a draft for its ``user_speech_timeout``.
    When the LLM withdraws a draft because it wants a tool, no further draft runs this turn:
    the real request runs the tool once the turn is confirmed.

    At the end of the turn the draft is committed when :class:`SimilarityMatch` keeps it,
    else cancelled and the real request runs. A turn that ends any other way (the stop
    watchdog, a new turn) withdraws it. Every decision is logged with both texts and score.
    """

    def __init__(
        self,
        *,
        stability: StabilityConfig | None = None,
        match_policy: SimilarityMatch | None = None,
        stats: SpeculationStats | None = None,
        **kwargs,
    ):
        """Create the strategy.

        Args:
            stability: When a partial is stable; the defaults when None.
            match_policy: Commit-or-cancel rule; ``SimilarityMatch(0.92)`` when None.
            stats: Where drafts are counted (share it with :class:`DraftAccountingMixin` on
                the LLM service); a new one when None.
            **kwargs: ``SpeechTimeoutUserTurnStopStrategy`` arguments, e.g.
                ``user_speech_timeout``.
        """
        super().__init__(**kwargs)
        self._detector = StablePartialDetector(stability)
        self._match_policy = match_policy or SimilarityMatch()
        self.stats = stats or SpeculationStats()
        self._silence = _SilenceClock()
        self._finals: list[str] = []
        self._heard_until_s: float | None = None  # audio end of the latest transcript
        self._draft: Draft | None = None
        self._turn_open = False
        self._drafts_blocked = False

    @property
    def match_policy(self) -> SimilarityMatch:
        """The commit-or-cancel rule."""
        return self._match_policy

    async def handle_user_turn_started(self):
        """Arm for a new turn; a draft left from the previous one is withdrawn."""
        await super().handle_user_turn_started()
        await self._withdraw("a new turn started")
        self._clear_turn()
        self._turn_open = True

    async def handle_user_turn_stopped(self):
        """A turn that ended without settling its draft (watchdog, interruption) withdraws it."""
        await super().handle_user_turn_stopped()
        await self._withdraw("the turn ended without a decision")
        self._clear_turn()
        self._turn_open = False

    async def process_frame(self, frame: Frame) -> ProcessFrameResult:
        """Track silence and transcripts, draft on stable ones, and end the turn as the base does."""
        if isinstance(frame, InputAudioRawFrame):
            before = self._silence.silence_s
            after = self._silence.add(frame)
            if any(before < t <= after for t in self._detector.config.silence_thresholds):
                await self._draft_if_stable(
                    self._detector.on_silence(self._silence.silence_after(self._heard_until_s))
                )
        elif isinstance(frame, EagerEndOfTurnCancelFrame):
            await self._on_withdrawn_by_llm()
        elif isinstance(frame, TranscriptionFrame):
            # Before the base class sees it: it may end the turn right away, and the decision
            # compares the draft with every final of the turn.
            self._finals.append(frame.text.strip())
            # A final covers its utterance up to the VAD stop.
            self._heard_until_s = self._silence.now_s

        result = await super().process_frame(frame)

        if isinstance(frame, TranscriptionFrame):
            if self._turn_open:
                await self._on_transcript("")
        elif isinstance(frame, InterimTranscriptionFrame):
            self._heard_until_s = getattr(frame, "audio_end_s", None)
            await self._on_transcript(frame.text.strip())
        return result

    async def trigger_user_turn_stopped(self, *, enable_user_speaking_frames: bool | None = None):
        """End the turn: commit the draft if the final still matches it, else cancel it."""
        draft, self._draft = self._draft, None
        if draft is None:
            await super().trigger_user_turn_stopped(enable_user_speaking_frames=enable_user_speaking_frames)
            return

        final = self._turn_text("")
        score = self._match_policy.score(draft.text, final)
        if score >= self._match_policy.threshold:
            self.stats.resolve(draft, DraftOutcome.COMMITTED, compared_with=final, score=score)
            logger.info(
                f"{self}: speculation committed (score {score:.3f} >= {self._match_policy.threshold}): "
                f"draft [{draft.text}] final [{final}]"
            )
            # The UserStoppedSpeakingFrame this emits releases the held answer; the flag keeps
            # the aggregator from running the same turn again.
            await self.trigger_user_turn_finalized(
                enable_user_speaking_frames=enable_user_speaking_frames, confirms_speculation=True
            )
            return

        self.stats.resolve(
            draft, DraftOutcome.CANCELLED, reason="mismatch", compared_with=final, score=score
        )
        logger.info(
            f"{self}: speculation cancelled (score {score:.3f} < {self._match_policy.threshold}): "
            f"draft [{draft.text}] final [{final}]"
        )
        await self.trigger_user_turn_speculation_cancelled()
        await super().trigger_user_turn_stopped(enable_user_speaking_frames=enable_user_speaking_frames)

    # -- internals -----------------------------------------------------------------------------

    def _turn_text(self, partial: str) -> str:
        return " ".join(t for t in (*self._finals, partial) if t)

    async def _on_transcript(self, partial: str):
        text = self._turn_text(partial)
        if not text:
            return
        silence = self._silence.silence_after(self._heard_until_s)
        await self._draft_if_stable(self._detector.feed(text, silence_s=silence))

    async def _draft_if_stable(self, stable: Stability | None):
        if stable is None or not self._turn_open or self._drafts_blocked:
            return
        replaced = self._draft
        score = None if replaced is None else self._match_policy.score(replaced.text, stable.text)
        if score is not None and score >= self._match_policy.threshold:
            return  # the draft in flight already answers this text
        # Bookkeeping first, awaits after: audio and transcripts reach this from two tasks.
        draft = self.stats.start(stable.text, stable.reason)
        self._draft = draft
        if replaced is not None:
            self.stats.resolve(
                replaced, DraftOutcome.SUPERSEDED, reason=stable.reason, compared_with=stable.text, score=score
            )
            logger.info(
                f"{self}: speculation superseded (score {score:.3f}): draft [{replaced.text}] "
                f"newer [{stable.text}]"
            )
            # Withdrawn before the new request goes out: the LLM service cancels the old
            # inference (closing its HTTP stream) instead of queueing the new one behind it.
            await self.trigger_user_turn_speculation_cancelled()
        logger.info(f"{self}: speculating on a stable partial ({stable.reason}): [{stable.text}]")
        await self.trigger_user_turn_inference_triggered(speculation=UserTurnSpeculation(text=stable.text))

    async def _on_withdrawn_by_llm(self):
        draft, self._draft = self._draft, None
        if draft is None:
            return
        # pipecat's LLM service withdraws a draft that reached a tool call: tools have side
        # effects no gate can undo. Drafting again would only reach the same call.
        self._drafts_blocked = True
        self.stats.resolve(draft, DraftOutcome.CANCELLED, reason="withdrawn by the LLM (tool call)")
        logger.info(f"{self}: speculation withdrawn by the LLM (it wants a tool): [{draft.text}]")

    async def _withdraw(self, why: str):
        draft, self._draft = self._draft, None
        if draft is None:
            return
        self.stats.resolve(draft, DraftOutcome.CANCELLED, reason=why)
        logger.info(f"{self}: speculation cancelled ({why}): [{draft.text}]")
        await self.trigger_user_turn_speculation_cancelled()

    def _clear_turn(self):
        self._detector.reset()
        self._finals.clear()
        self._heard_until_s = None
        self._drafts_blocked = False


# --- token accounting on the LLM service ----------------------------------------------------


class DraftAccountingMixin:
    """Mix into an ``LLMService`` (first in the bases) to count what each draft costs.

    The service's ``SpeculationGate`` holds a draft's frames and drops them when the draft is
    cancelled, so nothing downstream — no observer either — ever sees what a wasted draft
    produced. This sees every frame on its way *into* the gate: it stamps the draft's request
    time and first token, counts streamed chunks as completion tokens, estimates prompt
    tokens, and takes the server's usage when it reports one.

    With ``speculative_audio`` it also shows every frame to that cache before the gate, so the
    held draft's first chunk is synthesised while the turn is still open
    (processors/speculative_tts.py).

    Example::

        class BriskLLMService(DraftAccountingMixin, ResilientOpenAILLMService): ...
        llm = BriskLLMService(speculation_stats=stats, client=..., ...)
    """

    def __init__(
        self,
        *args,
        speculation_stats: SpeculationStats | None = None,
        speculative_audio: SpeculativeAudioCache | None = None,
        **kwargs,
    ):
        """Args: speculation_stats: the stats the stop strategy records drafts in;
        speculative_audio: the cache the TTS service shares, to prefetch a held draft's audio.
        """
        super().__init__(*args, **kwargs)
        self.speculation_stats = speculation_stats
        self.speculative_audio = speculative_audio
        self._accounted: Draft | None = None

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Note which draft (if any) the inference now starting belongs to."""
        if isinstance(frame, LLMContextFrame) and self.speculation_stats is not None:
            draft = self.speculation_stats.take_request() if frame.speculation else None
            if draft is not None:
                draft.prompt_tokens = self._estimate_prompt_tokens(frame)
            self._accounted = draft
        await super().process_frame(frame, direction)

    async def push_frame(self, frame: Frame, direction: FrameDirection = FrameDirection.DOWNSTREAM):
        """Count the draft's output before the gate decides what happens to it."""
        draft = self._accounted
        if draft is not None:
            if isinstance(frame, LLMTextFrame):
                if draft.first_token_at is None:
                    draft.first_token_at = time.monotonic()
                if not draft.usage_reported:
                    draft.completion_tokens += 1
            elif isinstance(frame, MetricsFrame):
                for data in frame.data:
                    if isinstance(data, LLMUsageMetricsData):
                        draft.prompt_tokens = data.value.prompt_tokens
                        draft.completion_tokens = data.value.completion_tokens
                        draft.usage_reported = True
            elif isinstance(frame, LLMFullResponseEndFrame):
                self._accounted = None
        if self.speculative_audio is not None:
            # No await suspends between this look at the gate and its verdict on the frame.
            holding = self._speculation_gate.state is SpeculationState.HOLDING
            await self.speculative_audio.before_gate(frame, direction, holding=holding)
        await super().push_frame(frame, direction)

    def _estimate_prompt_tokens(self, frame: LLMContextFrame) -> int:
        settings = getattr(self, "_settings", None)
        system = getattr(settings, "system_instruction", None)
        total = estimate_tokens(system) if isinstance(system, str) else 0
        for message in frame.context.get_messages():
            if isinstance(message, dict):
                total += estimate_tokens(str(message.get("content") or ""))
        return total
