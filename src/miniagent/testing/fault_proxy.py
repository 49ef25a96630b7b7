"""A fault proxy: an HTTP proxy on 127.0.0.1 in front of any OpenAI-compatible endpoint that
injects transport faults into a seeded share of the requests.

Kinds of fault (``kinds``):

- ``500``: an HTTP 500 answer with an error body;
- ``429``: an HTTP 429 answer with ``Retry-After: 0``;
- ``timeout``: no answer for ``hang`` seconds (set it above the client's timeout), then the
  connection is closed;
- ``drop``: the connection is closed as soon as the request has been read;
- ``truncate``: the request goes through, and the answer comes back cut short the way a
  server that ran out of tokens cuts it: half the assistant text (and half of each tool
  call's arguments), ``finish_reason: "length"``.

Whether the n-th request (counting from 0) meets a fault, and which, depends only on
``(seed, n)``. :attr:`FaultProxy.injected` counts the faults by kind, :attr:`forwarded` the
requests that reached the upstream::

    with FaultProxy("http://127.0.0.1:8000/v1", rate=0.2, seed=1).run_in_thread() as proxy:
        model = OpenAICompatibleModel(base_url=proxy.base_url, model="m", timeout=5)
        ...
        proxy.injected        # Counter({'500': 2, 'drop': 1})
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections import Counter
from collections.abc import Sequence
from http import HTTPStatus
from urllib.parse import urlsplit

from miniagent.core.errors import ModelError
from miniagent.core.models.http import HttpClient
from miniagent.testing.loopback import LoopbackServer, Request, read_request

__all__ = ["FAULT_KINDS", "FaultProxy"]

FAULT_KINDS = ("500", "429", "timeout", "drop", "truncate")
_PASSED_HEADERS = ("content-type", "authorization", "accept")


class FaultProxy(LoopbackServer):
    """Forwards requests to ``upstream`` (a base URL such as ``http://host:8000/v1``), injecting
    faults into a ``rate`` share of them.

    Args:
        upstream: The endpoint's base URL; the proxy keeps its path.
        rate: The share of requests that meet a fault, 0..1.
        kinds: Which faults to draw from (see the module docstring).
        seed: Makes the faults reproducible.
        hang: Seconds a ``timeout`` fault holds the connection before closing it.
        upstream_timeout: Seconds the proxy waits for the upstream's answer.
        host: Where to listen (keep it on loopback); ``port`` 0 picks a free port.
    """

    _thread_name = "miniagent-fault-proxy"

    def __init__(self, upstream: str, *, rate: float = 0.0, kinds: Sequence[str] = FAULT_KINDS,
                 seed: int = 0, hang: float = 30.0, upstream_timeout: float = 600.0,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"the upstream must be an http(s) URL, got {upstream!r}")
        unknown = [k for k in kinds if k not in FAULT_KINDS]
        if unknown or not kinds:
            raise ValueError(f"fault kinds must be among {', '.join(FAULT_KINDS)}, got "
                             f"{', '.join(kinds) or 'none'}")
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"the fault rate must be within 0..1, got {rate}")
        self.upstream_origin = f"{parts.scheme}://{parts.netloc}"
        self.path = parts.path.rstrip("/")
        self.rate, self.kinds, self.seed, self.hang = rate, tuple(kinds), seed, hang
        self.upstream_timeout = upstream_timeout
        self.injected: Counter[str] = Counter()
        self.forwarded = 0
        self.requests = 0
        self._client = HttpClient()
        super().__init__(host=host, port=port)

    @property
    def base_url(self) -> str:
        """The proxy's base URL (the upstream's path on the proxy's address)."""
        return f"http://{self.host}:{self.port}{self.path}"

    async def stop(self) -> None:
        """Stop listening, drop every open connection and the upstream's idle ones."""
        await super().stop()
        await self._client.aclose()

    def fault_for(self, n: int) -> str | None:
        """The fault the n-th request meets, or None."""
        draw = random.Random(f"{self.seed}|{n}")
        if draw.random() >= self.rate:
            return None
        return draw.choice(self.kinds)

    async def _converse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (request := await read_request(reader)) is not None:
            if not await self._answer(request, writer):
                break

    async def _answer(self, request: Request, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; whether the connection stays open."""
        n = self.requests
        self.requests += 1
        fault = self.fault_for(n)
        if fault is not None:
            self.injected[fault] += 1
        if fault == "drop":
            return False
        if fault == "timeout":
            await asyncio.sleep(self.hang)
            return False
        if fault in ("500", "429"):
            status = int(fault)
            error = {"error": {"message": f"injected fault {status}", "type": "injected_fault"}}
            headers = {"Retry-After": "0"} if status == 429 else {}
            await _write(writer, status, json.dumps(error).encode(), "application/json", headers)
            return True
        status, content_type, body = await self._forward(request)
        if fault == "truncate" and status == 200:
            body = _truncated(body)
        await _write(writer, status, body, content_type)
        return True

    async def _forward(self, request: Request) -> tuple[int, str, bytes]:
        headers = {k: v for k, v in request.headers.items() if k in _PASSED_HEADERS}
        try:
            response = await self._client.request(
                request.method, self.upstream_origin + request.path, request.body, headers,
                self.upstream_timeout)
        except ModelError as exc:
            body = {"error": {"message": f"fault proxy: upstream failed: {exc}",
                              "type": "upstream_error"}}
            return 502, "application/json", json.dumps(body).encode()
        self.forwarded += 1
        return (response.status, response.headers.get("content-type", "application/json"),
                response.body)


def _truncated(body: bytes) -> bytes:
    """A completion body cut short: half of each text and arguments, finish_reason length."""
    try:
        data = json.loads(body)
        choices = data["choices"]
    except (ValueError, KeyError, TypeError):
        return body[: len(body) // 2]
    for choice in choices if isinstance(choices, list) else []:
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            continue
        if isinstance(message.get("content"), str):
            message["content"] = message["content"][: len(message["content"]) // 2]
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                function["arguments"] = function["arguments"][: len(function["arguments"]) // 2]
        choice["finish_reason"] = "length"
    return json.dumps(data, ensure_ascii=False).encode()


async def _write(writer: asyncio.StreamWriter, status: int, body: bytes, content_type: str,
                 headers: dict[str, str] | None = None) -> None:
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "Unknown"
    lines = [f"HTTP/1.1 {status} {reason}", f"Content-Type: {content_type}",
             f"Content-Length: {len(body)}", "Connection: keep-alive"]
    lines.extend(f"{name}: {value}" for name, value in (headers or {}).items())
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
    with contextlib.suppress(ConnectionError):
        await writer.drain()
