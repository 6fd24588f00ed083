"""What every call of a process shares, loaded once: the models, the LLM client, the stores.

``agent/runtime/runtime.py`` fills it at start; every call builder reads it. Holds no per-call state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from openai import AsyncOpenAI

from agent.config import BriskConfig


@dataclass
class Resources:
    """Everything loaded once per process and shared by every call."""

    config: BriskConfig
    whisper_model_path: Path
    llm_client: AsyncOpenAI
    llm_model: str
    whisper_engine: object | None = None  # processors.stt.whisper_engine.WhisperEngine
    whisper_scheduler: object | None = None  # processors.stt.whisper_scheduler.WhisperScheduler, shared by every call
    hibari_voice: object | None = None  # processors.tts.hibari_tts voice, when tts_engine == "hibari"
    phrase_cache: object | None = None  # processors.tts.phrase_cache.PhraseCache for that voice (brisk calls only)
    store: object | None = None  # agent.tools.store.ShopStore: the orders and bookings the tools use
    records: object | None = None  # agent.records.store.CallRecords: every call and its turns
    api: object | None = None  # agent.tools.http_tool.BusinessApi: the business file's HTTP tools' requests
    mcp_tools: dict = field(default_factory=dict)  # agent.tools.mcp_tools.McpTool by name, found at start-up
    turn_check: object | None = None  # the audio end-of-turn model (processors/turns/*_check.py), with BRISK_TURN_AUDIO_CHECK
    embedder: object | None = None  # agent.business.embedder.SentenceEmbedder, with BRISK_UNDERSTANDING=meaning
    extra: dict = field(default_factory=dict)  # what another call builder loads once (the bench's baselines' models)
