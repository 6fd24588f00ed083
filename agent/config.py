"""All of Brisk's settings in one typed object.

Every option reads from an environment variable ``BRISK_<NAME>`` (e.g. ``BRISK_PORT=8080``)
or a ``.env`` file, and has a default that runs fully offline on the embedded models.
Set ``BRISK_LLM_BASE_URL`` (+ ``BRISK_LLM_API_KEY``, ``BRISK_LLM_MODEL``) to use any
OpenAI-compatible provider instead of the embedded LLM, and ``BRISK_CARTESIA_API_KEY`` to
speak with Cartesia instead of the embedded voice.
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, PrivateAttr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent.business.model import Business, BusinessError, load_business
from agent.business.prompt import system_prompt as business_prompt
from agent.security.access import is_loopback_host


class ConfigError(Exception):
    """A setting is missing or wrong. The message says which and how to fix it."""


class Stage:
    """A pipeline stage's setting: one of Brisk's own, or "package.module:factory", a function of
    one's own that makes the stage from the call's resources (agent/call/own_stages.py, docs/extending.md)."""

    PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")

    def __init__(self, *choices: str):
        self.choices = choices

    def __call__(self, value: str) -> str:
        if value in self.choices or self.PATH.fullmatch(value):
            return value
        raise ValueError(f"one of {', '.join(self.choices)}, or package.module:factory for one of your own "
                         f"(docs/extending.md); got {value!r}")


def stage(*choices: str):
    """The type of a stage's setting (``Stage``)."""
    return Annotated[str, AfterValidator(Stage(*choices))]


VADStage, STTStage, LLMStage = stage("silero"), stage("whisper"), stage("auto")
TTSStage = stage("auto", "hibari", "espeak", "cartesia")


