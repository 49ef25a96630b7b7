"""Fixtures for the model tests: stub servers on 127.0.0.1 and a port nobody listens on."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from miniagent.testing.stub_server import StubServer


@pytest.fixture
def stub() -> Iterator[Callable[..., StubServer]]:
    """Start stub servers (each in its own thread); all are stopped after the test."""
    with contextlib.ExitStack() as stack:

        def start(responses: Any = (), **options: Any) -> StubServer:
            return stack.enter_context(StubServer(responses, **options).run_in_thread())

        yield start


@pytest.fixture
def dead_port() -> int:
    """A loopback port with nothing listening: bound once, then released."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port
