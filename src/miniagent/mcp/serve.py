"""Our tools served over MCP: ``miniagent mcp-serve --tools FILE``.

A :class:`~miniagent.core.tools.toolbox.ToolRegistry` becomes a low-level MCP ``Server`` of the
official SDK: ``tools/list`` gives each tool's JSON Schema, ``tools/call`` runs it through a
:class:`~miniagent.core.tools.toolbox.Toolbox` over it, so MCP clients get the same argument
validation, coercion, timeouts and error messages as our own agents (an error observation is an
``is_error`` result). A tool without a description (no docstring) is described by its name,
since some clients require one. Tools that require approval are not served: an MCP client has
no way to ask our person, and such a tool never runs unapproved.

Over streamable HTTP (:func:`serve_http`), an optional bearer token is required on every
request, compared in constant time, and DNS-rebinding protection always checks the ``Host`` and
``Origin`` headers (loopback names, the bound address, and the names given with
``--allow-host``). At most :data:`MAX_CALLS` calls run at once and :data:`MAX_SESSIONS` sessions
are kept, :data:`MAX_SESSIONS_PER_CLIENT` of them for one client (one remote address: past
them, its least recently used idle session is ended); a client's idempotency key is scoped to
that client's connection.
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import uuid
import weakref
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

from miniagent._internal.version import installed_version
from miniagent.core.tools.tool import Tool
from miniagent.core.tools.toolbox import Toolbox, ToolRegistry
from miniagent.core.types import ToolCall, ToolContext
from miniagent.mcp.client import IDEMPOTENCY_META
from miniagent.mcp.connection import sdk

__all__ = ["build_server", "serve_http", "serve_stdio", "served_tools"]

ASGIApp = Callable[[MutableMapping[str, Any], Any, Any], Awaitable[None]]


def served_tools(registry: ToolRegistry) -> tuple[list[Tool], list[str]]:
    """The tools that can be served, and the names of those left out (they need approval)."""
    served, left_out = [], []
    for item in (registry.get(name) for name in registry.names):
        if item is None:
            continue
        if item.requires_approval is not False:
            left_out.append(item.name)
        else:
            served.append(item)
    return served, left_out


def build_server(registry: ToolRegistry, *, name: str = "miniagent") -> Any:
    """A low-level MCP server offering ``registry``'s tools that need no approval."""
    sdk()
    import mcp_types as types
    from mcp.server.lowlevel import Server

    tools, _ = served_tools(registry)
    functions = ToolRegistry(tools, default_timeout=registry.default_timeout)
    run_tools = Toolbox((item, functions) for item in tools)
    listing = types.ListToolsResult(tools=[_describe(types, item) for item in tools])
    session = f"mcp-serve-{uuid.uuid4().hex[:12]}"
    numbers = itertools.count(1)
    running = asyncio.Semaphore(MAX_CALLS)  # so many worker threads at most, whoever calls
    clients: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()

    async def on_list_tools(ctx: Any, params: Any) -> Any:
        return listing

    async def on_call_tool(ctx: Any, params: Any) -> Any:
        number = next(numbers)
        call = ToolCall(id=f"call-{number}", name=params.name,
                        arguments=dict(params.arguments or {}))
        client = _client_of(clients, ctx)
        key = _client_key(params)  # a client's own key: another client cannot share it
        context = ToolContext(session_id=session, call_id=call.id, tool=call.name, step=number,
                              idempotency_key=f"{session}:{client}:{key}" if key
                              else f"{session}:{call.id}")
        async with running:
            observation = await run_tools.execute(call, context)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=observation.output)],
            is_error=observation.is_error)

    return Server(name, version=installed_version(), on_list_tools=on_list_tools,
                  on_call_tool=on_call_tool)



MAX_CALLS = 16
"""Tool calls run at the same time, over every client (each sync one takes a thread)."""


def _client_of(clients: weakref.WeakKeyDictionary[Any, str], ctx: Any) -> str:
    """A name for the client connection of a request (its MCP session), made on first use."""
    connection = getattr(ctx, "session", None)
    if connection is None:
        return "client"
    try:
        return clients.setdefault(connection, uuid.uuid4().hex[:12])
    except TypeError:  # not weakly referable: keyed by identity while it lives
        return f"c{id(connection):x}"


def _describe(types: Any, item: Tool) -> Any:
    hints = types.ToolAnnotations(idempotent_hint=True) if item.idempotent else None
    return types.Tool(name=item.name, description=item.description or _from_name(item.name),
                      input_schema=item.parameters, annotations=hints)


