"""Fixtures for the MCP tests: real servers on this machine, started and stopped here.

- ``mcp-server-time`` (PyPI) and our lab server (``mcp_lab_server.py``) over stdio;
- ``@modelcontextprotocol/server-everything`` (npm), installed by
  ``scripts/deps/mcp-everything.sh`` into ``.deps/mcp-everything`` (or the folder in
  ``MINIAGENT_MCP_EVERYTHING_DIR``), over stdio and over streamable HTTP on a free port of
  127.0.0.1 (a preload makes its ``listen(PORT)`` bind to loopback only);
- :func:`descendants`, to check that no server process outlives its test.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

import miniagent

ROOT = Path(__file__).resolve().parents[2]
LAB_SERVER = Path(__file__).with_name("mcp_lab_server.py")
LOOPBACK = Path(__file__).with_name("mcp_loopback.mjs")
TIME_ARGS = ["-m", "mcp_server_time"]


def everything_dir() -> Path:
    folder = os.environ.get("MINIAGENT_MCP_EVERYTHING_DIR")
    return Path(folder) if folder else ROOT / ".deps" / "mcp-everything"


def everything_entry() -> Path:
    """The server's ``dist/index.js``; the tests skip when it is not installed."""
    entry = (everything_dir() / "node_modules" / "@modelcontextprotocol" / "server-everything"
             / "dist" / "index.js")
    if not entry.is_file():
        pytest.skip("server-everything is not installed: run scripts/deps/mcp-everything.sh")
    return entry


def node() -> str:
    for name in ("node", "nodejs"):
        for folder in os.environ.get("PATH", "").split(os.pathsep):
            candidate = Path(folder) / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    pytest.skip("node is not installed: run scripts/deps/mcp-everything.sh")


def descendants() -> set[int]:
    """Process ids of every living (not zombie) process started by this one."""
    alive = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                alive.add(child.pid)
        except psutil.NoSuchProcess:
            continue
    return alive


def wait_gone(pids: set[int], timeout: float = 10.0) -> set[int]:
    """The processes of ``pids`` still alive after waiting up to ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    left = set(pids)
    while left and time.monotonic() < deadline:
        left &= descendants()
        if left:
            time.sleep(0.05)
    return left


@pytest.fixture
def no_orphans() -> Iterator[None]:
    """Fails the test if it leaves a process of its own running."""
    before = descendants()
    yield
    left = wait_gone(descendants() - before)
    assert not left, f"processes left running: {left}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@pytest.fixture
def everything_url() -> Iterator[str]:
    """server-everything over streamable HTTP on a free loopback port; stopped afterwards."""
    entry = everything_entry()
    port = free_port()
    process = subprocess.Popen(
        [node(), "--import", LOOPBACK.as_uri(), str(entry), "streamableHttp"],
        env={**os.environ, "PORT": str(port)}, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(process)


def python() -> str:
    return sys.executable


SRC = str(Path(miniagent.__file__).parents[1])
TOOLS = '''
from miniagent import tool, tool_context


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def greet(name: str) -> str:
    """Greet someone by name."""
    return f"你好, {name}!"


@tool
def key() -> str:
    """The idempotency key of this call."""
    return tool_context().idempotency_key


@tool(requires_approval=True)
def wipe(path: str) -> str:
    """Delete a file (needs a person's approval)."""
    raise AssertionError("never served")
'''


@pytest.fixture
def tools_file(tmp_path: Path) -> Path:
    path = tmp_path / "served_tools.py"
    path.write_text(TOOLS, encoding="utf-8")
    return path


def env() -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]),
            "SERVE_TOKEN": "tok-3f9a-secret"}



@pytest.fixture
def served_http(tools_file: Path) -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "miniagent", "mcp-serve", "--tools", str(tools_file),
         "--http", "127.0.0.1:0", "--token-env", "SERVE_TOKEN"],
        env={**os.environ, **env()}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True)
    try:
        assert process.stderr is not None
        deadline = time.monotonic() + 30
        lines: list[str] = []
        match = None
        while match is None and time.monotonic() < deadline:  # bounded by the deadline
            lines.append(process.stderr.readline())
            if not lines[-1] and process.poll() is not None:
                break
            match = re.search(r"serving 3 tools at (http://127\.0\.0\.1:\d+/mcp)", lines[-1])
        assert match, f"mcp-serve did not start: {lines!r}"
        assert "not serving wipe (approval required)" in lines[0]
        yield match.group(1)
    finally:
        stop(process)  # type: ignore[arg-type]



