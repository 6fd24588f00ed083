"""Stages of one's own: BRISK_STT, BRISK_LLM, BRISK_TTS or BRISK_VAD set to "package.module:factory".

Consumes the settings; ``own_stage`` calls the named factory with the call's ``Resources`` and
returns what it made, a pipecat service of the stage's kind, which takes the built-in stage's
place in ``build_call`` (docs/extending.md). ``check_stages`` imports every factory once at start,
so a wrong path stops the server with a message naming the setting, not the first call.
Measures nothing.
"""

from __future__ import annotations

import importlib
from typing import Callable

from pipecat.audio.vad.vad_analyzer import VADAnalyzer
from pipecat.services.llm_service import LLMService
from pipecat.services.stt_service import STTService
from pipecat.services.tts_service import TTSService

from agent.config import BriskConfig, ConfigError

# What each stage's factory must make: the pipecat base class the pipeline's place takes.
KINDS = {"vad": VADAnalyzer, "stt": STTService, "llm": LLMService, "tts": TTSService}


def is_own(config: BriskConfig, stage: str) -> bool:
    """Whether ``BRISK_<STAGE>`` names a factory of one's own."""
    return ":" in getattr(config, stage)


def stage_factory(config: BriskConfig, stage: str) -> Callable | None:
    """The factory ``BRISK_<STAGE>`` names, or None when the setting is one of Brisk's own."""
    if not is_own(config, stage):
        return None
    value = getattr(config, stage)
    setting = f"BRISK_{stage.upper()}={value}"
    module_name, _, name = value.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError(f"{setting}: cannot import {module_name} ({e}); is its package installed?") from None
    factory = getattr(module, name, None)
    if not callable(factory):
        raise ConfigError(f"{setting}: {module_name} has no function {name}")
    return factory


def own_stage(resources, stage: str):
    """What the stage's own factory makes for one call (None: the built-in stage is used)."""
    factory = stage_factory(resources.config, stage)
    if factory is None:
        return None
    made = factory(resources)
    kind = KINDS[stage]
    if not isinstance(made, kind):
        raise ConfigError(f"BRISK_{stage.upper()}={getattr(resources.config, stage)} made a "
                          f"{type(made).__name__}, not a pipecat {kind.__name__}")
    return made


def check_stages(config: BriskConfig) -> list[str]:
    """Import every stage's own factory now; the stages that are one's own, by name."""
    return [stage for stage in KINDS if stage_factory(config, stage) is not None]
