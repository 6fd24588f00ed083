"""The business definition: typed, validated models of a business YAML file.

Consumes a YAML file (``BRISK_BUSINESS``); returns a ``Business``, or raises ``BusinessError``
with one message naming the file and the field that is wrong ("hours.saturday: ..."), so a
malformed file stops start-up with a clear reason.
"""

from __future__ import annotations

import re
from datetime import time
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

from agent.business.tool_spec import DeclaredTool, McpServer

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
Weekday = Literal["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_SPAN = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*$")


class BusinessError(ValueError):
    """A business file that cannot be used; the message names the file and the field."""


class Hours(BaseModel):
    """One day's opening hours."""

    model_config = ConfigDict(frozen=True)
    opens: time
    closes: time


def _parse_day(spec):
    """'HH:MM-HH:MM' -> Hours, 'closed' -> None (the field's location names the day)."""
    if spec is None or (isinstance(spec, str) and spec.strip().lower() == "closed"):
        return None
    if isinstance(spec, (Hours, dict)):
        return spec
    match = _SPAN.match(spec) if isinstance(spec, str) else None
    if not match:
        raise ValueError(f"expected 'HH:MM-HH:MM' or 'closed', got {spec!r}")
    h1, m1, h2, m2 = map(int, match.groups())
    try:
        opens, closes = time(h1, m1), time(h2, m2)
    except ValueError:
        raise ValueError(f"{spec!r} is not a time of day") from None
    if closes <= opens:
        raise ValueError(f"closes ({closes:%H:%M}) before it opens ({opens:%H:%M})")
    return Hours(opens=opens, closes=closes)


DayHours = Annotated[Hours | None, BeforeValidator(_parse_day)]


