"""One call's record, written as the call goes: opened at its start, each turn when it completes,
closed with how it ended.

Consumes the call's turn records (``processors/latency.py``'s turn listener: what the caller
said, what the bot said as heard, interrupted, speculative, fast path, the waterfall) and the
tools it called (``CallTools.calls``). Each write is its own task, so a slow database never holds
up the call's frames; ``close`` waits for them, then writes the status: ``transferred`` or
``abandoned`` when the bot handed over or hung up on silence, ``failed`` when the pipeline
failed, else ``completed``. A crash leaves ``in_progress``, which the next start marks
``failed`` (agent/records/store.py).
"""

from __future__ import annotations

import asyncio

from loguru import logger

from agent.records.store import CallRecords


class CallRecorder:
    def __init__(self, records: CallRecords, call):
        self.records = records
        self.call = call
        self.call_id = call.control.call_id
        self._writes: set[asyncio.Task] = set()
        self._tools_seen = 0
        self._opened = False

    async def open(self) -> None:
        try:
            await self.records.open_call(self.call_id, transport=self.call.control.transport,
                                         caller=self.call.control.caller)
            self._opened = True
        except Exception:  # the call goes on without its record, and the log says why
            logger.exception(f"call {self.call_id}: its record could not be opened")
            return
        self.call.latency.add_turn_listener(self._on_turn)

    def _on_turn(self, record: dict) -> None:
        tools = self.call.tools.calls if self.call.tools is not None else []
        turn = {**record, "tool_calls": tools[self._tools_seen:]}
        self._tools_seen = len(tools)
        task = asyncio.get_running_loop().create_task(self._write(turn))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, turn: dict) -> None:
        try:
            await self.records.add_turn(self.call_id, turn)
        except Exception:
            logger.exception(f"call {self.call_id}: turn {turn.get('turn')} could not be recorded")

    async def close(self, *, failed: bool = False) -> None:
        if not self._opened:
            return
        if self._writes:
            await asyncio.wait(list(self._writes), timeout=10)
        control = self.call.control
        status = "failed" if failed else (control.outcome if control.outcome in ("transferred", "abandoned") else "completed")
        try:
            await self.records.close_call(self.call_id, status=status, ended_by=control.ended_by)
        except Exception:
            logger.exception(f"call {self.call_id}: its record could not be closed")
