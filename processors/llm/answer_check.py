"""Answer check: the LLM's words are held to the business's facts before anyone hears them.

Consumes, as two processors around the LLM service: right before it (``AnswerChecker.reader()``),
each ``LLMContextFrame`` the service is given (the caller's last words, drafts' included; a
tool's result comes back to the service from downstream, and the checker sees that one);
right after it (``AnswerChecker``), the answer's ``LLMTextFrame``s between
``LLMFullResponseStartFrame`` and ``LLMFullResponseEndFrame``. A speculative draft's answer
reaches the checker only once the service's ``SpeculationGate`` has let it go. Fast-path answers
(``frames.turn.FAST_PATH``) are not the LLM's, and an answer to a tool's result reads the
business's own data (an order's status): both pass unchecked.
Emits: the answer's text frames as they were, a clause at a time once ``answer_check(question,
text so far)`` allows it; on the first clause it refuses, that clause and the rest of the
answer are dropped and ``unsupported_text`` (the business's "I don't know, shall I put you
through to a person?") is said in their place, or what ``instead(question, said so far)``
gives: the order worked out, or, when nothing was said yet, the business's own sentence nearest
the question, hedged. A first sentence that gives up ("I'm sorry, I don't know that.") is replaced by
``instead``'s text the same way. An answer that ends saying it cannot help ("I'm sorry, but I
can't assist with that.") and offers no one is followed by ``person_offer``: the bot that does
not know offers a person. A whole answer that lacks what ``lacking(question, answer)`` gives (an
order's total it never said) is followed by that.
Measures: ``refusals``, the answers cut this way; ``instead_said``, the answers that gave up
replaced by ``instead``'s text; ``completed``, the answers ``lacking`` added to; ``offers_added``,
the offers added.

A clause is checked when it ends (, ; : . ! ?), so the first clause still reaches the chunker
as soon as it is written; an answer that opens with "yes" or "no" is held to the end of its
first sentence, since "Yes," alone says nothing a check could hold to a fact (and "I'm sorry,"
too, since its sentence may give up). A 0.5B model
answers "Yes, we repair electric scooters." to a shop that never said so: "Right before fast".
"""

from __future__ import annotations

import re
from collections.abc import Callable

from loguru import logger
from pipecat.frames.frames import (
    Frame,
    InterruptionFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from frames.turn import FAST_PATH
from processors.fast_path import last_user_text

# (the caller's question, the answer so far) -> whether all of it may be said.
AnswerCheck = Callable[[str, str], bool]
# (the caller's question, what of the answer was said) -> what to say in place of the refused rest,
# or None for ``unsupported_text``.
Instead = Callable[[str, str], str | None]
# (the caller's question, the whole answer said) -> what to add that the answer lacks, or None.
Lacking = Callable[[str, str], str | None]

_CLAUSE_END = re.compile(r"[,;:.!?](?:\s|$)")
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)")
# The model's own ways of not knowing, and of already offering someone (embedded bench, 2026-12-03).
_CANNOT_HELP = re.compile(r"\b(can'?t|cannot|can not|unable to|not able to) (help|assist)|\b(don'?t|do not) know\b|\bnot sure\b|\bno information\b", re.I)
_OFFERS_SOMEONE = re.compile(r"\b(person|someone|colleague|agent|human|put you through|connect you|transfer you)\b", re.I)
_YES_NO_OPENING = re.compile(r"^\W*(yes|yeah|yep|no|nope|sure|absolutely|certainly|of course|definitely)\b", re.I)
# Held with the sentence after it too: "I'm sorry, I don't know." may become what the file has.
_APOLOGY_OPENING = re.compile(r"^\W*(i'?m sorry|i am sorry|sorry|unfortunately)\b", re.I)


def _opening(text: str) -> re.Match | None:
    """A first word or two that says nothing to judge on its own ("Sure!", "I'm sorry,")."""
    return _YES_NO_OPENING.match(text) or _APOLOGY_OPENING.match(text)


