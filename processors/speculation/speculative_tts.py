"""Speculative TTS: a held draft's first chunk is synthesised before its turn is confirmed.

Consumes: on the LLM side (through ``DraftAccountingMixin``, which calls
:meth:`SpeculativeAudioCache.before_gate` for every frame the LLM service pushes, *before*
pipecat's ``SpeculationGate`` holds or drops it) the draft's ``LLMTextFrame``s while the gate
is holding them, ``UserStoppedSpeakingFrame`` (the gate releases: the turn is confirmed),
``EagerEndOfTurnCancelFrame`` and ``InterruptionFrame`` (the gate drops the draft) and
``LLMFullResponseStartFrame`` (a new answer supersedes an unconfirmed draft). On the TTS side
the service binds its synthesiser and asks :meth:`SpeculativeAudioCache.take` for each text it
is about to speak.
Emits: nothing into the pipeline. The audio is handed to the TTS service's ``run_tts`` only,
which pushes it like audio it has just synthesised. A service that synthesises locally (hibari,
espeak) binds a coroutine that returns the chunk's PCM (:meth:`SpeculativeAudioCache.bind`); one
that streams from a server binds a function that opens the server's own speculative request and
returns its handle (:meth:`SpeculativeAudioCache.bind_request`: Cartesia opens a context, which
the confirmed turn then continues, processors/tts/cartesia_tts.py).
Measures: :class:`PrefetchStats` — prefetches started, used, discarded, missed.

Why a shared object and not a frame: while the gate holds a draft it holds every non-system
frame the LLM pushes, so a data frame carrying the chunk would arrive only after the
confirmation, too late; a system frame would pass, but it would need a new frame type and
would reach the TTS out of band with no tie to the answer it belongs to. One object per call,
handed to both services, keeps the hand-off explicit and testable.

Safety: audio is keyed by the exact text the TTS is asked to speak, and it is handed out only
after the gate released the draft it was made for. A cancelled, superseded or interrupted draft
drops it (its synthesis task is cancelled), so its audio never reaches the output; a live cut
that differs from the prefetched one (other chunking rules, a text transform) is a miss and the
TTS synthesises the text as usual.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Protocol

from loguru import logger
from pipecat.frames.frames import (
    EagerEndOfTurnCancelFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameDirection

from processors.tts.sentence_chunker import SentenceFirstAggregator, SentenceFirstConfig

# The TTS's synthesiser: text -> its PCM, in the pieces the TTS would stream.
Synthesize = Callable[[str], Awaitable[list[bytes]]]


class Prefetched(Protocol):
    """What a TTS made of a held draft's first chunk: PCM being synthesised (an asyncio.Task)
    or a request a TTS server is answering (a Cartesia context). Cancelling it drops its audio."""

    def cancel(self) -> object: ...


# A streaming TTS's opener: text -> a handle on the request it started for that text.
Request = Callable[[str], Prefetched]

_SPACES = re.compile(r"\s+")


def _key(text: str) -> str:
    # pipecat's TTS may add a trailing space to the chunk (append_trailing_space).
    return _SPACES.sub(" ", text).strip()


@dataclass
class PrefetchStats:
    """What became of one call's prefetched first chunks."""

    started: int = 0  # a held draft's first chunk went to synthesis
    used: int = 0  # its audio was spoken instead of a second synthesis
    discarded: int = 0  # the draft was cancelled, superseded or interrupted
    missed: int = 0  # the confirmed answer's first spoken chunk was another text

    def as_dict(self) -> dict:
        """The counters as a plain dict."""
        return asdict(self)


@dataclass
class _Prefetch:
    key: str
    task: Prefetched
    committed: bool = False


