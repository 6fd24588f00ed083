"""Process-wide runtime: prepares models, supervises the embedded LLM server, loads ASR/TTS once.

Both ``agent serve`` and ``agent call`` start one ``Runtime`` and build every call's pipeline
from its ``Resources``; nothing heavy is loaded per call.
"""

from __future__ import annotations

import asyncio
import functools
import time

from loguru import logger
from threadpoolctl import threadpool_info, threadpool_limits

from agent.runtime import llama_build, models
from agent.config import BriskConfig
from agent.runtime.llm_server import LocalLLMServer
from agent.call.resources import Resources
from agent.call.own_stages import check_stages
from agent.call.stages import check_noise_filter
from processors.llm.openai_llm import make_openai_client
from processors.stt.whisper_scheduler import WhisperScheduler


def blas_threads() -> int | None:
    """The threads numpy's BLAS may use now (None: no BLAS library loaded)."""
    counts = [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]
    return max(counts) if counts else None


def limit_blas_threads(threads: int) -> list[dict]:
    """Let numpy's (and scipy's) BLAS use at most ``threads`` threads in this process, from now on.

    faster-whisper computes its features with a numpy matmul on every partial. OpenBLAS runs
    that on as many threads as there are cores, and its helper thread then spins waiting for
    more: on 2 cores it took ~20% of one at the caller's pause, when tiny.en and base both want
    a core (docs/benchmarks.md). Returns threadpoolctl's view of the libraries afterwards.
    """
    threadpool_limits(limits=threads, user_api="blas")
    return [info for info in threadpool_info() if info["user_api"] == "blas"]


