"""The ``/metrics`` endpoint: a Prometheus registry in its text format over HTTP, and nothing else.

It is served from daemon threads (:func:`serve_metrics`) and answers:

- only ``GET`` (or ``HEAD``) of ``/metrics`` (a query string is ignored): 404 for any other
  path, 405 for another method on it;
- only a request whose ``Host`` names the server by an IP address (which no DNS rebinding
  produces), as ``localhost``, or by a name given in ``hosts``: 421 otherwise, so that a page on
  another site whose name was rebound to 127.0.0.1 reads nothing (tool and model names are
  label values);
- within :data:`REQUEST_SECONDS` per connection (reading the request and writing the answer),
  then the connection is closed; at most :data:`MAX_CONNECTIONS` at once, and one over them is
  closed at once: half-sent requests hold neither threads nor sockets for long.

Example:
    >>> with serve_metrics("127.0.0.1:0") as server:
    ...     server.url.endswith("/metrics")
    True
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from miniagent.core.errors import ConfigError
from miniagent.observe.metrics_prom import MISSING

__all__ = ["MAX_CONNECTIONS", "REQUEST_SECONDS", "MetricsAddress", "MetricsServer",
           "host_allowed", "parse_address", "serve_metrics"]

REQUEST_SECONDS = 10.0
"""How long one connection may take, its request read and its answer written; a scrape takes
milliseconds."""

MAX_CONNECTIONS = 100
"""Connections served at once; one more is closed as soon as it is accepted."""

PATH = "/metrics"

MetricsAddress = str | int | tuple[str, int]
"""Where to serve metrics: ``"HOST:PORT"``, a port (on 127.0.0.1), or ``(host, port)``."""


def parse_address(address: MetricsAddress) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9464`` for IPv6), a port number (served on 127.0.0.1) or a
    ``(host, port)`` pair, as a host and a port.

    Example:
        >>> parse_address("127.0.0.1:9464")
        ('127.0.0.1', 9464)
        >>> parse_address(9464)
        ('127.0.0.1', 9464)

    Raises:
        ConfigError: none of those, or a port outside 0 to 65535.
    """
    if isinstance(address, int) and not isinstance(address, bool):
        host, port = "127.0.0.1", str(address)
    elif (isinstance(address, tuple) and len(address) == 2 and isinstance(address[0], str)
          and isinstance(address[1], int) and not isinstance(address[1], bool)):
        host, port = address[0], str(address[1])
    elif isinstance(address, str):
        host, sep, port = address.rpartition(":")
        host = host.strip("[]") if sep else ""
    else:
        host, port = "", ""
    if not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"the metrics address must be HOST:PORT with a port from 0 to "
                          f"65535, e.g. 127.0.0.1:9464 (in Python also a port, or (host, "
                          f"port)), got {address!r}")
    return host, int(port)


def host_allowed(host_header: str | None, names: frozenset[str]) -> bool:
    """Whether a ``Host`` header names the server by an IP address, as ``localhost``, or by
    one of ``names`` (lower case); a request without one (HTTP/1.0) passes: a browser always
    sends one.

    Example:
        >>> [host_allowed(h, frozenset()) for h in ("127.0.0.1:9464", "[::1]:1", "evil.test:1")]
        [True, True, False]
    """
    if host_header is None:
        return True
    host = host_header.strip().lower()
    if host.startswith("["):
        host = host[1:].partition("]")[0]
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    if host in names or host == "localhost":
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class _Handler(BaseHTTPRequestHandler):
    """One connection: one request (HTTP/1.0, closed after its answer)."""

    server: _Server
    timeout = REQUEST_SECONDS  # each read; the whole connection is bounded in handle()

    def handle(self) -> None:
        timer = threading.Timer(REQUEST_SECONDS, self._cut)
        timer.daemon = True
        timer.start()
        try:
            super().handle()
        except OSError:
            pass  # cut, or the client went away: nothing to answer
        finally:
            timer.cancel()

    def _cut(self) -> None:
        """Close a connection past its time (a client sending its request a byte at a time)."""
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _answer(self, *, body: bool) -> None:
        if not host_allowed(self.headers.get("Host"), self.server.names):
            self._plain(421, "this server does not answer to that Host name", body)
        elif self.path.partition("?")[0] != PATH:
            self._plain(404, f"not found: metrics are at {PATH}", body)
        else:
            from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

            self._send(200, CONTENT_TYPE_LATEST, generate_latest(self.server.registry), body)

    def _not_allowed(self) -> None:
        self._plain(405, f"only GET {PATH}", True, allow="GET, HEAD")

    do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _not_allowed  # others: 501

    def _plain(self, status: int, text: str, body: bool, **headers: str) -> None:
        self._send(status, "text/plain; charset=utf-8", f"{text}\n".encode(), body, **headers)

    def _send(self, status: int, kind: str, data: bytes, body: bool, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name.title(), value)
        self.end_headers()
        if body:
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Requests are not logged (a scrape every few seconds)."""


class _Server(ThreadingHTTPServer):
    """A thread per connection, at most :data:`MAX_CONNECTIONS` of them."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], family: int, registry: Any,
                 names: frozenset[str]) -> None:
        self.address_family = family
        super().__init__(address, _Handler)
        self.registry, self.names = registry, names
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)  # too many at once: closed, not queued
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


@dataclass(kw_only=True)
class MetricsServer:
    """A running ``/metrics`` endpoint; :meth:`close` stops it."""

    host: str
    port: int
    server: Any
    thread: threading.Thread

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{PATH}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve_metrics(address: MetricsAddress, registry: Any = None, *,
                  hosts: Iterable[str] = ()) -> MetricsServer:
    """Serve ``registry`` (prometheus-client's default one when None) on
    ``http://HOST:PORT/metrics`` from daemon threads (see the module docstring).

    Args:
        address: Where to listen (:func:`parse_address`).
        registry: A ``prometheus_client.CollectorRegistry``.
        hosts: Host names requests may name besides IP addresses and ``localhost`` (the
            server's DNS name, when Prometheus scrapes it by name).

    Raises:
        ConfigError: ``address`` is not HOST:PORT, the port cannot be bound, or
            prometheus-client is not installed.
    """
    host, port = parse_address(address)
    try:
        import prometheus_client as prom
    except ImportError:
        raise ConfigError(MISSING) from None
    where = address if isinstance(address, str) else f"{host}:{port}"
    names = frozenset(name.strip().lower().strip("[]") for name in hosts if name.strip())
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        server = _Server((host, port), family, prom.REGISTRY if registry is None else registry,
                         names)
    except OSError as exc:
        raise ConfigError(f"cannot serve metrics on {where}: {exc.strerror or exc}") from None
    thread = threading.Thread(target=server.serve_forever, name="miniagent-metrics",
                              daemon=True)
    thread.start()
    return MetricsServer(host=host, port=server.server_address[1], server=server,
                         thread=thread)