class Intent(BaseModel):
    """A frequent question or request, handled without asking the LLM (agent/business/intents.py).

    A question is this intent when it holds one of ``keywords`` and is close enough to one of
    ``examples``. It is answered by exactly one of:

    - ``answer``: a template over the facts: ``{name}``, ``{phone}``, ``{address}``, ``{hours}``
      (the day asked about, "today", "tomorrow", "now", or the whole week), ``{price}`` (the
      price of each item the question names; a question that names no item of ``prices`` is
      left to the LLM), ``{prices[item]}``, ``{policies[topic]}``;
    - ``tool``: one of the business's ``tools``, called through pipecat's function calling
      with the arguments the words hold (an order number, a day, a count; an HTTP tool's
      arguments by their JSON Schema types, agent/tools/arguments.py).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    keywords: list[str] = Field(min_length=1)
    examples: list[str] = Field(min_length=1)
    answer: str | None = Field(None, min_length=1)
    tool: str | None = None

    @model_validator(mode="after")
    def _one_way(self) -> "Intent":
        if (self.answer is None) == (self.tool is None):
            raise ValueError("an intent has either an answer template or a tool, not both or neither")
        return self


# The tools Brisk has code for (agent/tools/); a business file chooses which its callers get,
# and may declare its own beside them (agent/business/tool_spec.py).
Tool = Literal["lookup_order", "transfer_to_human", "end_call"]
BUILT_IN_TOOLS = Tool.__args__
# Built-in once, now declared in the file: a file that lists one by name is told how to declare it.
DECLARED_NOW = {"book_rental": "declare it as a tool with store: bookings (docs/business-tools.md, "
                               "'A booking Brisk keeps'; the bike shop's file has one)"}


class Business(BaseModel):
    """Everything the bot may state as a fact about the business."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="What the business is called.")
    kind: str = Field("a business", description="What it is, said after its name ('a small bicycle shop').")
    greeting: str = Field(min_length=1, description="What the bot says first when a call opens.")
    timezone: str = Field(description="IANA time zone of the business ('Europe/London'): what 'today' means.")
    address: str = Field(min_length=1)
    phone: str = Field(min_length=1)
    hours: dict[Weekday, DayHours] = Field(description="Per weekday 'HH:MM-HH:MM', or 'closed'.")
    prices: dict[str, str] = Field(default_factory=dict, description="Item -> its price, as said aloud.")
    policies: dict[str, str] = Field(default_factory=dict, description="Topic -> the policy, one sentence.")
    intents: dict[str, Intent] = Field(default_factory=dict, description="Frequent questions answered without the LLM.")
    unknown_answer: str = Field(
        "I'm sorry, I don't know that. Would you like me to put you through to a person?",
        min_length=1, description="Said to a question no fact of this file answers, instead of a guess.",
    )
    unsure_preface: str = Field(
        "I'm not sure that's what you're asking, but", min_length=1,
        description="Said before the nearest fact to a question the file may not answer, which a person offer follows.",
    )
    offer_person: str = Field(
        "For anything more specific, I can put you through to a person.", min_length=1,
        description="Added to a policy read out for a question it may not fully answer.",
    )
    vocabulary: list[str] = Field(
        default_factory=list, description="Words callers say that Whisper should expect, beyond the facts' own."
    )
    stt_prompt: str | None = Field(
        None, description="What Whisper is told callers talk about, as a sentence; unset = made from the facts."
    )
    tools: list[Tool | DeclaredTool] = Field(
        default_factory=list,
        description="What the bot may do for a caller: lookup_order, transfer_to_human, end_call, and the business's "
        "own tools (a mapping: name, description, parameters, http or store, say; docs/business-tools.md).",
    )
    mcp_servers: dict[str, McpServer] = Field(
        default_factory=dict, description="The business's MCP servers by a name of its own: a command or a url, and the tools used.")
    filler: str = Field("Let me check that.", min_length=1, description="Said once when a tool turn is slow.")
    goodbye: str = Field("Thank you for calling. Goodbye!", min_length=1, description="Said before the bot ends a call.")
    still_there: str = Field("Are you still there?", min_length=1, description="Asked once when the caller goes quiet.")
    idle_goodbye: str = Field(
        "I haven't heard from you, so I'll end the call now. Goodbye!", min_length=1,
        description="Said before hanging up on a caller who stayed quiet.",
    )
    transfer_text: str = Field(
        "I'll put you through to a colleague now. Please stay on the line.", min_length=1,
        description="Said before the caller is handed to a person.",
    )
    tool_failed_text: str = Field(
        "I'm sorry, I can't check that right now. Would you like me to put you through to a person?",
        min_length=1, description="Said when a tool's data can not be reached (the store is down, say).",
    )
    no_transfer_text: str = Field(
        "I'm sorry, nobody can take your call right now. Please call us again during opening hours.",
        min_length=1, description="Said when a person was asked for and no transfer is possible.",
    )

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r} (an IANA name such as 'Europe/London')") from None
        return value

    @field_validator("hours")
    @classmethod
    def _every_day(cls, value: dict) -> dict:
        missing = [day for day in WEEKDAYS if day not in value]
        if missing:
            raise ValueError(f"every weekday needs its hours or 'closed'; missing: {', '.join(missing)}")
        return value

    @field_validator("tools", mode="before")
    @classmethod
    def _tools_by_name(cls, value):
        """A malformed HTTP tool is named by its name in the error, not its place in the list; each
        is validated here once (pydantic takes the validated model as it is)."""
        if not isinstance(value, list):
            return value
        seen, checked = set(), []
        for index, tool in enumerate(value):
            name = tool.get("name") if isinstance(tool, dict) else tool
            if isinstance(tool, str) and tool in DECLARED_NOW:
                raise ValueError(f"{tool!r} is no longer built in: {DECLARED_NOW[tool]}")
            if isinstance(tool, dict):
                if name in BUILT_IN_TOOLS:
                    raise ValueError(f"{name!r} is a built-in tool: list it by name, or give yours another name")
                try:
                    tool = DeclaredTool.model_validate(tool)
                except ValidationError as error:
                    first = error.errors()[0]
                    where = ".".join(str(part) for part in first["loc"])
                    message = first["msg"].removeprefix("Value error, ")
                    if first["type"] == "extra_forbidden":
                        message = "not a field a tool has"
                    raise ValueError(f"{name or index}: {where + ': ' if where else ''}{message}") from None
            if name in seen:
                raise ValueError(f"{name!r} is listed twice")
            seen.add(name)
            checked.append(tool)
        return checked

    @model_validator(mode="after")
    def _tools_declared(self) -> "Business":
        named = set(self._listed_tool_names)
        for server_name, server in self.mcp_servers.items():
            for name in server.tools:
                if name in named or name in BUILT_IN_TOOLS:
                    raise ValueError(f"mcp_servers.{server_name}.tools: {name!r} is already a tool of this file")
                named.add(name)
        for name, intent in self.intents.items():
            if intent.tool is not None and intent.tool not in named:
                raise ValueError(f"intents.{name}.tool: {intent.tool!r} is not one of this file's tools {self.tool_names}")
        return self

    # Properties, not cached: model_copy(update=...) would carry a cached value over stale, and
    # a handful of tools is microseconds to walk.
    @property
    def _listed_tool_names(self) -> list[str]:
        return [tool.name if isinstance(tool, DeclaredTool) else tool for tool in self.tools]

    @property
    def tool_names(self) -> list[str]:
        """Every tool a caller may get: the listed ones, then the MCP servers'."""
        return [*self._listed_tool_names, *self.mcp_tool_servers]

    @property
    def mcp_tool_servers(self) -> dict[str, str]:
        """Each MCP tool the business uses -> the name of its server."""
        return {tool: name for name, server in self.mcp_servers.items() for tool in server.tools}

    @property
    def declared_tools(self) -> dict[str, DeclaredTool]:
        """The business's own tools (its file declares them), by name."""
        return {tool.name: tool for tool in self.tools if isinstance(tool, DeclaredTool)}

    @property
    def http_tools(self) -> dict[str, DeclaredTool]:
        """Those of its own tools that call its API, by name."""
        return {name: tool for name, tool in self.declared_tools.items() if tool.http is not None}

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def person_offer(self) -> str:
        """The sentences of ``unknown_answer`` that offer a person ("Would you like me to put you
        through to a person?"), said after an LLM answer that cannot help and offers no one."""
        offers = [s for s in re.findall(r"[^.!?]+[.!?]*", self.unknown_answer) if "person" in s.lower()]
        return " ".join(s.strip() for s in offers) or self.offer_person

    def unsure(self, said: str) -> str:
        """``said`` as the nearest thing the file says, not as the answer, with a person offered
        ("I'm not sure that's what you're asking, but we don't take cash. Would you like ...?")."""
        return f"{self.unsure_preface} {said[:1].lower()}{said[1:]} {self.person_offer}"


def default_business_path() -> Path:
    """The example shipped with Brisk."""
    return Path(str(resources.files("agent.business") / "harbor_lane_bikes.yaml"))


def load_business(path: Path | str | None = None) -> Business:
    """Read and validate a business file (the shipped example when None)."""
    path = Path(path) if path else default_business_path()
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as error:
        raise BusinessError(f"business file {path}: cannot be read ({error.strerror or error})") from None
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        line = f" line {where.line + 1}:" if where else ""
        raise BusinessError(f"business file {path}:{line} not valid YAML ({getattr(error, 'problem', error)})") from None
    if not isinstance(data, dict):
        raise BusinessError(f"business file {path}: expected a mapping of fields (name, hours, ...)")
    try:
        return Business.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "(top level)"
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            message = "not a field a business file has"
            if field == "flows":
                message += " (a booking's steps are its tool's form now: docs/business-tools.md)"
        raise BusinessError(f"business file {path}: {field}: {message}") from None
