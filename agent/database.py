"""One way to open a database for Brisk's stores (the shop's data, the call records).

``open_engine`` is SQLAlchemy 2's asyncio engine for a URL; on SQLite it sets, on every
connection, WAL (several calls read and write at once), a busy timeout (a writer waits instead
of failing with "database is locked") and foreign keys (SQLite leaves them off).
"""

from __future__ import annotations

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine


def open_engine(url: str) -> AsyncEngine:
    engine = create_async_engine(url)
    if url.startswith("sqlite"):
        @event.listens_for(engine.sync_engine, "connect")
        def _sqlite_pragmas(connection, _record):
            cursor = connection.cursor()
            for pragma in ("journal_mode=WAL", "busy_timeout=5000", "foreign_keys=ON"):
                cursor.execute(f"PRAGMA {pragma}")
            cursor.close()
    return engine
