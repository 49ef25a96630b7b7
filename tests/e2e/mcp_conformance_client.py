"""The client the MCP conformance suite drives: ``python mcp_conformance_client.py URL``.

Built on miniagent's public API only (:class:`miniagent.mcp.MCPServer`, as an agent uses it):
it lists the server's tools, calls those the suite's scenarios offer with the arguments they
expect, prints each result, and exits 1 when a call fails. The suite names the scenario in
``MCP_CONFORMANCE_SCENARIO``; the tools it finds are enough to tell what to do.
"""

from __future__ import annotations

import asyncio
import sys

from miniagent import ToolCall
from miniagent.mcp import MCPServer

CALLS = {"add_numbers": {"a": 5, "b": 3}, "test_reconnection": {}}
"""The tools the client scenarios offer, and the arguments each expects."""


async def main(url: str) -> int:
    server = MCPServer.http(url, connect_timeout=20, call_timeout=20)
    failed = 0
    try:
        for tool in await server.list_tools():
            if tool.name not in CALLS:
                continue
            observation = await server.call_tool(
                ToolCall(id=f"call-{tool.name}", name=tool.name, arguments=CALLS[tool.name]))
            print(f"{tool.name}: {observation.output}")
            failed += observation.is_error
    finally:
        await server.aclose()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[-1])))
