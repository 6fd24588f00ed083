"""Recordings kept ``BRISK_RETENTION_DAYS`` and no longer: deleted at start and every hour after.

Consumes the call records' recording paths (agent/records/store.py); deletes the files of calls
that started more than the retention ago, and forgets them in the records (the call, its turns
and its waterfall stay; ``GET /api/calls/{id}/audio`` then answers 404). Measures: ``deleted``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from pathlib import Path

from loguru import logger

from agent.records.store import CallRecords

SWEEP_EVERY_S = 3600.0


class RecordingRetention:
    def __init__(self, records: CallRecords, days: float):
        self.records = records
        self.days = days
        self.deleted = 0
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="recording-retention")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            try:
                await self.sweep()
            except Exception:
                logger.exception("recordings: the retention sweep failed; trying again in an hour")
            await asyncio.sleep(SWEEP_EVERY_S)

    async def sweep(self, now: datetime | None = None) -> int:
        """Delete the recordings older than the retention; how many."""
        before = (now or datetime.now(timezone.utc)) - timedelta(days=self.days)
        expired = await self.records.recordings_started_before(before)
        for call_id, path in expired:
            file = Path(path)
            try:
                file.unlink(missing_ok=True)
                if file.parent.is_dir() and not any(file.parent.iterdir()):
                    file.parent.rmdir()  # the day's folder, once its last recording is gone
            except OSError:
                logger.exception(f"recordings: could not delete {file}")
                continue
            await self.records.set_recording(call_id, None)
            self.deleted += 1
        if expired:
            logger.info(f"recordings: deleted {len(expired)} older than {self.days:g} days")
        return len(expired)
