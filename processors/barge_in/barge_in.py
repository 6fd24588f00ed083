"""Barge-in: the user talks over the bot, the bot stops at once, and nothing of the cut answer
is heard, shown or remembered afterwards beyond what was actually played.

``BargeIn`` builds one call's barge-in processors and reads what they measured; the pieces
talk to each other through frames (``frames/turn.py``), but for the one fact that must be
known at once on both sides of the TTS, which turns are stale (``processors/barge_in/stale_turns.py``
says why). Wire them as

    user aggregator (start strategy: barge_in.start_strategy()) -> LLM -> barge_in.tagger()
        -> [barge_in.resumer(user aggregator)] -> [sentence chunker] -> TTS -> barge_in.gate()
        -> transport.output()
        -> barge_in.playback(assistant aggregator) -> assistant aggregator

- ``BargeInUserTurnStartStrategy`` (processors/barge_in/barge_in_user_turn_start.py) decides,
  by ``BargeInPolicy``, when speech over the bot starts a user turn (and an interruption),
  and pushes a ``BargeInDecisionFrame`` just before it does.
- ``TurnTagger`` (processors/barge_in/turn_tagger.py) numbers bot turns and, on an interrupting
  decision, pushes a ``BotTurnsCutFrame``: every turn so far is stale.
- ``StaleTurnGate`` (processors/barge_in/stale_turn_gate.py) drops stale turns' output before the
  transport and, on a decided cut, sends an ``InterruptionFrame`` straight on to it.
- ``PlaybackTracker`` (processors/barge_in/playback_tracker.py) knows what went out, records each
  interruption and rewrites the cut turn's context message to what was heard.
- ``FalseInterruptionResume`` (processors/barge_in/false_interruption.py), right after the
  tagger: when the turn that cut the bot ends with no words, the bot says the rest of its answer.

The client is told to stop by pipecat itself once an ``InterruptionFrame`` reaches the output
transport: queued audio is dropped (WebRTC then sends silence), a Twilio serializer sends a
``clear`` event, and RTVI sends ``bot-interrupted``. The LLM service closes its HTTP stream when
the interruption cancels its task; the TTS drops its audio contexts.
"""

from __future__ import annotations

from pipecat.processors.aggregators.llm_response_universal import LLMAssistantAggregator, LLMUserAggregator

from frames.turn import BargeInDecisionFrame
from processors.barge_in.false_interruption import FalseInterruptionResume
from processors.barge_in.playback_tracker import BotTurn, Interruption, PlaybackTracker
from processors.barge_in.stale_turn_gate import StaleTurnGate
from processors.barge_in.stale_turns import StaleTurns
from processors.barge_in.turn_tagger import TurnTagger
from processors.barge_in.barge_in_policy import BargeInPolicy
from processors.barge_in.barge_in_user_turn_start import Backchannel, BargeInUserTurnStartStrategy


class BargeIn:
    """One call's barge-in processors, and what they measured.

    ``interruptions`` lists every bot turn the user cut, ``backchannels`` every acknowledgement
    that let the bot go on, ``decisions`` every user turn start the strategy decided, ``turns``
    every bot turn as it went out, ``stale_frames`` counts frames of cut turns that left the
    output transport after the interruption reached it (must stay 0), and ``stale_speech_ended``
    how often the transport restarted speaking on a cut turn's last chunk and the gate ended it.
    """

    def __init__(self, policy: BargeInPolicy | None = None, *, chars_per_second: float = 15.0):
        """Create the call's barge-in.

        Args:
            policy: When speech interrupts the bot.
            chars_per_second: Speaking rate assumed for a sentence whose audio is not all
                synthesised yet when it is cut (hibari speaks ~17).
        """
        self.policy = policy or BargeInPolicy()
        self.chars_per_second = chars_per_second
        self._stale = StaleTurns()
        self._strategy: BargeInUserTurnStartStrategy | None = None
        self._tagger: TurnTagger | None = None
        self._tracker: PlaybackTracker | None = None
        self._gate: StaleTurnGate | None = None
        self._resume: FalseInterruptionResume | None = None

    def start_strategy(self, **kwargs) -> BargeInUserTurnStartStrategy:
        """The user turn start strategy."""
        self._strategy = BargeInUserTurnStartStrategy(policy=self.policy, **kwargs)
        return self._strategy

    def tagger(self) -> TurnTagger:
        """The processor to put right after the LLM."""
        self._tagger = TurnTagger(self._stale)
        return self._tagger

    def resumer(self, user: LLMUserAggregator) -> FalseInterruptionResume:
        """The processor to put right after the tagger; ``user`` must be built with
        ``EmptyUserTurnConfig(interrupted_prompt=None)`` (see false_interruption.py)."""
        self._resume = FalseInterruptionResume(user, self._heard)
        return self._resume

    def _heard(self, turn_id: int) -> str | None:
        cut = next((i for i in reversed(self.interruptions) if i.turn_id == turn_id), None)
        return cut.spoken_text if cut else None

    @property
    def resumed(self) -> list[str]:
        """The rests of cut answers said after a turn with no words."""
        return self._resume.resumed if self._resume else []

    @property
    def resumed_at(self) -> list[float]:
        """When each of ``resumed`` was sent on (``time.monotonic()``)."""
        return self._resume.resumed_at if self._resume else []

    def gate(self) -> StaleTurnGate:
        """The processor to put right before the output transport."""
        self._gate = StaleTurnGate(self._stale)
        return self._gate

    def playback(self, assistant: LLMAssistantAggregator | None = None) -> PlaybackTracker:
        """The processor to put right after the output transport, before ``assistant``."""
        self._tracker = PlaybackTracker(assistant, chars_per_second=self.chars_per_second)
        return self._tracker

    @property
    def current_turn(self) -> int | None:
        """The newest bot turn, if any."""
        return self._tagger.current_turn if self._tagger else None

    @property
    def decisions(self) -> list[BargeInDecisionFrame]:
        return self._strategy.decisions if self._strategy else []

    @property
    def backchannels(self) -> list[Backchannel]:
        return self._strategy.backchannels if self._strategy else []

    @property
    def interruptions(self) -> list[Interruption]:
        return self._tracker.interruptions if self._tracker else []

    @property
    def turns(self) -> list[BotTurn]:
        return self._tracker.turns if self._tracker else []

    @property
    def stale_frames(self) -> int:
        return self._tracker.stale_frames if self._tracker else 0

    @property
    def stale_speech_ended(self) -> int:
        return self._gate.stale_speech_ended if self._gate else 0
