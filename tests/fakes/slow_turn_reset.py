"""A user turn start strategy that is slow to hear a turn has ended: pipecat's turn controller
tells every strategy of the turn end one after another, and each may await something (the
timeout base cancels its timers there). This one holds that moment open until the test lets
go, so a frame can be processed inside it, as one was on a busy machine."""

from __future__ import annotations

import asyncio

from pipecat.turns.user_start import BaseUserTurnStartStrategy


class SlowTurnReset(BaseUserTurnStartStrategy):
    """``handle_user_turn_stopped`` sets ``entered`` and waits for ``release``."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def handle_user_turn_stopped(self):
        await super().handle_user_turn_stopped()
        self.entered.set()
        await self.release.wait()