def _from_name(name: str) -> str:
    """A description for a tool that has none (no docstring), which some clients require:
    its name as words (``get_weather``: ``Get weather.``)."""
    words = " ".join(name.replace("-", " ").replace("_", " ").split()) or name
    return f"{words[:1].upper()}{words[1:]}."


def _client_key(params: Any) -> str | None:
    """An idempotency key the client sent in the request's ``_meta`` (ours do)."""
    meta = getattr(params, "meta", None)
    if meta is None:
        return None
    values = meta if isinstance(meta, dict) else meta.model_dump(by_alias=True)
    key = values.get(IDEMPOTENCY_META)
    return key if isinstance(key, str) and key else None


async def serve_stdio(server: Any) -> None:
    """Serve one client over our stdin and stdout until it closes them."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


LOOPBACK = ("127.0.0.1", "localhost", "::1")
MAX_SESSIONS = 64
"""MCP sessions one server keeps at a time (the SDK's default is 10,000); past them, 503."""
MAX_SESSIONS_PER_CLIENT = 16
"""MCP sessions one client (one remote address) may hold at a time; one more ends its least
recently used idle session (429 only when every one has a request in flight). Clients behind
one proxy, or every client on this machine, share an address, hence a quarter."""
SESSION_IDLE_TIMEOUT = 30 * 60.0
"""Seconds a session may go without a request in flight before it is closed."""


def is_loopback(host: str) -> bool:
    return host in LOOPBACK or host.startswith("127.")


def transport_security(host: str, allowed: Sequence[str] = ()) -> Any:
    """DNS-rebinding protection, whatever the address: only these ``Host`` headers (loopback
    names, the bound address unless it is a wildcard, and ``allowed``) and the same origins get
    in, so a web page that made a name resolve here cannot reach the tools."""
    from mcp.server.transport_security import TransportSecuritySettings

    names = ["127.0.0.1", "localhost", "[::1]", *allowed]
    if host not in ("0.0.0.0", "::", "") and host not in ("127.0.0.1", "localhost", "::1"):
        names.append(f"[{host}]" if ":" in host else host)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*names, *(f"{name}:*" for name in names)],
        allowed_origins=[f"{scheme}://{name}:*" for name in names
                         for scheme in ("http", "https")])


def http_app(server: Any, *, host: str, token: str | None = None,
             allowed_hosts: Sequence[str] = (),
             sessions_per_client: int = MAX_SESSIONS_PER_CLIENT) -> ASGIApp:
    """The streamable HTTP app at ``/mcp``; with ``token``, only bearers of it get in (and
    only they are counted against their address's sessions)."""
    from miniagent.mcp.session_quota import SessionsPerClient

    app: ASGIApp = SessionsPerClient(server.streamable_http_app(
        host=host, transport_security=transport_security(host, allowed_hosts),
        max_sessions=MAX_SESSIONS, session_idle_timeout=SESSION_IDLE_TIMEOUT),
        limit=sessions_per_client, idle_timeout=SESSION_IDLE_TIMEOUT)
    return app if token is None else _require_bearer(app, token)


async def serve_http(server: Any, *, host: str, port: int, token: str | None = None,
                     allowed_hosts: Sequence[str] = (),
                     on_ready: Callable[[int], None] | None = None) -> None:
    """Serve streamable HTTP on ``host:port`` (port 0: one the OS picks, told to ``on_ready``)."""
    import uvicorn

    from miniagent._internal.web_limits import uvicorn_options

    app = http_app(server, host=host, token=token, allowed_hosts=allowed_hosts)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on",
                            **uvicorn_options())  # slow clients are cut
    web = uvicorn.Server(config)

    async def announce() -> None:
        while not web.started:  # ends with the server: this task is cancelled below
            await asyncio.sleep(0.05)
        if on_ready is not None:
            sockets = [s for srv in web.servers for s in srv.sockets]
            on_ready(sockets[0].getsockname()[1] if sockets else port)

    watcher = asyncio.create_task(announce())
    try:
        await web.serve()
    finally:
        watcher.cancel()


def _require_bearer(app: ASGIApp, token: str) -> ASGIApp:
    expected = f"Bearer {token}".encode()

    async def guarded(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, expected):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain"),
                                        (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": b"missing or wrong token\n"})
                return
        await app(scope, receive, send)

    return guarded
