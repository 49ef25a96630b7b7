"""Rules that stack on any tool source: a name prefix, allow/deny filters, per-tool options.

Each wrapper is itself a :class:`~miniagent.core.tools.toolbox.ToolSource` around another one
(functions, schema tools, an MCP server, an agent, another wrapper)::

    tools = Prefixed(Filtered(WithRules(server, {"delete_*": ToolRule(requires_approval=True)}),
                              deny=["move_*"]), "fs")

Patterns are :mod:`fnmatch` patterns on the names the wrapped source lists; the first rule
that matches a name applies. An MCP server's own ``prefix``, ``allow``, ``deny`` and ``rules``
options are these same functions applied to its listing.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from miniagent._internal.bounds import seconds
from miniagent.core.errors import ConfigError, ToolDefinitionError
from miniagent.core.retry import RetryPolicy, RetrySetting
from miniagent.core.tools.tool import ApprovalRule, Tool
from miniagent.core.types import Observation, ToolCall

if TYPE_CHECKING:
    from miniagent.core.tools.toolbox import ToolSource
    from miniagent.core.types import ToolContext

__all__ = ["Filtered", "Prefixed", "ToolRule", "WithRules", "apply_rule", "exposed_name",
           "first_rule", "innermost", "is_offered"]

_VALID_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_INVALID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


@dataclasses.dataclass(kw_only=True, frozen=True)
class ToolRule:
    """Options for the tools whose name matches a pattern; ``None`` keeps the tool's own.

    Attributes:
        requires_approval: ``True``, or a predicate on the arguments dict.
        idempotent: safe to run again after a crash left a call's outcome unknown.
        timeout: seconds one call may take.
        retry: how a call is tried again after a transient failure: a
            :class:`~miniagent.core.retry.RetryPolicy` or a number of attempts.
        max_concurrency: at most this many calls of each matching tool at once in the
            process (see :mod:`miniagent.core.throttles`).
    """

    requires_approval: ApprovalRule | None = None
    idempotent: bool | None = None
    timeout: float | None = None
    retry: RetrySetting = None
    max_concurrency: int | None = None

    def __post_init__(self) -> None:
        if self.timeout is not None:
            seconds("ToolRule timeout", self.timeout, error=ConfigError)
        limit = self.max_concurrency
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                  or limit < 1):
            raise ConfigError(f"ToolRule max_concurrency must be a positive integer, "
                              f"got {limit!r}")
        try:
            object.__setattr__(self, "retry", RetryPolicy.of(self.retry))
        except ToolDefinitionError as exc:
            raise ConfigError(f"ToolRule {exc}") from None


def is_offered(name: str, allow: Sequence[str] | None, deny: Sequence[str]) -> bool:
    """Whether a tool passes the filters (``fnmatch`` patterns on its name)."""
    if any(fnmatch.fnmatchcase(name, pattern) for pattern in deny):
        return False
    return allow is None or any(fnmatch.fnmatchcase(name, pattern) for pattern in allow)


def first_rule(name: str, rules: Mapping[str, ToolRule]) -> ToolRule:
    """The first rule whose pattern matches ``name`` (exact names are patterns too)."""
    for pattern, rule in rules.items():
        if fnmatch.fnmatchcase(name, pattern):
            return rule
    return ToolRule()


def apply_rule(tool: Tool, rule: ToolRule) -> Tool:
    """``tool`` with what ``rule`` sets (the tool itself when it sets nothing)."""
    if rule == ToolRule():
        return tool
    return tool.with_options(requires_approval=rule.requires_approval,
                             idempotent=rule.idempotent, timeout=rule.timeout,
                             retry=rule.retry, max_concurrency=rule.max_concurrency)


def exposed_name(name: str, prefix: str | None) -> str:
    """The name the model sees: ``prefix_name``, within ``^[a-zA-Z0-9_-]{1,64}$``.

    Characters outside that set become ``_``; a name too long is cut and given a short hash
    of the original, so two long names stay apart.
    """
    full = f"{prefix}_{name}" if prefix else name
    clean = _INVALID_CHARS.sub("_", full) or "tool"
    if len(clean) <= 64:
        return clean
    return f"{clean[:55]}_{name_digest(full)}"


def name_digest(name: str) -> str:
    """Eight hex digits that tell two names apart."""
    return hashlib.sha256(name.encode()).hexdigest()[:8]


def check_prefix(prefix: str) -> str:
    if not _VALID_NAME.match(prefix):
        raise ConfigError(f"tool prefix {prefix!r} may only hold letters, digits, '_' and '-'")
    return prefix


def innermost(source: object) -> object:
    """What ``source`` wraps, through any number of wrappers (``source`` itself if none)."""
    while isinstance(source, _Wrapper):
        source = source.source
    return source


class _Wrapper:
    """Passes calls and closing on to the wrapped source (and its ``record`` and ``warmup``,
    if it has them)."""

    def __init__(self, source: ToolSource) -> None:
        self.source = source

    async def call_tool(self, call: ToolCall, context: ToolContext | None = None
                        ) -> Observation:
        return await self.source.call_tool(call, context)

    async def aclose(self) -> None:
        await self.source.aclose()

    def __getattr__(self, name: str) -> object:
        # an MCP server's record and a source's warm-up survive wrapping (not every source
        # has them: a wrapper has them when what it wraps has them)
        if name in ("record", "warmup"):
            return getattr(self.source, name)
        raise AttributeError(name)


class Prefixed(_Wrapper):
    """The source's tools named ``prefix_name`` (kept within 64 valid characters)."""

    def __init__(self, source: ToolSource, prefix: str) -> None:
        super().__init__(source)
        self.prefix = check_prefix(prefix)
        self._inner: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"Prefixed({self.source!r}, {self.prefix!r})"

    async def list_tools(self) -> list[Tool]:
        listed = await self.source.list_tools()
        inner, out = {}, []
        for tool in listed:
            name = exposed_name(tool.name, self.prefix)
            inner[name] = tool.name
            out.append(tool.with_options(name=name))
        self._inner = inner
        return out

    async def call_tool(self, call: ToolCall, context: ToolContext | None = None
                        ) -> Observation:
        name = self._inner.get(call.name)
        if name is None:
            return Observation(call_id=call.id, tool_name=call.name, is_error=True,
                               output=f"Unknown tool {call.name!r}.")
        return await self.source.call_tool(dataclasses.replace(call, name=name), context)


