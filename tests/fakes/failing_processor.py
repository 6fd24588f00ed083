"""A processor that reports an error, as a failing service does, whenever a given frame passes."""

from pipecat.frames.frames import Frame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor


class ErrorOnFrameProcessor(FrameProcessor):
    """Passes every frame on; for each ``trigger`` frame also pushes an ``ErrorFrame`` upstream."""

    def __init__(self, trigger: type[Frame], error: str, **kwargs):
        super().__init__(**kwargs)
        self._trigger = trigger
        self._error = error

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if isinstance(frame, self._trigger):
            await self.push_error(self._error)
        await self.push_frame(frame, direction)
