"""Clients that send a request's first lines and never end its head (slowloris), to check that
a server closes them in time and serves others meanwhile.

Example:
    >>> from miniagent.observe.metrics_http import serve_metrics
    >>> with serve_metrics("127.0.0.1:0") as server:
    ...     with stalled_requests(server.port, 2) as sockets:
    ...         len(sockets)
    2
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

__all__ = ["closed_by_server", "stalled_requests"]


@contextmanager
def stalled_requests(port: int, count: int, *, path: str = "/", host: str = "127.0.0.1",
                     wait: float = 60.0) -> Iterator[list[socket.socket]]:
    """``count`` connections to ``host:port``, each with a request head begun and never ended
    (their reads time out after ``wait`` seconds); closed on exit."""
    with ExitStack() as stack:
        sockets = []
        for _ in range(count):
            sock = stack.enter_context(socket.create_connection((host, port), timeout=wait))
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nX-Slow: ".encode())
            sockets.append(sock)
        yield sockets


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closes ``sock`` (without an answer's first byte, or after one)
    before the socket's read timeout."""
    try:
        while sock.recv(4096):
            pass  # an answer (a 408, or a cut one) before the close: read on to the end
        return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
