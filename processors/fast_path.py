"""Fast path: a frequent question is answered from the business's own facts, with no LLM.

Consumes (between the prompt processors and the LLM): ``LLMContextFrame``s, and the frames that
settle a speculative one (``UserStoppedSpeakingFrame``, ``EagerEndOfTurnCancelFrame``,
``InterruptionFrame``). For each context it asks ``answer_for`` (the business's intents,
agent/business/intents.py) about the caller's last words.
Emits: for a turn a tool answers (an order lookup, a booking step), a
``frames.tools.RunFunctionCallFrame`` the LLM service runs as its own function call; for an
answered turn, the answer as an LLM would give it —
``LLMFullResponseStartFrame``, one ``LLMTextFrame``, ``LLMFullResponseEndFrame`` — so the chunker,
TTS, barge-in and the assistant aggregator treat it like any answer; the context frame itself
does not reach the LLM. Anything else passes on untouched.
Measures: ``hits``, each answered turn's intent and text; the answer's frames carry the intent
(``frames.turn.FAST_PATH``), which the latency observer puts in the turn record.

A speculative context (a draft on a stable partial) must not be heard before the turn is
confirmed: its answer is held here, spoken on the ``UserStoppedSpeakingFrame`` that confirms it,
and dropped when the draft is withdrawn (the real context then comes and is asked again).
While it is held, its first chunk is synthesised (``SpeculativeAudioCache.prefetch_answer``),
so a confirmed answer's audio is ready as a speculative LLM draft's is. The
confirmation is a system frame and can overtake the draft's context on its way here; a draft
that arrives after its turn ended is spoken at once, as pipecat's ``SpeculationGate`` does.
The cancel that withdraws a draft can overtake it too: a draft made before a cancel already
seen is dropped unanswered (processors/speculation/withdrawn_drafts.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from loguru import logger
from pipecat.frames.frames import (
    EagerEndOfTurnCancelFrame,
    Frame,
    InterruptionFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from frames.tools import RunFunctionCallFrame
from frames.turn import FAST_PATH
from processors.speculation.speculative_tts import SpeculativeAudioCache
from processors.speculation.withdrawn_drafts import WithdrawnDrafts


@dataclass(frozen=True)
class FastAnswer:
    """An answer the fast path gives: which intent, and what is said, or the tool that answers."""

    intent: str
    text: str
    tool: str | None = None  # run this function (frames.tools.RunFunctionCallFrame), after saying text if any
    arguments: dict = field(default_factory=dict, compare=True, hash=False)


# (the caller's last words; earlier=their turn before it, bot_said=the bot's last words, or "") ->
# the answer, or None for the LLM. A follow-up leans on them ("And on Sunday?", "Yes, please.").
AnswerFor = Callable[..., FastAnswer | None]


def last_user_text(frame: LLMContextFrame) -> str:
    return last_user_words(frame.context)


def last_user_words(context, back: int = 0, role: str = "user") -> str:
    """The caller's last words in ``context`` (an ``LLMContext``), or ""; ``back=1``: their turn
    before; ``role="assistant"``: the bot's."""
    for message in reversed(context.get_messages()):
        if isinstance(message, dict) and message.get("role") == role:
            if role == "assistant" and not message.get("content"):
                continue  # a tool call, not words the bot said
            if back:
                back -= 1
                continue
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):  # OpenAI content parts
                return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            return ""
    return ""


class FastPathResponder(FrameProcessor):
    """Answers frequent questions without the LLM; see the module docstring."""

    def __init__(self, answer_for: AnswerFor, *, speculative_audio: SpeculativeAudioCache | None = None, **kwargs):
        """Args: answer_for: the caller's words -> a ``FastAnswer``, or None for the LLM;
        speculative_audio: the call's cache (shared with the TTS), to synthesise a held answer's
        first chunk before the turn is confirmed.
        """
        super().__init__(**kwargs)
        self._answer_for = answer_for
        self._audio = speculative_audio
        self._held: FastAnswer | None = None  # a speculative turn's answer, until confirmed
        self._context = None  # the context the latest answer is for (a tool call goes with it)
        self._turn_ended = False
        self._withdrawn = WithdrawnDrafts()
        self.hits: list[FastAnswer] = []

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        self._withdrawn.see(frame, direction)
        if direction is FrameDirection.DOWNSTREAM:
            if self._withdrawn.withdrawn(frame):
                logger.debug(f"{self}: a draft arrived after its cancel; not answered")
                return
            if isinstance(frame, LLMContextFrame):
                answer = await self._answer(frame)
                if answer is not None:
                    self._context = frame.context
                    if frame.speculation and not self._turn_ended:
                        if answer != self._held:
                            self._drop()
                            self._held = answer
                            if self._audio is not None and answer.tool is None:
                                await self._audio.prefetch_answer(answer.text)
                    else:
                        self._drop()
                        await self._speak(answer)
                    return
                if not frame.speculation:
                    self._drop()
            elif isinstance(frame, UserStoppedSpeakingFrame):
                self._turn_ended = True
                await self.push_frame(frame, direction)
                held, self._held = self._held, None
                if held is not None:
                    if self._audio is not None and held.tool is None:
                        self._audio.confirm()
                    await self._speak(held)
                return
            elif isinstance(frame, (EagerEndOfTurnCancelFrame, InterruptionFrame, UserStartedSpeakingFrame)):
                self._drop()
                if isinstance(frame, UserStartedSpeakingFrame):
                    self._turn_ended = False
        await self.push_frame(frame, direction)

    def _drop(self):
        """Forget a held answer, and its prefetched audio."""
        if self._held is not None and self._held.tool is None and self._audio is not None:
            self._audio.discard("the fast path's held answer was dropped")
        self._held = None

    async def _answer(self, frame: LLMContextFrame) -> FastAnswer | None:
        text = last_user_text(frame)
        try:
            # Off the event loop: understanding a turn's words by meaning runs a small model
            # (~8 ms), which must not hold up every other call's audio.
            earlier = last_user_words(frame.context, back=1)
            bot_said = last_user_words(frame.context, role="assistant")
            answer = (await asyncio.to_thread(self._answer_for, text, earlier=earlier, bot_said=bot_said)
                      if text.strip() else None)
        except Exception as error:  # a bad template must cost the fast path, not the call
            logger.exception(f"{self}: fast path failed on [{text}]: {error}")
            return None
        if answer is not None:
            logger.debug(f"{self}: {answer.intent} answered without the LLM: [{text}] -> [{answer.text}]")
        return answer

    async def _speak(self, answer: FastAnswer):
        self.hits.append(answer)
        if answer.text:
            for frame in (LLMFullResponseStartFrame(), LLMTextFrame(answer.text), LLMFullResponseEndFrame()):
                frame.metadata[FAST_PATH] = answer.intent
                await self.push_frame(frame)
        if answer.tool is not None:
            # Side effects wait for the confirmed turn: a held call runs only now, never as a draft.
            await self.push_frame(RunFunctionCallFrame(function_name=answer.tool, arguments=answer.arguments,
                                                       context=self._context))
