"""The rental booking: a pipecat Flow from the business file, its steps' functions, and its router.

The flow (``flows.rental_booking`` in the business file, a ``pipecat.flows.FlowConfig``) asks
one thing per node with a ``tts_say`` and offers one function; the functions are here, as
Flows direct functions (their docstrings are what an LLM is told). Each stores its answer in
the flow's state and says which step is next (``"next"``), so a step the caller already
answered ("two city bikes for Saturday") is skipped; ``confirm_booking`` writes the rental to
the shop's store.

A capable LLM calls these functions itself. The embedded 0.5B model does not call tools
reliably (docs/benchmarks.md, the agent acting), so ``RentalBooking.route`` reads each answer from the caller's words
(agent/tools/words.py) and the fast path runs the step's function through pipecat's function
calling (frames/tools.py): the same handlers, transitions and context either way.

Each step's question (a ``tts_say`` in the file) is said by an action that does not wait for the
speech (agent/tools/spoken_steps.py).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from typing import Any

from loguru import logger
from pipecat.flows import TRANSITION_IN_YAML, Flow, FlowConfig, FlowManager

from agent.business.model import Business
from agent.tools import words
from agent.tools.spoken_steps import rendered, saying_without_waiting, speak_steps
from processors.turns.comparison_form import comparison_words

# The order the steps are asked in: a state key, and the node of the shipped flow that asks it.
STEPS = (("bike", "bike"), ("day", "date"), ("count", "count"), ("name", "name"))


def _tools(flow_manager: FlowManager):
    return flow_manager.worker.app_resources


def _next(flow_manager: FlowManager) -> dict:
    state = flow_manager.state
    for key, node in STEPS:
        if not state.get(key):
            return {"next": node}
    booking_day = date.fromisoformat(state["day"])
    count = int(state["count"])
    state["summary"] = (f"{count} {state['bike']}{'s' if count > 1 else ''} on "
                        f"{booking_day:%A} {booking_day.day} {booking_day:%B} for {state['name']}")
    return {"next": "confirm"}


async def choose_bike(flow_manager: FlowManager, bike: str) -> tuple[dict, Any]:
    """Record which bike the caller wants to rent.

    Args:
        bike: The bike: "city bike" or "electric bike".
    """
    chosen = words.bike(bike, _tools(flow_manager).business)
    if chosen:
        flow_manager.state["bike"] = chosen
    return _next(flow_manager), TRANSITION_IN_YAML


async def choose_date(flow_manager: FlowManager, day: str) -> tuple[dict, Any]:
    """Record the day the caller wants the bike for.

    Args:
        day: The day, as a date (2026-12-05), a weekday, "today" or "tomorrow".
    """
    tools = _tools(flow_manager)
    try:
        chosen = date.fromisoformat(day)
    except ValueError:
        chosen = words.day(day, tools.now())
    if chosen is not None:
        if tools.business.hours[chosen.strftime("%A").lower()] is None:
            flow_manager.state["closed_day"] = chosen.strftime("%A")
            logger.info(f"booking: {chosen:%A} is a closed day, asking again")
            return {"next": "date", "closed": chosen.strftime("%A")}, TRANSITION_IN_YAML
        flow_manager.state["day"] = chosen.isoformat()
    return _next(flow_manager), TRANSITION_IN_YAML


async def choose_count(flow_manager: FlowManager, count: int) -> tuple[dict, Any]:
    """Record how many bikes the caller wants.

    Args:
        count: How many bikes, 1 to 20.
    """
    if 1 <= int(count) <= 20:
        flow_manager.state["count"] = int(count)
    return _next(flow_manager), TRANSITION_IN_YAML


async def give_name(flow_manager: FlowManager, name: str) -> tuple[dict, Any]:
    """Record the name the booking is under.

    Args:
        name: The caller's name.
    """
    flow_manager.state["name"] = name.strip()
    return _next(flow_manager), TRANSITION_IN_YAML


async def confirm_booking(flow_manager: FlowManager, confirmed: bool) -> tuple[dict, Any]:
    """Book the rental read back to the caller, or drop it.

    Args:
        confirmed: True when the caller said yes to the booking as read back.
    """
    state = flow_manager.state
    if not confirmed:
        return {"booked": False}, TRANSITION_IN_YAML
    tools = _tools(flow_manager)
    try:
        booking_id = await tools.store.book_rental(
            bike=state["bike"], day=date.fromisoformat(state["day"]), count=int(state["count"]), name=state["name"],
            call_id=tools.control.call_id,
        )
    except Exception:  # the caller hears that nothing was booked (node not_booked), the log says why
        logger.exception(f"call {tools.control.call_id}: the booking could not be written")
        return {"booked": "failed", "error": "the booking could not be written"}, TRANSITION_IN_YAML
    state["booking_id"] = booking_id
    logger.info(f"call {tools.control.call_id}: booking {booking_id} written")
    logger.debug(f"booking {booking_id}: {state['summary']}")  # DEBUG: the caller's name and plans
    return {"booked": True, "booking_id": booking_id}, TRANSITION_IN_YAML


# Each step function, and how its argument is read from the caller's words.
_READERS: dict[str, Callable[[str, Any], dict | None]] = {
    "choose_bike": lambda text, tools: (b := words.bike(text, tools.business)) and {"bike": b},
    "choose_date": lambda text, tools: (d := _open_day(text, tools)) and {"day": d.isoformat()},
    "choose_count": lambda text, tools: (c := words.count(text)) and {"count": c},
    "give_name": lambda text, tools: (n := words.name(text)) and {"name": n},
    "confirm_booking": lambda text, tools: (y := words.yes_or_no(text)) is not None and {"confirmed": y} or None,
}
HANDLERS = {name: globals()[name] for name in _READERS}


def _open_day(text: str, tools) -> date | None:
    day = words.day(text, tools.now())
    return day if day is not None and tools.business.hours[day.strftime("%A").lower()] is not None else None


def opening_slots(text: str, business: Business, now: datetime) -> dict:
    """What a booking request already says: "two city bikes for Saturday" -> bike, count, day."""
    slots = {"bike": words.bike(text, business), "day": words.day(text, now), "count": words.count(text, alone=False)}
    return {k: (v.isoformat() if isinstance(v, date) else v) for k, v in slots.items() if v}


class RentalBooking:
    """One call's booking flow: its ``FlowManager``, where it is, and what the caller's words fill."""

    def __init__(self, flow_manager: FlowManager, config: FlowConfig, tools):
        self.flow_manager = flow_manager
        self.config = config
        self.flow = Flow(saying_without_waiting(config), handlers=HANDLERS)
        speak_steps(flow_manager)
        self._tools = tools
        self._started = False
        self._opening: tuple[list[str], str] | None = None  # the request's words, and the step it opened at

    @property
    def step(self) -> str | None:
        """The function the current node waits for (None: no booking in progress)."""
        node = self.config.nodes.get(self.flow_manager.current_node or "")
        return node.functions[0].name if node and node.functions else None

    async def start(self, slots: dict, request: str = "") -> None:
        """Begin (or begin again) at the first step the ``request`` (the caller's words) left open."""
        state = self.flow_manager.state
        for key in ("bike", "day", "count", "name", "summary", "booking_id", "closed_day"):
            state.pop(key, None)
        state.update(slots)
        node = _next(self.flow_manager)["next"]
        self._opening = (comparison_words(request), node) if request.strip() else None
        if self.flow_manager.current_node is None and not self._started:
            self._started = True
            await self.flow_manager.initialize(self.flow.node(node))
        else:
            await self.flow_manager.set_node_from_config(self.flow.node(node))

    def continues_request(self, text: str) -> bool:
        """Whether ``text`` is the request that opened the booking, gone on ("... for Saturday.
        And a child seat"), with no step answered since: the caller's turn continued
        (processors/turns/turn_continuation.py took the opening call back), so it is a new request."""
        if self._opening is None or self.flow_manager.current_node != self._opening[1]:
            return False
        opened, said = self._opening[0], comparison_words(text)
        return len(said) > len(opened) and said[:len(opened)] == opened

    def route(self, text: str) -> tuple[str, dict] | None:
        """(the step's function, its arguments) when the words answer the step, else None."""
        step = self.step
        reader = _READERS.get(step or "")
        arguments = reader(text, self._tools) if reader else None
        return (step, arguments) if arguments else None

    def ask_again(self, text: str = "") -> str:
        """The step's question again, for words that did not answer it (or named a closed day)."""
        day = words.day(text, self._tools.now()) if self.step == "choose_date" else None
        if day is not None:
            return f"Sorry, we're closed on {day:%A}s. Which other day would you like?"
        node = self.config.nodes[self.flow_manager.current_node]
        said = rendered(next((a.model_extra.get("text", "") for a in node.pre_actions if a.type == "tts_say"), ""),
                         self.flow_manager.state)
        return f"Sorry, I didn't catch that. {said}".strip()
