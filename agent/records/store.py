"""Where call records live: SQLite under ``BRISK_DATA_DIR`` by default, any SQLAlchemy URL otherwise.

``CallRecords`` opens the database (SQLAlchemy 2's asyncio engine; SQLite in WAL mode with a busy
timeout, so several calls write at once), brings its schema to the newest Alembic migration,
and marks the calls a crash left ``in_progress`` as ``failed``: their completed turns are all
there, since each turn is written when it completes. Shared by every call of the process.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import async_sessionmaker

from agent.database import open_engine
from agent.records.models import CallRow, TurnRow


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _as_utc(value: datetime | None) -> datetime | None:
    # SQLite gives datetimes back without their zone; they were written in UTC.
    return value.replace(tzinfo=timezone.utc) if value is not None and value.tzinfo is None else value


def _upgrade(connection) -> None:
    config = Config()
    config.set_main_option("script_location", str(resources.files("agent.records") / "migrations"))
    config.attributes["connection"] = connection
    command.upgrade(config, "head")


class CallRecords:
    """The calls and their turns; ``await start()`` once per process."""

    def __init__(self, url: str):
        self.url = url
        self.engine = open_engine(url)
        self._sessions = async_sessionmaker(self.engine, expire_on_commit=False)

    @classmethod
    def for_config(cls, database_url: str | None, data_dir: Path) -> "CallRecords":
        if database_url:
            return cls(database_url)
        data_dir.mkdir(parents=True, exist_ok=True)
        return cls(f"sqlite+aiosqlite:///{data_dir / 'calls.db'}")

    async def start(self) -> int:
        """Migrate, then mark calls left in progress by a crash as failed; returns how many."""
        async with self.engine.begin() as connection:
            await connection.run_sync(_upgrade)
        async with self._sessions() as session, session.begin():
            result = await session.execute(
                update(CallRow).where(CallRow.status == "in_progress")
                .values(status="failed", ended_by="crash", ended_at=func.coalesce(CallRow.ended_at, _now())))
            return result.rowcount or 0

    async def close(self) -> None:
        await self.engine.dispose()

    async def open_call(self, call_id: str, *, transport: str, caller: str = "") -> None:
        async with self._sessions() as session, session.begin():
            session.add(CallRow(id=call_id, transport=transport, caller=caller, status="in_progress",
                                started_at=_now(), turn_count=0))

    async def add_busy(self, call_id: str, *, transport: str, caller: str = "") -> None:
        """A call turned away because every line was taken: a record of it, ended at once."""
        now = _now()
        async with self._sessions() as session, session.begin():
            session.add(CallRow(id=call_id, transport=transport, caller=caller, status="busy", started_at=now,
                                ended_at=now, ended_by="busy", turn_count=0))

    async def add_turn(self, call_id: str, turn: dict) -> None:
        """One completed turn (``turn``: the latency record's fields, plus ``tool_calls``)."""
        async with self._sessions() as session, session.begin():
            session.add(TurnRow(
                call_id=call_id, n=int(turn.get("turn") or 0), user_text=turn.get("user_text") or "",
                bot_text=turn.get("bot_text") or "", interrupted=bool(turn.get("interrupted")),
                speculative=bool(turn.get("speculative")), fast_path=turn.get("fast_path"),
                tool_calls=turn.get("tool_calls") or [], latency_ms=turn.get("stages_ms") or {}, created_at=_now()))
            await session.execute(update(CallRow).where(CallRow.id == call_id).values(turn_count=CallRow.turn_count + 1))

    async def close_call(self, call_id: str, *, status: str, ended_by: str | None = None) -> None:
        async with self._sessions() as session, session.begin():
            await session.execute(update(CallRow).where(CallRow.id == call_id)
                                  .values(status=status, ended_by=ended_by, ended_at=_now()))

    async def calls(self, *, limit: int = 50, cursor: str | None = None) -> tuple[list[dict], str | None]:
        """Newest first, ``limit`` at a time; the cursor of the next page, or None at the end."""
        query = select(CallRow).order_by(CallRow.started_at.desc(), CallRow.id.desc()).limit(limit + 1)
        if cursor:
            started, last_id = _decode(cursor)
            if self.url.startswith("sqlite"):
                started = started.replace(tzinfo=None)  # SQLite keeps the UTC times without their zone
            query = query.where((CallRow.started_at < started) | ((CallRow.started_at == started) & (CallRow.id < last_id)))
        async with self._sessions() as session:
            rows = list(await session.scalars(query))
            page, more = rows[:limit], len(rows) > limit
            latencies = await session.execute(
                select(TurnRow.call_id, TurnRow.latency_ms).where(TurnRow.call_id.in_([r.id for r in page])))
        v2v: dict[str, list[float]] = {}
        for call_id, stages in latencies:
            if (stages or {}).get("first_audio_out") is not None:
                v2v.setdefault(call_id, []).append(float(stages["first_audio_out"]))
        calls = [{**_call_dict(r), "v2v_p50_ms": _median(v2v.get(r.id))} for r in page]
        return calls, (_encode(page[-1]) if more and page else None)

    async def call(self, call_id: str) -> dict | None:
        async with self._sessions() as session:
            row = await session.get(CallRow, call_id)
            if row is None:
                return None
            turns = await session.scalars(select(TurnRow).where(TurnRow.call_id == call_id).order_by(TurnRow.id))
            return {**_call_dict(row), "turns": [_turn_dict(t) for t in turns]}


def _median(values: list[float] | None) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _call_dict(row: CallRow) -> dict:
    started, ended = _as_utc(row.started_at), _as_utc(row.ended_at)
    return {"id": row.id, "status": row.status, "transport": row.transport, "caller": row.caller,
            "started_at": started.isoformat(), "ended_at": ended.isoformat() if ended else None,
            "ended_by": row.ended_by, "turn_count": row.turn_count}


def _turn_dict(row: TurnRow) -> dict:
    return {"n": row.n, "user_text": row.user_text, "bot_text": row.bot_text, "interrupted": row.interrupted,
            "speculative": row.speculative, "fast_path": row.fast_path, "tool_calls": row.tool_calls,
            "latency_ms": row.latency_ms, "at": _as_utc(row.created_at).isoformat()}


def _encode(row: CallRow) -> str:
    return base64.urlsafe_b64encode(json.dumps([_as_utc(row.started_at).isoformat(), row.id]).encode()).decode()


def _decode(cursor: str) -> tuple[datetime, str]:
    try:
        started, last_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return datetime.fromisoformat(started), str(last_id)
    except (ValueError, TypeError) as error:
        raise ValueError(f"not a cursor this API gave: {cursor!r}") from error
