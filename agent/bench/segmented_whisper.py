"""pipecat's own segmented Whisper STT (``WhisperSTTService``) on a model loaded once per process.

Consumes audio and VAD frames; emits one ``TranscriptionFrame`` per VAD segment, after it ends,
exactly as pipecat's service does: the baseline pipelines' STT (agent/bench/stock.py). Measures nothing itself.

pipecat's service loads its faster-whisper model in ``__init__``, on the event loop, for every
call it is built for; the benchmark's stock pipelines would pay that per call and stall the other
calls meanwhile, which Brisk's STT does not (it shares one engine, loaded off the loop). ``_load``
is the service's one hook for where the model comes from, so it is overridden to take the model
the runtime loaded once.
"""

from __future__ import annotations

from pipecat.services.whisper.stt import WhisperSTTService


class PreloadedWhisperSTTService(WhisperSTTService):
    def __init__(self, *, model, **kwargs):
        """``model``: a ``faster_whisper.WhisperModel`` shared by every call; ``kwargs``: ``WhisperSTTService``'s."""
        self._preloaded = model
        super().__init__(**kwargs)

    def _load(self):
        self._model = self._preloaded
