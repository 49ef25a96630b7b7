"""The HTTP client an MCP server is reached with: bounded answers, and statuses that say why.

The SDK's streamable-HTTP transport reads a JSON answer whole (``response.aread()``) and turns
any refusal (401, 403, 500...) into ``Server returned an error response``. The
:class:`BoundedTransport` under its ``httpx2`` client changes both:

- a JSON (or other non-stream) answer is cut off past :data:`MAX_RESPONSE_BYTES`, counted on
  the decoded bytes (a small gzip body cannot unpack into gigabytes); the SDK reports the
  :class:`ResponseTooLarge` as the failure of that one request. Event streams are left alone:
  the SDK bounds each event (we give it the same cap) and a call's timeout bounds the stream;
- a refusal whose body is not a JSON-RPC error (plain text, an OAuth error's JSON
  ``{"error": "invalid_token"}``, nothing) becomes one that names the status (``HTTP 401
  Unauthorized: check the token``) and what the server said; a JSON-RPC error is passed on as
  it is; 404 is left to the SDK, which reads it as an unknown method or an ended session.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import httpx2

from miniagent.core.models.http import DEFAULT_MAX_BODY_BYTES

__all__ = ["MAX_RESPONSE_BYTES", "BoundedTransport", "ResponseTooLarge", "http_client"]

MAX_RESPONSE_BYTES = DEFAULT_MAX_BODY_BYTES
"""The longest answer read from an MCP server (32 MiB, as for a model's answer)."""
_EXCERPT_BYTES = 300  # of a refusal's body, to show what the server said
_REFUSAL_BYTES = 64 << 10  # a refusal's body read at most, to find a JSON-RPC error in it
_HINTS = {401: "check the token", 403: "the token is not allowed here"}
_INTERNAL_ERROR = -32603  # the code the SDK gives a refusal too


class ResponseTooLarge(httpx2.StreamError):
    """An MCP server's answer is longer than the limit (the SDK fails that request with it:
    it reports a ``StreamError`` while reading a JSON answer as that request's error)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the MCP server's answer is over the {limit:,} byte limit "
                         f"(MAX_RESPONSE_BYTES, {limit >> 20} MiB)")


def http_client(headers: Mapping[str, str] | None, limit: int = MAX_RESPONSE_BYTES
                ) -> httpx2.AsyncClient:
    """An HTTP client for one MCP server, with the SDK's timeouts (30 s to connect and write,
    300 s to read: a stream may idle) and bounded answers."""
    return httpx2.AsyncClient(headers=dict(headers or {}),
                              timeout=httpx2.Timeout(30.0, read=300.0),
                              transport=BoundedTransport(httpx2.AsyncHTTPTransport(), limit))


class BoundedTransport(httpx2.AsyncBaseTransport):
    """``inner``, with answers bounded by ``limit`` bytes and refusals explained."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, limit: int) -> None:
        self._inner, self._limit = inner, limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        kind = response.headers.get("content-type", "").lower()
        if kind.startswith("text/event-stream"):
            return response
        if response.status_code >= 400 and response.status_code != 404:
            return await _refusal(response, request)
        return _BoundedResponse(self._limit, status_code=response.status_code,
                                headers=response.headers, stream=response.stream,
                                extensions=response.extensions, request=request)

    async def aclose(self) -> None:
        await self._inner.aclose()


class _BoundedResponse(httpx2.Response):
    """A response whose decoded body is cut off past ``limit`` bytes (``aread`` reads through
    ``aiter_bytes``, so every way of reading it is bounded)."""

    def __init__(self, limit: int, **options: Any) -> None:
        super().__init__(**options)
        self._limit = limit

    async def aiter_bytes(self, chunk_size: int | None = None) -> AsyncGenerator[bytes, None]:
        declared = self.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._limit and \
                not self.headers.get("content-encoding"):
            raise ResponseTooLarge(self._limit)  # refused before a byte is read
        total = 0
        async for chunk in super().aiter_bytes(chunk_size):
            total += len(chunk)
            if total > self._limit:
                raise ResponseTooLarge(self._limit)
            yield chunk


async def _refusal(response: httpx2.Response, request: httpx2.Request) -> httpx2.Response:
    """The refusal as a JSON-RPC error (the SDK shows one as the request's error): the
    server's own when its body is one, else one naming the status and the start of what the
    server said."""
    body = await _start_of(response)
    if _is_rpc_error(body):
        content = body
    else:
        said = " ".join(body[:_EXCERPT_BYTES].decode("utf-8", "replace").split())
        status = f"HTTP {response.status_code} {response.reason_phrase}".strip()
        hint = _HINTS.get(response.status_code)
        message = status + (f": {hint}" if hint else "") + (f" (the server says: {said})"
                                                             if said else "")
        content = json.dumps({"jsonrpc": "2.0", "id": None, "error": {
            "code": _INTERNAL_ERROR, "message": message}}, ensure_ascii=False).encode()
    return httpx2.Response(response.status_code, headers={"content-type": "application/json"},
                           content=content, extensions=response.extensions, request=request)


async def _start_of(response: httpx2.Response) -> bytes:
    """About the first :data:`_REFUSAL_BYTES` of a text or JSON body that is not compressed
    (a compressed one is not unpacked); the rest is not read."""
    kind = response.headers.get("content-type", "").lower()
    kept = b""
    try:
        if (kind.startswith("text/") or "json" in kind) and \
                not response.headers.get("content-encoding"):
            async for chunk in response.stream:  # type: ignore[union-attr]
                kept += chunk
                if len(kept) > _REFUSAL_BYTES:
                    break  # cut: no longer JSON, its start is shown
    except httpx2.HTTPError:
        pass  # the refusal is told with what arrived
    finally:
        await response.aclose()
    return kept


def _is_rpc_error(body: bytes) -> bool:
    """Whether ``body`` is a JSON-RPC error, which the SDK shows with its own message."""
    try:
        value = json.loads(body)
    except ValueError:
        return False
    if not isinstance(value, dict) or value.get("jsonrpc") != "2.0":
        return False
    error = value.get("error")
    return (isinstance(error, dict) and isinstance(error.get("message"), str)
            and isinstance(error.get("code"), int))
