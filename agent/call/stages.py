"""Each stage of a call, made from the settings: VAD, STT, LLM, TTS and what Brisk puts around them.

Consumes the config and the process's ``Resources``; returns new pipecat processors and services
for one call, or, where BRISK_STT, BRISK_LLM, BRISK_TTS or BRISK_VAD name a factory of one's own
(agent/call/own_stages.py), what that factory makes. ``build_call`` (agent/call/pipeline.py) wires
them; another call builder (the bench's baselines, one's own: docs/extending.md) reuses them.
"""

from __future__ import annotations

import functools
import importlib.util

from pipecat.audio.filters.base_audio_filter import BaseAudioFilter
from pipecat.audio.vad.silero import SileroVADAnalyzer
from pipecat.audio.vad.vad_analyzer import VADParams
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.openai.llm import OpenAILLMService

from agent.business.facts import FactIndex
from agent.business.intents import IntentMatcher
from agent.call.call_control import CallControl
from agent.config import BriskConfig
from agent.call.own_stages import is_own, own_stage
from agent.records.recording import CallAudio, recording_path
from agent.runtime.models import ModelError
from agent.tools.functions import CallTools
from agent.tools.router import ToolRouter
from processors.llm.answer_check import AnswerChecker
from processors.barge_in.barge_in import BargeIn
from processors.barge_in.barge_in_policy import DEFAULT_BACKCHANNELS, BargeInPolicy
from processors.llm.context_window import ContextWindow
from processors.llm.fact_grounding import FactGrounding
from processors.llm.facts_prefill import FactsPrefill
from processors.fast_path import FastPathResponder
from processors.llm.openai_llm import ResilientOpenAILLMService
from processors.llm.prefix_warmer import PrefixWarmer
from processors.llm.prompt_cache import PromptCache
from processors.llm.routed_calls import RoutedCallsMixin
from processors.tts.sentence_chunker import SentenceFirstConfig
from processors.speculation.draft_accounting import DraftAccountingMixin
from processors.speculation.withdrawn_drafts import WithdrawnDraftsMixin
from processors.speculation.speculation_stats import SpeculationStats
from processors.speculation.speculative_tts import SpeculativeAudioCache
from agent.call.resources import Resources


class BriskLLMService(WithdrawnDraftsMixin, RoutedCallsMixin, DraftAccountingMixin, ResilientOpenAILLMService):
    """The LLM service: tools routed by intent, each draft's cost counted, a draft overtaken by its
    own cancel left unanswered (why these are mixins: docs/architecture.md)."""


class RoutedLLMService(RoutedCallsMixin, ResilientOpenAILLMService):
    """The LLM service with tools routed by intent, for calls without speculation."""


def make_vad(config: BriskConfig) -> SileroVADAnalyzer:
    """Silero VAD on its bundled ONNX model, with the configured parameters."""
    return SileroVADAnalyzer(
        params=VADParams(
            confidence=config.vad_confidence,
            start_secs=config.vad_start_secs,
            stop_secs=config.vad_stop_secs,
            min_volume=config.vad_min_volume,
        )
    )


def make_noise_filter(config: BriskConfig) -> BaseAudioFilter | None:
    """A fresh noise filter for one call's input (``BRISK_NOISE_FILTER``), or None when off.

    One per call: RNNoise keeps the state of the stream it denoises, and its resamplers are set
    to the call's input rate when the transport starts it."""
    if config.noise_filter == "off":
        return None
    from pipecat.audio.filters.rnnoise_filter import RNNoiseFilter

    return RNNoiseFilter()


def check_noise_filter(config: BriskConfig) -> None:
    """At start: the noise filter's package is there, or ``ModelError`` names the install command."""
    if config.noise_filter == "rnnoise" and importlib.util.find_spec("pyrnnoise") is None:
        raise ModelError("BRISK_NOISE_FILTER=rnnoise needs pyrnnoise, which is not installed: "
                         "pip install 'pipecat-ai[rnnoise]==1.14.0'")


