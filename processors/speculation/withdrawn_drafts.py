"""Drafts withdrawn before they arrive: a speculative context whose cancel overtook it.

Consumes: ``EagerEndOfTurnCancelFrame`` (downstream) and ``LLMContextFrame``.
Emits: nothing of its own. ``WithdrawnDrafts`` answers, for a speculative context, whether a
cancel made after it has already passed (frames/drafts.py: frame ids grow in creation
order); ``WithdrawnDraftsMixin`` makes the LLM service drop such a context unanswered.
Measures: ``withdrawn_late``, the contexts dropped that way.

Why: at a turn end whose final differs from the draft, the aggregator withdraws the draft
(``EagerEndOfTurnCancelFrame``) and ends the turn (``UserStoppedSpeakingFrame``), both system
frames, while the draft's context may still be queued in the processors before the LLM.
The LLM service then sees the cancel with nothing to cancel, and the draft after the turn
end, which pipecat's ``SpeculationGate`` takes for an ordinary inference: the draft and the
real request were both answered, one after the other (seen under load in
tests/test_concurrent_calls.py). Every processor that answers a context (the fast path, the
LLM) keeps one of these. A dropped draft never reaches pipecat's ``FrameProcessor.process_frame``,
so observers never see it enter the LLM, and the turn's record times the real request.
"""

from __future__ import annotations

from loguru import logger
from pipecat.frames.frames import EagerEndOfTurnCancelFrame, Frame, LLMContextFrame
from pipecat.processors.frame_processor import FrameDirection

from frames.drafts import created_as


class WithdrawnDrafts:
    """Which speculative contexts were withdrawn by a cancel that reached us before them."""

    def __init__(self):
        self._cancelled_before = -1  # the id of the newest cancel seen: contexts made before it are void

    def see(self, frame: Frame, direction: FrameDirection = FrameDirection.DOWNSTREAM):
        """Take note of ``frame`` if it withdraws drafts (a downstream cancel from the aggregator)."""
        if isinstance(frame, EagerEndOfTurnCancelFrame) and direction is FrameDirection.DOWNSTREAM:
            self._cancelled_before = max(self._cancelled_before, frame.id)

    def withdrawn(self, frame: Frame) -> bool:
        """Whether ``frame`` is a speculative context made before a cancel already seen."""
        return (isinstance(frame, LLMContextFrame) and frame.speculation
                and created_as(frame) < self._cancelled_before)


class WithdrawnDraftsMixin:
    """Mix into an ``LLMService`` (before it in the bases) to leave withdrawn drafts unanswered.

    Example::

        class BriskLLMService(WithdrawnDraftsMixin, DraftAccountingMixin, ResilientOpenAILLMService): ...
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._withdrawn = WithdrawnDrafts()
        self.withdrawn_late = 0

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Drop a draft whose cancel got here first; everything else goes to the service."""
        self._withdrawn.see(frame, direction)
        if self._withdrawn.withdrawn(frame):
            self.withdrawn_late += 1
            logger.debug(f"{self}: a draft arrived after its cancel; not answered")
            return
        await super().process_frame(frame, direction)
