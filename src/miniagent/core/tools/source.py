"""Tool sources: where an agent's tools come from.

A :class:`ToolSource` lists its tools, runs a call of one of them, and can be closed. The
agent's functions and schema tools are one source (a
:class:`~miniagent.core.tools.registry.ToolRegistry`); an MCP server
(:class:`~miniagent.mcp.MCPServer`), another agent (:meth:`Agent.as_tool
<miniagent.core.agent.Agent.as_tool>`) and the wrappers of :mod:`miniagent.core.tools.wrappers`
(prefix, filter, rules, stacked on any source) are others.

A run lists its sources once into a :class:`~miniagent.core.tools.toolbox.Toolbox`, which
validates every call the same way and hands it to the source that listed the tool: a source's
``call_tool`` receives calls whose arguments were checked against the schema it listed.

A source may also have an ``async warmup()`` method (not part of the protocol, which it does
not need): what makes its first call fast, run once per process by :meth:`Agent.start
<miniagent.core.agent.Agent.start>` (an MCP server connects and lists its tools; a registry runs its
tools' warm-ups). It raises when warming fails; the source must stay usable then. A source
with a connection may add ``is_warm()`` (False once it is lost: the next start warms it again).
See :mod:`miniagent.core.tools.warmup`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from miniagent.core.types import Observation, ToolCall

if TYPE_CHECKING:
    from miniagent.core.tools.registry import Tool
    from miniagent.core.types import ToolContext

__all__ = ["ToolSource", "records"]


@runtime_checkable
class ToolSource(Protocol):
    """Something that offers tools: list them, run a call, close."""

    async def list_tools(self) -> Sequence[Tool]:
        """The tools offered now (a source may change them between runs)."""
        ...

    async def call_tool(self, call: ToolCall, context: ToolContext | None = None
                        ) -> Observation:
        """Run one validated call of a tool it listed; failures are error observations,
        never exceptions. ``context`` is the call's (also installed for
        :func:`~miniagent.core.types.tool_context`)."""
        ...

    async def aclose(self) -> None:
        """Release what the source holds (processes, connections)."""
        ...


def records(sources: Iterable[ToolSource]) -> list[dict[str, Any]]:
    """What the sources that can describe themselves say, to be kept with a session.

    A source offering ``record()`` (an MCP server: its command or URL, never its secrets) is
    listed; the others (the agent's functions) are rebuilt from code on resume.
    """
    found = (getattr(source, "record", None) for source in sources)
    return [record() for record in found if callable(record)]
