"""What each speculative draft costs, seen on the LLM service before its gate holds or drops it.

Consumes (mixed into the LLM service): the ``LLMContextFrame`` that starts each inference, and
every frame the service pushes — ``LLMTextFrame``s, ``MetricsFrame``s with the server's usage,
``LLMFullResponseEndFrame`` and the turn frames that settle a speculation.
Emits: nothing of its own; with a ``SpeculativeAudioCache`` it shows each frame to that cache
first (processors/speculation/speculative_tts.py).
Measures: per draft, request time, first token, prompt and completion tokens (the server's
usage when it reports one, else estimates), in the call's ``SpeculationStats``.
"""

from __future__ import annotations

import time

from pipecat.frames.frames import (
    EagerEndOfTurnCancelFrame,
    Frame,
    InterruptionFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    MetricsFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.metrics.metrics import LLMUsageMetricsData
from pipecat.processors.frame_processor import FrameDirection

from processors.speculation.speculation_stats import Draft, SpeculationStats, estimate_tokens
from processors.speculation.speculative_tts import SpeculativeAudioCache


class DraftAccountingMixin:
    """Mix into an ``LLMService`` (first in the bases) to count what each draft costs.

    The service's ``SpeculationGate`` holds a draft's frames and drops them when the draft is
    cancelled, so nothing downstream — no observer either — ever sees what a wasted draft
    produced. This sees every frame on its way *into* the gate: it stamps the draft's request
    time and first token, counts streamed chunks as completion tokens, estimates prompt
    tokens, and takes the server's usage when it reports one.

    With ``speculative_audio`` it also shows every frame to that cache before the gate, so the
    held draft's first chunk is synthesised while the turn is still open
    (processors/speculation/speculative_tts.py).

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
        # pipecat keeps its SpeculationGate private, so whether it is holding the answer now
        # is followed here from the same frames, in the same order, by the gate's own rules:
        # an inference is speculative when its context frame says so and the turn has not
        # ended; its response is held from its start frame until the turn ends (released) or
        # the draft is withdrawn or interrupted (dropped).
        self._inference_speculative = False
        self._turn_ended = False
        self._holding = False

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Note which draft (if any) the inference now starting belongs to."""
        if isinstance(frame, LLMContextFrame) and self.speculation_stats is not None:
            draft = self.speculation_stats.take_request() if frame.speculation else None
            if draft is not None:
                draft.prompt_tokens = self._estimate_prompt_tokens(frame)
            self._accounted = draft
        if isinstance(frame, LLMContextFrame):
            self._inference_speculative = frame.speculation and not self._turn_ended
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
        # What the gate is doing as this frame reaches it, before the frame changes it.
        holding = self._holding
        if direction is FrameDirection.DOWNSTREAM:
            self._follow_gate(frame)
        if self.speculative_audio is not None:
            await self.speculative_audio.before_gate(frame, direction, holding=holding)
        await super().push_frame(frame, direction)

    def _follow_gate(self, frame: Frame):
        """Apply ``frame`` to the mirrored gate state, as the gate is about to."""
        if isinstance(frame, UserStoppedSpeakingFrame):
            self._holding = False
            self._turn_ended = True
            self._inference_speculative = False
        elif isinstance(frame, UserStartedSpeakingFrame):
            self._turn_ended = False
        elif isinstance(frame, (EagerEndOfTurnCancelFrame, InterruptionFrame)):
            self._holding = False
            self._inference_speculative = False
        elif isinstance(frame, LLMFullResponseStartFrame):
            self._holding = self._inference_speculative

    def _estimate_prompt_tokens(self, frame: LLMContextFrame) -> int:
        settings = getattr(self, "_settings", None)
        system = getattr(settings, "system_instruction", None)
        total = estimate_tokens(system) if isinstance(system, str) else 0
        for message in frame.context.get_messages():
            if isinstance(message, dict):
                total += estimate_tokens(str(message.get("content") or ""))
        return total
