"""A stdio MCP server that shakes hands and lists two tools: ``chatter`` answers with a line
that is not MCP (as a server that logs to stdout does), then nothing; ``crash`` exits with an
error on stderr.

Run as ``python mcp_chatty_server.py``. Hand-written: the SDK's servers divert stray stdout.
"""

from __future__ import annotations

import json
import sys
import time


def send(request_id: object, result: dict[str, object]) -> None:
    print(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}), flush=True)


def main() -> None:
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
            send(request_id, {"tools": [{"name": name, "inputSchema": {"type": "object"}}
                                        for name in ("chatter", "crash")]})
        elif method == "tools/call" and message["params"]["name"] == "crash":
            print("Traceback (most recent call last):\nRuntimeError: 内存不足", file=sys.stderr,
                  flush=True)
            sys.exit(1)
        elif method == "tools/call":
            print("progress: 50%", flush=True)
            time.sleep(60)
        else:
            print(json.dumps({"jsonrpc": "2.0", "id": request_id,
                              "error": {"code": -32601, "message": f"no method {method}"}}),
                  flush=True)


if __name__ == "__main__":
    main()