class QuestionReader(FrameProcessor):
    """Right before the LLM service: tells its ``AnswerChecker`` what each inference is asked."""

    def __init__(self, checker: "AnswerChecker", **kwargs):
        super().__init__(**kwargs)
        self._checker = checker

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMContextFrame):
            self._checker.asked(frame)
        await self.push_frame(frame, direction)


class AnswerChecker(FrameProcessor):
    """Right after the LLM service, with ``reader()`` right before it; see the module docstring.

    Example::

        check = AnswerChecker(answer_check=facts.supports, unsupported_text="...")
        Pipeline([..., check.reader(), llm, check, ...])
    """

    def __init__(self, *, answer_check: AnswerCheck, unsupported_text: str = "", person_offer: str = "",
                 instead: Instead | None = None, lacking: Lacking | None = None, **kwargs):
        """Args: answer_check: see ``AnswerCheck``; unsupported_text: said instead of a refused
        answer; person_offer: said after an answer that cannot help and offers no one; instead:
        see ``Instead``; lacking: see ``Lacking``."""
        super().__init__(**kwargs)
        self._reader = QuestionReader(self)
        self._after_tool = False
        self._answer_check = answer_check
        self._unsupported_text = unsupported_text
        self._instead = instead
        self._lacking = lacking
        self._person_offer = person_offer
        self.offers_added = 0
        self._question = ""
        self._checking = False
        self._pending: list[LLMTextFrame] = []
        self._said = ""
        self._refused = False
        self.refusals = 0
        self.instead_said = 0
        self.completed = 0

    def reader(self) -> QuestionReader:
        """The processor to put right before the LLM service."""
        return self._reader

    def asked(self, frame: LLMContextFrame) -> None:
        """The LLM service is given ``frame``: what the answer that follows is checked against."""
        self._question = last_user_text(frame)
        # An answer to a tool's result reads the business's own data (an order's status):
        # the result is its fact, which the file's facts cannot hold.
        messages = frame.context.get_messages()
        self._after_tool = bool(messages) and isinstance(messages[-1], dict) and messages[-1].get("role") == "tool"

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if direction is not FrameDirection.DOWNSTREAM:
            if isinstance(frame, LLMContextFrame):  # a tool's result, going back to the service
                self.asked(frame)
            await self.push_frame(frame, direction)
            return
        if isinstance(frame, LLMFullResponseStartFrame):
            self._checking = FAST_PATH not in frame.metadata and not self._after_tool
            self._pending, self._said, self._refused = [], "", False
        elif isinstance(frame, LLMTextFrame) and self._checking:
            if not self._refused:
                self._pending.append(frame)
                if self._clause_complete():
                    await self._release()
            return
        elif isinstance(frame, LLMFullResponseEndFrame) and self._checking:
            if self._pending and not self._refused:
                await self._release()
            if not self._refused:
                await self._complete()
                await self._offer_someone()
            self._checking = False
        elif isinstance(frame, InterruptionFrame):
            self._pending, self._checking = [], False
        await self.push_frame(frame, direction)

    def _clause_complete(self) -> bool:
        text = self._said + "".join(f.text for f in self._pending)
        opening = _opening(text) if not self._said else None
        if opening:
            # "Sure!" is not the sentence to judge: the one after it is.
            rest = text[opening.end():].lstrip(" ,.!?")
            return bool(rest) and bool(_SENTENCE_END.search(rest))
        return bool(_CLAUSE_END.search("".join(f.text for f in self._pending)))

    async def _release(self):
        pending, self._pending = self._pending, []
        candidate = self._said + "".join(f.text for f in pending)
        try:
            allowed = self._answer_check(self._question, candidate)
        except Exception as error:  # a bug in the check must not silence the answer
            logger.exception(f"{self}: answer check failed on [{candidate}]: {error}")
            allowed = True
        if allowed and not self._said and _CANNOT_HELP.search(candidate):
            better = _ask(self._instead, self._question, "")
            if better:  # the model gave up where the file has something: that is said instead
                self._refused = True
                self.instead_said += 1
                await self.push_frame(LLMTextFrame(better), FrameDirection.DOWNSTREAM)
                return
        if allowed:
            self._said = candidate
            for frame in pending:
                await self.push_frame(frame, FrameDirection.DOWNSTREAM)
            return
        self._refused = True
        self.refusals += 1
        logger.warning(f"{self}: an answer not supported by the business facts was not said")
        logger.debug(f"{self}: not said: [{self._question}] -> [{candidate.strip()}]")  # DEBUG: what was said
        await self.push_frame(LLMTextFrame(self._replacement()), FrameDirection.DOWNSTREAM)

    async def _complete(self):
        said = self._said.strip()
        if said and not _CANNOT_HELP.search(said) and (more := _ask(self._lacking, self._question, said)):
            self.completed += 1
            self._said += self._after_said(more)
            await self.push_frame(LLMTextFrame(self._after_said(more)), FrameDirection.DOWNSTREAM)

    async def _offer_someone(self):
        said = self._said.strip()
        if self._person_offer and _CANNOT_HELP.search(said) and not _OFFERS_SOMEONE.search(said):
            self.offers_added += 1
            await self.push_frame(LLMTextFrame(self._after_said(self._person_offer)), FrameDirection.DOWNSTREAM)

    def _after_said(self, text: str) -> str:
        """``text`` to follow what was said, with the space the model's last token may lack."""
        return text if not self._said or self._said[-1].isspace() else " " + text

    def _replacement(self) -> str:
        """``instead``'s text, when it has one; else ``unsupported_text``, less the part of it the
        caller already heard: the model's own "I'm sorry," before a refused clause must not make
        the bot say "I'm sorry, I'm sorry"."""
        said = self._said.strip()
        if better := _ask(self._instead, self._question, said):
            return self._after_said(better)
        if said and self._unsupported_text.lower().startswith(said.lower()):
            return self._after_said(self._unsupported_text[len(said):].lstrip())
        return self._after_said(self._unsupported_text)


