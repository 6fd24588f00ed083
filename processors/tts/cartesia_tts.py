"""pipecat's Cartesia websocket TTS, which also opens a held draft's Cartesia context early.

Consumes: text from pipecat's TTS machinery, as ``CartesiaTTSService`` does; with a
``SpeculativeAudioCache`` (processors/speculation/speculative_tts.py), the held draft's first chunk, which
it sends to Cartesia at once in a context of its own (``draft-<id>``).
Emits: what ``CartesiaTTSService`` emits. The draft context's audio and word timestamps are
held until its turn is confirmed; the confirmed turn then *continues that context*: its held
audio plays at once, and the answer's later chunks are sent to the same Cartesia context, so
the voice's prosody runs on across them as it would in one context.
Measures: pipecat's TTS metrics; the cache's ``PrefetchStats``.

Why the draft is its own context and not the turn's: the turn's context id exists only once the
confirmed answer reaches this service, after the speculation gate released it. Cartesia's
context ids are ours to choose, so the turn's id is mapped to the draft's for everything sent
(continuations, the flush, a cancel) and the draft's to the turn's for everything received.
A draft that is cancelled, superseded or interrupted is cancelled at Cartesia too and its held
audio is dropped, so none of it is ever played.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field

from loguru import logger
from pipecat.frames.frames import Frame
from pipecat.services.cartesia.tts import CartesiaTTSService
from websockets.protocol import State

from processors.speculation.speculative_tts import SpeculativeAudioCache, in_background


@dataclass
class _Draft:
    """A held draft's Cartesia context: what came back for it, and the turn that continues it."""

    cartesia_id: str
    sent: asyncio.Task
    drop: Callable[[_Draft], None]
    # Audio frames (None: the end of the context) or word timestamps, with add_word_timestamps's
    # options for the latter.
    held: list[tuple[Frame | list | None, dict | None]] = field(default_factory=list)
    turn_id: str | None = None

    def cancel(self):
        """The draft will not be spoken (the cache's discard); a continued one is the turn's."""
        if self.turn_id is None:
            self.drop(self)


