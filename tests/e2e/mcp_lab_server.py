"""A small MCP server (official SDK) for the lifecycle tests: it dies, sleeps, counts, grows.

Run as ``python lab_server.py``; speaks MCP over stdio.
"""

from __future__ import annotations

import asyncio
import os

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("lab")
calls = {"count": 0}


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
def die() -> str:
    """Exit at once, without answering."""
    os._exit(3)


@server.tool()
def die_counted(ledger: str) -> str:
    """Write a line to the file ``ledger`` (what this server received), then exit unanswered."""
    with open(ledger, "a", encoding="utf-8") as file:
        file.write(f"{os.getpid()}\n")
    os._exit(3)


@server.tool()
def count() -> int:
    """Count the calls of this tool (a side effect: not idempotent)."""
    calls["count"] += 1
    return calls["count"]


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleep, then say so."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def fail(message: str) -> str:
    """Raise, so the result is an error."""
    raise ValueError(message)


@server.tool()
def idempotency_key(ctx: Context) -> str:
    """The idempotency key the client sent in the request's _meta, or 'none'."""
    meta = ctx.request_context.meta or {}
    values = meta if isinstance(meta, dict) else meta.model_dump(by_alias=True)
    return str(values.get("io.github.miniagent/idempotency-key", "none"))


def greet(name: str) -> str:
    """Greet someone."""
    return f"Hello, {name}!"


@server.tool()
async def add_greeter(ctx: Context) -> str:
    """Add the tool 'greet' and tell the clients the list changed."""
    server.add_tool(greet, name="greet")
    await ctx.notify_tools_changed()
    return "added greet"


if __name__ == "__main__":
    server.run()
