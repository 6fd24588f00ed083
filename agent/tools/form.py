"""A form: what a business tool still needs, asked one thing at a time, read back, then the tool run.

A pipecat Flow built from the tool's declaration in the business file (agent/business/tool_spec.py),
not written per business: the bike shop's rental booking is one, as is the plumber's visit.
``start`` opens it when a call of the tool lacks a required argument, or is of a tool that
``changes`` something: one node per missing argument asks the property's ``ask`` and waits for
its ``give_<argument>`` function; a tool that changes something then reads the arguments back
(its ``confirm`` template) and waits for ``confirm_<tool>``; then the tool runs (its API,
agent/tools/http_tool.py, or a booking Brisk keeps, agent/tools/booking.py, or its MCP server)
and its reply, or the tool's ``failed`` line (the business's ``tool_failed_text``), is said.

The embedded LLM does not call functions reliably (docs/benchmarks.md, the agent acting), so
``route`` reads each answer from the caller's words (agent/tools/arguments.py) and the fast path
runs the step's function through pipecat's function calling; an LLM that calls tools well calls
the same functions. The caller is never trapped (agent/tools/router.py): a question is answered
and the step asked again, "never mind" (``leaves``) or another request leaves the form, and
words that answer nothing hear the step's question again.

Records each run of the tool, its request and outcome, in ``CallTools.calls``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re

from loguru import logger
from pipecat.flows import FlowManager, FlowsFunctionSchema, NodeConfig

from agent.business.tool_spec import DeclaredTool, llm_property
from agent.tools import arguments, words
from agent.tools.spoken_steps import SAY, speak_steps
from processors.turns.comparison_form import comparison_words

LEFT = "Okay, I've left that. Is there anything else I can help with?"
NOT_DONE = "Okay, I haven't done anything. Is there anything else I can help with?"
_LEAVING = re.compile(r"\b(?:never ?mind|no,? thanks|no,? thank you|forget (?:it|that|about it)|"
                      r"don'?t bother|leave it|not now|cancel (?:that|it))\b", re.I)


class Form:
    """One call's form for whichever business tool asked for it; see the module docstring."""

    def __init__(self, flow_manager: FlowManager, tools):
        self.flow_manager = flow_manager
        self._tools = tools  # agent.tools.functions.CallTools
        self.tool: DeclaredTool | None = None
        self.arguments: dict = {}
        self._confirmed = False
        self._open = False
        self._nodes: dict[str, NodeConfig] = {}
        self._opening: tuple[list[str], str] | None = None  # the request's words, and the node it opened at
        self._left_after: str | None = None  # the caller's turn before the words that left the form
        self._loop: asyncio.AbstractEventLoop | None = None  # the call's, where the flow runs
        self._leaving: concurrent.futures.Future | None = None  # moving the flow off the step it left
        speak_steps(flow_manager)

    # --- where the form is ------------------------------------------------------------

    @property
    def step(self) -> str | None:
        """The function the current node waits for (None: no form in progress)."""
        node = self._nodes.get(self.flow_manager.current_node or "") if self._open else None
        functions = node.get("functions") if node else None
        return functions[0].name if functions else None

    def question(self) -> str:
        """What the current step asks."""
        node = self._nodes.get(self.flow_manager.current_node or "") or {}
        return next((a["text"] for a in node.get("pre_actions", []) if a.get("type") == SAY), "")

    def _asking(self) -> str | None:
        """The argument the current step asks for (None: the read-back, or no step)."""
        step = self.step
        return step.removeprefix("give_") if step and step.startswith("give_") else None

    # --- opening and leaving ----------------------------------------------------------

    async def start(self, tool: DeclaredTool, given: dict, request: str = "") -> None:
        """Open the form for ``tool`` with what the caller already ``given``, at the first thing left to ask."""
        self.tool, self.arguments, self._confirmed, self._open = tool, dict(given), False, True
        self._left_after = None
        self._loop = asyncio.get_running_loop()
        if self._leaving is not None:
            await asyncio.wrap_future(self._leaving)  # the node that left the last form is set before this one's
        self._nodes = {}
        node = self._next_node()
        if node is None:  # nothing to ask: the caller of start checks, but a form never stalls
            node = await self._run()
        self._opening = (comparison_words(request), node["name"]) if request.strip() else None
        if self.flow_manager.current_node is None:
            await self.flow_manager.initialize(node)
        else:
            await self.flow_manager.set_node_from_config(node)

    def continues_request(self, text: str) -> bool:
        """Whether ``text`` is the request that opened the form gone on, with no step answered since
        (the turn continued: processors/turns/turn_continuation.py took the opening call back)."""
        if self._opening is None or self.flow_manager.current_node != self._opening[1]:
            return False
        opened, said = self._opening[0], comparison_words(text)
        return len(said) > len(opened) and said[:len(opened)] == opened

    def leaves(self, text: str) -> bool:
        """Whether the caller drops the form ("never mind", "no thanks", "forget it")."""
        return bool(_LEAVING.search(text))

    def leave(self, after: str | None = None) -> str:
        """Drop the form (nothing is run); what the caller hears. ``after``: the caller's turn
        before the words that left it, so the same turn routed again knows (``left_in``).

        The flow moves to a node that offers no function: an LLM that answers what comes next is
        not shown the step's function, which the embedded model would say as JSON."""
        logger.info(f"call {self._tools.control.call_id}: form for {self.tool.name if self.tool else '?'} left")
        self._open = False
        self._left_after = after
        if self.tool is not None and self._loop is not None:
            left = self._node(f"{self.tool.name}.left", "", "The caller left the form; nothing was done.")
            left["pre_actions"] = []
            # The router runs off the event loop (processors/fast_path.py): the node is set on it.
            self._leaving = asyncio.run_coroutine_threadsafe(self.flow_manager.set_node_from_config(left), self._loop)
        return LEFT

    def left_in(self, earlier: str) -> bool:
        """Whether the form was left by words of the turn that follows ``earlier``: a speculative
        draft of the turn left it, and the turn's final is routed again (processors/fast_path.py)."""
        return self.step is None and self._left_after is not None and self._left_after == earlier

    # --- the caller's words -----------------------------------------------------------

    def route(self, text: str) -> tuple[str, dict] | None:
        """(the step's function, its arguments) when the words answer the step, else None."""
        step = self.step
        if step is None:
            return None
        asking = self._asking()
        if asking is None:
            keyed = words.keyed_digits(text)
            # Keyed: 1 for yes, 2 for no, as phone menus ask.
            confirmed = words.yes_or_no(text) if keyed is None else {"1": True, "2": False}.get(keyed)
            return (step, {"confirmed": confirmed}) if confirmed is not None else None
        value = arguments.from_answer(self.tool, asking, text, self._tools.now())
        if value is None or self._closed_on(asking, value):
            return None
        return step, {asking: value}

    def ask_again(self, text: str = "") -> str:
        """The step's question again, for words that did not answer it (or named a closed day)."""
        asking = self._asking()
        value = arguments.from_answer(self.tool, asking, text, self._tools.now()) if asking else None
        closed = self._closed_on(asking, value) if value is not None else None
        if closed:
            return f"Sorry, we're closed on {closed}s. {self.question()}"
        return f"Sorry, I didn't catch that. {self.question()}".strip()

    def _closed_on(self, argument: str, value) -> str | None:
        """The weekday ("Sunday") when ``value`` is a day the business is closed and the argument
        wants an open one (``open_days_only``); else None."""
        if not self.tool.parameters["properties"][argument].get("open_days_only"):
            return None
        day = arguments.weekday_of(self.tool, argument, value)
        return day.capitalize() if day and self._tools.business.hours.get(day) is None else None

    # --- the flow's nodes -------------------------------------------------------------

    def _next_node(self) -> NodeConfig | None:
        """The node that asks what is still missing, or reads back; None: ready to run."""
        tool = self.tool
        missing = [name for name in tool.required if name not in self.arguments]
        if missing:
            return self._ask_node(missing[0])
        if tool.changes and not self._confirmed:
            return self._confirm_node()
        return None

    def _node(self, name: str, said: str, task: str, function: FlowsFunctionSchema | None = None) -> NodeConfig:
        node: NodeConfig = {
            "name": name,
            "task_messages": [{"role": "developer", "content": task}],
            "pre_actions": [{"type": SAY, "text": said}],
            "respond_immediately": False,
        }
        if function is not None:
            node["functions"] = [function]
        self._nodes[name] = node
        return node

    def _ask_node(self, argument: str) -> NodeConfig:
        tool = self.tool
        prop = tool.parameters["properties"][argument]
        what = prop.get("description") or argument.replace("_", " ")
        question = prop.get("ask") or f"Could you tell me {what}?"
        llm_prop = llm_property(prop)
        function = FlowsFunctionSchema(
            name=f"give_{argument}", description=f"Record {what}, as the caller said it.",
            properties={argument: llm_prop}, required=[argument], handler=self._given(argument))
        return self._node(f"{tool.name}.{argument}", question, f"Ask the caller for {what}.", function)

    def _confirm_node(self) -> NodeConfig:
        tool = self.tool
        if tool.confirm:
            blanks = {name: "" for name in tool.parameters.get("properties", {})}
            said = arguments.read_back(tool, tool.confirm, {**blanks, **self.arguments})
        else:
            spoken = [arguments.spoken(tool, name, value) for name, value in self.arguments.items()]
            said = f"So that's {', '.join(spoken)}. Shall I go ahead?"
        function = FlowsFunctionSchema(
            name=f"confirm_{tool.name}", description="Whether the caller said yes to the details as read back.",
            properties={"confirmed": {"type": "boolean"}}, required=["confirmed"], handler=self._confirm)
        return self._node(f"{tool.name}.confirm", said, "Read the details back and ask the caller to confirm them.",
                          function)

    def _given(self, argument: str):
        async def handler(args: dict, flow_manager: FlowManager):
            value = args.get(argument)
            if isinstance(value, str):
                # An LLM may give the words as it heard them ("next Thursday"): read as the fast path
                # reads them; a value the fast path read reads back as itself.
                value = arguments.from_answer(self.tool, argument, value, self._tools.now())
            if value is None or self._closed_on(argument, value):
                return {"recorded": False}, self._ask_node(argument)
            self.arguments[argument] = value
            return {"recorded": argument}, await self._after_step()
        return handler

    async def _confirm(self, args: dict, flow_manager: FlowManager):
        if not args.get("confirmed"):
            self._open = False
            return {"confirmed": False}, self._node(f"{self.tool.name}.not_done", NOT_DONE,
                                                    "The caller did not confirm; nothing was done.")
        self._confirmed = True
        return {"confirmed": True}, await self._after_step()

    async def _after_step(self) -> NodeConfig:
        return self._next_node() or await self._run()

    async def _run(self) -> NodeConfig:
        """Run the tool with the form's arguments; the node that says how it went."""
        tools, tool = self._tools, self.tool
        self._open = False
        outcome, kept = await tools.run(tool, self.arguments)
        tools.calls.append({"name": tool.name, "arguments": dict(self.arguments), "result": outcome.result(), **kept})
        said = tools.heard(tool, outcome, self.arguments)
        if outcome.ok:
            return self._node(f"{tool.name}.done", said, "The tool has run; answer any other question.")
        return self._node(f"{tool.name}.failed", said, "The tool failed; nothing was done.")
