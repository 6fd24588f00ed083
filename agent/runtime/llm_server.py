"""A supervised local llama.cpp server speaking the OpenAI API on a loopback port.

The server is llama.cpp's own ``llama-server`` (built by agent/runtime/llama_build.py), run as a
child process so a crash in native code cannot take the agent down with it. It serves several
calls at once: ``parallel`` slots decode together (continuous batching), each keeps its own
prompt cache, a request goes to the idle slot whose cached prompt it shares most of, and no
request ever ends another's stream. The supervisor restarts it with backoff and puts the
system prompt back into every slot, because a cold prompt costs seconds of first-token time.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any, Literal

import httpx
import psutil
from loguru import logger

from agent.runtime.models import DEFAULT_CACHE_DIR

# Logs of finished runs kept for a post-mortem; older ones are deleted at start.
KEPT_LOGS = 5

State = Literal["stopped", "starting", "healthy", "restarting", "failed"]

_LOG_TAIL_BYTES = 4096
_LOG_TAIL_LINES = 25


class LLMServerError(RuntimeError):
    """The LLM server could not be started or stopped answering."""


def _child_env() -> dict[str, str]:
    """Our environment, less what llama-server would read as its settings.

    Every option of llama-server has an ``LLAMA_ARG_*`` variable (and ``LLAMA_API_KEY`` locks
    the API): one set in our environment for something else would silently move the server,
    resize it or lock us out of it. ``HF_*`` would let it reach for a model hub.
    """
    return {key: value for key, value in os.environ.items() if not key.upper().startswith(("LLAMA_", "HF_"))}


_SETPRIV = shutil.which("setpriv") if sys.platform == "linux" else None


def dying_with_parent(command: list[str]) -> list[str]:
    """``command`` run so that the kernel kills it when the process that started it dies
    (util-linux's ``setpriv --pdeathsig KILL``, which sets it and then execs the command), or
    as it is where ``setpriv`` is missing.

    Why not a ``preexec_fn`` calling prctl: Python code between fork and exec in a threaded
    parent can deadlock on a lock (the allocator's, the interpreter's own after-fork locks) held
    by a thread that does not exist in the child. The agent forks the server while Whisper and
    the other models load on threads (and restarts it mid-call), and an ``agent eval`` hung so,
    the server's log holding its command line and nothing after it: Popen waits in the event
    loop's thread for the child's exec, so the whole process stopped. The signal follows the
    thread that forked the child, the event loop's, which lives as long as the loop that
    supervises the server.
    """
    return [_SETPRIV, "--pdeathsig", "KILL", "--", *command] if _SETPRIV else command


def prune_logs(directory: Path, *, keep: int) -> None:
    """Delete all but the newest ``keep`` logs of agents no longer running, so restarts do not fill the disk."""
    finished = []
    for log in directory.glob("llama-server-*-*.log"):
        pid = log.stem.rsplit("-", 1)[-1]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            finished.append(log)
    finished.sort(key=lambda path: path.stat().st_mtime, reverse=True)
    for log in finished[keep:]:
        log.unlink(missing_ok=True)


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class LocalLLMServer:
    """Runs llama.cpp's OpenAI-compatible server for one GGUF model and keeps it up.

    Point an OpenAI client at `base_url` with `model=model_alias` (any API key).
    """

    def __init__(
        self,
        model_path: Path | str,
        *,
        model_alias: str = "local",
        n_ctx: int = 2048,
        parallel: int = 1,
        n_threads: int | None = None,
        binary: Path | str,
        log_dir: Path | str | None = None,
        start_timeout_s: float = 120.0,
        warm_timeout_s: float = 120.0,
        max_restarts: int = 5,
        restart_backoff_s: float = 1.0,
        stable_after_s: float = 60.0,
        stop_grace_s: float = 5.0,
    ) -> None:
        """
        Args:
            model_path: the GGUF file (see agent.runtime.models.llm_model_path).
            model_alias: the model name clients send.
            n_ctx: context tokens of each slot (one call's prompt and answer).
            parallel: slots: requests decoded at once, each with its own prompt cache.
            n_threads: decode threads; defaults to the CPUs this process may run on.
            binary: the llama-server executable (agent.runtime.llama_build.find_binary).
            log_dir: where `llama-server-<alias>-<pid>.log` goes (pid of this process: two
                agents on one model cache must not truncate and interleave one file); defaults
                to the model cache.
            max_restarts: restarts in a row before giving up; the count resets once the
                server has stayed up for `stable_after_s`.
            restart_backoff_s: first restart delay, doubled per attempt (capped at 30 s).
        """
        self._model_path = Path(model_path)
        self._model_alias = model_alias
        self._n_ctx = n_ctx
        self._parallel = max(1, parallel)
        self._binary = Path(binary)
        self._n_threads = n_threads or len(os.sched_getaffinity(0))
        self._log_path = Path(log_dir or DEFAULT_CACHE_DIR) / f"llama-server-{model_alias}-{os.getpid()}.log"
        self._start_timeout_s = start_timeout_s
        self._warm_timeout_s = warm_timeout_s
        self._max_restarts = max_restarts
        self._restart_backoff_s = restart_backoff_s
        self._stable_after_s = stable_after_s
        self._stop_grace_s = stop_grace_s

        self._port: int | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._log_offset = 0
        self._client: httpx.AsyncClient | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._state: State = "stopped"
        self._healthy_since = 0.0
        self._restarts = 0
        self._last_exit: str | None = None
        self._warm_prompt: str | None = None

    @property
    def model_alias(self) -> str:
        return self._model_alias

    @property
    def base_url(self) -> str:
        """The OpenAI API root, e.g. http://127.0.0.1:PORT/v1 (known once started)."""
        if self._port is None:
            raise LLMServerError("the LLM server has not been started")
        return f"http://127.0.0.1:{self._port}/v1"

    @property
    def log_path(self) -> Path:
        return self._log_path

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def healthy(self) -> bool:
        return (
            self._state == "healthy"
            and self._process is not None
            and self._process.returncode is None
        )

    def status(self) -> dict[str, Any]:
        """A JSON-ready snapshot for a health endpoint."""
        return {
            "state": self._state,
            "healthy": self.healthy,
            "model": str(self._model_path),
            "model_alias": self._model_alias,
            "slots": self._parallel,
            "base_url": self.base_url if self._port is not None else None,
            "pid": self.pid,
            "restarts": self._restarts,
            "last_exit": self._last_exit,
            "log": str(self._log_path),
        }

    async def start(self) -> None:
        """Launch the server and return once it answers; raise LLMServerError if it cannot."""
        if self._state != "stopped":
            raise LLMServerError(f"the LLM server is already {self._state}")
        if not self._model_path.is_file():
            raise LLMServerError(f"model file {self._model_path} does not exist")
        if not os.access(self._binary, os.X_OK):
            raise LLMServerError(f"llama-server {self._binary} is not an executable")
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        prune_logs(self._log_path.parent, keep=KEPT_LOGS)
        # One log per run: restarts append to it, so a crash loop reads as one story.
        self._log_path.write_bytes(b"")
        self._port = _free_loopback_port()
        # Loopback only: an HTTP(S)_PROXY in the environment must not intercept these calls.
        self._client = httpx.AsyncClient(trust_env=False)
        self._state = "starting"
        try:
            await self._launch()
        except BaseException:
            await self._close_client()
            self._state = "stopped"
            raise
        self._state = "healthy"
        atexit.register(self._kill_at_exit)
        self._supervisor = asyncio.create_task(self._supervise(), name=f"llm-server-{self._model_alias}")

    @property
    def metrics_url(self) -> str:
        """llama-server's Prometheus metrics (tokens prompted, cached and generated)."""
        return self.base_url.removesuffix("/v1") + "/metrics"

    async def warm(self, system_prompt: str) -> None:
        """Evaluate `system_prompt` in every slot now, so any call's first turn finds it cached.

        Remembered, and replayed after every restart.
        """
        if self._client is None:
            raise LLMServerError("the LLM server has not been started")
        self._warm_prompt = system_prompt
        await self._send_warm_request(system_prompt)

    async def stop(self) -> None:
        """Stop supervising and end the server: SIGTERM, then SIGKILL after a grace period."""
        self._state = "stopped"
        supervisor, self._supervisor = self._supervisor, None
        if supervisor:
            supervisor.cancel()
            try:
                await supervisor
            except asyncio.CancelledError:
                pass
        await self._terminate()
        await self._close_client()
        atexit.unregister(self._kill_at_exit)

    async def _launch(self) -> None:
        """Start one server process and wait for it to answer; kill it if it never does."""
        assert self._port is not None and self._client is not None
        command = [
            str(self._binary),
            "--model", str(self._model_path),
            "--alias", self._model_alias,
            # The context is split evenly between the slots: each gets one call's worth.
            "--ctx-size", str(self._n_ctx * self._parallel),
            "--parallel", str(self._parallel),
            "--threads", str(self._n_threads),
            "--host", "127.0.0.1",
            "--port", str(self._port),
            "--metrics",
            "--no-webui",
        ]  # fmt: skip
        with self._log_path.open("ab") as log:
            log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n".encode())
            log.flush()
            self._log_offset = log.tell()
            self._process = await asyncio.create_subprocess_exec(
                *dying_with_parent(command),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                env=_child_env(),
                # Its own session: a Ctrl-C in our terminal is ours to handle via stop(),
                # not a crash for the supervisor to "repair".
                start_new_session=True,
            )
        logger.info(
            f"LLM server {self._model_alias} starting (pid {self._process.pid}, "
            f"{self._model_path.name}, port {self._port}, log {self._log_path})"
        )
        try:
            await asyncio.wait_for(self._wait_until_answering(), self._start_timeout_s)
        except asyncio.TimeoutError:
            await self._terminate()
            raise LLMServerError(
                f"LLM server {self._model_alias} did not answer within {self._start_timeout_s:.0f} s; "
                f"last lines of {self._log_path}:\n{self._log_tail()}"
            ) from None
        except BaseException:
            await self._terminate()
            raise
        self._healthy_since = time.monotonic()
        logger.info(f"LLM server {self._model_alias} ready at {self.base_url}")

    async def _wait_until_answering(self) -> None:
        assert self._process is not None and self._client is not None
        # 503 while the model loads, 200 once it can answer.
        url = self.base_url.removesuffix("/v1") + "/health"
        while True:
            if self._process.returncode is not None:
                raise LLMServerError(
                    f"LLM server {self._model_alias} exited during start-up "
                    f"({_describe_exit(self._process.returncode)}); last lines of "
                    f"{self._log_path}:\n{self._log_tail()}"
                )
            try:
                response = await self._client.get(url, timeout=2.0)
                if response.status_code == 200:
                    return
            except httpx.TransportError:
                pass  # not listening yet: the model loads before the port opens
            await asyncio.sleep(0.2)

    async def _send_warm_request(self, system_prompt: str) -> None:
        assert self._client is not None

        async def warm_slot(slot: int):
            response = await self._client.post(
                f"{self.base_url}/chat/completions",
                json={
                    "model": self._model_alias,
                    "messages": [
                        {"role": "system", "content": system_prompt},
                        # Some chat templates reject a conversation without a user turn.
                        {"role": "user", "content": "Hi"},
                    ],
                    "max_tokens": 1,
                    "id_slot": slot,
                    "cache_prompt": True,
                },
                timeout=self._warm_timeout_s,
            )
            response.raise_for_status()

        # All at once: the slots prefill together in one batch.
        await asyncio.gather(*(warm_slot(slot) for slot in range(self._parallel)))
        logger.debug(f"LLM server {self._model_alias}: {self._parallel} slots warmed with the system prompt")

    async def _supervise(self) -> None:
        attempts = 0
        while True:
            assert self._process is not None
            code = await self._process.wait()
            if self._state == "stopped":
                return
            self._last_exit = _describe_exit(code)
            logger.error(
                f"LLM server {self._model_alias} (pid {self._process.pid}) died unexpectedly "
                f"({self._last_exit}); last lines of {self._log_path}:\n{self._log_tail()}"
            )
            if time.monotonic() - self._healthy_since >= self._stable_after_s:
                attempts = 0
            self._state = "restarting"
            while True:
                if attempts >= self._max_restarts:
                    self._state = "failed"
                    logger.error(
                        f"LLM server {self._model_alias} gave up after {attempts} restarts in a row"
                    )
                    return
                attempts += 1
                delay = min(self._restart_backoff_s * 2 ** (attempts - 1), 30.0)
                logger.warning(
                    f"Restarting LLM server {self._model_alias} in {delay:.1f} s "
                    f"(attempt {attempts}/{self._max_restarts})"
                )
                await asyncio.sleep(delay)
                try:
                    await self._launch()
                except (LLMServerError, OSError) as error:
                    logger.error(f"Restarting LLM server {self._model_alias} failed: {error}")
                    continue
                break
            self._restarts += 1
            # Healthy only once warm again, so a turn routed by `healthy` gets a fast answer.
            if self._warm_prompt is not None:
                try:
                    await self._send_warm_request(self._warm_prompt)
                except httpx.HTTPError as error:
                    # A failed warm-up only costs the next turn its speed; the exit watch
                    # above handles a server that is really gone.
                    logger.warning(f"Re-warming LLM server {self._model_alias} failed: {error!r}")
            self._state = "healthy"

    async def _terminate(self) -> None:
        process = self._process
        if process is None or process.returncode is not None:
            return
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), self._stop_grace_s)
        except asyncio.TimeoutError:
            logger.warning(
                f"LLM server {self._model_alias} ignored SIGTERM for {self._stop_grace_s} s; killing it"
            )
            process.kill()
            await process.wait()

    async def _close_client(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _kill_at_exit(self) -> None:
        """Last resort for an interpreter exiting without stop(), where no loop runs any more."""
        if self._process is not None and self._process.returncode is None:
            try:
                os.kill(self._process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _log_tail(self) -> str:
        """The last lines the current server process wrote."""
        try:
            with self._log_path.open("rb") as log:
                size = log.seek(0, os.SEEK_END)
                log.seek(max(self._log_offset, size - _LOG_TAIL_BYTES))
                text = log.read().decode("utf-8", errors="replace")
        except OSError as error:
            return f"(log unreadable: {error})"
        lines = text.strip().splitlines()[-_LOG_TAIL_LINES:]
        return "\n".join(f"  | {line}" for line in lines) if lines else "  (nothing logged)"
