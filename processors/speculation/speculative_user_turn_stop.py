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
Measures: ``SpeculationStats`` (processors/speculation/speculation_stats.py) and one log line per
decision with both texts and the score.

A subclass of the adaptive end of turn (``adaptive_user_turn_stop.py``, itself pipecat's
``SpeechTimeoutUserTurnStopStrategy``) rather than a second strategy next to it, because the
draft has to be settled *at the moment* the turn ends — in ``end_of_turn``, the way pipecat's
``EagerUserTurnStopStrategy`` does in ``trigger_user_turn_stopped`` — and a separate strategy
would only learn of the turn end afterwards, when the aggregator has already run the second
inference. Drafts start while an unfinished turn's end is held; only the commit waits. When a partial is stable is ``stable_partials.py``; commit or cancel
is ``similarity_match.py``.
"""

from __future__ import annotations

from loguru import logger
from pipecat.frames.frames import (
    EagerEndOfTurnCancelFrame,
    Frame,
    InputAudioRawFrame,
    InterimTranscriptionFrame,
    TranscriptionFrame,
)
from pipecat.turns.types import ProcessFrameResult, UserTurnSpeculation

from processors.speculation.speculation_stats import Draft, DraftOutcome, SpeculationStats
from processors.turns.adaptive_user_turn_stop import AdaptiveUserTurnStopStrategy
from processors.speculation.similarity_match import SimilarityMatch
from processors.speculation.stable_partials import Stability, StabilityConfig, StablePartialDetector


class SpeculativeUserTurnStopStrategy(AdaptiveUserTurnStopStrategy):
    """Brisk's end of turn, answering stable partials ahead of it.

    End of turn: ``AdaptiveUserTurnStopStrategy`` (VAD stop, then ``user_speech_timeout``, with a
    transcript; longer, up to ``max_wait_s``, when the words are unfinished).

    Drafts: on a stable partial (:class:`StablePartialDetector`; the text is the turn's
    finals so far plus the partial) it starts a speculative inference — at most one in
    flight. A newer stable text replaces the draft only when the draft would not survive it
    (similarity below the threshold): the old inference is withdrawn first, which closes its
    HTTP stream. A final transcript counts as a partial heard up to the VAD's silence, so a
    turn that had no stable partial still gets a draft for its ``user_speech_timeout``.
    When the LLM withdraws a draft because it wants a tool, no further draft runs this turn:
    the real request runs the tool once the turn is confirmed.

    At the end of the turn the draft is committed when :class:`SimilarityMatch` keeps it (or,
    when a final of the turn was ``revised`` by the STT's second hearing, only for the same
    words), else cancelled and the real request runs. A turn that ends any other way (the stop
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
            **kwargs: ``AdaptiveUserTurnStopStrategy`` arguments, e.g.
                ``user_speech_timeout``, ``max_wait_s``.
        """
        super().__init__(**kwargs)
        self._detector = StablePartialDetector(stability)
        self._match_policy = match_policy or SimilarityMatch()
        self.stats = stats or SpeculationStats()
        self._heard_until_s: float | None = None  # audio end of the latest transcript
        self._draft: Draft | None = None
        self._turn_open = False
        self._drafts_blocked = False
        self._revised = False  # a final of this turn was revised by a second hearing

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
        self._turn_open = False  # before the awaits: no draft starts on a frame processed meanwhile
        await super().handle_user_turn_stopped()
        await self._withdraw("the turn ended without a decision")
        self._clear_turn()

    async def process_frame(self, frame: Frame) -> ProcessFrameResult:
        """Track silence and transcripts, draft on stable ones, and end the turn as the base does."""
        silence_before = self.silence.silence_s
        if isinstance(frame, EagerEndOfTurnCancelFrame):
            await self._on_withdrawn_by_llm()
        elif isinstance(frame, TranscriptionFrame):
            # A final covers its utterance up to the VAD stop. (The adaptive base keeps the
            # turn's finals before the timeout base sees one: that may end the turn at once.)
            self._heard_until_s = self.silence.now_s
            self._revised |= getattr(frame, "revised", False)

        result = await super().process_frame(frame)  # the base counts audio into self.silence

        if isinstance(frame, InputAudioRawFrame):
            silence = self.silence.silence_s
            if any(silence_before < t <= silence for t in self._detector.config.silence_thresholds):
                await self._draft_if_stable(self._detector.on_silence(self.silence.silence_after(self._heard_until_s)))
        elif isinstance(frame, TranscriptionFrame):
            if self._turn_open:
                await self._on_transcript("")
        elif isinstance(frame, InterimTranscriptionFrame):
            self._heard_until_s = getattr(frame, "audio_end_s", None)
            await self._on_transcript(frame.text.strip())
        return result

    async def end_of_turn(self, *, enable_user_speaking_frames: bool | None = None):
        """End the turn: commit the draft if the final still matches it, else cancel it."""
        draft, self._draft = self._draft, None
        if draft is None:
            await super().end_of_turn(enable_user_speaking_frames=enable_user_speaking_frames)
            return

        final = self._turn_text("")
        score = self._match_policy.score(draft.text, final)
        # A final the second opinion revised says the first words were misheard: a draft on
        # them is kept only for the very same words, never for "a small ASR wobble" in a long
        # question, which may be the one word that changes the answer.
        threshold = 1.0 if self._revised else self._match_policy.threshold
        if score >= threshold:
            self.stats.resolve(draft, DraftOutcome.COMMITTED, compared_with=final, score=score)
            logger.info(
                f"{self}: speculation committed (score {score:.3f} >= {threshold}): "
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
            f"{self}: speculation cancelled (score {score:.3f} < {threshold}): "
            f"draft [{draft.text}] final [{final}]"
        )
        await self.trigger_user_turn_speculation_cancelled()
        await super().end_of_turn(enable_user_speaking_frames=enable_user_speaking_frames)

    # -- internals -----------------------------------------------------------------------------

    def _turn_text(self, partial: str) -> str:
        return " ".join(t for t in (*self._finals, partial) if t)

    async def _on_transcript(self, partial: str):
        text = self._turn_text(partial)
        if not text:
            return
        silence = self.silence.silence_after(self._heard_until_s)
        await self._draft_if_stable(self._detector.feed(text, silence_s=silence))

    async def _draft_if_stable(self, stable: Stability | None):
        if stable is None or not self._turn_open or self._drafts_blocked or self.ended:
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
        logger.debug(f"{self}: speculating on a stable partial ({stable.reason}): [{stable.text}]")
        await self.trigger_user_turn_inference_triggered(speculation=UserTurnSpeculation(text=stable.text))

    async def _on_withdrawn_by_llm(self):
        draft, self._draft = self._draft, None
        if draft is None:
            return
        # pipecat's LLM service withdraws a draft that reached a tool call: tools have side
        # effects no gate can undo. Drafting again would only reach the same call.
        self._drafts_blocked = True
        self.stats.resolve(draft, DraftOutcome.CANCELLED, reason="withdrawn by the LLM (tool call)")
        logger.debug(f"{self}: speculation withdrawn by the LLM (it wants a tool): [{draft.text}]")

    async def _withdraw(self, why: str):
        draft, self._draft = self._draft, None
        if draft is None:
            return
        self.stats.resolve(draft, DraftOutcome.CANCELLED, reason=why)
        logger.debug(f"{self}: speculation cancelled ({why}): [{draft.text}]")
        await self.trigger_user_turn_speculation_cancelled()

    def _clear_turn(self):
        self._detector.reset()
        self._heard_until_s = None
        self._drafts_blocked = False
        self._revised = False
