"""``agent bench --suite threads``: what llama-server's thread count costs when Whisper shares the CPU.

For each thread count, the embedded LLM server is started on its own (``LocalLLMServer``, the
shipped system prompt), asked the same short questions alone and then while tiny.en transcribes
in a loop on another thread, as it does for a call's partials while the LLM drafts. Reported:
the median, over ``QUESTIONS`` requests, of llama-server's own timings (prompt ms per new token,
decode ms per generated token). This is the measurement behind ``BRISK_LLM_THREADS``'s default.
"""

from __future__ import annotations

import statistics
import threading

import httpx
import numpy as np

from agent.runtime import llama_build, models
from agent.business.model import load_business
from agent.business.prompt import system_prompt
from agent.config import load_config
from agent.runtime.llm_server import LocalLLMServer
from processors.stt.whisper_engine import WhisperEngine

QUESTIONS = 6
MAX_TOKENS = 40


class _WhisperLoad:
    """tiny.en transcribing 3 s of audio over and over on a thread of its own, while in use."""

    def __init__(self, engine: WhisperEngine):
        self._engine = engine
        self._audio = (np.random.default_rng(0).standard_normal(16000 * 3) * 0.05).astype(np.float32)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self._engine.transcribe(self._audio)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


async def _timings(client: httpx.AsyncClient, url: str, system: str, model: str) -> list[dict]:
    rows = []
    for i in range(QUESTIONS):
        # A different question each time: its tokens are new to the prompt cache, as a caller's are.
        question = f"Question {i}: do you sell helmets for kids, what do they cost, and can I try {i + 1} on?"
        body = {"model": model, "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}],
                "max_tokens": MAX_TOKENS, "temperature": 0, "stream": False}
        response = await client.post(f"{url}/chat/completions", json=body)
        response.raise_for_status()
        t = response.json()["timings"]
        rows.append({"prompt_ms_per_token": t["prompt_ms"] / max(1, t["prompt_n"]),
                     "decode_ms_per_token": t["predicted_ms"] / max(1, t["predicted_n"])})
    return rows


def _median(rows: list[dict], key: str) -> float:
    return round(statistics.median(r[key] for r in rows), 1)


async def run_threads(counts: tuple[int, ...] = (1, 2), log=print) -> dict:
    """The medians per thread count, alone and next to Whisper."""
    config = load_config()
    system = system_prompt(load_business(config.business))
    whisper = WhisperEngine.load(str(models.whisper_model_path("tiny.en", config.models_dir)),
                                 cpu_threads=config.whisper_threads)
    binary = llama_build.find_binary(config.llama_server_dir, config.llama_cpu_flags)
    path = models.llm_model_path(config.llm_embedded_model, config.models_dir)
    results = []
    for count in counts:
        server = LocalLLMServer(path, binary=binary, model_alias=config.llm_embedded_model,
                                n_ctx=config.llm_context_tokens, n_threads=count, log_dir=config.models_dir)
        await server.start()
        try:
            async with httpx.AsyncClient(timeout=120) as client:
                await _timings(client, server.base_url, system, config.llm_embedded_model)  # warm the prefix
                alone = await _timings(client, server.base_url, system, config.llm_embedded_model)
                with _WhisperLoad(whisper):
                    loaded = await _timings(client, server.base_url, system, config.llm_embedded_model)
        finally:
            await server.stop()
        row = {"threads": count,
               **{f"{key}_alone": _median(alone, key) for key in ("prompt_ms_per_token", "decode_ms_per_token")},
               **{f"{key}_with_whisper": _median(loaded, key) for key in ("prompt_ms_per_token", "decode_ms_per_token")}}
        log(f"bench: llama-server on {count} thread(s): {row}")
        results.append(row)
    return {"levels": results, "questions": QUESTIONS, "max_tokens": MAX_TOKENS,
            "method": __doc__.split("\n\n")[1].replace("\n", " ")}


def format_threads(result: dict) -> str:
    lines = ["llama-server threads   prompt ms/token alone  with Whisper   decode ms/token alone  with Whisper"]
    for row in result["levels"]:
        lines.append(f"{row['threads']:>20}   {row['prompt_ms_per_token_alone']:>21}  {row['prompt_ms_per_token_with_whisper']:>12}"
                     f"   {row['decode_ms_per_token_alone']:>21}  {row['decode_ms_per_token_with_whisper']:>12}")
    return "\n".join(lines)

