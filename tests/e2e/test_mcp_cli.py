"""The CLI with MCP servers: ``run --mcp``, ``tools --mcp``, tokens, ``sessions resume``.

The commands run as real subprocesses; the model is the stub server on 127.0.0.1, the MCP
servers are mcp-server-time (PyPI) and ``miniagent mcp-serve`` behind a bearer token.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from mcp_support import descendants, served_http, tools_file, wait_gone

import miniagent
from miniagent.testing.stub_server import StubServer

__all__ = ["served_http", "tools_file"]  # fixtures

TOKEN = "tok-3f9a-secret"  # the token mcp-serve requires (see mcp_support.env)
TIME = f"{sys.executable} -m mcp_server_time"


def cli(*args: str, store: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIAGENT_", "OPENAI_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(miniagent.__file__).parents[1]),
                                         env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "miniagent", *args, "--store", str(store)],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                          env={**env, "COLUMNS": "120"})


def native_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"content": None, "tool_calls": [{"name": name, "arguments": arguments}]}


def tool_messages(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_run_answers_from_mcp_server_time(tmp_path: Path) -> None:
    before = descendants()
    script = [native_call("get_current_time", {"timezone": "Asia/Tokyo"}), "It is evening."]
    with StubServer(script).run_in_thread() as stub:
        out = cli("run", "What time is it in Tokyo?", "--mcp", TIME, "--base-url",
                  stub.base_url, "--mode", "native", "--json", store=tmp_path / "s.db")
        requests = list(stub.requests)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["final_answer"] == "It is evening."
    offered = [t["function"]["name"] for t in requests[0]["tools"]]
    assert offered == ["get_current_time", "convert_time"]
    observation = json.loads(tool_messages(requests[1])[0])  # what the model was sent
    assert observation["timezone"] == "Asia/Tokyo" and observation["datetime"].endswith("+09:00")
    assert not wait_gone(descendants() - before)


def test_tools_prints_what_a_server_offers(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "miniagent", "tools", "--mcp", TIME],
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(Path(miniagent.__file__).parents[1])})
    assert out.returncode == 0, out.stderr
    names = [t["function"]["name"] for t in json.loads(out.stdout)]
    assert names == ["get_current_time", "convert_time"]


def test_a_bad_mcp_command_is_one_clear_line(tmp_path: Path) -> None:
    out = cli("run", "hi", "--mcp", "/nonexistent/server --flag", "--base-url",
              "http://127.0.0.1:9/v1", store=tmp_path / "s.db")
    assert out.returncode != 0
    assert "cannot list the tools of MCP server /nonexistent/server --flag" in out.stderr
    assert "Traceback" not in out.stderr


def test_tokens_are_used_but_never_saved_or_shown(tmp_path: Path, served_http: str) -> None:
    store = tmp_path / "sessions.db"
    script = [native_call("key", {}), "The key is known."]
    with StubServer(script).run_in_thread() as stub:
        first = cli("run", "Which key?", "--mcp-url", served_http, "--mcp-header",
                    f"Authorization: Bearer {TOKEN}", "--mcp-approve", "key", "--detach",
                    "--base-url", stub.base_url, "--mode", "native", "-v", store=store)
        assert first.returncode == 3, first.stderr  # waiting for approval
        assert "sessions approve" in first.stdout
        session_id = json.loads(cli("sessions", "list", "--json", store=store).stdout)[0][
            "session_id"]
        approved = cli("sessions", "approve", session_id, store=store)
        assert approved.returncode == 0, approved.stderr
        # resuming without the token: the server refuses, the session is not lost
        refused = cli("sessions", "resume", session_id, "--detach", store=store)
        assert refused.returncode != 0 and "cannot list the tools" in refused.stderr
        resumed = cli("sessions", "resume", session_id, "--detach", "--mcp-header",
                      f"Authorization: Bearer {TOKEN}", "--json", store=store)
        requests = list(stub.requests)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["final_answer"] == "The key is known."
    # the served tool really ran, for this session's call (its key scoped to our connection)
    served, _client, sent = tool_messages(requests[-1])[0].split(":", 2)
    assert served.startswith("mcp-serve-") and sent.startswith(f"{session_id}:")
    shown = first.stdout + first.stderr + refused.stdout + refused.stderr + resumed.stdout + \
        resumed.stderr
    assert TOKEN not in shown
    saved = b"".join(p.read_bytes() for p in tmp_path.glob("sessions.db*"))
    assert TOKEN.encode() not in saved
    recorded = json.loads(cli("sessions", "show", session_id, "--json", store=store).stdout)
    assert served_http in json.dumps(recorded)  # the server is recorded, its token is not
