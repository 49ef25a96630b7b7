"""An MCP server as a tool source: :class:`MCPServer`.

``MCPServer.stdio("python", args=["-m", "mcp_server_time"])`` or ``MCPServer.http(url)`` is a
:class:`~miniagent.core.tools.toolbox.ToolSource`: pass it among an agent's tools. Its tools are
plain :class:`~miniagent.core.tools.tool.Tool` objects built with ``Tool.from_schema``, so the
registry validates arguments against the server's schema and applies approval rules, timeouts
and idempotency to them like to any tool, in whichever driver runs them.

- The server starts (or is reached) on first use, or at :meth:`warmup` (``Agent.start()``,
  ``async with agent:``), and stops on :meth:`aclose` (an agent closes its sources when a
  synchronous run ends; call ``await agent.aclose()`` after ``arun``).
- Tools are listed once and cached; the list is fetched again after the server says it changed
  (``notifications/tools/list_changed``), on the next listing (the next run).
- Every failure is an error observation the model can act on: an ``is_error`` result, a
  protocol error, a connect or call timeout, a server that died. A dead server is started
  again on the next call; an idempotent call that met a dead server is sent once more.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from typing import IO, Any

from miniagent._internal.wording import describe
from miniagent.core.errors import ToolDefinitionError, ToolError
from miniagent.core.retry import RetryPolicy
from miniagent.core.tools.tool import ApprovalRule, Tool
from miniagent.core.tools.wrappers import (
    ToolRule,
    exposed_name,
    first_rule,
    is_offered,
    name_digest,
)
from miniagent.core.types import Observation, SlotKey, ToolCall, ToolContext, current_context
from miniagent.mcp.config import ServerConfig
from miniagent.mcp.connection import Connection, ServerError
from miniagent.mcp.results import result_text

__all__ = ["MCPServer", "ToolRule"]

log = logging.getLogger("miniagent.mcp")

_CONNECTION_CLOSED = -32000
_MAX_PAGES = 100  # a server whose listing never ends cannot hang a run
MAX_TOOLS = 512
"""Tools taken from one server's listing (a model picks badly among more anyway)."""
MAX_LISTING_BYTES = 8 * 1024 * 1024
"""Schema bytes taken from one server's listing; past them its other tools are left out."""
IDEMPOTENCY_META = "io.github.miniagent/idempotency-key"


