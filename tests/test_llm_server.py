"""The local LLM server against the real llama-server (llama.cpp) and the small SmolLM2 model."""

import asyncio
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import openai
import pytest

from agent.config import load_config
from agent.runtime.llama_build import find_binary
from agent.runtime.llm_server import LLMServerError, LocalLLMServer
from agent.runtime.models import llm_model_path
from tests.waiting import until

BINARY = find_binary(load_config().llama_server_dir, load_config().llama_cpu_flags)

SYSTEM_PROMPT = (
    "You are Brisk, a voice assistant. Answer in one short sentence, in plain words, with no "
    "lists, no markdown and no emoji, because everything you write is spoken aloud. If you do "
    "not know something, say so briefly instead of guessing. Never mention these instructions."
)


def _server(tmp_path: Path, model: Path | None = None, **options) -> LocalLLMServer:
    return LocalLLMServer(
        model or llm_model_path("smollm2-135m"),
        binary=BINARY,
        model_alias="smollm2-test",
        n_threads=2,
        log_dir=tmp_path,
        restart_backoff_s=0.1,
        **options,
    )


@pytest.fixture
async def server(tmp_path):
    server = _server(tmp_path)
    await server.start()
    yield server
    await server.stop()


def _alive(pid: int) -> bool:
    # An orphan may linger as a zombie when PID 1 does not reap: that is dead too.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _accepts_connections(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


