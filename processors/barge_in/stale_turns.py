"""Which bot turns are stale: known at once on both sides of the TTS.

Written by the turn tagger after the LLM, read by the stale-turn gate before the output
transport. Everything else barge-in's processors tell each other goes by frames
(``frames/turn.py``); this one fact cannot. A cut announced by a frame reaches the gate only
through the TTS, and when pipecat interrupts, the cancelled LLM's late end frame makes the TTS
flush the half sentence it held (pipecat #754) from its own task, which can reach the gate
before the announcement does (tests/test_barge_in.py, the held-answer case, catches it).
"""

from __future__ import annotations


class StaleTurns:
    """Bot turns up to ``through`` are stale: none of their output may go out any more."""

    def __init__(self):
        self._through = 0

    @property
    def through(self) -> int:
        """The newest stale bot turn (0: none)."""
        return self._through

    def cut_through(self, turn_id: int):
        """Every bot turn up to ``turn_id`` is stale from now on."""
        self._through = max(self._through, turn_id)

    def is_stale(self, turn_id: int) -> bool:
        """Whether ``turn_id`` was cut (or is older than a turn that was)."""
        return turn_id <= self._through
