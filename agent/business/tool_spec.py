"""A tool the business declares in its file (``tools:`` entries that are mappings, beside the
built-in names): a call to its own HTTP API, or a booking Brisk keeps in its own database; and the
tools of its MCP servers (``mcp_servers:``).

Consumes the YAML mapping of one tool; returns a ``DeclaredTool``, or raises ``ValueError`` naming
the field that is wrong, which ``load_business`` turns into a start-up error:

- ``parameters``: the arguments' JSON Schema (checked as one, draft 2020-12): an object whose
  properties are strings, integers, numbers or booleans. A property may say ``ask``: what the
  caller is asked when their words do not give it. What kind of value a property is, and so how
  it is read from the caller's words (agent/tools/arguments.py), is its ``type``, its ``enum``,
  and its ``format`` (``date``, ``time``, ``weekday``, ``phone``, ``name``), or without a format
  its name (``day``, ``date``, ``time``, ``phone``, ``name``). A day with ``open_days_only`` must
  be one the business is open (its ``hours``): a closed day is refused and asked again.
- ``http``: where the request goes (agent/tools/http_tool.py); or ``store: bookings``: Brisk
  writes the call's arguments as a booking in its own database (agent/tools/booking.py), and
  ``say`` may name the ``{booking_id}`` it gets. ``${VAR}`` in the URL or a header is read from the
  environment when the request is made; a variable that is not set stops start-up (``${VAR:-x}``
  gives a default).
- ``response``: the JSON Schema of the API's reply; ``say`` is a template over its fields
  (``{message}``, ``{slot.time}``) and the arguments, and every field it names must be declared
  there, so a typo stops start-up rather than a call. ``failed`` is said instead of the
  business's ``tool_failed_text`` when the tool fails.
"""

from __future__ import annotations

import os
import re
import string
from typing import Literal

from jsonschema import Draft202012Validator, SchemaError
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
VALUE_TYPES = ("string", "integer", "number", "boolean")
FORMATS = ("date", "time", "weekday", "phone", "name")
# Brisk's own keywords in a property (JSON Schema ignores keywords it does not know); kept out of
# the schema an LLM is shown.
OWN_KEYWORDS = ("ask", "open_days_only")


def missing_env(text: str) -> list[str]:
    """The ``${VAR}`` in ``text`` that the environment does not set and that give no default."""
    return [m.group(1) for m in _ENV.finditer(text) if m.group(2) is None and m.group(1) not in os.environ]


def expand_env(text: str) -> str:
    """``text`` with each ``${VAR}`` (``${VAR:-default}``) replaced from the environment."""
    return _ENV.sub(lambda m: os.environ.get(m.group(1), m.group(2) or ""), text)


def template_fields(template: str) -> list[str]:
    """The fields a ``say`` template names ("{message} at {slot.time}" -> ["message", "slot.time"]).

    Raises ValueError for a template ``str.format`` cannot read (an unclosed brace)."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as error:
        raise ValueError(f"{template!r} is not a template: {error}") from None
    fields = []
    for _, field, spec, _ in parsed:
        if field is None:
            continue
        if not field or not re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*", field) or spec:
            raise ValueError(f"{{{field}{':' + spec if spec else ''}}} in {template!r}: a field is a name, "
                             "or names joined by dots ({slot.time})")
        fields.append(field)
    return fields


class _Fields(string.Formatter):
    """A template's fields from values, dotted names walked through nested objects ({slot.time})."""

    def get_field(self, field_name, args, kwargs):
        value = kwargs
        for part in field_name.split("."):
            if not isinstance(value, dict) or part not in value or value[part] is None:
                raise KeyError(field_name)
            value = value[part]
        return value, field_name


def fill(template: str, values: dict) -> str:
    """``template`` with its fields from ``values``; raises KeyError naming a field it lacks."""
    return _Fields().format(template, **values)


def _declared(schema: dict, path: str) -> bool:
    """Whether the object ``schema`` declares the dotted ``path`` among its (nested) properties."""
    for part in path.split("."):
        properties = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(properties, dict) or part not in properties:
            return False
        schema = properties[part]
    return True