class SpeculativeAudioCache:
    """One call's prefetched audio for the first chunk of a held speculative answer.

    Create one per call and hand it to the LLM service (``speculative_audio=`` on
    ``DraftAccountingMixin``) and to the TTS service (``speculative_audio=`` on
    ``HibariTTSService``, ``EspeakTTSService`` or ``PrefetchingCartesiaTTSService``), with the
    ``SentenceFirstConfig`` the pipeline's ``SentenceChunker`` uses, so the chunk cut here is the
    one the TTS will be asked for.
    """

    def __init__(self, chunking: SentenceFirstConfig | None = None):
        """Args: chunking: the SentenceChunker's rules; ``SentenceFirstConfig()`` when None."""
        self._cutter = SentenceFirstAggregator(chunking)
        self._open: Request | None = None
        self._prefetch: _Prefetch | None = None
        # Whether the answer now streaming is held and its first chunk not cut yet.
        self._cutting = False
        self.stats = PrefetchStats()

    def bind(self, synthesize: Synthesize):
        """Called by a local TTS service with the coroutine that synthesises a text off the loop."""
        self._open = lambda text: in_background(synthesize(text))

    def bind_request(self, open_request: Request):
        """Called by a streaming TTS service with the function that asks its server for a text."""
        self._open = open_request

    @property
    def pending_text(self) -> str | None:
        """The text whose audio is prefetched or being prefetched, if any."""
        return self._prefetch.key if self._prefetch else None

    # -- LLM side --------------------------------------------------------------------------------

    async def before_gate(self, frame: Frame, direction: FrameDirection, *, holding: bool):
        """See a frame the LLM service pushes, before its speculation gate decides on it.

        Args:
            frame: The frame being pushed.
            direction: Its direction; the gate only acts on downstream frames.
            holding: Whether the gate is holding a speculative answer right now.
        """
        if direction != FrameDirection.DOWNSTREAM or self._open is None:
            return
        if isinstance(frame, (EagerEndOfTurnCancelFrame, InterruptionFrame)):
            self._cutting = False
            self.discard(type(frame).__name__)
        elif isinstance(frame, UserStoppedSpeakingFrame):
            # The gate releases what it holds on this frame: the draft's turn is confirmed.
            if holding and self._prefetch is not None:
                self._prefetch.committed = True
        elif isinstance(frame, LLMFullResponseStartFrame):
            if self._prefetch is not None and not self._prefetch.committed:
                self.discard("superseded by a new answer")
            await self._cutter.reset()
            self._cutting = True
        elif isinstance(frame, LLMTextFrame) and self._cutting:
            if not holding or frame.skip_tts:
                # A live answer goes straight to the TTS: nothing to win by prefetching it.
                self._cutting = False
                return
            chunks = [chunk async for chunk in self._cutter.aggregate(frame.text)]
            if chunks:
                self._start(chunks[0].text)
        elif isinstance(frame, LLMFullResponseEndFrame) and self._cutting:
            # An answer shorter than a first chunk: the chunker flushes it whole at its end.
            tail = await self._cutter.flush()
            if holding and tail is not None:
                self._start(tail.text)
            self._cutting = False

    # -- a held answer known whole (the fast path's) --------------------------------------------

    async def prefetch_answer(self, text: str):
        """Synthesise the first chunk of an answer that is held, whole, until its turn is confirmed.

        The fast path (processors/fast_path.py) knows a speculative turn's answer at once; its
        audio is made while the caller is still finishing, as a draft's is. ``confirm`` when the
        turn is confirmed, ``discard`` when it is withdrawn.
        """
        if self._open is None:
            return
        await self._cutter.reset()
        chunks = [chunk async for chunk in self._cutter.aggregate(text)]
        first = chunks[0] if chunks else await self._cutter.flush()
        self._cutting = False
        if first is not None:
            self._start(first.text)

    def confirm(self):
        """The held answer's turn is confirmed: its prefetched audio may be spoken."""
        if self._prefetch is not None:
            self._prefetch.committed = True

    def _start(self, text: str):
        self._cutting = False
        self.discard("replaced by a newer draft")
        self._prefetch = _Prefetch(_key(text), self._open(text))
        self.stats.started += 1
        logger.debug(f"speculative TTS: prefetching the held draft's first chunk [{text}]")

    # -- TTS side --------------------------------------------------------------------------------

    def take(self, text: str) -> Prefetched | None:
        """The prefetched audio for ``text``, once its draft is confirmed; else None.

        The first text the TTS speaks after a confirmation is the confirmed answer's first
        chunk, so a different text means the prefetch missed: it is dropped either way.

        Returns:
            What the bound opener returned: for :meth:`bind`, a task whose result is the PCM
            pieces (await it: it may still be synthesising).
        """
        prefetch = self._prefetch
        if prefetch is None or not prefetch.committed:
            return None
        self._prefetch = None
        if prefetch.key == _key(text):
            self.stats.used += 1
            return prefetch.task
        prefetch.task.cancel()
        self.stats.missed += 1
        logger.debug(f"speculative TTS: missed, [{prefetch.key}] prefetched, [{_key(text)}] spoken")
        return None

    def discard(self, reason: str):
        """Drop the prefetched audio (cancelling its synthesis) so it is never spoken."""
        prefetch, self._prefetch = self._prefetch, None
        if prefetch is None:
            return
        prefetch.task.cancel()
        self.stats.discarded += 1
        logger.debug(f"speculative TTS: discarded [{prefetch.key}] ({reason})")


async def spoken_pcm(cache: SpeculativeAudioCache | None, text: str,
                     synthesize: Callable[[str], AsyncIterator[bytes]]) -> AsyncIterator[bytes]:
    """A local TTS's audio for ``text``: the prefetched PCM when ``cache`` holds it for this
    text, else ``synthesize(text)`` as it streams."""
    prefetched = cache.take(text) if cache is not None else None
    if prefetched is None:
        async for chunk in synthesize(text):
            yield chunk
        return
    for chunk in await prefetched:
        yield chunk


def in_background(synthesis: Awaitable) -> asyncio.Task:
    """Run a prefetch's synthesis as a task whose failure is reported only if it is spoken."""
    task = asyncio.get_running_loop().create_task(synthesis)
    task.add_done_callback(_retrieve_exception)
    return task


def _retrieve_exception(task: asyncio.Task):
    # A failed prefetch is reported by run_tts if its audio is ever asked for; a dropped one is
    # of no interest. Either way asyncio must not log it as never retrieved.
    if not task.cancelled():
        task.exception()