class BriskConfig(BaseSettings):
    """Brisk settings. Field descriptions are the reference in docs/configuration.md (agent/config_docs.py)."""

    model_config = SettingsConfigDict(
        env_prefix="BRISK_", env_file=".env", extra="ignore", validate_default=True
    )

    # --- server ---------------------------------------------------------------------------
    host: str = Field("127.0.0.1", description="Interface the HTTP server listens on.")
    port: int = Field(7860, ge=1, le=65535, description="Port the HTTP server listens on.")
    ice_servers: list[str] = Field(
        default_factory=list,
        description="STUN/TURN URLs offered to WebRTC peers; empty = host candidates only (offline).",
    )
    api_key: str | None = Field(None, description="Bearer key for server-to-server clients: offers and LiveKit tokens without a page's call token.")
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="Origins of the pages that may start calls (https://shop.example); this server's own page always may.",
    )
    allow_open: bool = Field(False, description="Accept calls with no credential even when reachable from elsewhere (a demo, behind your own gate).")
    call_token_ttl_secs: int = Field(60, ge=5, description="How long a page's single-use call token stays valid.")
    rate_limit_per_minute: int = Field(
        30, ge=1, description="Requests a minute per client address to each public route group (sessions, offers, ICE, tokens, Twilio)."
    )
    rate_limit_burst: int = Field(10, ge=1, description="Requests a client may make at once before the per-minute rate applies.")
    turn_secret: str | None = Field(None, description="coturn use-auth-secret: TURN URLs in ice_servers get short-lived credentials made with it.")
    turn_ttl_secs: int = Field(3600, ge=60, description="How long a page's TURN credential stays valid.")
    webrtc_input_prefetch_packets: int = Field(
        0, ge=0, le=8,
        description="Later packets a WebRTC call's input audio waits for before a packet goes on to the VAD (aiortc's playout default is 4, ~80 ms); a missing packet is waited for either way.",
    )
    max_offer_bytes: int = Field(65536, ge=1024, description="Largest SDP offer accepted; bigger ones get HTTP 413.")
    max_calls: int | None = Field(
        None,
        ge=1,
        description="Calls this process takes at once, over every transport; unset = 1 with the embedded LLM, "
        "3 with an LLM server elsewhere (2 cores: P95 within 1.5x of one call, docs/benchmarks.md, Capacity).",
    )
    call_idle_timeout_secs: float = Field(60.0, ge=0, description="A call whose caller sends nothing (no audio, key or message) this long is ended (0 = never).")
    call_max_duration_secs: float = Field(3600.0, ge=0, description="Longest a call may last (0 = no limit).")
    busy_text: str = Field(
        "Sorry, all our lines are busy right now. Please call again in a few minutes.",
        description="What a phone caller hears when every line is taken, before the call ends.",
    )
    log_level: str = Field("INFO", description="loguru level: DEBUG, INFO, WARNING, ERROR.")

    # --- models on disk -------------------------------------------------------------------
    models_dir: Path = Field(
        Path.home() / ".cache" / "brisk" / "models",
        description="Where joined model files (GGUF, Whisper base) are prepared once.",
    )

    llama_server_dir: Path = Field(
        Path.home() / ".cache" / "brisk" / "llama-server",
        description="Where llama.cpp's llama-server is built once per version and CPU flags.",
    )
    llama_cpu_flags: str | None = Field(
        None,
        description="CMake CPU flags for building llama-server; unset = AVX2 (+AVX-512 where present), no AMX.",
    )

    # --- VAD + turn taking ----------------------------------------------------------------
    vad: VADStage = Field("silero", description="Voice activity detector: silero (bundled), or package.module:factory making a pipecat VADAnalyzer.")
    vad_confidence: float = Field(0.7, ge=0, le=1, description="Silero speech probability threshold.")
    vad_start_secs: float = Field(0.2, ge=0, description="Speech needed before the VAD says 'started'.")
    vad_stop_secs: float = Field(0.3, ge=0, description="Silence needed before the VAD says 'stopped'.")
    vad_min_volume: float = Field(0.6, ge=0, le=1, description="Minimum volume for a frame to count as speech.")
    noise_filter: Literal["off", "rnnoise"] = Field(
        "off", description="Noise filter on the caller's audio before the VAD: off, or rnnoise (pipecat's RNNoiseFilter; it raised WER on noisy and phone audio here, docs/benchmarks.md).")
    turn_stop_timeout_secs: float = Field(
        0.1,
        ge=0,
        description="Extra wait after the VAD stop before the user's turn ends (pause tolerance).",
    )
    turn_question_ends_at_final: bool = Field(
        True,
        description="A finished question ('...?') ends the turn as soon as its final transcript is in after the VAD stop, without the rest of turn_stop_timeout_secs.",
    )
    turn_audio_check: bool = Field(
        True,
        description="A statement Whisper heard as finished is also put to an audio end-of-turn model (turn_audio_model); judged unfinished, it waits like unfinished words (docs/benchmarks.md, End of turn).",
    )
    turn_audio_model: Literal["livekit_eot", "smart_turn"] = Field(
        "livekit_eot",
        description="The audio end-of-turn model turn_audio_check uses: livekit_eot (LiveKit's on-device turn-detector-v1-mini, 1.2 s of audio) or smart_turn (pipecat's Smart Turn v3, 8 s).",
    )
    turn_audio_check_threshold: float | None = Field(
        None, ge=0, le=1,
        description="The audio model's probability of a finished turn below which the turn waits (None: the model's own, 0.36 for livekit_eot in English, 0.5 for smart_turn).",
    )
    turn_continuation_window_secs: float = Field(
        2.0, ge=0,
        description="The caller speaking again this soon after their turn ended, before its answer was heard, goes on with that turn: one answer to both (0 = never).",
    )
    turn_continuation_heard_secs: float = Field(
        1.0, ge=0, description="An answer that had played for less than this when the caller went on counts as not yet heard."
    )
    turn_unfinished_wait_secs: float = Field(
        1.0,
        ge=0,
        description="After the VAD stop, a turn whose words are unfinished ('and', 'is', 'um', a number half said) waits up to this long for more (0 = never).",
    )
    turn_final_wait_secs: float = Field(
        3.0,
        ge=0,
        description="After the VAD stop, the longest a turn waits for the final transcript of words a partial already heard, when earlier words could end it.",
    )

    # --- barge-in -------------------------------------------------------------------------
    barge_in_min_speech_secs: float = Field(0.3, ge=0, description="Speech over the bot must last this long (VAD-measured) to interrupt it.")
    barge_in_min_words: int = Field(1, ge=1, description="Words (from partial transcripts) speech over the bot needs to interrupt it.")
    barge_in_backchannels: list[str] | None = Field(
        None,
        description="Acknowledgements that never interrupt the bot mid-answer (kept in the transcript, "
        "out of the LLM context); unset = uh-huh, mm-hmm, yeah, ok, right, 嗯, 对 and their spellings.",
    )
    barge_in_resume: bool = Field(
        True,
        description="A turn that cut the bot off and ended with no words (a cough, a door) lets the bot say the rest of its answer, from the sentence it was cut in (off: pipecat's LLM prompt to have the caller repeat).",
    )

    # --- ASR ------------------------------------------------------------------------------
    stt: STTStage = Field("whisper", description="Speech to text: whisper (streaming faster-whisper, embedded), or package.module:factory making a pipecat STTService.")
    whisper_model: Literal["tiny.en", "base"] = Field("tiny.en", description="Embedded Whisper model: tiny.en (fast) or base (more accurate).")
    whisper_threads: int = Field(1, ge=1, description="CPU threads for Whisper (1 leaves a core for the rest).")
    blas_threads: int = Field(
        1, ge=1,
        description="Threads numpy's BLAS may use in the agent process (Whisper's features): with 2, its helper thread spun beside Whisper and took ~20% of a core at the caller's pause (docs/benchmarks.md).",
    )
    stt_vocabulary: bool = Field(True, description="Tell Whisper the business's words (name, items, topics, its vocabulary list) as hotwords.")
    stt_second_opinion: Literal["off", "tiny.en", "base"] = Field(
        "base", description="Whisper model that hears a final again when the first was unsure (beam search); off = never."
    )
    stt_second_opinion_beam: int = Field(
        5, ge=1, description="Beam width of the second opinion (2 is faster but heard 'Can I pay with cash?' wrong).")
    stt_second_opinion_window_secs: float = Field(
        6.0, ge=1, le=30, description="Shortest encoder window of the second opinion (tiny.en's partials keep 10 s): 6 s reviews ~0.1 s sooner than 10 s at about the same word error rate (docs/benchmarks.md).")
    stt_review_unrecognised: bool = Field(
        True, description="Also give the second opinion a sure final no intent of the business file asks (off: 0.3-0.8 s sooner on such turns, but 2 more FAQ questions heard wrong and answered 'don't know'; docs/benchmarks.md)."
    )
    stt_review_off_topic: bool = Field(
        False, description="Also give it a sure final about nothing the business file holds (no intent asks it, no fact shares a word with it, and it does not name the business): off, 'Do you have this sofa in blue?' gets its answer without waiting for base."
    )
    stt_review_early: bool = Field(
        True, description="Start that second opinion before the VAD stop, on the first partial whose words repeat or that ends in the caller's pause, so the final is ready at the turn end."
    )
    stt_review_narrowband: bool = Field(
        False, description="Give the second opinion every final of a phone call's 8 kHz audio, not only the doubted ones (tiny.en mishears narrowband speech about twice as often).")
    stt_review_max_secs: float | None = Field(
        5.0, gt=0, description="Utterances longer than this (seconds of audio) get no second opinion: the turn would wait ~1/3 of their length for it (None = no limit)."
    )
    stt_doubt_below: float = Field(-0.4, le=0, description="A final whose average token log probability is below this gets the second opinion.")
    stt_partial_interval_secs: float = Field(
        0.2, gt=0, description="Target cadence of partial transcripts while the user speaks (stretches under load)."
    )
    stt_preroll_secs: float = Field(1.0, ge=0, description="Audio before the VAD start given to Whisper (the VAD hears a soft first word late).")
    stt_max_utterance_secs: float = Field(
        20.0, gt=1, description="Speech without a pause this long is transcribed so far and continued as a new utterance."
    )

    # --- LLM ------------------------------------------------------------------------------
    llm: LLMStage = Field("auto", description="LLM service: auto = the embedded llama.cpp server, or llm_base_url's when set; or package.module:factory making a pipecat LLMService.")
    llm_base_url: str | None = Field(None, description="OpenAI-compatible endpoint (e.g. https://api.openai.com/v1); unset = embedded LLM.")
    llm_api_key: str | None = Field(None, description="API key for llm_base_url.")
    llm_model: str | None = Field(None, description="Model name at llm_base_url (required with it).")
    llm_embedded_model: Literal["qwen-0.5b", "smollm2-135m"] = Field(
        "qwen-0.5b", description="Embedded GGUF: qwen-0.5b (default) or smollm2-135m (faster, weaker)."
    )
    llm_threads: int | None = Field(
        None, ge=1, description="CPU threads for the embedded llama.cpp server; unset = half the CPU cores (at least 1)."
    )
    llm_context_tokens: int = Field(2048, ge=256, description="Context window of each call in the embedded LLM server (one slot's).")
    llm_parallel: int | None = Field(None, ge=1, description="Slots of the embedded LLM server (calls decoded at once); unset = max_calls.")
    llm_max_tokens: int = Field(150, ge=1, description="Cap on tokens per answer (spoken answers stay short).")
    llm_temperature: float = Field(0.3, ge=0, le=2, description="Sampling temperature.")
    llm_connect_timeout_secs: float = Field(2.0, gt=0, description="HTTP connect timeout to the LLM.")
    llm_timeout_secs: float = Field(30.0, gt=0, description="Total timeout of one LLM request.")
    business: Path | None = Field(
        None,
        description="The business file (YAML: name, hours, prices, policies, ...); unset = the Harbor Lane Bikes example.",
    )
    fast_path: bool = Field(True, description="Answer the business file's frequent questions (intents) from its facts, without the LLM.")
    understanding: Literal["meaning", "words"] = Field(
        "meaning", description="How a caller's words find the business's facts: meaning (a sentence-embedding model) and words, or words alone."
    )
    hedged_answers: Literal["auto", "on", "off"] = Field(
        "auto", description="A question near a fact but not plainly about it: on = the fast path says that fact with a hedge and a person; off = the LLM answers from the facts; auto = on with the embedded LLM, off with BRISK_LLM_BASE_URL."
    )
    llm_grounding: bool = Field(True, description="Give the LLM the business facts each question is about, and the caller's date, next to it.")
    llm_facts_prefill: bool = Field(
        False,
        description="Read a question's facts into the LLM server's prompt cache while the caller still speaks (off: see docs/benchmarks.md).",
    )
    llm_answer_check: bool = Field(
        True, description="Hold each LLM answer to the facts; an unsupported one is replaced by the business's unknown_answer."
    )
    llm_fact_lines: int = Field(3, ge=1, description="Most fact lines retrieved from the business file for one question.")
    system_prompt: str | None = Field(None, description="System prompt; unset = generated from the business file (keep it free of clock times).")
    apology_text: str = Field(
        "Sorry, I'm having trouble answering right now. Please try again in a moment.",
        description="Spoken when the LLM fails mid-call, so the caller never hears silence.",
    )
    llm_history_turns: int = Field(8, ge=0, description="Most past turns (question + answer) kept in the prompt; older ones are dropped.")
    llm_history_trim_batch: int = Field(4, ge=1, description="Turns dropped at a time once llm_history_turns is exceeded (keeps the prefix cached).")
    llm_warm_up: bool = Field(True, description="Send a 1-token request at call start so the system prompt is in the prefix cache.")
    llm_rewarm_secs: float = Field(240.0, ge=0, description="Re-warm the prefix cache after this long without a request (0 = never).")

    # --- speculation (drafts from stable partial transcripts) -----------------------------
    speculation: bool = Field(True, description="Start the LLM on stable partial transcripts; a draft is kept only if the final matches.")
    speculation_stable_partials: int = Field(2, ge=1, description="K: consecutive partials that must end with the same characters to be stable.")
    speculation_tail_chars: int = Field(8, ge=1, description="N: trailing characters compared between partials.")
    speculation_min_chars: int = Field(6, ge=0, description="M: shortest partial worth a draft.")
    speculation_end_words: list[str] = Field(
        default_factory=lambda: ["right?", "that's it", "please"],
        description="Phrases that make a partial stable at once when it ends with one (empty = off).",
    )
    speculation_silence_secs: float = Field(0.25, ge=0, description="Silence after a partial that makes it stable (0 = off).")
    speculation_question_min_chars: int = Field(
        30, ge=0, description="A partial ending in '?' with at least this many characters is stable (0 = off)."
    )
    speculation_min_silence_secs: float = Field(
        0.1, ge=0, description="Silence every stability rule also needs (0 = off); stops drafts on mid-word partials."
    )
    speculation_match_threshold: float = Field(
        0.92, ge=0, le=1, description="Word similarity of draft and final transcript needed to keep the draft."
    )
    speculation_prefetch_tts: bool = Field(
        True, description="Synthesise a held draft's first chunk before the turn is confirmed (hibari, espeak; Cartesia opens its context)."
    )

    # --- speaking ---------------------------------------------------------------------------
    first_chunk_min_words: int = Field(2, ge=1, description="Words a first clause needs before a comma/colon/dash sends it to TTS.")
    first_chunk_word_cap: int = Field(8, ge=1, description="With no punctuation yet, the first chunk goes to TTS after about this many words.")

    # --- TTS ------------------------------------------------------------------------------
    tts: TTSStage = Field(
        "auto", description="Voice: auto = cartesia if cartesia_api_key is set, else hibari; or package.module:factory making a pipecat TTSService."
    )
    espeak_voice: str = Field("en-us", description="espeak-ng voice for tts=espeak.")
    tts_phrase_cache_mb: float = Field(
        16.0, ge=0, description="hibari: speech kept for texts said again (fixed answers, the greeting), shared by every call, in MiB (0 = off)."
    )
    cartesia_api_key: str | None = Field(None, description="Cartesia API key; setting it switches TTS to Cartesia.")
    cartesia_voice_id: str = Field("71a7ad14-091c-4e8e-a314-022ece01c121", description="Cartesia voice id.")
    cartesia_model: str = Field("sonic-2", description="Cartesia model id.")
    cartesia_url: str = Field("wss://api.cartesia.ai/tts/websocket", description="Cartesia websocket URL (a stand-in in tests).")

    # --- phone (Twilio Media Streams) -----------------------------------------------------
    public_url: str | None = Field(
        None,
        description="URL Twilio reaches this server at (https://brisk.example.com); unset = the request's Host.",
    )
    twilio_auth_token: str | None = Field(None, description="Twilio auth token: webhooks must then carry a valid X-Twilio-Signature.")

    # --- LiveKit --------------------------------------------------------------------------
    livekit_url: str | None = Field(None, description="LiveKit server the worker joins rooms on (ws://livekit:7880); enables the token route.")
    livekit_public_url: str | None = Field(None, description="LiveKit URL handed to callers with their token; unset = livekit_url.")
    livekit_api_key: str | None = Field(None, description="LiveKit API key.")
    livekit_api_secret: str | None = Field(None, description="LiveKit API secret.")
    livekit_agent_name: str = Field("", description="Worker agent name: set = explicit dispatch (caller tokens name it); empty = every room.")
    livekit_load_threshold: float = Field(0.75, gt=0, le=1, description="A worker takes no new room once rooms in progress / max_calls reach this.")
    livekit_drain_timeout_secs: float = Field(
        300.0, ge=0, description="On SIGTERM a worker waits this long for its rooms to end before leaving them."
    )
    livekit_token_ttl_secs: int = Field(600, ge=10, description="How long a caller's room token stays valid.")

    # --- conversation: greeting, silence, tools, hand-over -----------------------------------
    greet_first: bool = Field(True, description="The bot says the business's greeting as soon as a call opens.")
    user_idle_secs: float = Field(
        12.0, ge=0, description="Caller silent this long after the bot spoke: it asks once if they are still there (0 = never)."
    )
    user_idle_hangup_secs: float = Field(
        8.0, ge=0, description="Silent this long after that question: the bot says goodbye and ends the call (0 = never)."
    )
    filler_after_secs: float = Field(
        0.7, ge=0, description="A tool turn with nothing said after this long gets one short filler, the business's 'filler' (0 = never)."
    )
    llm_tools: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Offer the business's tools to the LLM's function calling; auto = only an LLM server elsewhere "
        "(the embedded 0.5B model calls them unreliably, docs/benchmarks.md, The agent acting): intents route to them either way.",
    )
    dtmf_timeout_secs: float = Field(3.0, gt=0, description="Keypad digits end an entry after this pause, or at '#'.")
    data_dir: Path = Field(
        Path.home() / ".local" / "share" / "brisk", description="Where Brisk keeps its data (the demo orders and bookings, the call records and recordings)."
    )
    database_url: str | None = Field(
        None, description="Where call records are kept (SQLAlchemy URL, e.g. postgresql+asyncpg://...); unset = SQLite in data_dir."
    )
    operator_key: str | None = Field(
        None, description="Bearer key for the call records API (/api/calls); unset = only clients on this machine may read them."
    )
    instance_id: str = Field(
        default_factory=socket.gethostname,
        description="This server's name in the call records (default: the host name); keep it stable: a restart fails only its own calls left in progress.",
    )
    record_audio: bool = Field(
        False, description="Keep each call's audio (caller left, bot right, 16 kHz WAV) under data_dir/recordings; GET /api/calls/{id}/audio."
    )
    retention_days: float = Field(30.0, gt=0, description="Recordings of calls older than this many days are deleted (hourly).")
    webhook_url: str | None = Field(
        None, description="POSTed each call's record as JSON when it ends, signed and retried from an outbox; unset = no webhook."
    )
    webhook_secret: str | None = Field(
        None, description="Key of the webhook's X-Brisk-Signature (HMAC-SHA256 of '<t>.<body>'); required with webhook_url."
    )
    tool_secret: str | None = Field(
        None, description="Key of the X-Brisk-Signature on every request of the business file's HTTP tools (HMAC-SHA256 of '<t>.<body>'); required when it declares any."
    )
    webhook_retry_secs: float = Field(
        2.0, gt=0, description="A failed webhook delivery is tried again after this long, doubling each time up to 10 minutes."
    )
    transfer_number: str | None = Field(
        None, description="Number a phone caller is put through to with <Dial> (E.164: +15550100); unset = no phone transfer."
    )
    twilio_account_sid: str | None = Field(None, description="Twilio account SID, for the REST API (the transfer).")
    twilio_api_url: str = Field("https://api.twilio.com", description="Twilio's REST API base URL (a local stand-in in tests).")

    # --- operations -----------------------------------------------------------------------
    otlp_endpoint: str | None = Field(None, description="OpenTelemetry collector, OTLP/HTTP (http://collector:4318); unset = no traces.")

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, v: str) -> str:
        v = v.upper()
        if v not in {"TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL"}:
            raise ValueError(f"unknown log level {v!r}")
        return v

    _business: Business | None = PrivateAttr(None)

    @property
    def business_definition(self) -> Business:
        """The business this agent answers for, read and checked once (``business``)."""
        return self._business

    @model_validator(mode="after")
    def _consistent(self) -> "BriskConfig":
        try:
            self._business = load_business(self.business)
        except BusinessError as error:
            raise ValueError(f"{error} (BRISK_BUSINESS)") from None
        if self.system_prompt is None:
            self.system_prompt = business_prompt(self._business)
        if self.max_calls is None:
            # `python -m agent bench --concurrency 1,2,3,4` on 2 cores: with the embedded LLM
            # sharing the cores, two calls already take 2.6x one call's P95; with the LLM on
            # another machine, three calls stay within 1.5x.
            self.max_calls = 1 if self.embedded_llm else 3
        if self.llm_base_url and not self.llm_model:
            raise ValueError("llm_base_url is set but llm_model is not: set BRISK_LLM_MODEL too")
        if (self.llm_api_key or self.llm_model) and not self.llm_base_url:
            raise ValueError(
                "llm_api_key/llm_model only apply to an external LLM: set BRISK_LLM_BASE_URL as well"
            )
        if self.webhook_url and not self.webhook_secret:
            raise ValueError("webhook_url needs BRISK_WEBHOOK_SECRET too: receivers check each delivery's signature with it")
        if self._business.http_tools and not self.tool_secret:
            raise ValueError(f"the business file's HTTP tools ({', '.join(self._business.http_tools)}) need "
                             "BRISK_TOOL_SECRET: every request they send is signed with it")
        if self.tts == "cartesia" and not self.cartesia_api_key:
            raise ValueError("tts=cartesia needs BRISK_CARTESIA_API_KEY")
        if self.livekit_url and not (self.livekit_api_key and self.livekit_api_secret):
            raise ValueError("livekit_url needs BRISK_LIVEKIT_API_KEY and BRISK_LIVEKIT_API_SECRET too")
        if not self.listens_locally and not self.allow_open and not (self.api_key or self.allowed_origins):
            raise ValueError(
                f"Brisk listens on {self.host}, reachable from elsewhere, with no credential for calls: set "
                "BRISK_ALLOWED_ORIGINS (the origins of the pages that may start calls) and/or BRISK_API_KEY "
                "(server-to-server clients), or BRISK_ALLOW_OPEN=true to let anyone call (docs/security.md)")
        if self.public_url and not self.twilio_auth_token:
            raise ValueError("public_url faces Twilio's webhooks to the internet: set BRISK_TWILIO_AUTH_TOKEN too, "
                             "so only Twilio's signed requests start calls")
        return self

    @property
    def listens_locally(self) -> bool:
        """The server listens on loopback only: nobody on another machine can reach it."""
        return is_loopback_host(self.host)

    @property
    def calls_open(self) -> bool:
        """Calls start with no credential: on loopback with none configured (make run), or allow_open."""
        return self.allow_open or (self.listens_locally and not (self.api_key or self.allowed_origins))

    @property
    def embedded_llm(self) -> bool:
        """True when Brisk runs its own llama.cpp server."""
        return not self.llm_base_url and self.llm == "auto"

    @property
    def openai_llm(self) -> bool:
        """True when the LLM is Brisk's own OpenAI-compatible service, whose server caches prompts."""
        return self.llm == "auto"

    @property
    def hedges(self) -> bool:
        """Whether the fast path hedges (``hedged_answers``): a 0.5B model given the nearest fact
        answered "Yes, you can pay cash"; a capable LLM elsewhere answers what the facts say."""
        return self.hedged_answers == "on" or (self.hedged_answers == "auto" and self.embedded_llm)

    @property
    def facts_prefilled(self) -> bool:
        """Whether calls read their questions' facts into the LLM's cache during speech."""
        return self.llm_facts_prefill and self.llm_grounding

    @property
    def tools_offered_to_llm(self) -> bool:
        """Whether the LLM's requests carry the tools (``llm_tools`` with 'auto' resolved)."""
        return self.llm_tools == "on" or (self.llm_tools == "auto" and not self.embedded_llm)

    @property
    def llm_server_threads(self) -> int:
        """``llm_threads``, unset resolved: half the cores this process may run on, at least one.

        llama.cpp's threads wait for each other at every step, so one that shares a core with
        Whisper or the TTS stalls the rest: on 2 cores with Whisper busy on one, 2 threads
        decoded at 1721 ms a token and 1 thread at 33 ms (22 and 32 ms with nothing else
        running; ``python -m agent bench --suite threads``). The other half is left for the
        calls' own work.
        """
        if self.llm_threads is not None:
            return self.llm_threads
        return max(1, len(os.sched_getaffinity(0)) // 2)

    @property
    def tts_engine(self) -> str:
        """The voice actually used, with 'auto' resolved: hibari, espeak, cartesia or one's own factory."""
        if self.tts == "auto":
            return "cartesia" if self.cartesia_api_key else "hibari"
        return self.tts


def load_config(**overrides) -> BriskConfig:
    """Read the config from the environment, turning validation errors into one clear ConfigError."""
    try:
        return BriskConfig(**overrides)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            message = err["msg"].removeprefix("Value error, ")
            if not err["loc"]:  # a check across settings: its message names what is wrong
                problems.append(f"  - {message}")
                continue
            field = ".".join(str(p) for p in err["loc"])
            problems.append(f"  - {field} (BRISK_{field.upper()}): {message}")
        raise ConfigError("invalid Brisk configuration:\n" + "\n".join(problems)) from None
