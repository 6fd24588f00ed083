"""Processors that take a known time to answer, for testing latency measurement.

``DelayProcessor`` holds frames for known times before passing them on;
``DelayedEmitProcessor`` answers each trigger frame with a new frame after a known time.
The ``Delayed*Service`` classes and ``InstantOutputTransport`` stand in for the STT, LLM and
TTS services and the output transport of a voice pipeline: they are the real pipecat base
classes, so anything that tells services apart with ``isinstance`` sees them as such, and each
answers its input after a known delay.
"""

import asyncio
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import fields
from typing import TypeVar

from pipecat.frames.frames import (
    ControlFrame,
    Frame,
    FunctionCallFromLLM,
    FunctionCallResultFrame,
    FunctionCallsStartedFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    OutputAudioRawFrame,
    StartFrame,
    SystemFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import LLMService
from pipecat.services.settings import LLMSettings, ServiceSettings, STTSettings, TTSSettings
from pipecat.services.stt_service import STTService
from pipecat.services.tts_service import TTSService
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.transports.base_transport import TransportParams
from pipecat.utils.time import time_now_iso8601


_S = TypeVar("_S", bound=ServiceSettings)


def _nothing_supported(settings: type[_S]) -> _S:
    """Settings of a service that has no model, voice or tunables: every field None."""
    return settings(**{f.name: None for f in fields(settings) if f.name != "extra"})


class DelayProcessor(FrameProcessor):
    """Passes every frame on; the frames it delays only after a known delay.

    By default it delays data frames; system and control frames go straight through so the
    pipeline starts and stops on time.
    """

    def __init__(
        self,
        delay_s: float | Sequence[float],
        *,
        on_frame: Callable[[Frame], None] | None = None,
        delay_types: tuple[type[Frame], ...] | None = None,
        **kwargs,
    ):
        """Create the processor.

        Args:
            delay_s: How long each delayed frame is held: one delay for all, or one per
                delayed frame in arrival order (the last repeats).
            on_frame: Called with every frame as it arrives, for a test that must act at a
                known point of the stream.
            delay_types: The frame classes to delay, instead of every data frame. A
                delayed system frame also holds back the system frames behind it.
            **kwargs: Passed to ``FrameProcessor``.
        """
        super().__init__(**kwargs)
        self._delays = [delay_s] if isinstance(delay_s, int | float) else list(delay_s)
        self._on_frame = on_frame
        self._delay_types = delay_types
        self._held = 0

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Hold the frames it delays, then push every frame on."""
        await super().process_frame(frame, direction)
        if self._on_frame:
            self._on_frame(frame)
        if self._delays_frame(frame):
            await asyncio.sleep(self._delays[min(self._held, len(self._delays) - 1)])
            self._held += 1
        await self.push_frame(frame, direction)

    def _delays_frame(self, frame: Frame) -> bool:
        if self._delay_types is not None:
            return isinstance(frame, self._delay_types)
        return not isinstance(frame, (SystemFrame, ControlFrame))


class DelayedEmitProcessor(FrameProcessor):
    """Answers each downstream ``trigger`` frame with ``make_frame(trigger)`` after ``delay_s``.

    The trigger is consumed, as a service consumes its input; other frames pass through.
    """

    def __init__(
        self,
        *,
        trigger: type[Frame],
        make_frame: Callable[[Frame], Frame],
        delay_s: float,
        **kwargs,
    ):
        """Create the processor.

        Args:
            trigger: The frame class that is answered.
            make_frame: Builds the answer from the trigger.
            delay_s: How long after the trigger arrives the answer is pushed.
            **kwargs: Passed to ``FrameProcessor``.
        """
        super().__init__(**kwargs)
        self._trigger = trigger
        self._make_frame = make_frame
        self.delay_s = delay_s

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Answer triggers after ``delay_s``; pass everything else on."""
        await super().process_frame(frame, direction)
        if direction is FrameDirection.DOWNSTREAM and isinstance(frame, self._trigger):
            await asyncio.sleep(self.delay_s)
            await self.push_frame(self._make_frame(frame), direction)
        else:
            await self.push_frame(frame, direction)


class DelayedSTTService(STTService):
    """Transcribes each utterance as ``text``, ``delay_s`` after the VAD says it stopped."""

    def __init__(self, *, text: str, delay_s: float, **kwargs):
        """Create the service.

        Args:
            text: The transcript of every utterance.
            delay_s: Time from ``VADUserStoppedSpeakingFrame`` to the ``TranscriptionFrame``.
            **kwargs: Passed to ``STTService``.
        """
        super().__init__(
            settings=_nothing_supported(STTSettings), ttfs_p99_latency=delay_s, **kwargs
        )
        self._text = text
        self.delay_s = delay_s

    async def run_stt(self, audio: bytes) -> AsyncGenerator[Frame | None, None]:
        """Audio is not listened to: the transcript is known in advance."""
        yield None

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Pass frames on as the base class does, and transcribe after a VAD stop."""
        await super().process_frame(frame, direction)
        if isinstance(frame, VADUserStoppedSpeakingFrame):
            await asyncio.sleep(self.delay_s)
            await self.push_frame(TranscriptionFrame(self._text, "user", time_now_iso8601()))


class DelayedLLMService(LLMService):
    """Answers each ``LLMContextFrame`` with ``tokens``, the first ``delay_s`` after the request."""

    def __init__(self, *, tokens: Sequence[str], delay_s: float, gap_s: float = 0.0, **kwargs):
        """Create the service.

        Args:
            tokens: The response, as the text of successive ``LLMTextFrame``s.
            delay_s: Time from the request to the first token.
            gap_s: Time between tokens (a slow decode: the bot's audio can run dry).
            **kwargs: Passed to ``LLMService``.
        """
        super().__init__(settings=_nothing_supported(LLMSettings), **kwargs)
        self._tokens = list(tokens)
        self.delay_s = delay_s
        self.gap_s = gap_s

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Stream the response to a context; pass other frames on."""
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMContextFrame):
            await self.push_frame(LLMFullResponseStartFrame())
            await asyncio.sleep(self.delay_s)
            for n, token in enumerate(self._tokens):
                if n and self.gap_s:
                    await asyncio.sleep(self.gap_s)
                await self.push_frame(LLMTextFrame(token))
            await self.push_frame(LLMFullResponseEndFrame())
        else:
            await self.push_frame(frame, direction)


class DelayedToolLLMService(LLMService):
    """Answers each ``LLMContextFrame`` with a tool call that takes ``tool_s``, a ``filler`` said
    while it runs, and then ``tokens``: the frames pipecat's LLM service and Brisk's tool filler
    push on a slow tool turn."""

    def __init__(self, *, filler: str, tool_s: float, tokens: Sequence[str], **kwargs):
        super().__init__(settings=_nothing_supported(LLMSettings), **kwargs)
        self._filler = filler
        self.tool_s = tool_s
        self._tokens = list(tokens)

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Call the tool, fill, give its result, answer; pass other frames on."""
        await super().process_frame(frame, direction)
        if not isinstance(frame, LLMContextFrame):
            await self.push_frame(frame, direction)
            return
        call = FunctionCallFromLLM(function_name="lookup_order", tool_call_id="call-1", arguments={}, context=None)
        await self.push_frame(LLMFullResponseStartFrame())
        await self.push_frame(FunctionCallsStartedFrame(function_calls=[call]))
        await self.push_frame(LLMFullResponseEndFrame())
        await self.push_frame(TTSSpeakFrame(self._filler, append_to_context=False))
        await asyncio.sleep(self.tool_s)
        await self.push_frame(FunctionCallResultFrame(function_name=call.function_name, tool_call_id=call.tool_call_id,
                                                      arguments={}, result={"found": True}))
        if self._tokens:
            await self.push_frame(LLMFullResponseStartFrame())
            for token in self._tokens:
                await self.push_frame(LLMTextFrame(token))
            await self.push_frame(LLMFullResponseEndFrame())


class DelayedTTSService(TTSService):
    """Speaks each sentence as ``chunks`` frames of silence, the first after ``delay_s``."""

    def __init__(self, *, delay_s: float, chunks: int = 3, **kwargs):
        """Create the service.

        Args:
            delay_s: Time from a sentence reaching synthesis to its first audio.
            chunks: 20 ms audio frames per sentence.
            **kwargs: Passed to ``TTSService``. Without a ``sample_rate`` it speaks at the
                pipeline's output rate, so the output transport need not resample (its
                resampler holds back the first few milliseconds of audio).
        """
        super().__init__(
            push_start_frame=True,
            push_stop_frames=True,
            settings=_nothing_supported(TTSSettings),
            **kwargs,
        )
        self.delay_s = delay_s
        self._chunks = chunks

    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        """Yield the sentence's audio after ``delay_s``."""
        await asyncio.sleep(self.delay_s)
        chunk = b"\x00\x01" * (self.sample_rate // 50)  # not silent: the transport plays it
        for _ in range(self._chunks):
            yield TTSAudioRawFrame(chunk, self.sample_rate, 1, context_id=context_id)


class InstantOutputTransport(BaseOutputTransport):
    """An output transport whose peer takes every audio frame at once.

    It is pipecat's own output transport otherwise, so it reports
    ``BotStartedSpeakingFrame``/``BotStoppedSpeakingFrame`` as a real one does.
    """

    def __init__(self, *, sample_rate: int | None = None, **kwargs):
        """Create the transport with audio output enabled (at ``sample_rate``: the pipeline's when None)."""
        super().__init__(TransportParams(audio_out_enabled=True, audio_out_sample_rate=sample_rate), **kwargs)

    async def start(self, frame: StartFrame):
        """Start and declare itself ready, as a connected transport does."""
        await super().start(frame)
        await self.set_transport_ready(frame)

    async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
        """Accept the frame."""
        return True
