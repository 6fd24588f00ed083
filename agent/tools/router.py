"""Which tool the caller's words are for, and its arguments: the fast path's answers, per call.

Consumes the caller's words (a transcript, or the keypad's "DTMF: 4572#"); returns a
``FastAnswer``: a fact answer from the intents, a tool to run with its arguments, or None
for the LLM. In order:

1. A form in progress (agent/tools/form.py: a booking, or another of the business's tools
   that asks before it runs): words that answer its step run the step's function; a question
   the intents answer is answered and the step's question said again after it (a short answer
   said as a question, "Is Monday OK?", is the answer); "never mind" leaves the form, and so
   does another request (which is then routed); anything else hears the step's question again.
   The request that opened the form, continued after a pause, is a new request (3).
2. Keyed digits, or a number said right after the bot asked for an order number: the order.
3. The business's intents: an answer template, or a tool with what the words hold for it
   (an order number; a declared tool's arguments by their types, agent/tools/arguments.py).
   "Do you rent electric bikes?" asks about the offer and is the LLM's, not a booking.
4. Words of several sentences no intent matches whole, whose first is a tool's request and
   whose rest asks about something no fact holds ("... two bikes for Saturday. And a child
   seat if you have one."): the tool runs, after the caller is told that the rest is not known
   here. With a rest the facts do speak of, the LLM answers the whole.
"""

from __future__ import annotations

import functools
import re

from agent.business.intents import IntentMatcher
from agent.business.words import is_question, opens_a_question
from agent.tools import arguments, words
from agent.tools.functions import CallTools
from processors.fast_path import FastAnswer
from processors.turns.comparison_form import comparison_words

# "Do you rent...?", "Are you renting...?": a question about what the business offers, not a request.
_OFFER_OPENINGS = {("do", "you"), ("does", "the"), ("are", "you"), ("is", "there"), ("does", "your")}


def _asks_about_the_offer(text: str) -> bool:
    return tuple(comparison_words(text)[:2]) in _OFFER_OPENINGS


_SENTENCE_END = re.compile(r"(?<=[.?!])\s+")
_ARTICLES = {"a", "an", "the", "any", "some"}


def _named(text: str, unknown: list[str]) -> str:
    """How the caller named what no fact holds: "a child seat" in "And a child seat if you have
    one", "unicorns" in "Do you sell unicorns?" (the unknown words after an article, else the last)."""
    said = comparison_words(text)
    for i, word in enumerate(said[:-1]):
        if word in _ARTICLES and said[i + 1] in unknown:
            end = i + 1
            while end < len(said) and said[end] in unknown:
                end += 1
            return " ".join(said[i:end])
    return unknown[-1]

# The bot's last sentence asks whether the caller wants a person.
_OFFERED_A_PERSON = re.compile(r"\b(?:person|someone|colleague|human|member of (?:our|the) team)\b[^.!?]*\?\s*$", re.I)
# "Yes, please, that would be great." takes the offer; a longer turn says something more.
_SHORT_YES = 6

# Words of an answer to a form's step said as a question ("Is Monday OK?"), at most: a longer
# question the file answers is a question, whatever day it names.
_SHORT_ANSWER = 4


