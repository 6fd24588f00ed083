"""Shared fixtures: one real Brisk runtime (models + LLM server) and one real server per session.

Starting the runtime costs a few seconds (the LLM server loads and prefills the system
prompt), so the end-to-end tests share it; each test places its own real WebRTC call.
"""

import os
import tempfile
from pathlib import Path

import pytest
import pytest_asyncio

from agent.caller.call import running_server
from agent.config import load_config
from agent.runtime.runtime import Runtime
from tests.postgres import PG_BIN, Cluster

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"

# Tests speak from the first second and wait in silence between steps: calls neither greet nor
# ask "Are you still there?" unless a test asks for it (tests/test_conversation_e2e.py does).
# The tools' store lives in a directory of the session's own, never the user's data.
os.environ.setdefault("BRISK_GREET_FIRST", "false")
os.environ.setdefault("BRISK_USER_IDLE_SECS", "0")
os.environ.setdefault("BRISK_DATA_DIR", tempfile.mkdtemp(prefix="brisk-test-data-"))
# The plumbing example's HTTP tool reads its key from the environment, and the tools' requests are
# signed (tests/test_http_tools.py runs them against tests/fakes/business_api.py).
os.environ.setdefault("BRIGHTWATER_API_KEY", "brightwater-key-for-tests")
os.environ.setdefault("BRISK_TOOL_SECRET", "tool-secret-for-tests")


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def e2e_config():
    # Short answers keep each call brief on 2 cores. These tests pin the LLM's path, and their
    # questions (opening hours) are the fast path's: tests/test_fast_path_e2e.py covers that one.
    return load_config(llm_max_tokens=40, fast_path=False)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def runtime(e2e_config):
    rt = Runtime(e2e_config)
    await rt.start()
    yield rt
    await rt.stop()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def server(e2e_config, runtime):
    """(base_url, app) of a real Brisk server on a free loopback port."""
    async with running_server(e2e_config, runtime) as served:
        yield served


@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL cluster of the session's own (tests/postgres.py)."""
    if PG_BIN is None:
        pytest.skip("PostgreSQL is not installed (Debian package postgresql; .ci/run installs it)")
    cluster = Cluster()
    yield cluster
    cluster.stop()


@pytest_asyncio.fixture(params=["sqlite", "postgresql"])
async def records_url(request, tmp_path):
    """A fresh, empty database for the call records: SQLite (the default) and PostgreSQL (many servers)."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'calls.db'}"
    return await request.getfixturevalue("postgres").new_database()
