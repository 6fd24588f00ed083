"""Prefix-stable LLM context: pinned session data, normalised and windowed history.

Consumes: ``LLMContextFrame`` (downstream, between the user aggregator and the LLM service).
Its context is rewritten in place to the layout the LLM server's prefix cache can reuse:
``[session messages] + [history, windowed] + [current turn]`` (the fixed system prompt is the
LLM service's ``system_instruction``, which pipecat's OpenAI adapter sends first). Every frame,
the context frame included, passes on unchanged otherwise.
Emits: nothing of its own.
Measures: nothing; ``dropped_turns`` counts the history turns windowed away.

Why this shape (a prompt that starts byte for byte the same stays in the server's prefix cache):

- History is normalised before it is sent: fillers ("um", "uh", a set-off "you know", 嗯, a
  set-off 那个) and timestamps are stripped, so the same words always render the same tokens.
  A message is rewritten once and stays byte-identical afterwards (normalising is idempotent).
- History is windowed to at most ``max_turns`` turns, but cut ``trim_batch`` turns at a time,
  counted from the start of the call, so the prefix changes once every ``trim_batch`` turns
  instead of on every turn. The cut is a function of the whole history, so a speculative
  (provisional) copy of the context and the real one are cut at the same turn.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from pipecat.frames.frames import Frame, LLMContextFrame
from pipecat.processors.aggregators.llm_context import LLMContext, LLMContextMessage
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

# Hesitation words that never carry meaning. "er" and "mm" only as whole words.
_LATIN_HESITATIONS = r"u+m+|u+h+|e+r+m*|h+m+|m{2,}"
_CJK_HESITATIONS = "嗯呃"

# Fillers that are also real words ("you know" in "do you know...", 那个 = "that one"): in
# history they count as fillers only when set off by punctuation, which is how Whisper writes
# them when they are fillers.
_PAUSE = "[,，、…]"

_HESITATION_WORD = re.compile(
    rf"{_PAUSE}?\s*(?<!\w)(?:{_LATIN_HESITATIONS})(?!\w)\s*{_PAUSE}?", re.IGNORECASE
)
_HESITATION_CJK = re.compile(rf"[{_CJK_HESITATIONS}]+{_PAUSE}?")
_SET_OFF_YOU_KNOW = re.compile(
    rf"(?:^|{_PAUSE})\s*you know\s*{_PAUSE}|{_PAUSE}\s*you know(?=[\s.?!]*$)", re.IGNORECASE
)
_SET_OFF_NAGE = re.compile(rf"那个{_PAUSE}")
# For comparing two transcripts nothing is meaning-bearing enough to keep: both sides lose it.
_ANY_YOU_KNOW = re.compile(r"(?<!\w)you know(?!\w)", re.IGNORECASE)
_ANY_NAGE = re.compile("那个")

# Timestamps a transcript or a logging layer may prefix or bracket: "[12:03:44]", "(00:01.2)",
# "2026-11-29T10:00:00Z", "12:03:44 - ". A bare "10:30" inside a sentence is a time the user said.
_TIME = r"\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?"
_DATE = r"\d{4}-\d{2}-\d{2}"
_ZONE = r"(?:Z|[+-]\d{2}:?\d{2})?"
_BRACKETED_TIMESTAMP = re.compile(rf"[\[(<]\s*(?:{_DATE}(?:[T ]{_TIME}{_ZONE})?|{_TIME})\s*[\])>]")
_ISO_DATETIME = re.compile(rf"(?<![\w:]){_DATE}[T ]{_TIME}{_ZONE}(?![\w:])")
_LEADING_TIME = re.compile(rf"^\s*{_TIME}\s*[-–—|>]\s*")

_SPACES = re.compile(r"\s+")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?，。！？、])")
_REPEATED_PAUSES = re.compile(rf"{_PAUSE}(?:\s*{_PAUSE})+")
_LEADING_PUNCT = re.compile(r"^[\s,，、….;:]+")


def strip_fillers(text: str, *, aggressive: bool = False) -> str:
    """Remove fillers, keeping the rest of the text as written.

    Args:
        text: A transcript.
        aggressive: Also remove "you know" and 那个 where they are not set off by punctuation
            (right for comparing transcripts; wrong for text the LLM reads).

    Returns:
        The text without fillers, spaces collapsed.
    """
    text = _HESITATION_WORD.sub(" ", text)
    text = _HESITATION_CJK.sub("", text)
    if aggressive:
        text = _ANY_YOU_KNOW.sub(" ", text)
        text = _ANY_NAGE.sub("", text)
    else:
        text = _SET_OFF_YOU_KNOW.sub(" ", text)
        text = _SET_OFF_NAGE.sub("", text)
    return _tidy(text)


def strip_timestamps(text: str) -> str:
    """Remove bracketed, ISO and leading timestamps; a time said mid-sentence stays."""
    text = _BRACKETED_TIMESTAMP.sub(" ", text)
    text = _ISO_DATETIME.sub(" ", text)
    text = _LEADING_TIME.sub("", text)
    return _tidy(text)


def normalize_history_text(text: str, *, role: str) -> str:
    """What a message's text becomes in the prompt: timestamps stripped; fillers too for users."""
    text = strip_timestamps(text)
    return strip_fillers(text) if role == "user" else text