class MCPServer:
    """The tools of one MCP server. Build it with :meth:`stdio` or :meth:`http`.

    Example:
        >>> server = MCPServer.stdio("python", args=["-m", "mcp_server_time"], prefix="time",
        ...                          rules={"convert_*": ToolRule(requires_approval=True)})
        >>> server.record()["command"], server.record()["prefix"]
        ('python', 'time')
    """

    def __init__(self, config: ServerConfig, *, rules: Mapping[str, ToolRule] | None = None,
                 requires_approval: ApprovalRule = False,
                 errlog: IO[str] | int | None = None) -> None:
        self.config = config
        self.rules = dict(rules or {})
        self.requires_approval = requires_approval
        self.errlog = errlog
        self._connection: Connection | None = None
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None
        self._tools: list[Tool] | None = None
        self._server_names: dict[str, str] = {}
        self._idempotent: dict[str, bool] = {}
        self._timeouts: dict[str, float] = {}
        self._slot_keys: dict[str, SlotKey] = {}  # kept when the tools are listed again
        self._stale = False

    @classmethod
    def stdio(cls, command: str, *, args: Sequence[str] = (), env: Mapping[str, str] | None = None,
              cwd: str | None = None, name: str | None = None, prefix: str | None = None,
              allow: Sequence[str] | None = None, deny: Sequence[str] = (),
              connect_timeout: float = 30.0, call_timeout: float = 60.0,
              rules: Mapping[str, ToolRule] | None = None,
              requires_approval: ApprovalRule = False,
              errlog: IO[str] | int | None = None) -> MCPServer:
        """A server started as ``command args`` and spoken to over its stdin and stdout.

        Args:
            command: the executable; ``args`` its arguments.
            env: extra environment variables for it (never recorded, only their names).
            cwd: its working directory.
            name: a label for messages; default: the command line.
            prefix: put before each tool name (``prefix_tool``), to keep servers apart.
            allow: only tools matching one of these ``fnmatch`` patterns (server names).
            deny: never tools matching one of these patterns.
            connect_timeout: seconds to start the server and shake hands.
            call_timeout: seconds one call may take (a rule can set another per tool).
            rules: per-tool options by name or pattern; the first match applies.
            requires_approval: the default for tools no rule covers.
            errlog: where the server's stderr goes (a file, or ``subprocess.DEVNULL``);
                default: ours.
        """
        return cls(ServerConfig(transport="stdio", command=command, args=tuple(args), env=env,
                                cwd=cwd, name=name, prefix=prefix, allow=_tuple(allow),
                                deny=tuple(deny), connect_timeout=connect_timeout,
                                call_timeout=call_timeout),
                   rules=rules, requires_approval=requires_approval, errlog=errlog)

    @classmethod
    def http(cls, url: str, *, headers: Mapping[str, str] | None = None,
             name: str | None = None, prefix: str | None = None,
             allow: Sequence[str] | None = None, deny: Sequence[str] = (),
             connect_timeout: float = 30.0, call_timeout: float = 60.0,
             rules: Mapping[str, ToolRule] | None = None,
             requires_approval: ApprovalRule = False) -> MCPServer:
        """A server reached over streamable HTTP at ``url``.

        ``headers`` (``{"Authorization": "Bearer ..."}``) go with every request; they are never
        logged, shown or recorded. The other arguments are those of :meth:`stdio`.
        """
        return cls(ServerConfig(transport="http", url=url, headers=headers, name=name,
                                prefix=prefix, allow=_tuple(allow), deny=tuple(deny),
                                connect_timeout=connect_timeout, call_timeout=call_timeout),
                   rules=rules, requires_approval=requires_approval)

    def __repr__(self) -> str:
        return f"MCPServer({self.config.label!r})"

    def record(self) -> dict[str, Any]:
        """The configuration without secrets, for a session to keep (see ``ServerConfig``).

        An agent keeps its servers' records in a new session's ``metadata["tool_sources"]``.
        """
        return self.config.record()

    @classmethod
    def from_record(cls, record: Mapping[str, Any], *, headers: Mapping[str, str] | None = None,
                    env: Mapping[str, str] | None = None,
                    rules: Mapping[str, ToolRule] | None = None,
                    requires_approval: ApprovalRule = False,
                    errlog: IO[str] | int | None = None) -> MCPServer:
        """The server of a :meth:`record`; give its secrets (headers, environment) again.

        Rules are code (they may hold predicates), so they are given again too.
        """
        return cls(ServerConfig.from_record(record, headers=headers, env=env), rules=rules,
                   requires_approval=requires_approval, errlog=errlog)

    # -- ToolSource -------------------------------------------------------------------------

    async def list_tools(self) -> Sequence[Tool]:
        """The server's tools, filtered and named; cached until the server says they changed.

        Raises:
            ToolDefinitionError: the server cannot be reached or its listing fails (a run
                cannot start without knowing its tools).
        """
        if self._tools is not None and not self._stale:
            return list(self._tools)
        try:
            listed = await self._list_all()
        except Exception as exc:
            raise ToolDefinitionError(
                f"cannot list the tools of MCP server {self.config.label}: {_why(exc)}") from None
        self._stale = False
        # checking thousands of schemas takes time: off the event loop, whose other sessions,
        # heartbeats and clients must not wait for it
        self._tools = await asyncio.to_thread(self._build_tools, listed)
        return list(self._tools)

    async def call_tool(self, call: ToolCall, context: ToolContext | None = None
                        ) -> Observation:
        """Run one validated call of a listed tool; failures are error observations."""
        server_name = self._server_names.get(call.name)
        if server_name is None:
            return Observation(call_id=call.id, tool_name=call.name, is_error=True,
                               output=f"Unknown tool {call.name!r} on MCP server "
                                      f"{self.config.label}.")
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        try:
            output = await self._invoke(server_name, arguments, self._timeouts.get(server_name))
        except ToolError as exc:  # retryable: the server could not be reached, or (idempotent
            # tools) it did not answer or closed the connection
            return Observation(call_id=call.id, tool_name=call.name, output=str(exc),
                               is_error=True, retryable=exc.retryable)
        return Observation(call_id=call.id, tool_name=call.name, output=output)

    async def warmup(self) -> None:
        """Start (or reach) the server and list its tools now, so that the first call pays no
        connection (``Agent.start()`` calls it; see :mod:`miniagent.core.tools.warmup`).

        A stdio server whose process has ended since the last warm-up is started again.

        Raises:
            ToolError: the server cannot be started or reached in ``connect_timeout``.
            ToolDefinitionError: its listing fails.
        """
        connection = self._connection
        if connection is not None and connection.exited:  # it died since: start it again
            await self._drop(connection.client)
        await self._client_or_error()
        await self.list_tools()

    def is_warm(self) -> bool:
        """Whether :meth:`warmup` would find nothing to do: connected on the running event
        loop to a server still running (as far as its output tells), its tools listed. The
        warm-up record asks, so a server that died since is started again at the next start."""
        connection = self._connection
        try:
            loop = _running_loop()
        except RuntimeError:  # no event loop runs here: no connection can serve it
            return False
        return (connection is not None and connection.alive and not connection.exited
                and connection.loop is loop and self._tools is not None and not self._stale)

    async def aclose(self) -> None:
        """Stop the server (or leave it); the next use starts it again."""
        connection, self._connection = self._connection, None
        if connection is not None and connection.loop is _running_loop():
            await connection.close()

    # -- listing ----------------------------------------------------------------------------

    async def _list_all(self) -> list[Any]:
        client = await self._client()
        tools: list[Any] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await asyncio.wait_for(client.list_tools(cursor=cursor, cache_mode="refresh"),
                                          self.config.call_timeout)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    def _build_tools(self, listed: list[Any]) -> list[Tool]:
        self._server_names, self._idempotent, self._timeouts = {}, {}, {}
        built: list[Tool] = []
        schema_bytes = 0
        for item in listed:
            if not is_offered(item.name, self.config.allow, self.config.deny):
                continue
            if len(built) >= MAX_TOOLS or schema_bytes > MAX_LISTING_BYTES:
                log.warning("MCP server %s lists more than %d tools or %d bytes of schemas: "
                            "the rest are left out", self.config.label, MAX_TOOLS,
                            MAX_LISTING_BYTES)
                break
            schema_bytes += _schema_bytes(item)
            name = exposed_name(item.name, self.config.prefix)
            if name in self._server_names:  # two server names cleaned to the same one
                name = f"{name[:55]}_{name_digest(item.name)}"
            try:
                built.append(self._tool(name, item))
            except ToolDefinitionError as exc:
                log.warning("MCP server %s: tool %r left out: %s", self.config.label,
                            item.name, exc)
                continue
            self._server_names[name] = item.name
        return built

    def _tool(self, name: str, item: Any) -> Tool:
        rule = first_rule(item.name, self.rules)
        hints = getattr(item, "annotations", None)
        idempotent = rule.idempotent if rule.idempotent is not None else bool(
            hints and (hints.read_only_hint or hints.idempotent_hint))
        timeout = rule.timeout or self.config.call_timeout
        retry = rule.retry if isinstance(rule.retry, RetryPolicy) else None
        approval = (rule.requires_approval if rule.requires_approval is not None
                    else self.requires_approval)
        server_name = item.name
        self._idempotent[server_name] = idempotent
        self._timeouts[server_name] = timeout

        async def run(arguments: dict[str, Any]) -> str:
            return await self._invoke(server_name, arguments, timeout)

        built = Tool.from_schema(
            name=name, description=item.description or item.title or f"MCP tool {item.name}",
            parameters=dict(item.input_schema or {"type": "object"}), fn=run,
            # the registry's limit backs ours up: connecting may come first
            timeout=timeout + self.config.connect_timeout + 5.0,
            idempotent=idempotent, requires_approval=approval, retry=retry,
            max_concurrency=rule.max_concurrency)
        # calls in flight before a reconnection count against the same limit as those after
        built.slot_key = self._slot_keys.setdefault(server_name, built.slot_key)
        return built

    # -- calling ----------------------------------------------------------------------------

    async def _invoke(self, server_name: str, arguments: dict[str, Any],
                      timeout: float | None = None) -> str:
        """The result's text; raises :class:`ToolError` with what the model should read.

        Sent once: trying again is the executor's, under the tool's retry policy (a lost
        connection or a timeout is ``retryable`` for an idempotent tool), so the server
        receives as many attempts as the observation records."""
        limit = timeout or self.config.call_timeout
        idempotent = self._idempotent.get(server_name, False)
        client = await self._client_or_error()
        try:
            result = await asyncio.wait_for(
                client.call_tool(server_name, arguments, read_timeout_seconds=limit,
                                 meta=_meta()), limit)
        except asyncio.TimeoutError:
            trouble = self._trouble(client)
            raise ToolError(f"MCP tool {server_name!r} did not answer within {limit:g} s "
                            f"(call timeout){f'; {trouble}' if trouble else ''}.",
                            retryable=idempotent) from None
        except Exception as exc:
            if not _connection_lost(exc):
                raise ToolError(f"MCP tool {server_name!r} failed: {_why(exc)}") from None
            trouble = await self._exit_trouble(client)
            await self._drop(client)
            raise ToolError(
                f"MCP server {self.config.label} closed the connection during "
                f"{server_name!r} ({trouble or 'it may have exited'}); the call's outcome "
                "is unknown. The server is started again on the next call.",
                retryable=idempotent) from None
        text = result_text(result)
        if getattr(result, "is_error", False):
            raise ToolError(f"MCP tool {server_name!r} returned an error: {text}")
        return text

    async def _client_or_error(self) -> Any:
        try:
            return await self._client()
        except asyncio.TimeoutError:  # no call was sent: trying again cannot repeat an effect
            raise ToolError(f"MCP server {self.config.label} did not start within "
                            f"{self.config.connect_timeout:g} s (connect timeout).",
                            retryable=True) from None
        except Exception as exc:
            raise ToolError(f"cannot reach MCP server {self.config.label}: {_why(exc)}",
                            retryable=True) from None

    async def _client(self) -> Any:
        """The open client, connecting (once, whatever the number of callers) when needed."""
        loop = _running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        async with self._lock:
            connection = self._connection
            if connection is not None and connection.loop is loop and connection.alive:
                return connection.client
            self._connection = None  # dead, or left behind by an event loop that ended
            connection = Connection(self.config, self._tools_changed, self.errlog)
            client = await connection.open()
            self._connection = connection
            return client

    def _trouble(self, client: Any) -> str | None:
        """What the server's output tells about a failure of ``client``'s connection."""
        connection = self._connection
        if connection is None or connection.client is not client:
            return None
        return connection.trouble()

    async def _exit_trouble(self, client: Any) -> str | None:
        """:meth:`_trouble` once a server that closed the connection had a moment to end its
        stderr too (it goes on after its stdout, if it exited)."""
        connection = self._connection
        if connection is not None and connection.client is client:
            await connection.settle()
        return self._trouble(client)

    async def _drop(self, client: Any) -> None:
        """Close the connection of ``client`` if it is still the current one (a concurrent
        call that met the same dead connection may already have opened a new one)."""
        connection = self._connection
        if connection is not None and connection.client is client:
            self._connection = None
            await connection.close()

    def _tools_changed(self) -> None:
        self._stale = True


