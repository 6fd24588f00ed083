"""The call records' tables: one row per call, one per completed turn, and the webhook outbox
(SQLAlchemy 2 models).

The schema is made and changed by Alembic (``migrations/``), never by ``create_all``, so a
database many machines share (``BRISK_DATABASE_URL``) moves forward one migration at a time.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Boolean, DateTime, ForeignKey, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# A call's status, as the API reports it.
STATUSES = ("in_progress", "completed", "transferred", "abandoned", "busy", "failed")


class Base(DeclarativeBase):
    pass


class CallRow(Base):
    __tablename__ = "calls"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    transport: Mapped[str] = mapped_column(String(16))
    caller: Mapped[str] = mapped_column(String(64), default="")  # masked unless configured otherwise
    status: Mapped[str] = mapped_column(String(16), index=True)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    ended_by: Mapped[str | None] = mapped_column(String(32), nullable=True)
    turn_count: Mapped[int] = mapped_column(Integer, default=0)
    # The server that ran it (BRISK_INSTANCE_ID): after a crash a server fails only its own calls.
    instance: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    recording: Mapped[str | None] = mapped_column(String(512), nullable=True)  # WAV path, while kept


class TurnRow(Base):
    __tablename__ = "turns"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    call_id: Mapped[str] = mapped_column(ForeignKey("calls.id", ondelete="CASCADE"), index=True)
    n: Mapped[int] = mapped_column(Integer)
    user_text: Mapped[str] = mapped_column(Text, default="")
    bot_text: Mapped[str] = mapped_column(Text, default="")  # as heard: cut where it was interrupted
    interrupted: Mapped[bool] = mapped_column(Boolean, default=False)
    merged: Mapped[bool] = mapped_column(Boolean, default=False)  # it continued the turn before: one question
    speculative: Mapped[bool] = mapped_column(Boolean, default=False)
    fast_path: Mapped[str | None] = mapped_column(String(64), nullable=True)
    tool_calls: Mapped[list] = mapped_column(JSON, default=list)
    latency_ms: Mapped[dict] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class OutboxRow(Base):
    """A webhook delivery still owed: written with the call's final status, deleted once delivered."""

    __tablename__ = "webhook_outbox"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    call_id: Mapped[str] = mapped_column(String(128), index=True)
    payload: Mapped[str] = mapped_column(Text)  # the exact body that is signed and sent
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    # A sender that took the row: others leave it alone until then (many machines, one database).
    claimed_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
