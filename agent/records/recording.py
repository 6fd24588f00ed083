"""One call's recording: the caller on the left, the bot on the right, a 16 kHz stereo WAV.

Consumes the call's audio through pipecat's ``AudioBufferProcessor`` (placed after the output
transport, where the caller's audio and the bot's audio as sent both pass), which hands over
a second at a time; each second is appended to the file and the WAV header is patched at once
(Python's ``wave`` does that on every write), so a crash leaves a playable file up to the last
second. Memory stays at one second per call. The file is
``<data_dir>/recordings/<YYYY-MM-DD>/<call id, made safe>.wav``; agent/records/retention.py
deletes old ones.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import wave
from datetime import datetime, timezone
from pathlib import Path

from loguru import logger
from pipecat.processors.audio.audio_buffer_processor import AudioBufferProcessor

SAMPLE_RATE = 16000
CHANNELS = 2


def recording_path(recordings_dir: Path, call_id: str, when: datetime | None = None) -> Path:
    """Where ``call_id``'s recording goes: call ids hold '#', ':' and such, so only a safe form is used."""
    when = when or datetime.now(timezone.utc)
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", call_id)[:80]
    digest = hashlib.sha256(call_id.encode()).hexdigest()[:8]  # two ids that make the same safe form
    return recordings_dir / when.strftime("%Y-%m-%d") / f"{safe}-{digest}.wav"


class CallAudio:
    """Records one call into ``path``; put ``processor`` after the output transport."""

    def __init__(self, path: Path):
        self.path = path
        self.processor = AudioBufferProcessor(
            sample_rate=SAMPLE_RATE, num_channels=CHANNELS, buffer_size=SAMPLE_RATE * 2,  # 1 s per track
            auto_start_recording=True)
        self.seconds = 0.0
        self._file: wave.Wave_write | None = None
        self._raw = None  # the open file under it, flushed after every second
        self._finished = asyncio.Event()
        self.processor.add_event_handler("on_audio_data", self._on_audio)
        self.processor.add_event_handler("on_recording_stopped", self._on_stopped)

    async def _on_audio(self, _processor, audio: bytes, sample_rate: int, channels: int) -> None:
        try:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._raw = open(self.path, "wb")
                self._file = wave.open(self._raw, "wb")
                self._file.setnchannels(channels)
                self._file.setsampwidth(2)
                self._file.setframerate(sample_rate)
            # A second of audio into the page cache is well under a millisecond: written here,
            # in order, rather than from a thread that could reorder seconds.
            self._file.writeframes(audio)
            self._raw.flush()  # the patched header and the data reach the OS: a crash keeps them
            self.seconds += len(audio) / (2 * channels * sample_rate)
        except OSError:
            logger.exception(f"recording {self.path}: could not write; the call goes on unrecorded")
            self._close_file()

    async def _on_stopped(self, _processor) -> None:
        # pipecat runs these handlers in the order they were called: the last second is written.
        self._close_file()
        self._finished.set()

    async def close(self) -> bool:
        """Finish the file once the call is over; whether there is one."""
        try:
            await asyncio.wait_for(self._finished.wait(), timeout=2.0)
        except asyncio.TimeoutError:
            self._close_file()
        return self.path.exists()

    def _close_file(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
                self._raw.close()
            except OSError:
                logger.exception(f"recording {self.path}: could not be closed")
            self._file = self._raw = None
