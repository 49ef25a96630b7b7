"""Tool sources: where an agent's tools come from, and the tool set of one run.

A :class:`ToolSource` lists tools (async), runs a call (async; an
:class:`~miniagent.types.Observation`, never an exception) and can be closed. The agent's own
functions and schema tools are one source (a :class:`~miniagent.tools.registry.ToolRegistry`);
an MCP server or another agent can be others. A source's tools are :class:`Tool` objects, so
approval rules, timeouts, idempotency and argument validation apply to them whatever their
source: :meth:`ToolSet.for_run` lists every source once and gathers what they offer in one
registry, which the run then uses to describe, judge and run every call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from miniagent.errors import ToolDefinitionError
from miniagent.tools.registry import Tool, ToolRegistry
from miniagent.types import Observation, ToolCall


@runtime_checkable
class ToolSource(Protocol):
    """Something that offers tools: list them, run a call, close."""

    async def list_tools(self) -> Sequence[Tool]:
        """The tools offered now (a source may change them between runs)."""
        ...

    async def call_tool(self, call: ToolCall) -> Observation:
        """Run one call; failures are error observations, never exceptions."""
        ...

    async def aclose(self) -> None:
        """Release what the source holds (processes, connections)."""
        ...


class ToolSet:
    """An agent's tools: its own registry plus any other sources.

    Args:
        registry: The agent's own tools (functions and schema tools).
        sources: Other sources, listed at the start of every run.
    """

    def __init__(self, registry: ToolRegistry, sources: Sequence[ToolSource] = ()) -> None:
        self.registry = registry
        self.sources = list(sources)

    async def for_run(self) -> ToolRegistry:
        """The tools of one run: each source listed once, names checked to be unique.

        Raises:
            ToolDefinitionError: two sources offer tools with the same name.
        """
        if not self.sources:
            return self.registry  # nothing to list: the agent's own tools, as they are
        listed = await asyncio.gather(*(source.list_tools() for source in self.sources))
        run_tools = ToolRegistry(self.registry, default_timeout=self.registry.default_timeout)
        for tools in listed:
            for item in tools:
                if item.name in run_tools:
                    raise ToolDefinitionError(
                        f"two tools are named {item.name!r}: give one source a name prefix "
                        "or filter it out")
                run_tools.register(item)
        return run_tools

    def records(self) -> list[dict[str, Any]]:
        """What the sources that can describe themselves say, to be kept with a session.

        A source offering ``record()`` (an MCP server: its command or URL, never its secrets)
        is listed; the others (the agent's functions) are rebuilt from code on resume.
        """
        records = (getattr(source, "record", None) for source in self.sources)
        return [record() for record in records if callable(record)]

    async def aclose(self) -> None:
        """Close every source; one that fails to close does not keep the others open."""
        await asyncio.gather(*(source.aclose() for source in self.sources),
                             return_exceptions=True)
