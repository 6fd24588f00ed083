"""The business's data the tools read and write: online orders and the bookings Brisk keeps.

One SQLite file under ``BRISK_DATA_DIR`` (WAL, so several calls read and write at once),
through SQLAlchemy 2's asyncio engine on aiosqlite: shared by every call of the process, the
one thing made for sharing here. The orders table is the demo's: seeded once with a few
orders (``DEMO_ORDERS``) so ``lookup_order`` has something to find. A booking is what a
tool declared with ``store: bookings`` was called with (agent/tools/booking.py): its name and its
arguments as JSON, whatever the business asks for. A business points its other tools at its own
systems.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path

from sqlalchemy import JSON, Date, DateTime, Integer, String, func, select
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from agent.database import open_engine


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"

    number: Mapped[str] = mapped_column(String(32), primary_key=True)
    item: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(32))  # processing, shipped, delivered
    updated_on: Mapped[date] = mapped_column(Date)
    arrives_by: Mapped[date | None] = mapped_column(Date, nullable=True)


class Booking(Base):
    __tablename__ = "bookings"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tool: Mapped[str] = mapped_column(String(64))  # the declared tool that made it (book_rental)
    details: Mapped[dict] = mapped_column(JSON)  # its arguments: {"bike": "city bike", "day": "2026-12-05", ...}
    call_id: Mapped[str] = mapped_column(String(64), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=lambda: datetime.now(timezone.utc))


DEMO_ORDERS = [
    Order(number="4572", item="a city bike helmet", status="shipped", updated_on=date(2026, 11, 28), arrives_by=date(2026, 12, 3)),
    Order(number="1234", item="a set of bike lights", status="processing", updated_on=date(2026, 11, 30), arrives_by=date(2026, 12, 5)),
    Order(number="9001", item="a puncture repair kit", status="delivered", updated_on=date(2026, 11, 25), arrives_by=None),
]


@dataclass(frozen=True)
class OrderStatus:
    number: str
    item: str
    status: str
    updated_on: date
    arrives_by: date | None


class ShopStore:
    """The orders and bookings; ``await start()`` once per process, then share it."""

    def __init__(self, url: str):
        self.url = url
        self.engine: AsyncEngine = open_engine(url)
        self._sessions = async_sessionmaker(self.engine, expire_on_commit=False)

    @classmethod
    def in_dir(cls, data_dir: Path) -> "ShopStore":
        data_dir.mkdir(parents=True, exist_ok=True)
        return cls(f"sqlite+aiosqlite:///{data_dir / 'shop.db'}")

    def for_another_loop(self) -> "ShopStore":
        """The same store for calls on another thread's event loop (a LiveKit room's job): an
        engine of its own, since a pooled connection belongs to the loop that opened it."""
        return ShopStore(self.url)

    async def start(self) -> None:
        async with self.engine.begin() as connection:
            await connection.run_sync(Base.metadata.create_all)
        async with self._sessions() as session, session.begin():
            if not await session.scalar(select(func.count()).select_from(Order)):
                session.add_all(Order(**{c.key: getattr(o, c.key) for c in Order.__table__.columns}) for o in DEMO_ORDERS)

    async def order(self, number: str) -> OrderStatus | None:
        async with self._sessions() as session:
            row = await session.get(Order, number)
            return None if row is None else OrderStatus(row.number, row.item, row.status, row.updated_on, row.arrives_by)

    async def book(self, tool: str, details: dict, *, call_id: str = "") -> int:
        """Write a booking; its id."""
        async with self._sessions() as session, session.begin():
            booking = Booking(tool=tool, details=details, call_id=call_id)
            session.add(booking)
            await session.flush()
            return booking.id

    async def bookings(self) -> list[Booking]:
        async with self._sessions() as session:
            return list(await session.scalars(select(Booking).order_by(Booking.id)))

    async def close(self) -> None:
        await self.engine.dispose()
