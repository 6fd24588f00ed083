"""llama.cpp's own ``llama-server``, built once from the pinned llama-cpp-python sdist and cached.

Why this server: it batches several sequences at once (parallel slots), keeps a prompt cache
per slot, never ends one request's stream because another arrived, and exposes ``/metrics``
and ``/slots``; llama-cpp-python's Python server decodes one sequence at a time and, by
default, ends the stream in progress when a new request comes (architecture.md, "Concurrent
LLM serving"). The C++ source ships inside the llama-cpp-python sdist on PyPI, so it builds
offline from a registry package, with the same AMX-free CPU flags the Makefile always used.

    python -m agent prepare-llm-server      # make does this; ~9 min on 2 cores, then cached

The binary lands in ``~/.cache/brisk/llama-server/<version>-<flags hash>/llama-server``
(``BRISK_LLAMA_SERVER_DIR`` moves it), so a second install, a CI run on the same machine or
another checkout finds it at once; other CPU flags (``BRISK_LLAMA_CPU_FLAGS``, e.g. a portable
image's) build a new one beside it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from loguru import logger

SDIST = "llama-cpp-python"
SDIST_VERSION = "0.3.36"
BINARY = "llama-server"

# AMX tile instructions fault inside the VMs this runs on (SIGSEGV at ldtilecfg on the first
# token), and -march=native would turn them on where the CPU advertises them: so the vector
# extensions are named explicitly, without AMX.
_BASE_FLAGS = (
    "-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON",
    "-DGGML_BMI2=ON",
)  # fmt: skip
_AVX512_FLAGS = ("-DGGML_AVX512=ON", "-DGGML_AVX512_VBMI=ON", "-DGGML_AVX512_VNNI=ON", "-DGGML_AVX512_BF16=ON")
# Only the server, statically linked; no web UI (its prebuilt copy would be downloaded), no TLS.
_BUILD_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_CURL=OFF",
)  # fmt: skip


class LlamaServerMissing(RuntimeError):
    """No llama-server binary is built for this machine's flags yet."""


def cpu_flags(override: str | None = None) -> tuple[str, ...]:
    """The CMake CPU flags: ``override`` if given, else AVX2 everywhere and AVX-512 where the CPU has it."""
    if override:
        return tuple(override.split())
    try:
        avx512 = "avx512f" in Path("/proc/cpuinfo").read_text()
    except OSError:
        avx512 = False
    return _BASE_FLAGS + (_AVX512_FLAGS if avx512 else ())


def binary_path(root: Path, flags: tuple[str, ...]) -> Path:
    """Where the binary built with ``flags`` lives under ``root`` once built."""
    digest = hashlib.sha256(" ".join((*flags, *_BUILD_FLAGS)).encode()).hexdigest()[:12]
    return Path(root) / f"{SDIST_VERSION}-{digest}" / BINARY


def find_binary(root: Path, flags_override: str | None = None) -> Path:
    """The built binary; raises ``LlamaServerMissing`` naming the command that builds it."""
    path = binary_path(root, cpu_flags(flags_override))
    if not os.access(path, os.X_OK):
        raise LlamaServerMissing(
            f"llama-server is not built for this machine yet ({path}); run `make install` or "
            f"`python -m agent prepare-llm-server` (about 9 minutes on 2 cores, once)"
        )
    return path


def build(root: Path, flags_override: str | None = None, jobs: int | None = None) -> Path:
    """Build llama-server under ``root`` unless it is already there for these flags; returns its path."""
    flags = cpu_flags(flags_override)
    target = binary_path(root, flags)
    if os.access(target, os.X_OK):
        logger.info(f"llama-server already built: {target}")
        return target
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"building llama-server needs {tool}; install cmake and a C++ compiler")
    jobs = jobs or int(os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or len(os.sched_getaffinity(0)))
    with tempfile.TemporaryDirectory(prefix="brisk-llama-") as work:
        work = Path(work)
        logger.info(f"downloading the {SDIST}=={SDIST_VERSION} sdist (llama.cpp's source) ...")
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q",
             f"{SDIST}=={SDIST_VERSION}", "-d", str(work)],
            check=True,
        )  # fmt: skip
        [sdist] = work.glob("*.tar.gz")
        with tarfile.open(sdist) as archive:
            archive.extractall(work, filter="data")
        source = next(work.glob("*/vendor/llama.cpp"))
        build_dir = work / "build"
        logger.info(f"building {BINARY} with {jobs} jobs (flags: {' '.join(flags)}) ...")
        subprocess.run(["cmake", "-S", str(source), "-B", str(build_dir), *_BUILD_FLAGS, *flags], check=True)
        subprocess.run(["cmake", "--build", str(build_dir), "--target", BINARY, "-j", str(jobs)], check=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        # Copied then renamed: a build interrupted half way never leaves a binary that looks done.
        partial = target.with_suffix(".partial")
        shutil.copy2(build_dir / "bin" / BINARY, partial)
        partial.replace(target)
    logger.info(f"llama-server built: {target}")
    return target