class Runtime:
    """Owns the shared models and the LLM server for the life of the process."""

    def __init__(self, config: BriskConfig):
        self.config = config
        self.resources: Resources | None = None
        self.llm_server: LocalLLMServer | None = None
        self.webhook = None  # agent.records.webhook.WebhookSender, with BRISK_WEBHOOK_URL
        self.retention = None  # agent.records.retention.RecordingRetention
        self.blas_threads_at_start: int | None = None  # numpy's own BLAS thread count, before BRISK_BLAS_THREADS
        self._components: dict[str, dict] = {
            "models": {"ready": False},
            "asr": {"ready": False, "model": config.whisper_model},
            "tts": {"ready": False, "engine": config.tts_engine},
            "llm": {"ready": False, "embedded": config.embedded_llm},
        }
        self.error: str | None = None
        self.embedder = None  # agent.business.embedder.SentenceEmbedder (BRISK_UNDERSTANDING=meaning)

    async def start(self) -> None:
        """Prepare and load everything; raises with a clear message if a part cannot start."""
        config = self.config
        t0 = time.monotonic()
        own = await asyncio.to_thread(check_stages, config)
        check_noise_filter(config)
        if own:
            logger.info(f"stages of your own: {', '.join(f'{s}={getattr(config, s)}' for s in own)}")
        whisper_path = await asyncio.to_thread(models.whisper_model_path, config.whisper_model, config.models_dir)
        llm_path = None
        if config.embedded_llm:
            llm_path = await asyncio.to_thread(models.llm_model_path, config.llm_embedded_model, config.models_dir)
        self._components["models"] = {"ready": True, "whisper": str(whisper_path), "llm": str(llm_path or "")}

        if config.embedded_llm:
            binary = await asyncio.to_thread(llama_build.find_binary, config.llama_server_dir, config.llama_cpu_flags)
            self.llm_server = LocalLLMServer(
                model_path=llm_path,
                binary=binary,
                model_alias=config.llm_embedded_model,
                n_threads=config.llm_server_threads,
                n_ctx=config.llm_context_tokens,
                parallel=config.llm_parallel or config.max_calls,
                log_dir=config.models_dir,
            )
            llm_task = asyncio.create_task(self.llm_server.start())
        else:
            llm_task = None

        # Load ASR and TTS while the LLM server boots: they are independent.
        whisper_engine = second_opinion = None
        if "stt" not in own:
            whisper_engine = await asyncio.to_thread(self._load_whisper, whisper_path)
            second_opinion = await asyncio.to_thread(self._load_second_opinion)
        self._components["asr"].update({"ready": True, "second_opinion": second_opinion.name if second_opinion else None})
        hibari_voice = await asyncio.to_thread(self._load_tts)
        self._components["tts"]["ready"] = True
        turn_check = await asyncio.to_thread(self._load_turn_check)
        self.embedder = await asyncio.to_thread(self._load_embedder)
        # After the models: threadpoolctl reaches only the BLAS libraries loaded by then.
        self.blas_threads_at_start = blas_threads()  # what the process started with, before BRISK_BLAS_THREADS
        limit_blas_threads(config.blas_threads)

        if llm_task is not None:
            await llm_task
            await self.llm_server.warm(config.system_prompt)
            base_url, api_key, model = self.llm_server.base_url, None, self.llm_server.model_alias
        else:
            base_url, api_key, model = config.llm_base_url, config.llm_api_key, config.llm_model
        self._components["llm"].update({"ready": True, "base_url": base_url, "model": model})

        from agent.tools.store import ShopStore

        from agent.records.store import CallRecords

        store = ShopStore.in_dir(config.data_dir)
        await store.start()
        records = CallRecords.for_config(config.database_url, config.data_dir, instance=config.instance_id,
                                         webhook=bool(config.webhook_url))
        failed = await records.start()
        if failed:
            logger.warning(f"{failed} call(s) were cut off by the last stop; their records say failed")
        self._start_record_keepers(records)
        self.resources = Resources(
            config=config,
            whisper_model_path=whisper_path,
            whisper_engine=whisper_engine,
            whisper_scheduler=self._whisper_scheduler(whisper_engine, second_opinion),
            hibari_voice=hibari_voice,
            phrase_cache=self._phrase_cache(hibari_voice),
            llm_client=make_openai_client(
                base_url=base_url,
                api_key=api_key,
                connect_timeout=config.llm_connect_timeout_secs,
                total_timeout=config.llm_timeout_secs,
            ),
            llm_model=model,
            store=store,
            records=records,
            api=self._business_api(),
            mcp_tools=await self._mcp_tools(),
            turn_check=turn_check,
            embedder=self.embedder,
        )
        logger.info(f"Brisk runtime ready in {time.monotonic() - t0:.1f} s")

    def _whisper_scheduler(self, engine, second_opinion) -> WhisperScheduler | None:
        """The one queue every call's Whisper work goes through (None: BRISK_STT is one's own)."""
        if engine is None:
            return None
        config = self.config
        return WhisperScheduler(engine, second_opinion=second_opinion, doubt_below=config.stt_doubt_below,
                                recognised=self._recognised(), review_unrecognised=config.stt_review_unrecognised,
                                about_the_business=self._about_the_business(), review_max_s=config.stt_review_max_secs,
                                review_narrowband=config.stt_review_narrowband)

    def _business_api(self):
        """The sender of the business file's HTTP tools' requests (None: it declares none)."""
        if not self.config.business_definition.http_tools:
            return None
        from agent.tools.http_tool import BusinessApi

        return BusinessApi(self.config.tool_secret)

    async def _mcp_tools(self) -> dict:
        """The business file's MCP tools as their servers describe them (empty: it names none)."""
        if not self.config.business_definition.mcp_servers:
            return {}
        from agent.tools.mcp_tools import discover

        return await discover(self.config.business_definition)

    def _start_record_keepers(self, records) -> None:
        """The webhook sender and the recordings' retention sweep, each in its own task."""
        from agent.records.retention import RecordingRetention
        from agent.records.webhook import WebhookSender

        config = self.config
        if config.webhook_url:
            self.webhook = WebhookSender(records, config.webhook_url, config.webhook_secret,
                                         retry_s=config.webhook_retry_secs)
            self.webhook.start()
        self.retention = RecordingRetention(records, config.retention_days)
        self.retention.start()

    def _vocabulary(self) -> str | None:
        """The business's words Whisper is told (``stt_vocabulary``), or None."""
        from agent.business.facts import vocabulary_of

        return vocabulary_of(self.config.business_definition) if self.config.stt_vocabulary else None

    def _about_the_business(self):
        """Whether a transcript is about anything the business file holds, which a sure final
        must be for the second opinion to hear it again (None: every unrecognised final is)."""
        if self.config.stt_review_off_topic or self._matcher is None:
            return None
        # Pure in the words, so one bounded cache serves every call.
        return functools.lru_cache(maxsize=256)(self._matcher.about_the_file)

    def _recognised(self):
        """Whether an intent of the business asks a transcript, which the Whisper scheduler prefers
        between two transcripts of one clip (None: no fast path or no intents to ask)."""
        return self._matcher.recognises if self._matcher is not None else None

    @functools.cached_property
    def _matcher(self):
        """The business's intents and facts, shared by every call's transcripts (None: no fast
        path or no intents to ask)."""
        config = self.config
        if not (config.fast_path and (config.business_definition.intents or self.embedder)):
            return None
        from agent.business.facts import FactIndex
        from agent.business.intents import IntentMatcher

        business = config.business_definition
        return IntentMatcher(business, facts=FactIndex(business, embedder=self.embedder))

    def _load_embedder(self):
        """The sentence-embedding model every call's understanding shares (None: by words alone)."""
        if self.config.understanding != "meaning":
            return None
        from agent.business.embedder import load_embedder

        embedder = load_embedder(str(self.config.models_dir) if self.config.models_dir else None)
        # The business's own sentences, embedded now rather than on the first caller's turn.
        from agent.business.facts import FactIndex

        FactIndex(self.config.business_definition, embedder=embedder)
        return embedder

    def _load_whisper(self, path):
        from processors.stt.whisper_engine import WhisperEngine

        return WhisperEngine.load(str(path), cpu_threads=self.config.whisper_threads, vocabulary=self._vocabulary())

    def _load_second_opinion(self):
        """The engine that hears doubtful finals again, or None (off, or its model not installed)."""
        config = self.config
        if config.stt_second_opinion == "off":
            return None
        from processors.stt.whisper_engine import WhisperEngine

        try:
            path = models.whisper_model_path(config.stt_second_opinion, config.models_dir)
        except models.ModelError as error:  # base ships in optional packages: run without it
            logger.warning(f"Whisper second opinion off: {error}")
            return None
        return WhisperEngine.load(str(path), cpu_threads=config.whisper_threads, vocabulary=self._vocabulary(),
                                  beam_size=config.stt_second_opinion_beam,
                                  min_window_s=config.stt_second_opinion_window_secs, name=f"{config.stt_second_opinion}-review")

    def _load_turn_check(self):
        if not self.config.turn_audio_check:
            return None
        if self.config.turn_audio_model == "smart_turn":
            from processors.turns.smart_turn_check import SmartTurnCheck

            return SmartTurnCheck(threshold=self.config.turn_audio_check_threshold)
        from processors.turns.livekit_eot_check import LiveKitEotCheck

        return LiveKitEotCheck(threshold=self.config.turn_audio_check_threshold)

    def _load_tts(self):
        if self.config.tts_engine != "hibari":
            return None
        from processors.tts.hibari_tts import load_voice

        return load_voice()

    def _phrase_cache(self, hibari_voice):
        if hibari_voice is None or not self.config.tts_phrase_cache_mb:
            return None
        from processors.tts.phrase_cache import PhraseCache

        return PhraseCache(max_bytes=round(self.config.tts_phrase_cache_mb * 2**20))

    async def stop(self) -> None:
        if self.llm_server:
            await self.llm_server.stop()
        if self.resources:
            await self.resources.llm_client.close()
            if self.resources.store is not None:
                await self.resources.store.close()
            for keeper in (self.webhook, self.retention):
                if keeper is not None:
                    await keeper.stop()
            if self.resources.records is not None:
                await self.resources.records.close()
            if self.resources.api is not None:
                await self.resources.api.close()
            if self.resources.turn_check is not None:
                self.resources.turn_check.close()

    def health(self) -> tuple[bool, dict]:
        """(ready, per-component status) for GET /healthz."""
        components = {k: dict(v) for k, v in self._components.items()}
        if self.llm_server is not None:
            components["llm"].update(self.llm_server.status())
            components["llm"]["ready"] = components["llm"]["ready"] and self.llm_server.healthy
        ready = self.resources is not None and all(c["ready"] for c in components.values())
        body = {"ready": ready, "components": components}
        if self.error:
            body["error"] = self.error
        return ready, body
