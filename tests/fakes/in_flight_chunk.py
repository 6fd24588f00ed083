"""Reproduces the chunk an output transport writes after an interruption reached it.

pipecat's output transport can have taken an audio chunk off its queue just before an
interruption resets that queue; it writes the chunk after saying the bot stopped, and says the
bot started again. ``InFlightChunk`` (put right before the transport, in direct mode so the
interruption does not clear it) holds back the first audio frames of one turn and sends them on
right after the next ``InterruptionFrame``: the transport then goes through exactly that.
"""

from __future__ import annotations

from pipecat.frames.frames import Frame, InterruptionFrame, OutputAudioRawFrame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from frames.turn import TURN_ID


class InFlightChunk(FrameProcessor):
    """Holds turn ``turn_id``'s first ``frames`` audio frames until the next interruption has passed."""

    def __init__(self, turn_id: int = 1, frames: int = 1, **kwargs):
        super().__init__(enable_direct_mode=True, **kwargs)
        self._turn_id = turn_id
        self._to_hold = frames
        self._held: list[Frame] = []

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if (self._to_hold and direction is FrameDirection.DOWNSTREAM and isinstance(frame, OutputAudioRawFrame)
                and frame.metadata.get(TURN_ID) == self._turn_id):
            self._held.append(frame)
            self._to_hold -= 1
            return
        await self.push_frame(frame, direction)
        if isinstance(frame, InterruptionFrame):
            held, self._held = self._held, []
            for chunk in held:
                await self.push_frame(chunk)
