"""What an MCP server is (a command or a URL) and the rules for its tools.

:class:`ServerConfig` is plain data. :meth:`ServerConfig.record` is the form a session keeps
for resuming: it never holds header values (bearer tokens) and never the environment given to
a command, only their names, so no secret reaches a checkpoint or a log.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from miniagent.errors import ConfigError
from miniagent.tools.registry import ApprovalRule

__all__ = ["ServerConfig", "ToolRule", "exposed_name", "first_rule", "is_offered"]

_VALID_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_INVALID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


@dataclasses.dataclass(kw_only=True, frozen=True)
class ToolRule:
    """Options for the MCP tools whose (server-side) name matches a pattern.

    Fields left ``None`` keep the server's defaults: no approval, idempotent when the server
    annotates the tool read-only or idempotent, the server's ``call_timeout``.

    Attributes:
        requires_approval: ``True``, or a predicate on the arguments dict.
        idempotent: safe to run again after a crash left a call's outcome unknown.
        timeout: seconds one call may take.
    """

    requires_approval: ApprovalRule | None = None
    idempotent: bool | None = None
    timeout: float | None = None

    def __post_init__(self) -> None:
        if self.timeout is not None and not self.timeout > 0:
            raise ConfigError(f"ToolRule timeout must be positive, got {self.timeout!r}")


@dataclasses.dataclass(kw_only=True, frozen=True)
class ServerConfig:
    """One MCP server: started with ``command`` (stdio) or reached at ``url`` (HTTP)."""

    transport: Literal["stdio", "http"]
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = dataclasses.field(default=None, repr=False)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] | None = dataclasses.field(default=None, repr=False)
    name: str | None = None
    prefix: str | None = None
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()
    connect_timeout: float = 30.0
    call_timeout: float = 60.0

    def __post_init__(self) -> None:
        if self.transport == "stdio" and not self.command:
            raise ConfigError("an MCP stdio server needs a command")
        if self.transport == "http" and not (self.url or "").startswith(("http://", "https://")):
            raise ConfigError(f"an MCP server URL must start with http:// or https://, "
                              f"got {self.url!r}")
        for label in ("connect_timeout", "call_timeout"):
            if not getattr(self, label) > 0:
                raise ConfigError(f"MCP {label} must be positive, got {getattr(self, label)!r}")
        if self.prefix is not None and not _VALID_NAME.match(self.prefix):
            raise ConfigError(f"MCP tool prefix {self.prefix!r} may only hold letters, digits, "
                              "'_' and '-'")

    @property
    def label(self) -> str:
        """A name for messages: the given name, else the command or the URL (never headers)."""
        if self.name:
            return self.name
        if self.transport == "stdio":
            return " ".join([str(self.command), *self.args])
        return str(self.url).split("?", 1)[0]

    def record(self) -> dict[str, Any]:
        """A JSON-ready form without secrets: header and environment values are left out."""
        out: dict[str, Any] = {"transport": self.transport}
        if self.transport == "stdio":
            out.update(command=self.command, args=list(self.args), cwd=self.cwd)
            if self.env:
                out["env_names"] = sorted(self.env)
        else:
            out["url"] = self.url
            if self.headers:
                out["header_names"] = sorted(self.headers)
        out.update(name=self.name, prefix=self.prefix,
                   allow=list(self.allow) if self.allow is not None else None,
                   deny=list(self.deny), connect_timeout=self.connect_timeout,
                   call_timeout=self.call_timeout)
        return out

    @classmethod
    def from_record(cls, record: Mapping[str, Any], *, headers: Mapping[str, str] | None = None,
                    env: Mapping[str, str] | None = None) -> ServerConfig:
        """Rebuild from :meth:`record`; secrets (headers, environment) are given again."""
        known = {f.name for f in dataclasses.fields(cls)} - {"headers", "env"}
        values = {k: v for k, v in record.items() if k in known}
        for key in ("args", "deny"):
            values[key] = tuple(values.get(key) or ())
        if values.get("allow") is not None:
            values["allow"] = tuple(values["allow"])
        return cls(**values, headers=headers, env=env)


def is_offered(name: str, allow: Sequence[str] | None, deny: Sequence[str]) -> bool:
    """Whether a server tool passes the filters (``fnmatch`` patterns on its own name)."""
    if any(fnmatch.fnmatchcase(name, pattern) for pattern in deny):
        return False
    return allow is None or any(fnmatch.fnmatchcase(name, pattern) for pattern in allow)


def first_rule(name: str, rules: Mapping[str, ToolRule]) -> ToolRule:
    """The first rule whose pattern matches ``name`` (exact names are patterns too)."""
    for pattern, rule in rules.items():
        if fnmatch.fnmatchcase(name, pattern):
            return rule
    return ToolRule()


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