def make_stt(resources: Resources):
    """Streaming Whisper on the process's one engine: partials while the caller speaks (or BRISK_STT's own)."""
    if (own := own_stage(resources, "stt")) is not None:
        return own
    config = resources.config
    from processors.stt.streaming_whisper import StreamingWhisperSTTService

    return StreamingWhisperSTTService(
        engine=resources.whisper_engine,
        scheduler=resources.whisper_scheduler,
        partial_interval_s=config.stt_partial_interval_secs,
        max_utterance_s=config.stt_max_utterance_secs,
        preroll_s=config.stt_preroll_secs,
        review_early=config.stt_review_early,
    )


def make_llm(
    resources: Resources,
    speculation: SpeculationStats | None = None,
    speculative_audio: SpeculativeAudioCache | None = None,
    facts: FactIndex | None = None,
) -> OpenAILLMService:
    """The LLM service; with ``facts``, the business's tools routed by intent; with neither,
    pipecat's OpenAI service that apologises instead of going silent. BRISK_LLM's own service is
    used as it is (docs/extending.md)."""
    if (own := own_stage(resources, "llm")) is not None:
        return own
    config = resources.config
    routed = {"offer_tools": config.tools_offered_to_llm} if facts is not None else {}
    kwargs = dict(
        client=resources.llm_client,
        apology_text=config.apology_text,
        supports_developer_role=not config.embedded_llm,
        settings=OpenAILLMService.Settings(
            model=resources.llm_model,
            system_instruction=config.system_prompt,
            temperature=config.llm_temperature,
            max_tokens=config.llm_max_tokens,
        ),
    )
    if speculation is not None:
        return BriskLLMService(speculation_stats=speculation, speculative_audio=speculative_audio, **routed, **kwargs)
    if routed:
        return RoutedLLMService(**routed, **kwargs)
    return ResilientOpenAILLMService(**kwargs)


def make_answer_check(config: BriskConfig, facts: FactIndex) -> AnswerChecker | None:
    """With ``llm_answer_check``, the LLM's answers held to the business facts before anyone hears
    them, whichever LLM service answers (``checker.reader()`` goes right before it)."""
    if not config.llm_answer_check:
        return None
    business = facts.business
    return AnswerChecker(answer_check=facts.supports, unsupported_text=business.unknown_answer,
                         person_offer=business.person_offer, instead=facts.instead, lacking=facts.lacking)


def make_prompt_processors(resources: Resources, tools=None) -> list:
    """The prompt prefix kept stable and warm, so the server's prefix cache holds it (the warm-up
    only where the LLM is Brisk's OpenAI-compatible one)."""
    config = resources.config
    processors = [
        ContextWindow(
            max_turns=config.llm_history_turns,
            trim_batch=min(config.llm_history_trim_batch, max(1, config.llm_history_turns)),
        )
    ]
    if config.llm_warm_up and config.openai_llm:
        processors.append(
            PrefixWarmer(
                client=resources.llm_client,
                model=resources.llm_model,
                system_prompt=config.system_prompt,
                rewarm_after_s=config.llm_rewarm_secs or None,
                convert_developer_to_user=config.embedded_llm,
                tools=tools,
            )
        )
    return processors


def chunking(config: BriskConfig) -> SentenceFirstConfig:
    return SentenceFirstConfig(
        min_first_words=config.first_chunk_min_words,
        first_chunk_word_cap=config.first_chunk_word_cap,
    )


def make_speculative_audio(config: BriskConfig, speculation: SpeculationStats | None):
    """A held draft's first chunk is synthesised before its turn is confirmed (every engine:
    hibari and espeak synthesise it locally, Cartesia opens its context)."""
    if speculation is None or not config.speculation_prefetch_tts or is_own(config, "tts"):
        return None
    # Cut with the chunker's rules, so the prefetched chunk is the text the TTS will be asked for.
    return SpeculativeAudioCache(chunking(config))


