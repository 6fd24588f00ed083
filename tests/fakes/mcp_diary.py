"""A business's MCP server, a stand-in for its diary system: the plumbing company's next free slot.

Runs as a real MCP server over stdio (``python -m tests.fakes.mcp_diary``, as a business file's
``command`` starts it) or over streamable HTTP (``app()``, served on loopback). Its tool
``next_free_slot(day)`` answers from a fixed diary; ``broken_day(day)`` always raises, an MCP
server failing a call.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

SLOTS = {"monday": "9 am", "tuesday": "11 am", "wednesday": "2 pm", "thursday": "10 am", "friday": "3 pm"}

server = MCPServer("diary")


@server.tool()
def next_free_slot(day: str) -> str:
    """The next free engineer slot on a weekday.

    Args:
        day: the weekday, lower case
    """
    slot = SLOTS.get(day.lower())
    if slot is None:
        return f"There are no free slots on {day.capitalize()}."
    return f"The next free slot on {day.capitalize()} is at {slot}."


@server.tool()
def broken_day(day: str) -> str:
    """A tool whose every call fails.

    Args:
        day: the weekday, lower case
    """
    raise RuntimeError("the diary database is down")


def app():
    """The server over streamable HTTP, at ``/mcp``."""
    return server.streamable_http_app()


if __name__ == "__main__":
    server.run("stdio")
