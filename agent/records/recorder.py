"""One call's record, written as the call goes: opened at its start, each turn when it completes,
closed with how it ended.

Consumes the call's turn records (``processors/observers/latency.py``'s turn listener: what the caller
said, what the bot said, interrupted, speculative, fast path, the waterfall), the tools it called
(``CallTools.calls``), the barge-in cuts (``BargeIn.interruptions``: for an interrupted turn the
bot's words are kept as the caller heard them, cut where they were cut) and, when recording is on,
the call's audio (agent/records/recording.py). Each write is its own task, so a slow database
never holds up the call's frames; ``close`` waits for them, then writes the status:
``transferred`` or ``abandoned`` when the bot handed over or hung up on silence, ``failed`` when
the pipeline failed, else ``completed``. A crash leaves ``in_progress``, which the next start
marks ``failed`` (agent/records/store.py).
"""

from __future__ import annotations

import asyncio

from loguru import logger

from agent.records.recording import CallAudio
from agent.records.store import CallRecords

# How long an interrupted turn's write waits for its cut to reach the output transport (where
# what was heard is worked out): the two are told apart by different processors. 1 s was too
# short on a 2-core machine three to four times slower than usual (make test, 2026-12-03): the record
# then kept the whole answer, the answer check's replacement the caller never heard included.
_CUT_WAIT_S = 3.0


class CallRecorder:
    def __init__(self, records: CallRecords, call, audio: CallAudio | None = None):
        self.records = records
        self.call = call
        self.audio = audio
        self.call_id = call.control.call_id
        self._writes: set[asyncio.Task] = set()
        self._tools_seen = 0
        self._cuts_used = 0
        self._opened = False

    async def open(self) -> None:
        try:
            await self.records.open_call(self.call_id, transport=self.call.control.transport,
                                         caller=self.call.control.caller)
            if self.audio is not None:
                # Named at once, so a call cut off by a crash keeps the audio it had.
                await self.records.set_recording(self.call_id, str(self.audio.path))
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
            if turn.get("interrupted"):
                turn = await self._as_heard(turn)
            await self.records.add_turn(self.call_id, turn)
        except Exception:
            logger.exception(f"call {self.call_id}: turn {turn.get('turn')} could not be recorded")

    async def _as_heard(self, turn: dict) -> dict:
        """The turn with ``bot_text`` cut to what the caller heard, once the cut is known."""
        barge_in = self.call.barge_in
        if barge_in is None or not turn.get("bot_text"):
            return turn
        since = turn.get("t0_monotonic") or 0.0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _CUT_WAIT_S
        while True:
            cuts = [c for c in barge_in.interruptions[self._cuts_used:] if c.decided_at >= since]
            if cuts and all(c.reached_output_at is not None for c in cuts):
                break
            if loop.time() >= deadline:
                # No cut came. With no audio out (the caller went on before the bot spoke) nothing
                # was heard; with audio out, the whole answer is the best that is known.
                return turn if turn.get("stages_ms", {}).get("first_audio_out") is not None else {**turn, "bot_text": ""}
            await asyncio.sleep(0.05)
        self._cuts_used = barge_in.interruptions.index(cuts[-1]) + 1
        return {**turn, "bot_text": " ".join(c.spoken_text for c in cuts if c.spoken_text).strip()}

    async def close(self, *, failed: bool = False) -> None:
        if not self._opened:
            return
        if self.audio is not None:
            try:
                if not await self.audio.close():
                    await self.records.set_recording(self.call_id, None)  # no audio ever went through
            except Exception:
                logger.exception(f"call {self.call_id}: its recording could not be finished")
        if self._writes:
            await asyncio.wait(list(self._writes), timeout=10)
        control = self.call.control
        status = "failed" if failed else (control.outcome if control.outcome in ("transferred", "abandoned") else "completed")
        try:
            await self.records.close_call(self.call_id, status=status, ended_by=control.ended_by)
        except Exception:
            logger.exception(f"call {self.call_id}: its record could not be closed")