def make_tts(
    resources: Resources,
    speculative_audio: SpeculativeAudioCache | None = None,
    *,
    phrase_cache: bool = True,
    chunked: bool = True,
):
    """The configured voice. ``phrase_cache``: texts said before are not synthesised again (hibari);
    ``chunked``: the text comes cut by the ``SentenceChunker`` rather than as pipecat's whole sentences.
    BRISK_TTS's own service is used as it is."""
    if (own := own_stage(resources, "tts")) is not None:
        return own
    config = resources.config
    engine = config.tts_engine
    if engine == "hibari":
        from processors.tts.hibari_tts import HibariTTSService

        phrases = resources.phrase_cache if phrase_cache else None
        return HibariTTSService(voice=resources.hibari_voice, speculative_audio=speculative_audio,
                                phrase_cache=phrases)
    if engine == "espeak":
        from processors.tts.espeak_tts import EspeakTTSService, EspeakTTSSettings

        return EspeakTTSService(
            settings=EspeakTTSSettings(voice=config.espeak_voice), speculative_audio=speculative_audio
        )
    from processors.tts.cartesia_tts import PrefetchingCartesiaTTSService

    return PrefetchingCartesiaTTSService(
        speculative_audio=speculative_audio,  # None: pipecat's CartesiaTTSService as it is
        api_key=config.cartesia_api_key,
        voice_id=config.cartesia_voice_id,
        model=config.cartesia_model,
        url=config.cartesia_url,
        # Cartesia joins a context's inputs verbatim: without it "today," + "from" is "today,from".
        append_trailing_space=chunked,
    )


def make_facts(config: BriskConfig, embedder=None) -> FactIndex:
    """The index of the business facts, one per call for the fast path, grounding and check;
    by meaning too when the runtime loaded the embedder (its sentences are embedded once per process)."""
    return FactIndex(config.business_definition, limit=config.llm_fact_lines, embedder=embedder)


def make_fast_path(
    config: BriskConfig,
    facts: FactIndex | None,
    speculative_audio: SpeculativeAudioCache | None = None,
    tools: CallTools | None = None,
) -> FastPathResponder | None:
    """The business's frequent questions answered from its facts, its requests routed to its tools
    (agent/tools/router.py); None sends every turn to the LLM."""
    business = config.business_definition
    if facts is None or not config.fast_path or not (business.intents or facts.meaning):
        return None
    matcher = IntentMatcher(business, facts=facts if config.llm_grounding else None, hedge=config.hedges)
    return FastPathResponder(ToolRouter(matcher, tools) if tools else matcher, speculative_audio=speculative_audio)


def make_grounding(config: BriskConfig, facts: FactIndex | None) -> FactGrounding | None:
    """The facts a question is about, put next to it for the LLM."""
    if facts is None or not config.llm_grounding:
        return None
    return FactGrounding(facts.grounding)


def make_facts_prefill(resources: Resources, facts: FactIndex | None, context: LLMContext,
                       prompt_processors: list) -> FactsPrefill | None:
    """With BRISK_LLM_FACTS_PREFILL, a question's facts are read into the LLM's cache while the caller asks it."""
    config = resources.config
    if facts is None or not config.facts_prefilled or not config.openai_llm:
        return None
    window = next((p for p in prompt_processors if isinstance(p, ContextWindow)), None)
    cache = PromptCache(client=resources.llm_client, model=resources.llm_model, system_prompt=config.system_prompt,
                        convert_developer_to_user=config.embedded_llm)
    return FactsPrefill(cache=cache, context=context, grounding_for=facts.grounding,
                        layout=functools.partial(window.apply, count_drops=False) if window else None)


def make_barge_in(config: BriskConfig) -> BargeIn:
    return BargeIn(
        BargeInPolicy(
            min_speech_secs=config.barge_in_min_speech_secs,
            min_words=config.barge_in_min_words,
            backchannels=tuple(config.barge_in_backchannels or DEFAULT_BACKCHANNELS),
        )
    )


def make_call_audio(resources: Resources, control: CallControl) -> CallAudio | None:
    """The call's audio, both sides, when BRISK_RECORD_AUDIO is on and calls are recorded."""
    config = resources.config
    if not config.record_audio or resources.records is None:
        return None
    return CallAudio(recording_path(config.data_dir / "recordings", control.call_id))
