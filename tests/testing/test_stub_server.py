"""The stub server stops quietly, even with requests in flight."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import miniagent
from miniagent.testing.stub_server import StubServer


def start_request(port: int) -> socket.socket:
    """A chat completion request sent, its answer not awaited (the stub is slow)."""
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                 b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    return sock


def wait_for_request(stub: StubServer) -> None:
    import time

    deadline = time.monotonic() + 10
    while not stub.requests:
        assert time.monotonic() < deadline, "the stub never received the request"
        time.sleep(0.01)


def test_stopping_in_a_thread_with_a_request_in_flight_is_quiet(
        capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with StubServer(["late"], latency=60).run_in_thread() as stub:
        sock = start_request(stub.port)
        wait_for_request(stub)
    sock.close()
    assert capfd.readouterr().err == ""
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_stopping_in_the_running_loop_with_a_request_in_flight_is_quiet(
        capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with StubServer(["late"], latency=60) as stub:
        reader, writer = await asyncio.open_connection("127.0.0.1", stub.port)
        body = b'{"model": "m", "messages": []}'
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        while not stub.requests:
            await asyncio.sleep(0.01)
    assert await reader.read() == b""  # the connection was dropped
    writer.close()
    await asyncio.sleep(0)  # let the loop run the callbacks the shutdown scheduled
    assert capfd.readouterr().err == ""
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_the_standalone_server_stops_quietly_on_ctrl_c() -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(miniagent.__file__).parents[1])}
    process = subprocess.Popen(
        [sys.executable, "-m", "miniagent.testing.stub_server", "--latency", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        port = int(base_url.rsplit(":", 1)[1].split("/")[0])
        sock = start_request(port)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as probe:
            probe.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
            assert probe.recv(100).startswith(b"HTTP/1.1 200")  # serving (and got the POST)
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=30)
        sock.close()
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0
    assert err == ""