def _object_schema(schema: dict) -> dict:
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ValueError("must be a JSON Schema of type object")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        where = ".".join(str(p) for p in error.absolute_path)
        raise ValueError(f"{where + ': ' if where else ''}not valid JSON Schema ({error.message})") from None
    return schema


def argument_kind(parameters: dict, name: str) -> str:
    """How argument ``name`` of a tool with these ``parameters`` is read from words: choice,
    number, integer, yes_no, date, time, weekday, phone, name or text (see the module docstring)."""
    prop = parameters["properties"][name]
    kind = prop.get("type")
    if kind == "boolean":
        return "yes_no"
    if kind in ("integer", "number"):
        return kind
    if prop.get("enum"):
        return "choice"
    if prop.get("format") in FORMATS:
        return prop["format"]
    named = name.lower()
    for word, meant in (("weekday", "weekday"), ("date", "date"), ("time", "time"), ("phone", "phone"),
                        ("name", "name"), ("day", "weekday")):
        if named == word or named.endswith(f"_{word}"):
            return meant
    return "text"


class HttpRequest(BaseModel):
    """Where and how the tool's request is sent."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    url: str = Field(min_length=1, description="The API's URL; ${VAR} is read from the environment.")
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = Field(
        "POST", description="POST, PUT, PATCH: the arguments as the JSON body; GET, DELETE: as query parameters.")
    headers: dict[str, str] = Field(default_factory=dict, description="Headers sent; ${VAR} is read from the environment.")
    timeout_secs: float = Field(4.0, gt=0, le=30, description="The request fails after this long and the caller hears tool_failed_text.")

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not re.match(r"^(https?://|\$\{)", value):
            raise ValueError(f"{value!r} is not an http:// or https:// URL")
        _environment_set(value)
        return value

    @field_validator("headers")
    @classmethod
    def _headers_set(cls, value: dict) -> dict:
        for name, text in value.items():
            _environment_set(text, f"{name}: ")
        return value


def _environment_set(text: str, where: str = "") -> None:
    unset = missing_env(text)
    if unset:
        raise ValueError(f"{where}the environment variable {unset[0]} is not set")


class McpServer(BaseModel):
    """A business's MCP server (``mcp_servers:``), started as a process (``command``) or reached
    over streamable HTTP (``url``); ``tools`` are the tools of it the business uses, which its
    intents may route to (agent/tools/mcp_tools.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    command: str | None = Field(None, min_length=1, description="stdio: the program that serves it, started for each call.")
    args: list[str] = Field(default_factory=list, description="stdio: its arguments.")
    env: dict[str, str] = Field(default_factory=dict, description="stdio: its environment; ${VAR} read from Brisk's.")
    url: str | None = Field(None, description="Streamable HTTP: the server's URL (https://.../mcp).")
    headers: dict[str, str] = Field(default_factory=dict, description="Streamable HTTP: headers sent; ${VAR} read from the environment.")
    tools: list[str] = Field(min_length=1, description="The server's tools the business uses, by name.")
    timeout_secs: float = Field(8.0, gt=0, le=60, description="A tool call fails after this long and the caller hears tool_failed_text.")

    @model_validator(mode="after")
    def _one_transport(self) -> "McpServer":
        if (self.command is None) == (self.url is None):
            raise ValueError("an MCP server has either a command (stdio) or a url (streamable HTTP), not both or neither")
        for where, text in [("url", self.url or ""), ("command", self.command or ""),
                            *((f"args.{i}", a) for i, a in enumerate(self.args)),
                            *((f"env.{k}", v) for k, v in self.env.items()),
                            *((f"headers.{k}", v) for k, v in self.headers.items())]:
            _environment_set(text, f"{where}: ")
        for name in self.tools:
            if not _NAME.match(name):
                raise ValueError(f"tools: {name!r} is not a function name (lower-case letters, digits and _)")
        return self


# What a ``store`` tool's reply holds, for its ``say``.
STORE_REPLIES = {"bookings": {"type": "object", "properties": {"booking_id": {"type": "integer"}}}}


class DeclaredTool(BaseModel):
    """A tool the business file declares; see the module docstring."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(description="The function's name, as an intent's tool names it (lower case, digits, _).")
    description: str = Field(min_length=1, description="What it does, as an LLM that calls tools is told.")
    parameters: dict = Field(default_factory=lambda: {"type": "object", "properties": {}},
                             description="The arguments' JSON Schema (type: object).")
    http: HttpRequest | None = Field(None, description="The request to the business's API (or store).")
    store: Literal["bookings"] | None = Field(
        None, description="bookings: Brisk writes the arguments as a booking in its own database (or http).")
    response: dict = Field(default_factory=lambda: {"type": "object", "properties": {}},
                           description="The JSON Schema of the API's reply: the fields `say` may use.")
    say: str = Field(min_length=1, description="What the caller hears: a template over the reply's fields and the arguments.")
    failed: str | None = Field(
        None, min_length=1, description="Said when it fails (a template over the arguments); unset = tool_failed_text.")
    changes: bool = Field(False, description="It changes something (a booking): the caller confirms the details before it runs.")
    confirm: str | None = Field(
        None, min_length=1,
        description="With changes: the read-back before it runs, a template over the arguments ending in a question; "
        "unset = each argument said in turn, then 'Shall I go ahead?'.")

    @field_validator("name")
    @classmethod
    def _function_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"{value!r}: a tool's name is lower-case letters, digits and _, starting with a letter")
        return value

    @field_validator("parameters")
    @classmethod
    def _parameters(cls, value: dict) -> dict:
        _object_schema(value)
        properties = value.get("properties", {})
        for name, prop in properties.items():
            if not isinstance(prop, dict) or prop.get("type") not in VALUE_TYPES:
                raise ValueError(f"properties.{name}: type must be one of {', '.join(VALUE_TYPES)}")
            if prop.get("ask") is not None and not (isinstance(prop["ask"], str) and prop["ask"].strip()):
                raise ValueError(f"properties.{name}.ask: the question asked for it, as text")
            if prop.get("open_days_only") and argument_kind(value, name) not in ("weekday", "date"):
                raise ValueError(f"properties.{name}.open_days_only: only a weekday or a date is a day")
        for name in value.get("required", []):
            if name not in properties:
                raise ValueError(f"required: {name!r} is not one of the properties")
        return value

    @field_validator("response")
    @classmethod
    def _response(cls, value: dict) -> dict:
        return _object_schema(value)

    @model_validator(mode="after")
    def _one_way_to_run(self) -> "DeclaredTool":
        if (self.http is None) == (self.store is None):
            raise ValueError("a tool has either http (its API) or store (a booking Brisk keeps), not both or neither")
        if self.store and self.response.get("properties"):
            raise ValueError(f"response: a store tool's reply is Brisk's own ({', '.join(self.reply['properties'])})")
        return self

    @model_validator(mode="after")
    def _say_fields_declared(self) -> "DeclaredTool":
        for field in template_fields(self.say):
            if not (_declared(self.reply, field) or _declared(self.parameters, field)):
                where = (f"what store: {self.store} gives ({', '.join(self.reply['properties'])})" if self.store
                         else "a property of response (declare the reply's fields under response.properties)")
                raise ValueError(f"say: {{{field}}} is neither an argument nor {where}")
        return self

    @model_validator(mode="after")
    def _argument_templates(self) -> "DeclaredTool":
        for name, template in (("confirm", self.confirm), ("failed", self.failed)):
            for field in template_fields(template or ""):
                if not _declared(self.parameters, field):
                    raise ValueError(f"{name}: {{{field}}} is not an argument of the tool")
        return self

    @property
    def reply(self) -> dict:
        """The JSON Schema of what the tool gives back: the API's ``response``, or the store's."""
        return STORE_REPLIES[self.store] if self.store else self.response

    @property
    def required(self) -> list[str]:
        return list(self.parameters.get("required", []))

    def argument_kind(self, name: str) -> str:
        return argument_kind(self.parameters, name)

    def llm_parameters(self) -> dict:
        """``parameters`` as an LLM is shown them: without Brisk's own keywords."""
        return {**self.parameters, "properties": {name: llm_property(prop)
                                                  for name, prop in self.parameters.get("properties", {}).items()}}


def llm_property(prop: dict) -> dict:
    """One property as an LLM is shown it: without Brisk's own keywords."""
    return {k: v for k, v in prop.items() if k not in OWN_KEYWORDS}
