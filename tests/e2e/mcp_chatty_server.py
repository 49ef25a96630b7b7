"""A stdio MCP server that shakes hands, lists one tool, and answers its call with a line that
is not MCP (as a server that logs to stdout does), then nothing.

Run as ``python mcp_chatty_server.py``. Hand-written: the SDK's servers divert stray stdout.
"""

from __future__ import annotations

import json
import sys
import time


def send(request_id: object, result: dict[str, object]) -> None:
    print(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}), flush=True)


for line in sys.stdin:
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:
        continue  # a notification
    if method == "initialize":
        send(request_id, {"protocolVersion": message["params"]["protocolVersion"],
                          "capabilities": {"tools": {}},
                          "serverInfo": {"name": "chatty", "version": "1"}})
    elif method == "tools/list":
        send(request_id, {"tools": [{"name": "chatter", "inputSchema": {"type": "object"}}]})
    elif method == "tools/call":
        print("progress: 50%", flush=True)
        time.sleep(60)
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": request_id,
                          "error": {"code": -32601, "message": f"no method {method}"}}),
              flush=True)