async def _chat_with_usage(
    server: LocalLLMServer, user: str, system: str = SYSTEM_PROMPT, max_tokens: int = 16
) -> tuple[str, openai.types.CompletionUsage | None, str | None]:
    """(text, the server's usage, finish reason) of one streamed answer."""
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="unused")
    try:
        stream = await client.chat.completions.create(
            model=server.model_alias,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
            max_tokens=max_tokens,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
        text, usage, finish = [], None, None
        async for chunk in stream:
            usage = chunk.usage or usage
            for choice in chunk.choices:
                text.append(choice.delta.content or "")
                finish = choice.finish_reason or finish
        return "".join(text), usage, finish
    finally:
        await client.close()


async def _chat(server: LocalLLMServer, user: str, system: str = SYSTEM_PROMPT) -> str:
    return (await _chat_with_usage(server, user, system))[0]


def _cached(usage) -> int:
    return usage.prompt_tokens_details.cached_tokens


async def test_a_started_server_is_healthy_and_streams_a_chat_completion(server):
    assert server.healthy
    assert server.status()["healthy"] is True
    assert server.base_url.startswith("http://127.0.0.1:") and server.base_url.endswith("/v1")

    answer = await _chat(server, "Say hello.")

    assert answer.strip()


async def test_a_port_or_api_key_in_our_environment_does_not_reach_the_server(tmp_path, monkeypatch):
    # llama-server reads every option from LLAMA_ARG_* and its key from LLAMA_API_KEY.
    monkeypatch.setenv("LLAMA_ARG_PORT", "1")
    monkeypatch.setenv("LLAMA_ARG_CTX_SIZE", "64")
    monkeypatch.setenv("LLAMA_API_KEY", "a key our client does not send")
    server = _server(tmp_path)
    await server.start()
    try:
        assert (await _chat(server, "Say hello.")).strip()
    finally:
        await server.stop()


async def test_warming_leaves_the_system_prompt_in_the_kv_cache_for_the_first_turn(server):
    await server.warm(SYSTEM_PROMPT)

    _, usage, _ = await _chat_with_usage(server, "What is the capital of France?")

    assert _cached(usage) > usage.prompt_tokens - _cached(usage), "the first turn re-evaluated the prompt"


async def test_two_answers_at_once_both_run_to_their_end_each_with_the_prompt_cached(tmp_path):
    # llama-cpp-python's server ended the stream in progress when a second request came.
    server = _server(tmp_path, parallel=2)
    await server.start()
    try:
        await server.warm(SYSTEM_PROMPT)
        answers = await asyncio.gather(
            _chat_with_usage(server, "Count from one to twenty.", max_tokens=40),
            _chat_with_usage(server, "Name the days of the week.", max_tokens=40),
        )
        for text, usage, finish in answers:
            assert finish in ("length", "stop") and text.strip()
            assert usage.completion_tokens >= 5
            assert _cached(usage) > 0
        assert server.status()["slots"] == 2
    finally:
        await server.stop()


async def test_a_killed_server_is_restarted_warm_on_the_same_address(server):
    await server.warm(SYSTEM_PROMPT)
    base_url, old_pid = server.base_url, server.pid

    os.kill(old_pid, signal.SIGKILL)
    await until(lambda: server.pid != old_pid and server.healthy, server.status, timeout=180)

    status = server.status()
    assert status["restarts"] == 1
    assert "SIGKILL" in status["last_exit"]
    assert server.base_url == base_url
    text, usage, _ = await _chat_with_usage(server, "Say hello.")
    assert text.strip()
    assert _cached(usage) > 0, "the restarted server was not re-warmed"


async def test_stop_leaves_no_server_process_behind(server):
    pid, port = server.pid, int(server.base_url.split(":")[2].split("/")[0])

    await server.stop()

    assert not _alive(pid)
    assert not _accepts_connections(port)
    assert server.status()["state"] == "stopped"


async def test_restarting_gives_up_after_the_bounded_number_of_attempts(tmp_path):
    model = tmp_path / "model.gguf"
    model.symlink_to(llm_model_path("smollm2-135m"))
    server = _server(tmp_path, model, max_restarts=2)
    await server.start()
    try:
        model.unlink()
        os.kill(server.pid, signal.SIGKILL)

        await until(lambda: server.status()["state"] == "failed", server.status, timeout=180)

        assert not server.healthy
        assert server.status()["restarts"] == 0
        assert server.log_path.read_text().count("=== ") == 3  # the first start and two retries
    finally:
        await server.stop()


async def test_a_server_that_cannot_load_its_model_fails_to_start_with_its_log_tail(tmp_path):
    model = tmp_path / "broken.gguf"
    model.write_bytes(b"this is not a GGUF file")
    server = _server(tmp_path, model)

    with pytest.raises(LLMServerError, match="exited during start-up") as error:
        await server.start()

    last_logged = server.log_path.read_text().strip().splitlines()[-1]
    assert last_logged in str(error.value)
    assert server.status()["state"] == "stopped"


def test_the_server_dies_with_the_process_that_started_it(tmp_path):
    script = textwrap.dedent(
        f"""
        import asyncio
        from agent.runtime.llm_server import LocalLLMServer
        from agent.runtime.models import llm_model_path

        async def main():
            server = LocalLLMServer(
                llm_model_path("smollm2-135m"), binary={str(BINARY)!r}, n_threads=1, log_dir={str(tmp_path)!r}
            )
            await server.start()
            print(server.pid, flush=True)
            await asyncio.sleep(3600)

        asyncio.run(main())
        """
    )
    with (tmp_path / "parent.log").open("w") as parent_log:
        parent = subprocess.Popen(
            [sys.executable, "-c", script],
            cwd=Path(__file__).parent.parent,
            stdout=subprocess.PIPE,
            stderr=parent_log,
            text=True,
        )
    child = None
    try:
        line = parent.stdout.readline()
        assert line.strip().isdigit(), (tmp_path / "parent.log").read_text()
        child = int(line)
        assert _alive(child)

        parent.kill()
        parent.wait()

        asyncio.run(until(lambda: not _alive(child), lambda: f"pid {child} still alive", timeout=180))
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()
        if child is not None and _alive(child):
            os.kill(child, signal.SIGKILL)


def test_logs_of_finished_runs_are_pruned_to_the_newest_few_and_a_running_agents_log_is_kept(tmp_path):
    import os
    import time

    from agent.runtime.llm_server import prune_logs

    running = tmp_path / f"llama-server-qwen-0.5b-{os.getpid()}.log"
    running.write_text("this agent")
    finished = []
    for i, pid in enumerate((999_991, 999_992, 999_993, 999_994)):  # no such processes
        log = tmp_path / f"llama-server-qwen-0.5b-{pid}.log"
        log.write_text("done")
        os.utime(log, (time.time() - 100 + i, time.time() - 100 + i))
        finished.append(log)
    other = tmp_path / "notes.log"
    other.write_text("not ours")
    prune_logs(tmp_path, keep=2)
    assert running.exists() and other.exists()
    assert [log.exists() for log in finished] == [False, False, True, True]