def _tidy(text: str) -> str:
    text = _SPACES.sub(" ", text)
    text = _REPEATED_PAUSES.sub(lambda m: m.group(0)[0], text)
    text = _SPACE_BEFORE_PUNCT.sub(r"\1", text)
    return _LEADING_PUNCT.sub("", text).strip()


def _is_turn_start(message: LLMContextMessage) -> bool:
    return isinstance(message, dict) and message.get("role") == "user"


def _normalize_message(message: LLMContextMessage) -> LLMContextMessage:
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
        return message
    role, content = message["role"], message.get("content")
    if isinstance(content, str):
        new_content = normalize_history_text(content, role=role)
    elif isinstance(content, list):
        new_content = [
            {**part, "text": normalize_history_text(part["text"], role=role)}
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
            else part
            for part in content
        ]
    else:
        return message
    # A new dict, never a mutation: a speculative context copy shares its message dicts
    # with the real context.
    return message if new_content == content else {**message, "content": new_content}


def window_turns(
    messages: Sequence[LLMContextMessage], *, max_turns: int, trim_batch: int
) -> tuple[list[LLMContextMessage], int]:
    """Keep at most ``max_turns`` history turns before the current one, cut in whole batches.

    A turn starts at a user message and holds what follows it (assistant text, tool calls and
    results), so a tool call is never separated from its result.

    Returns:
        The kept messages and how many history turns were dropped.
    """
    starts = [i for i, m in enumerate(messages) if _is_turn_start(m)]
    history_turns = max(0, len(starts) - 1)
    if history_turns <= max_turns:
        return list(messages), 0
    drop = min(history_turns, math.ceil((history_turns - max_turns) / trim_batch) * trim_batch)
    return list(messages[starts[drop] :]), drop


class ContextWindow(FrameProcessor):
    """Rewrites each ``LLMContextFrame``'s context to a prefix-stable layout (see module doc)."""

    def __init__(
        self,
        *,
        max_turns: int = 8,
        trim_batch: int = 4,
        session_messages: Sequence[LLMContextMessage] = (),
        **kwargs,
    ):
        """Create the processor.

        Args:
            max_turns: Most history turns (user message + its answer) kept before the current
                turn. The window never holds more.
            trim_batch: Turns dropped at a time once ``max_turns`` is exceeded (1 = a plain
                sliding window, which changes the prompt prefix on every turn).
            session_messages: Per-session data (caller details, today's date — never a clock
                time) pinned right after the system prompt, ahead of all history.
            **kwargs: Passed to ``FrameProcessor``.
        """
        super().__init__(**kwargs)
        if max_turns < 0:
            raise ValueError("max_turns cannot be negative")
        if not 1 <= trim_batch <= max(1, max_turns):
            raise ValueError("trim_batch must be between 1 and max_turns")
        self._max_turns = max_turns
        self._trim_batch = trim_batch
        self._session_messages = list(session_messages)
        self.dropped_turns = 0

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Lay out the context of a downstream ``LLMContextFrame``; pass every frame on."""
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMContextFrame) and direction == FrameDirection.DOWNSTREAM:
            self.dropped_turns += self.apply(frame.context, count_drops=not frame.speculation)
        await self.push_frame(frame, direction)

    def apply(self, context: LLMContext, *, count_drops: bool = True) -> int:
        """Rewrite ``context`` in place; returns the history turns dropped (0 if not counted)."""
        messages = context.get_messages()
        pinned = self._session_messages
        body = messages[len(pinned) :] if messages[: len(pinned)] == pinned else list(messages)
        body = [_normalize_message(m) for m in body]
        body, dropped = window_turns(body, max_turns=self._max_turns, trim_batch=self._trim_batch)
        context.set_messages([*pinned, *body])
        return dropped if count_drops else 0
