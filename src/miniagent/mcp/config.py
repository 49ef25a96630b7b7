"""What an MCP server is (a command or a URL); the rules for its tools are the generic ones of
:mod:`miniagent.core.tools.wrappers` (``ToolRule``, prefix, allow/deny).

:class:`ServerConfig` is plain data. :meth:`ServerConfig.record` is the form a session keeps
for resuming: it never holds header values (bearer tokens) and never the environment given to
a command, only their names, so no secret reaches a checkpoint or a log.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

from miniagent.core.errors import ConfigError
from miniagent.core.tools.wrappers import ToolRule, check_prefix
from miniagent.core.trace.redact import expand_references, redact_command, redact_url

__all__ = ["ServerConfig", "ToolRule"]


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
        if self.prefix is not None:
            check_prefix(self.prefix)

    @property
    def label(self) -> str:
        """A name for messages: the given name, else the command or the URL (never headers,
        never a credential)."""
        if self.name:
            return self.name
        if self.transport == "stdio":
            return " ".join([str(self.command), *redact_command(self.args)])
        return redact_url(str(self.url)).split("?", 1)[0]

    def expanded(self) -> ServerConfig:
        """This configuration with its ``${NAME}`` references replaced by the environment's
        values, to connect with (the record keeps the references).

        Raises:
            ConfigError: a referenced variable is not set.
        """
        try:
            return dataclasses.replace(
                self, command=expand_references(self.command) if self.command else None,
                args=tuple(expand_references(a) for a in self.args),
                url=expand_references(self.url) if self.url else None)
        except KeyError as exc:
            raise ConfigError(f"MCP server {self.label}: {exc.args[0]}") from None

    def record(self) -> dict[str, Any]:
        """A JSON-ready form without secrets: header and environment values are left out, and
        credentials in the URL or the arguments are replaced (``${NAME}`` references stay:
        pass a token that way and a resume finds it again)."""
        out: dict[str, Any] = {"transport": self.transport}
        if self.transport == "stdio":
            out.update(command=self.command, args=redact_command(self.args), cwd=self.cwd)
            if self.env:
                out["env_names"] = sorted(self.env)
        else:
            out["url"] = redact_url(str(self.url))
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
