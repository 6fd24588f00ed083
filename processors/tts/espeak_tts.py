"""espeak-ng as a pipecat TTS service: robotic, instant, and always installed (CI, fallback).

Consumes: text from pipecat's TTS machinery (LLM text, TTSSpeakFrame).
Emits: TTSStartedFrame, TTSAudioRawFrames at espeak's native 22050 Hz (or the rate asked for,
through pipecat's resampler) as espeak writes them, TTSStoppedFrame; an ErrorFrame upstream
when espeak fails.
Measures: pipecat's TTS metrics (TTFB to espeak's first audio, processing, usage).

With a ``SpeculativeAudioCache`` (processors/speculation/speculative_tts.py) it also runs espeak on a held
speculative answer's first chunk ahead of time, and speaks that audio when the confirmed answer
asks for the same text.
"""

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field

from pipecat.frames.frames import Frame
from pipecat.services.settings import TTSSettings
from pipecat.services.tts_service import TTSService
from pipecat.utils.tracing.service_decorators import traced_tts
from pipecat.utils.types import NOT_GIVEN, NotGiven, assert_given

from processors.speculation.speculative_tts import SpeculativeAudioCache, in_background

ESPEAK_SAMPLE_RATE = 22050
FRAME_SECONDS = 0.04
_WAV_HEADER_BYTES = 44  # espeak-ng --stdout writes a plain 44-byte PCM header


class EspeakError(RuntimeError):
    """espeak-ng failed or wrote something other than a WAV stream."""


def _describe_failure(returncode: int, stderr: bytes) -> str:
    message = stderr.decode(errors="replace").strip()
    return f"exit status {returncode}" + (f": {message}" if message else "")


@dataclass
class EspeakTTSSettings(TTSSettings):
    """Settings for EspeakTTSService.

    Parameters:
        voice: An espeak-ng voice name (`espeak-ng --voices`), e.g. "en-us".
        words_per_minute: Speaking rate (espeak's -s; 80..450).
    """

    words_per_minute: int | NotGiven = field(default_factory=lambda: NOT_GIVEN)


class EspeakTTSService(TTSService):
    """Runs one espeak-ng process per text and streams its stdout as audio."""

    Settings = EspeakTTSSettings
    _settings: Settings

    def __init__(
        self,
        *,
        executable: str = "espeak-ng",
        settings: Settings | None = None,
        speculative_audio: SpeculativeAudioCache | None = None,
        **kwargs,
    ):
        """Create the service.

        Args:
            executable: The espeak-ng binary to run.
            settings: Voice and words per minute (defaults: "en-us", 175).
            speculative_audio: The call's cache of a held draft's first chunk, shared with the
                LLM service; this service synthesises into it and speaks from it.
            **kwargs: Passed to `TTSService`. `sample_rate` defaults to espeak's 22050 Hz, so
                the output transport resamples if it runs at another rate.
        """
        default_settings = self.Settings(
            model=None, voice="en-us", language=None, words_per_minute=175
        )
        if settings is not None:
            default_settings.apply_update(settings)
        kwargs.setdefault("sample_rate", ESPEAK_SAMPLE_RATE)
        super().__init__(
            push_start_frame=True,
            push_stop_frames=True,
            settings=default_settings,
            **kwargs,
        )
        self._executable = executable
        self._speculative_audio = speculative_audio
        if speculative_audio is not None:
            speculative_audio.bind_request(lambda text: in_background(self._prefetch(text)))

    def can_generate_metrics(self) -> bool:
        """TTFB, processing and usage metrics are supported."""
        return True

    @traced_tts
    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame, None]:
        """Speak `text` with espeak-ng, yielding audio as the process writes it (or as it was
        prefetched for a confirmed draft)."""
        process = None
        try:
            await self.start_tts_usage_metrics(text)
            prefetched = self._speculative_audio.take(text) if self._speculative_audio else None
            if prefetched is not None:
                sample_rate, pieces = await prefetched
                audio = _replay(pieces)
            else:
                process = await self._start_espeak(text)
                sample_rate = await self._read_wav_header(process)
                audio = self._pcm_chunks(process.stdout, sample_rate)
            async for frame in self._stream_audio_frames_from_iterator(
                audio, in_sample_rate=sample_rate, context_id=context_id
            ):
                await self.stop_ttfb_metrics()
                yield frame
            if process is not None:
                await self._check_exit(process)
        except Exception as e:
            await self.push_error(error_msg=f"espeak-ng could not speak [{text}]: {e}", exception=e)
        finally:
            await self.stop_ttfb_metrics()
            await _stop(process)

    async def cleanup(self):
        """Drop audio prefetched for a draft the call ended before."""
        await super().cleanup()
        if self._speculative_audio is not None:
            self._speculative_audio.discard("the call ended")

    async def _prefetch(self, text: str) -> tuple[int, list[bytes]]:
        """The whole of `text`'s audio (a first chunk: a clause) and its sample rate."""
        process = await self._start_espeak(text)
        try:
            sample_rate = await self._read_wav_header(process)
            pieces = [chunk async for chunk in self._pcm_chunks(process.stdout, sample_rate)]
            await self._check_exit(process)
            return sample_rate, pieces
        finally:
            await _stop(process)

    async def _start_espeak(self, text: str) -> asyncio.subprocess.Process:
        process = await asyncio.create_subprocess_exec(
            self._executable,
            "--stdout",
            "-b", "1",  # UTF-8 input
            "-v", assert_given(self._settings.voice),
            "-s", str(assert_given(self._settings.words_per_minute)),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        # Text goes through stdin so that text starting with "-" is not read as an option.
        process.stdin.write(text.encode())
        process.stdin.close()
        return process

    @staticmethod
    async def _check_exit(process: asyncio.subprocess.Process):
        _, stderr = await process.communicate()
        if process.returncode != 0:
            raise EspeakError(_describe_failure(process.returncode, stderr))

    async def _read_wav_header(self, process: asyncio.subprocess.Process) -> int:
        try:
            header = await process.stdout.readexactly(_WAV_HEADER_BYTES)
        except asyncio.IncompleteReadError:
            _, stderr = await process.communicate()
            raise EspeakError(_describe_failure(process.returncode, stderr)) from None
        if header[:4] != b"RIFF" or header[8:12] != b"WAVE":
            raise EspeakError(f"unexpected output header {header[:12]!r}")
        return int.from_bytes(header[24:28], "little")

    @staticmethod
    async def _pcm_chunks(stdout: asyncio.StreamReader, sample_rate: int) -> AsyncIterator[bytes]:
        # read(n) returns whatever espeak has written so far, up to one frame's worth.
        frame_bytes = int(sample_rate * FRAME_SECONDS) * 2
        while chunk := await stdout.read(frame_bytes):
            yield chunk


async def _replay(pieces: list[bytes]) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece


async def _stop(process: asyncio.subprocess.Process | None):
    # An interruption cancels us mid-read: the process must not outlive the request.
    if process is not None and process.returncode is None:
        process.kill()
        await process.wait()