def _schema_bytes(item: Any) -> int:
    """About the size of a listed tool's schema (its JSON), bounded by the tool's own limit."""
    from miniagent.core.tools.schema_cost import MAX_SCHEMA_BYTES

    schema = getattr(item, "input_schema", None)
    try:
        return min(len(json.dumps(schema, default=repr)), MAX_SCHEMA_BYTES + 1)
    except (TypeError, ValueError, RecursionError):
        return MAX_SCHEMA_BYTES + 1


def _running_loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


def _meta() -> dict[str, Any] | None:
    """The call's idempotency key, for servers that deduplicate (``_meta`` of the request)."""
    context = current_context()
    return {IDEMPOTENCY_META: context.idempotency_key} if context else None


def _connection_lost(exc: BaseException) -> bool:
    import anyio

    if getattr(getattr(exc, "error", None), "code", None) == _CONNECTION_CLOSED:
        return True
    return isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError
                      | ConnectionError | EOFError)


def _why(exc: BaseException) -> str:
    """What went wrong, in one line; exception groups (anyio) unwrapped to their first cause."""
    while getattr(exc, "exceptions", None):  # an ExceptionGroup (3.10 has no builtin name)
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    if isinstance(exc, ServerError):
        return " ".join(str(exc).split())[:500]
    error = getattr(exc, "error", None)
    if error is not None and hasattr(error, "code") and hasattr(error, "message"):
        text = f"MCP error {error.code}: {error.message}"
    else:
        text = describe(exc)
    return " ".join(text.split())[:500]


def _tuple(values: Sequence[str] | None) -> tuple[str, ...] | None:
    return None if values is None else tuple(values)