def _ask(hook: Instead | Lacking | None, question: str, said: str) -> str | None:
    """``hook(question, said)``; None when there is none, or it fails (logged): a bug in it must
    not silence the turn, which then ends as it would without it."""
    if hook is None:
        return None
    try:
        return hook(question, said)
    except Exception as error:
        logger.exception(f"{getattr(hook, '__name__', hook)} failed on [{question}] -> [{said}]: {error}")
        return None


def checked_answer(answer_check: AnswerCheck, question: str, answer: str, *, unsupported_text: str,
                   person_offer: str = "", instead: Instead | None = None, lacking: Lacking | None = None) -> str:
    """What the caller hears of a whole ``answer`` (the checker's rules without frames): the text up
    to the first clause the check refuses, then ``unsupported_text``; an answer that cannot help
    and offers no one, followed by ``person_offer``. For answers that are not streamed (the FAQ
    suite's text runs)."""
    said, start = "", 0
    ends = [m.end() for m in _CLAUSE_END.finditer(answer)] + [len(answer)]
    for end in ends:
        candidate = answer[:end]
        opening = _opening(candidate) if not said else None
        if opening and end < len(answer) and not _SENTENCE_END.search(candidate[opening.end():].lstrip(" ,.!?")):
            continue  # "Yes," alone says nothing to hold to a fact: judge its sentence
        if end <= start or not candidate[start:].strip():
            continue
        allowed = answer_check(question, candidate)
        if allowed and not said and _CANNOT_HELP.search(candidate) and (better := _ask(instead, question, "")):
            return better
        if not allowed:
            kept = said.strip()
            if better := _ask(instead, question, kept):
                return f"{kept} {better}".strip()
            rest = unsupported_text
            if kept and unsupported_text.lower().startswith(kept.lower()):
                rest = unsupported_text[len(kept):].lstrip()
            return f"{kept} {rest}".strip()
        said, start = candidate, end
    said = said.strip()
    if said and not _CANNOT_HELP.search(said) and (more := _ask(lacking, question, said)):
        said = f"{said} {more}"
    if person_offer and _CANNOT_HELP.search(said) and not _OFFERS_SOMEONE.search(said):
        said = f"{said} {person_offer}"
    return said
