"""MCP: servers as tool sources (:class:`MCPServer`) and our tools served over MCP.

The client side needs the ``mcp`` SDK (``pip install 'miniagent[mcp]'``) only when a server is
first used; importing this package does not load it.
"""

from miniagent.core.tools.wrappers import ToolRule
from miniagent.mcp.client import MCPServer
from miniagent.mcp.config import ServerConfig

__all__ = ["MCPServer", "ServerConfig", "ToolRule"]
