"""Speech already synthesised, kept for the next time the same words are said in the same voice.

Consumes: a TTS service's key for a text (the voice, the pace, the text, how its silence is
cut) and, after a whole synthesis, the PCM of each of its sentences. Returns them on a later
``get`` of the same key; emits nothing into the pipeline.
Measures: per call, ``PhraseStats`` (texts spoken from the cache and texts synthesised).

Why: a business's line says a few texts over and over — the fast path's fixed answers ("I'm
sorry, I don't know that. Would you like me to put you through to a person?"), the greeting,
the hand-over line. On two cores their synthesis lands at the turn's end, beside the second
opinion that decides it (hibari is quick, so the gain measured was small: docs/benchmarks.md,
"2026-12-04 23:31"). The cache is one of the
things made to be shared between calls, like the models: audio is bytes nobody mutates, and it
is bounded by size, least recently used first out, so it never grows with the process's life.

Not a library's LRU (functools.lru_cache, cachetools): entries are filled after an async
synthesis that may be cancelled halfway, and the bound is in bytes, not entries.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import asdict, dataclass


@dataclass
class PhraseStats:
    """One call's use of the phrase cache."""

    hits: int = 0  # texts spoken from the cache
    misses: int = 0  # texts synthesised (and then kept)

    def as_dict(self) -> dict:
        """The counters as a plain dict."""
        return asdict(self)


class PhraseCache:
    """Synthesised sentences by text, at most ``max_bytes`` of PCM, shared by every call.

    Used from the event loop only (the services' ``run_tts``), so it needs no lock.
    """

    def __init__(self, max_bytes: int):
        """Args: max_bytes: PCM kept at most; a text longer than this is never kept."""
        if max_bytes <= 0:
            raise ValueError("max_bytes must be > 0 (leave the cache out to switch it off)")
        self.max_bytes = max_bytes
        self.size = 0
        self._entries: OrderedDict[Hashable, tuple[bytes, ...]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> tuple[bytes, ...] | None:
        """Each sentence's PCM for ``key``, or None when it is not kept."""
        pcm = self._entries.get(key)
        if pcm is not None:
            self._entries.move_to_end(key)
        return pcm

    def put(self, key: Hashable, sentences: list[bytes]):
        """Keep the whole synthesis of ``key``, evicting the least recently used to fit."""
        pcm = tuple(sentences)
        size = sum(map(len, pcm))
        if size > self.max_bytes or key in self._entries:
            return
        while self.size + size > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self.size -= sum(map(len, evicted))
        self._entries[key] = pcm
        self.size += size