class ToolRouter:
    """The call's fast path: ``router(text) -> FastAnswer | None``."""

    def __init__(self, matcher: IntentMatcher, tools: CallTools):
        self.matcher = matcher
        self.tools = tools

    def __call__(self, text: str, earlier: str = "", bot_said: str = "") -> FastAnswer | None:
        """Args: earlier: the caller's turn before, which a follow-up leans on ("And on Sunday?");
        bot_said: the bot's last words: "Yes, please." to its offer of a person is the hand-over."""
        if self._takes_the_offer_of_a_person(text, bot_said):
            return FastAnswer("person", "", tool="transfer_to_human")
        form = self.tools.form
        if form is not None and form.step is not None and not form.continues_request(text):
            return self._in_form(form, text, earlier)
        if form is not None and form.left_in(earlier) and form.leaves(text):
            return FastAnswer("form:left", form.leave(earlier))  # the turn's draft left it; this is its final
        answer = self._request(text, earlier)
        if answer is None or answer.intent == "unknown" or answer.tool is not None:
            # "Where is my order 4572? And do you sell unicorns?" is mostly words the file lacks,
            # yet its first sentence is a request to run; "I'd like two bikes for Saturday. And a
            # child seat if you have one." is a request, and a question the caller must hear is not known.
            return self._request_and_more(text) or answer
        return answer

    def _in_form(self, form, text: str, earlier: str) -> FastAnswer:
        """The caller's words while a form waits for its step (see the module docstring)."""
        call = form.route(text)
        # Asked at most once, and only when it is needed: it reads the words by meaning.
        request = functools.cache(lambda: self._request(text, earlier))
        short = len(comparison_words(text)) <= _SHORT_ANSWER
        # "Sorry, what time do you open on Saturday?" is a question to answer, not the day to give;
        # "Is Monday OK?" and "Monday?" are the answer.
        if (call is None or not short) and (opens_a_question(text) or is_question(text)):
            asked = request()
            if asked is not None and asked.tool is None and asked.intent != "unknown":
                return FastAnswer(asked.intent, f"{asked.text} {form.question()}")
            if call is not None and asked is not None and asked.tool not in (None, form.tool.name):
                form.leave(earlier)  # "Actually, is anyone free on Tuesday?": another tool's request
                return asked
        if call is not None:
            return FastAnswer(f"form:{call[0]}", "", tool=call[0], arguments=call[1])
        if form.leaves(text):
            return FastAnswer("form:left", form.leave(earlier))
        answer = request()
        if answer is not None and answer.tool is None and answer.intent != "unknown":
            return FastAnswer(answer.intent, f"{answer.text} {form.question()}")
        if answer is not None and answer.tool is not None:
            form.leave(earlier)  # a request: the caller has moved on (or starts this one again)
            return answer
        return FastAnswer("form:ask_again", form.ask_again(text))

    def _request(self, text: str, earlier: str = "") -> FastAnswer | None:
        keyed = words.keyed_digits(text)
        if keyed is not None or (self._asked_for_order() and words.order_number(text)):
            if "lookup_order" in self.tools.business.tools:
                return FastAnswer("order_status", "", tool="lookup_order",
                                  arguments={"order_number": keyed if keyed is not None else words.order_number(text)})
        answer = self.matcher(text, earlier)
        if answer is None or answer.tool is None:
            return answer
        if self._changes(answer.tool) and _asks_about_the_offer(text):
            return None  # "Do you rent electric bikes?" asks what the shop does: the LLM, with its facts
        return FastAnswer(answer.intent, "", tool=answer.tool, arguments=self._arguments(answer.tool, text))

    def _request_and_more(self, text: str) -> FastAnswer | None:
        first, *rest = _SENTENCE_END.split(text.strip())
        if not rest:
            return None
        opening = self._request(first)
        if opening is None or opening.tool is None:
            return None
        if self._arguments(opening.tool, text) != opening.arguments:
            return None  # "Where's my order? It's number 4572.": the rest is the request's, not a question
        unknown = self.matcher.unknown_details(" ".join(rest))
        if not unknown:
            return None
        said = f"I'm sorry, I don't know about {_named(' '.join(rest), unknown)}; I can put you through to a person for that."
        return FastAnswer(opening.intent, said, tool=opening.tool, arguments=opening.arguments)

    def _takes_the_offer_of_a_person(self, text: str, bot_said: str) -> bool:
        """The caller said yes, and nothing more, to the bot's "Would you like me to put you
        through to a person?" (the don't-know, a tool that failed, an unsure answer)."""
        if "transfer_to_human" not in self.tools.business.tools or not _OFFERED_A_PERSON.search(bot_said):
            return False
        return (words.yes_or_no(text) is True and not opens_a_question(text)
                and len(comparison_words(text)) <= _SHORT_YES)

    def _changes(self, tool: str) -> bool:
        declared = self.tools.business.declared_tools.get(tool)
        return declared is not None and declared.changes

    def _asked_for_order(self) -> bool:
        last = self.tools.calls[-1] if self.tools.calls else None
        return bool(last and last["name"] == "lookup_order" and not last["result"].get("found"))

    def _arguments(self, tool: str, text: str) -> dict:
        if tool == "lookup_order":
            return {"order_number": words.order_number(text) or ""}
        own = self.tools.business.declared_tools.get(tool) or self.tools.mcp_tools.get(tool)
        if own is not None:
            return arguments.from_request(own, text, self.tools.now())
        return {}
