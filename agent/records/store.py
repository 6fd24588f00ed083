"""Where call records live: SQLite under ``BRISK_DATA_DIR`` by default, any SQLAlchemy URL otherwise.

``CallRecords`` opens the database (SQLAlchemy 2's asyncio engine; SQLite in WAL mode with a busy
timeout, so several calls write at once), brings its schema to the newest Alembic migration,
and marks the calls a crash of this server (``instance``) left ``in_progress`` as ``failed``:
their completed turns are all there, since each turn is written when it completes. Shared by
every call of the process.

With a webhook configured, a call's final record goes into the outbox table in the same
transaction that writes its final status, so a call can not end without its delivery being
owed (agent/records/webhook.py sends them).
"""

from __future__ import annotations

import asyncio
import base64
import json
from datetime import datetime, timedelta, timezone
from importlib import resources
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.database import open_engine
from agent.records.models import CallRow, OutboxRow, TurnRow


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

    def __init__(self, url: str, *, instance: str = "", webhook: bool = False):
        """``instance``: this server's name in the records; ``webhook``: owe each ended call a delivery."""
        self.url = url
        self.instance = instance
        self.webhook = webhook
        self.engine = open_engine(url)
        self._sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop start() ran on, the sender's
        self.delivery_owed = asyncio.Event()  # set when a delivery is queued, for the webhook sender
        self._wake = self.delivery_owed.set

    def for_another_loop(self) -> "CallRecords":
        """The same records, for calls run on another thread's event loop (a LiveKit room's job):
        an engine of its own, since a pooled connection belongs to the loop that opened it, and a
        queued delivery wakes this process's one webhook sender on its own loop. Already started."""
        twin = CallRecords(self.url, instance=self.instance, webhook=self.webhook)
        loop = asyncio.get_running_loop() if self._loop is None else self._loop
        twin._wake = lambda: loop.call_soon_threadsafe(self.delivery_owed.set)
        return twin

    @classmethod
    def for_config(cls, database_url: str | None, data_dir: Path, **options) -> "CallRecords":
        if database_url:
            return cls(database_url, **options)
        data_dir.mkdir(parents=True, exist_ok=True)
        return cls(f"sqlite+aiosqlite:///{data_dir / 'calls.db'}", **options)

    async def start(self) -> int:
        """Migrate, then mark this server's calls left in progress by a crash as failed; returns how many."""
        self._loop = asyncio.get_running_loop()
        async with self.engine.begin() as connection:
            await connection.run_sync(_upgrade)
        async with self._sessions() as session, session.begin():
            # Calls recorded before servers were named (instance NULL) are this server's too.
            cut_off = list(await session.scalars(select(CallRow.id).where(
                CallRow.status == "in_progress", or_(CallRow.instance == self.instance, CallRow.instance.is_(None)))))
            if not cut_off:
                return 0
            await session.execute(
                update(CallRow).where(CallRow.id.in_(cut_off))
                .values(status="failed", ended_by="crash", ended_at=func.coalesce(CallRow.ended_at, _now())))
            for call_id in cut_off:
                await self._owe_delivery(session, call_id)
        self._wake_sender()
        return len(cut_off)

    async def close(self) -> None:
        await self.engine.dispose()

    async def open_call(self, call_id: str, *, transport: str, caller: str = "") -> None:
        async with self._sessions() as session, session.begin():
            session.add(CallRow(id=call_id, transport=transport, caller=caller, status="in_progress",
                                started_at=_now(), turn_count=0, instance=self.instance))

    async def add_busy(self, call_id: str, *, transport: str, caller: str = "") -> None:
        """A call turned away because every line was taken: a record of it, ended at once."""
        now = _now()
        async with self._sessions() as session, session.begin():
            session.add(CallRow(id=call_id, transport=transport, caller=caller, status="busy", started_at=now,
                                ended_at=now, ended_by="busy", turn_count=0, instance=self.instance))
            await self._owe_delivery(session, call_id)
        self._wake_sender()

    async def add_turn(self, call_id: str, turn: dict) -> None:
        """One completed turn (``turn``: the latency record's fields, plus ``tool_calls``)."""
        async with self._sessions() as session, session.begin():
            session.add(TurnRow(
                call_id=call_id, n=int(turn.get("turn") or 0), user_text=turn.get("user_text") or "",
                bot_text=turn.get("bot_text") or "", interrupted=bool(turn.get("interrupted")),
                merged=bool(turn.get("merged")),
                speculative=bool(turn.get("speculative")), fast_path=turn.get("fast_path"),
                tool_calls=turn.get("tool_calls") or [], latency_ms=turn.get("stages_ms") or {}, created_at=_now()))
            await session.execute(update(CallRow).where(CallRow.id == call_id).values(turn_count=CallRow.turn_count + 1))

    async def close_call(self, call_id: str, *, status: str, ended_by: str | None = None) -> None:
        async with self._sessions() as session, session.begin():
            await session.execute(update(CallRow).where(CallRow.id == call_id)
                                  .values(status=status, ended_by=ended_by, ended_at=_now()))
            await self._owe_delivery(session, call_id)
        self._wake_sender()

    async def _owe_delivery(self, session: AsyncSession, call_id: str) -> None:
        if not self.webhook:
            return
        await session.flush()
        call = await _read_call(session, call_id)
        if call is None:
            return
        now = _now()
        payload = json.dumps({"event": "call.ended", "call": call}, separators=(",", ":"))
        session.add(OutboxRow(call_id=call_id, payload=payload, attempts=0, next_attempt_at=now, created_at=now))

    def _wake_sender(self) -> None:
        # Called once the transaction is in, so the woken sender sees the row.
        if self.webhook:
            self._wake()

    # --- recordings ---------------------------------------------------------------------------

    async def set_recording(self, call_id: str, path: str | None) -> None:
        async with self._sessions() as session, session.begin():
            await session.execute(update(CallRow).where(CallRow.id == call_id).values(recording=path))

    async def recording(self, call_id: str) -> str | None:
        async with self._sessions() as session:
            return await session.scalar(select(CallRow.recording).where(CallRow.id == call_id))

    async def recordings_started_before(self, before: datetime) -> list[tuple[str, str]]:
        """(call id, path) of every kept recording of a call started before ``before``."""
        async with self._sessions() as session:
            rows = await session.execute(select(CallRow.id, CallRow.recording).where(
                CallRow.recording.is_not(None), CallRow.started_at < _for_db(self.url, before)))
            return [(call_id, path) for call_id, path in rows]

    # --- the webhook outbox -------------------------------------------------------------------

    async def claim_deliveries(self, *, limit: int, lease_s: float) -> list[tuple[int, str, int]]:
        """Take up to ``limit`` due deliveries for ``lease_s`` seconds: [(id, payload, attempts)].

        Claimed one row at a time with a conditional update, so two senders (two servers on one
        database) never take the same row: it works the same on SQLite and PostgreSQL.
        """
        now = _for_db(self.url, _now())
        lease = _for_db(self.url, _now() + timedelta(seconds=lease_s))
        free = (OutboxRow.next_attempt_at <= now) & (OutboxRow.claimed_until.is_(None) | (OutboxRow.claimed_until < now))
        claimed = []
        async with self._sessions() as session, session.begin():
            due = list(await session.execute(
                select(OutboxRow.id, OutboxRow.payload, OutboxRow.attempts).where(free)
                .order_by(OutboxRow.next_attempt_at).limit(limit)))
            for row_id, payload, attempts in due:
                taken = await session.execute(update(OutboxRow).where(OutboxRow.id == row_id, free)
                                              .values(claimed_until=lease))
                if taken.rowcount:
                    claimed.append((row_id, payload, attempts))
        return claimed

    async def delivered(self, delivery_id: int) -> None:
        async with self._sessions() as session, session.begin():
            await session.execute(delete(OutboxRow).where(OutboxRow.id == delivery_id))

    async def retry_later(self, delivery_id: int, *, after_s: float, error: str) -> None:
        async with self._sessions() as session, session.begin():
            await session.execute(update(OutboxRow).where(OutboxRow.id == delivery_id).values(
                attempts=OutboxRow.attempts + 1, claimed_until=None, last_error=error[:1000],
                next_attempt_at=_for_db(self.url, _now() + timedelta(seconds=after_s))))

    async def deliveries_owed(self) -> int:
        async with self._sessions() as session:
            return await session.scalar(select(func.count()).select_from(OutboxRow)) or 0

    async def calls(self, *, limit: int = 50, cursor: str | None = None) -> tuple[list[dict], str | None]:
        """Newest first, ``limit`` at a time; the cursor of the next page, or None at the end."""
        query = select(CallRow).order_by(CallRow.started_at.desc(), CallRow.id.desc()).limit(limit + 1)
        if cursor:
            started, last_id = _decode(cursor)
            started = _for_db(self.url, started)
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
            return await _read_call(session, call_id)


async def _read_call(session: AsyncSession, call_id: str) -> dict | None:
    row = await session.get(CallRow, call_id, populate_existing=True)
    if row is None:
        return None
    turns = await session.scalars(select(TurnRow).where(TurnRow.call_id == call_id).order_by(TurnRow.n, TurnRow.id))
    return {**_call_dict(row), "turns": [_turn_dict(t) for t in turns]}


def _for_db(url: str, value: datetime) -> datetime:
    # SQLite compares the stored zone-less UTC text: a comparison value must be written the same way.
    return value.replace(tzinfo=None) if url.startswith("sqlite") else value


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
            "ended_by": row.ended_by, "turn_count": row.turn_count, "has_audio": row.recording is not None}


def _turn_dict(row: TurnRow) -> dict:
    return {"n": row.n, "user_text": row.user_text, "bot_text": row.bot_text, "interrupted": row.interrupted,
            "merged": row.merged,
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
