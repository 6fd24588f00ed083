"""A LiveKit room as ``run_room`` sees it, with no LiveKit media server: a caller who speaks a clip.

``RoomTransport`` stands where pipecat's ``LiveKitTransport`` stands (``run_room(join=...)``):
its input plays the caller's clip in real time, then silence for as long as the caller stays;
its output takes the bot's audio as a room's track would, in real time, and keeps it; it has the
participants and the events ``run_room`` uses (``on_first_participant_joined``,
``on_participant_disconnected``, ``on_disconnected``). The LiveKit stand-in
(tests/fakes/livekit_server.py) dispatches the room; this is the room's audio.
"""

import asyncio
import threading

import numpy as np
from pipecat.frames.frames import InputAudioRawFrame, OutputAudioRawFrame, StartFrame
from pipecat.transports.base_input import BaseInputTransport
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.transports.base_transport import BaseTransport, TransportParams

FRAME_S = 0.02


class _CallerInput(BaseInputTransport):
    def __init__(self, samples: np.ndarray, rate: int, params: TransportParams, on_start):
        super().__init__(params)
        self._samples, self._rate = samples.astype(np.int16), rate
        self._on_start = on_start
        self._task = None

    async def start(self, frame: StartFrame):
        await super().start(frame)
        await self.set_transport_ready(frame)
        self._task = self.create_task(self._speak())
        await self._on_start()

    async def _speak(self):
        step = int(self._rate * FRAME_S)
        loop = asyncio.get_running_loop()
        began = loop.time()
        for n in range(10**9):  # the clip, then silence until the call ends
            chunk = self._samples[n * step:(n + 1) * step]
            chunk = np.pad(chunk, (0, step - len(chunk)))
            await self.push_audio_frame(InputAudioRawFrame(chunk.tobytes(), self._rate, 1))
            # A microphone's pace: each frame when its time comes, not as fast as the loop runs.
            await asyncio.sleep(max(0.0, began + (n + 1) * FRAME_S - loop.time()))

    async def cleanup(self):
        if self._task is not None:
            await self.cancel_task(self._task)
        await super().cleanup()


class _RoomOutput(BaseOutputTransport):
    def __init__(self, params: TransportParams):
        super().__init__(params)
        self.audio: list[bytes] = []

    async def start(self, frame: StartFrame):
        await super().start(frame)
        await self.set_transport_ready(frame)

    async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
        self.audio.append(frame.audio)
        await asyncio.sleep(len(frame.audio) / 2 / frame.sample_rate)  # played as a track plays it
        return True


class RoomTransport(BaseTransport):
    """One caller in one room; ``leave()`` (from any thread) is the caller hanging up."""

    def __init__(self, samples: np.ndarray, rate: int = 16000):
        super().__init__()
        params = TransportParams(audio_in_enabled=True, audio_out_enabled=True, audio_in_sample_rate=rate)
        self._input = _CallerInput(samples, rate, params, on_start=self.join)
        self._output = _RoomOutput(params)
        self.participants = ["caller"]
        self.joined = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        for event in ("on_first_participant_joined", "on_participant_disconnected", "on_disconnected"):
            self._register_event_handler(event)

    def input(self) -> BaseInputTransport:
        return self._input

    def output(self) -> BaseOutputTransport:
        return self._output

    def get_participants(self) -> list[str]:
        return list(self.participants)

    @property
    def heard(self) -> bytes:
        """The bot's audio as it went out to the room."""
        return b"".join(self._output.audio)

    async def join(self) -> None:
        """The caller is in the room: what LiveKit says once the bot's participant has joined
        (here, once the room's input has started)."""
        self._loop = asyncio.get_running_loop()
        self.joined.set()
        await self._call_event_handler("on_first_participant_joined", "caller")

    def leave(self) -> None:
        """The caller leaves, from the test's thread: the room's loop hears it."""
        def gone():
            self.participants.clear()
            asyncio.ensure_future(self._call_event_handler("on_participant_disconnected", "caller"))

        self._loop.call_soon_threadsafe(gone)
