"""The caller's voice for scenarios run with ``--audio``: espeak-ng, which Brisk already needs.

pipecat's eval harness speaks a scenario's user turns with the TTS its ``user.speech`` names
(Kokoro by default, a model Brisk does not ship). ``espeak`` is the ``factory`` the runner
gives a scenario that names none: it returns Brisk's own espeak-ng service
(processors/tts/espeak_tts.py), whose voice (``voice``, default ``en-us``) and rate
(``words_per_minute``) come from the scenario's ``user.speech`` mapping.
"""

from __future__ import annotations

from processors.tts.espeak_tts import EspeakTTSService, EspeakTTSSettings

DEFAULT = {"factory": "agent.evals.caller_voice.espeak", "voice": "en-us", "words_per_minute": 165}


def espeak(speech: dict) -> EspeakTTSService:
    return EspeakTTSService(settings=EspeakTTSSettings(
        voice=str(speech.get("voice") or DEFAULT["voice"]),
        words_per_minute=int(speech.get("words_per_minute") or DEFAULT["words_per_minute"])))
