"""The business's MCP servers (``mcp_servers:`` in its file), through pipecat's ``MCPClient``.

``discover`` connects to each server once at start-up, checks that it offers every tool the file
names, and keeps each tool's description and JSON Schema (``McpTool``): intents route to them, an
LLM that calls tools is offered them, and their arguments are read from the caller's words as an
HTTP tool's are (agent/tools/arguments.py); what is missing is asked for by a form
(agent/tools/form.py). A server that cannot be reached, or lacks a tool,
stops start-up naming it.

Each call then has its own connections (``McpCalls``: one ``MCPClient`` per server, opened at the
call's first use of it and closed when the call ends; a stdio server is a process per call, so
no call sees another's state). A tool's text reply is what the caller hears; a call that fails
(the server's error, a lost connection, no reply within ``timeout_secs``) says the business's
``tool_failed_text``. Each outcome is kept for the call's record.

pipecat's ``MCPClient`` hands a tool's reply to the model as text, its error flag dropped (an
error reads "Error executing tool ..."); a caller must not hear that as an answer, so
``_FlaggingClient`` calls the tool on the client's own session and keeps the flag.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from loguru import logger
from mcp import StdioServerParameters
from mcp.client.session_group import StreamableHttpParameters
from mcp.types import TextContent
from pipecat.services.mcp_service import MCPClient

from agent.business.model import Business
from agent.business.tool_spec import McpServer, argument_kind, expand_env
from agent.tools.http_tool import Outcome


class McpStartError(RuntimeError):
    """An MCP server of the business file cannot be used; the message names it."""


@dataclass(frozen=True)
class McpTool:
    """One tool of a business's MCP server, as it described itself at start-up."""

    name: str
    server: str
    description: str
    parameters: dict  # JSON Schema, type object
    # As a declared tool has them, for its form (agent/tools/form.py): an MCP tool's required
    # arguments the words do not give are asked for; it is not read back (its server says what
    # it changes, not the file); its failure is tool_failed_text.
    changes = False
    confirm = None
    failed = None

    @property
    def required(self) -> list[str]:
        return list(self.parameters.get("required", []))

    def argument_kind(self, name: str) -> str:
        return argument_kind(self.parameters, name)


def server_params(server: McpServer):
    """pipecat's (the MCP SDK's) parameters for ``server``, ``${VAR}`` read from the environment."""
    if server.command is not None:
        return StdioServerParameters(command=expand_env(server.command), args=[expand_env(a) for a in server.args],
                                     env={k: expand_env(v) for k, v in server.env.items()} or None)
    return StreamableHttpParameters(url=expand_env(server.url), timeout=server.timeout_secs,
                                    headers={k: expand_env(v) for k, v in server.headers.items()} or None)


async def discover(business: Business) -> dict[str, McpTool]:
    """Every MCP tool the business names, as its server describes it; raises ``McpStartError``."""
    found: dict[str, McpTool] = {}
    for name, server in business.mcp_servers.items():
        client = MCPClient(server_params(server), tools_filter=server.tools)
        try:
            schema = await asyncio.wait_for(client.tools(), server.timeout_secs)
        except Exception as error:
            raise McpStartError(f"mcp_servers.{name}: cannot list its tools ({type(error).__name__}: {error})") from None
        finally:
            await client.close()
        offered = {tool.name: tool for tool in schema.standard_tools}
        missing = [tool for tool in server.tools if tool not in offered]
        if missing:
            raise McpStartError(f"mcp_servers.{name}.tools: the server offers no tool {missing[0]!r}")
        for tool_name in server.tools:
            tool = offered[tool_name]
            parameters = {"type": "object", "properties": tool.properties, "required": tool.required}
            found[tool_name] = McpTool(tool_name, name, tool.description or tool_name, parameters)
    logger.info(f"MCP tools ready: {', '.join(found) or 'none'}")
    return found


class _FlaggingClient(MCPClient):
    """An ``MCPClient`` whose calls keep the MCP result's error flag (see the module docstring)."""

    async def call(self, name: str, arguments: dict) -> tuple[bool, str]:
        """(failed, text) of one tool call; a lost connection is dropped for the next call to reopen."""
        session = await self._open_session(as_owner=True)
        try:
            result = await session.call_tool(name, arguments=arguments)
        except Exception:
            await self._drop_session(session)
            raise
        text = "".join(c.text for c in result.content if isinstance(c, TextContent) and c.text)
        return bool(result.is_error), text


class McpCalls:
    """One call's connections to the business's MCP servers (see the module docstring)."""

    def __init__(self, business: Business):
        self._servers = business.mcp_servers
        self._clients: dict[str, _FlaggingClient] = {}

    async def call(self, tool: McpTool, arguments: dict, *, call_id: str = "") -> Outcome:
        """One call of ``tool`` on this call's connection to its server; logged here, once."""
        outcome = await self._send(tool, arguments)
        if outcome.ok:
            logger.info(f"call {call_id}: MCP tool {tool.name} answered in {outcome.elapsed_ms:.0f} ms")
        else:
            logger.warning(f"call {call_id}: MCP tool {tool.name} failed: {outcome.error}")
        return outcome

    async def _send(self, tool: McpTool, arguments: dict) -> Outcome:
        server = self._servers[tool.server]
        request = {"mcp_server": tool.server, "tool": tool.name, "arguments": arguments}
        client = self._clients.get(tool.server)
        if client is None:
            client = self._clients[tool.server] = _FlaggingClient(server_params(server))
        started = time.monotonic()
        try:
            failed, text = await asyncio.wait_for(client.call(tool.name, arguments), server.timeout_secs)
        except asyncio.TimeoutError:
            return Outcome(None, error=f"no answer within {server.timeout_secs:g} s", request=request,
                           elapsed_ms=_since(started))
        except Exception as error:
            return Outcome(None, error=f"the call failed: {type(error).__name__}: {error}", request=request,
                           elapsed_ms=_since(started))
        if failed or not text.strip():
            return Outcome(None, response=text, error=f"the server's error: {text[:200] or '(no text)'}",
                           request=request, elapsed_ms=_since(started))
        return Outcome(text.strip(), response=text, request=request, elapsed_ms=_since(started))

    @property
    def connected(self) -> list[str]:
        """The servers this call has opened a connection to and not yet closed."""
        return list(self._clients)

    async def close(self) -> None:
        for client in self._clients.values():
            try:
                await client.close()
            except Exception:  # a server already gone: nothing is left to release
                logger.exception("closing an MCP connection failed")
        self._clients.clear()


def _since(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 1)