class Filtered(_Wrapper):
    """Only the source's tools that an ``allow`` pattern matches (all, without ``allow``) and
    no ``deny`` pattern does."""

    def __init__(self, source: ToolSource, *, allow: Sequence[str] | None = None,
                 deny: Sequence[str] = ()) -> None:
        super().__init__(source)
        self.allow = None if allow is None else tuple(allow)
        self.deny = tuple(deny)

    def __repr__(self) -> str:
        return f"Filtered({self.source!r}, allow={self.allow!r}, deny={self.deny!r})"

    async def list_tools(self) -> list[Tool]:
        return [t for t in await self.source.list_tools()
                if is_offered(t.name, self.allow, self.deny)]

    async def call_tool(self, call: ToolCall, context: ToolContext | None = None
                        ) -> Observation:
        if not is_offered(call.name, self.allow, self.deny):
            return Observation(call_id=call.id, tool_name=call.name, is_error=True,
                               output=f"Unknown tool {call.name!r}.")
        return await self.source.call_tool(call, context)


class WithRules(_Wrapper):
    """The source's tools with the options of the first rule their name matches (approval,
    idempotency, timeout, retry); ``default`` applies to the names no rule matches."""

    def __init__(self, source: ToolSource, rules: Mapping[str, ToolRule], *,
                 default: ToolRule | None = None) -> None:
        super().__init__(source)
        self.rules, self.default = dict(rules), default or ToolRule()

    def __repr__(self) -> str:
        return f"WithRules({self.source!r}, {sorted(self.rules)!r})"

    async def list_tools(self) -> list[Tool]:
        return [apply_rule(t, self._rule(t.name)) for t in await self.source.list_tools()]

    def _rule(self, name: str) -> ToolRule:
        for pattern, rule in self.rules.items():
            if fnmatch.fnmatchcase(name, pattern):
                return rule
        return self.default
