"""Tool calls in tests, run the way a run runs them: through the toolbox over a registry."""

from __future__ import annotations

import asyncio

from miniagent.core.tools.toolbox import Toolbox, ToolRegistry
from miniagent.core.types import Observation, ToolCall, ToolContext


def toolbox_of(registry: ToolRegistry) -> Toolbox:
    """The toolbox a run over ``registry`` alone lists."""
    return Toolbox((tool, registry) for tool in registry)


async def execute(registry: ToolRegistry, call: ToolCall, context: ToolContext | None = None
                  ) -> Observation:
    """Validate ``call`` and run it in ``registry``, as a run's toolbox does."""
    return await toolbox_of(registry).execute(call, context)


async def execute_all(registry: ToolRegistry, calls: list[ToolCall]) -> list[Observation]:
    """Run ``calls`` concurrently; the observations come back in call order."""
    toolbox = toolbox_of(registry)
    return list(await asyncio.gather(*(toolbox.execute(call) for call in calls)))
