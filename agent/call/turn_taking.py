"""How a call's turns start and end: the user turn strategies, the continuation of a turn cut
by a pause, and the keypad's digits as words.

``agent/call/pipeline.py`` puts these in each call's pipeline; ``python -m agent bench --suite turns``
runs the stop strategies on the same audio to compare them.
"""

from __future__ import annotations

from pipecat.processors.aggregators.dtmf_aggregator import DTMFAggregator
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from agent.config import BriskConfig
from agent.tools.functions import redo_calls
from processors.speculation.speculation_stats import SpeculationStats
from processors.turns.turn_continuation import TurnContinuation
from processors.turns.adaptive_user_turn_stop import AdaptiveUserTurnStopStrategy
from processors.speculation.similarity_match import SimilarityMatch
from processors.speculation.speculative_user_turn_stop import SpeculativeUserTurnStopStrategy
from processors.speculation.stable_partials import StabilityConfig


def make_turn_strategies(
    config: BriskConfig, speculation: SpeculationStats | None = None,
    audio_check=None,
) -> UserTurnStrategies:
    """``audio_check``: the process's audio end-of-turn model (``Resources.turn_check``), None = words only."""
    # Questions are never put to the audio model: asked about them too, it cut no fewer paused
    # utterances and ended finished ones later (docs/benchmarks.md, End of turn).
    if speculation is None:
        return UserTurnStrategies(stop=[AdaptiveUserTurnStopStrategy(
            user_speech_timeout=config.turn_stop_timeout_secs, max_wait_s=config.turn_unfinished_wait_secs,
            final_wait_s=config.turn_final_wait_secs, audio_check=audio_check,
            question_ends_at_final=config.turn_question_ends_at_final)])
    # The same end of turn, plus drafts from stable partials, kept or cancelled at the turn end.
    stability = StabilityConfig(
        consecutive=config.speculation_stable_partials,
        tail_chars=config.speculation_tail_chars,
        min_chars=config.speculation_min_chars,
        end_words=tuple(config.speculation_end_words),
        silence_s=config.speculation_silence_secs or None,
        question_min_chars=config.speculation_question_min_chars or None,
        min_silence_s=config.speculation_min_silence_secs,
    )
    return UserTurnStrategies(
        stop=[
            SpeculativeUserTurnStopStrategy(
                user_speech_timeout=config.turn_stop_timeout_secs,
                max_wait_s=config.turn_unfinished_wait_secs,
                final_wait_s=config.turn_final_wait_secs,
                question_ends_at_final=config.turn_question_ends_at_final,
                audio_check=audio_check,
                stability=stability,
                match_policy=SimilarityMatch(config.speculation_match_threshold),
                stats=speculation,
            )
        ]
    )


def make_continuation(config: BriskConfig, context: LLMContext) -> list:
    """A caller going on after a pause gets one answer to the whole question."""
    if config.turn_continuation_window_secs <= 0:
        return []
    return [TurnContinuation(context, window_s=config.turn_continuation_window_secs,
                             heard_s=config.turn_continuation_heard_secs,
                             redo_calls=redo_calls(config.business_definition))]


def make_dtmf(config: BriskConfig) -> list:
    """Keypad digits become the caller's words ("DTMF: 4572#"), pipecat's way."""
    return [DTMFAggregator(timeout=config.dtmf_timeout_secs)]