class PrefetchingCartesiaTTSService(CartesiaTTSService):
    """``CartesiaTTSService`` whose confirmed turns continue the context of their held draft."""

    def __init__(self, *, speculative_audio: SpeculativeAudioCache | None = None, **kwargs):
        """Args:
            speculative_audio: The call's cache of a held draft's first chunk, shared with the
                LLM service; None: the service is pipecat's as it is.
            **kwargs: Passed to ``CartesiaTTSService``.
        """
        super().__init__(**kwargs)
        self._speculative_audio = speculative_audio
        self._drafts: dict[str, _Draft] = {}  # by Cartesia context id
        self._continued: dict[str, str] = {}  # turn context id -> the draft's Cartesia id
        if speculative_audio is not None:
            speculative_audio.bind_request(self._open_draft)

    # -- the draft -------------------------------------------------------------------------------

    def _open_draft(self, text: str) -> _Draft:
        cartesia_id = f"draft-{self.create_context_id()}"
        draft = _Draft(cartesia_id, in_background(self._send_draft(cartesia_id, text)), self._drop)
        self._drafts[cartesia_id] = draft
        return draft

    async def _send_draft(self, cartesia_id: str, text: str):
        if not self._websocket or self._websocket.state is not State.OPEN:
            raise ConnectionError("not connected to Cartesia")
        # As pipecat prepares a chunk (its trailing space): the next chunk continues this input.
        # A text transform the service is given is not applied here: its chunk is then a miss.
        message = self._build_msg(text=self._prepare_text_for_tts(text), context_id=cartesia_id)
        await self._websocket.send(message)

    def _drop(self, draft: _Draft):
        self._drafts.pop(draft.cartesia_id, None)
        if not draft.sent.done():
            draft.sent.cancel()
        elif not draft.sent.cancelled() and draft.sent.exception() is None and self._websocket is not None:
            message = json.dumps({"context_id": draft.cartesia_id, "cancel": True})
            in_background(self._websocket.send(message))

    async def _continue(self, draft: _Draft, turn_id: str) -> bool:
        """Make ``draft`` the turn's context; False when it never reached Cartesia."""
        await asyncio.wait({draft.sent})  # wait(), not await: its failure is not this task's
        if draft.sent.cancelled() or draft.sent.exception() is not None:
            reason = "cancelled" if draft.sent.cancelled() else draft.sent.exception()
            logger.warning(f"{self}: the held draft's first chunk was not sent ({reason}); sending it now")
            self._drafts.pop(draft.cartesia_id, None)
            return False
        if self._drafts.get(draft.cartesia_id) is not draft:
            return False  # the connection it was sent on has gone
        self._continued[turn_id] = draft.cartesia_id
        # No await between the last held item and ``turn_id``: nothing received can slip past.
        while draft.held:
            item, timestamps = draft.held.pop(0)
            await self._deliver(turn_id, item, timestamps)
        draft.turn_id = turn_id
        return True

    async def _deliver(self, turn_id: str, item, timestamps: dict | None):
        if timestamps is not None:
            await super().add_word_timestamps(item, turn_id, **timestamps)
            return
        if item is not None:
            item.context_id = turn_id
        await super().append_to_audio_context(turn_id, item)

    # -- pipecat's TTS ---------------------------------------------------------------------------

    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        """Continue the held draft's context when ``text`` is its first chunk; else send it."""
        draft = self._speculative_audio.take(text) if self._speculative_audio else None
        if isinstance(draft, _Draft) and await self._continue(draft, context_id):
            logger.debug(f"{self}: [{text}] continues the held draft's context {draft.cartesia_id}")
            await self.start_tts_usage_metrics(text)
            yield None
            return
        async for frame in super().run_tts(text, context_id):
            yield frame

    def _build_msg(self, text: str = "", continue_transcript: bool = True,
                   add_timestamps: bool = True, context_id: str = ""):
        return super()._build_msg(text, continue_transcript, add_timestamps,
                                  self._continued.get(context_id, context_id))

    async def on_audio_context_interrupted(self, context_id: str):
        """Cancel the Cartesia context the interrupted turn speaks from (its draft's, if any)."""
        cartesia_id = self._continued.pop(context_id, context_id)
        self._drafts.pop(cartesia_id, None)
        await super().on_audio_context_interrupted(cartesia_id)

    # What Cartesia sends for a draft's context is held until its turn is confirmed, then goes
    # to the turn's audio context. pipecat's message loop asks for contexts by the id received.

    def audio_context_available(self, context_id: str) -> bool:
        """A draft's context is available (held) as well as pipecat's own contexts."""
        return context_id in self._drafts or super().audio_context_available(context_id)

    async def append_to_audio_context(self, context_id: str | None, frame):
        """Hold a draft's audio until its turn is confirmed; then it is the turn's."""
        draft = self._drafts.get(context_id)
        if draft is None:
            await super().append_to_audio_context(context_id, frame)
        elif draft.turn_id is None:
            draft.held.append((frame, None))
        else:
            await self._deliver(draft.turn_id, frame, None)

    async def add_word_timestamps(self, word_times, context_id=None, includes_inter_frame_spaces=None,
                                  pre_merge_tokens=False):
        """Hold a draft's word timestamps with its audio."""
        draft = self._drafts.get(context_id)
        options = {"includes_inter_frame_spaces": includes_inter_frame_spaces,
                   "pre_merge_tokens": pre_merge_tokens}
        if draft is None:
            await super().add_word_timestamps(word_times, context_id, **options)
        elif draft.turn_id is None:
            draft.held.append((word_times, options))
        else:
            await self._deliver(draft.turn_id, word_times, options)

    async def remove_audio_context(self, context_id: str | None):
        """A draft's context is done: so is the turn that continued it."""
        draft = self._drafts.pop(context_id, None)
        if draft is None:
            await super().remove_audio_context(context_id)
        elif draft.turn_id is not None:
            self._continued.pop(draft.turn_id, None)
            await super().remove_audio_context(draft.turn_id)

    async def _disconnect(self):
        await super()._disconnect()
        # Cartesia keeps contexts per connection: a draft sent on this one cannot be continued.
        self._drafts.clear()
        self._continued.clear()

    async def cleanup(self):
        """Drop a draft the call ended before."""
        if self._speculative_audio is not None:
            self._speculative_audio.discard("the call ended")
        await super().cleanup()
