"""Agent: the configuration of an agent. Each run's state lives in its own AgentSession."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from miniagent.errors import UserError
from miniagent.models.base import Model
from miniagent.runtime.events import EventBus, Subscriber
from miniagent.runtime.guards import Limits
from miniagent.runtime.loop import Runtime
from miniagent.runtime.session import AgentSession
from miniagent.tools.registry import Tool, ToolRegistry
from miniagent.types import RunResult


class Agent:
    """A model, tools and limits; ``run`` / ``arun`` answer one question each.

    Example:
        >>> from miniagent import Agent, ScriptedModel, tool
        >>> @tool
        ... def add(a: int, b: int) -> int:
        ...     '''Add two integers.'''
        ...     return a + b
        >>> model = ScriptedModel([
        ...     'Thought: add\\nAction: add\\nAction Input: {"a": 2, "b": 3}',
        ...     "Thought: I know it\\nFinal Answer: 5",
        ... ])
        >>> result = Agent(model=model, tools=[add]).run("What is 2+3?")
        >>> result.status, result.final_answer
        ('completed', '5')
    """

    def __init__(
        self,
        *,
        model: Model,
        tools: ToolRegistry | Iterable[Tool | Callable[..., Any]] = (),
        instructions: str | None = None,
        max_steps: int = 10,
        token_budget: int | None = None,
        timeout: float | None = None,
        max_observation_chars: int = 4000,
        repeat_limit: int = 3,
        temperature: float | None = 0.0,
        max_tokens: int | None = 1024,
        on_event: Subscriber | None = None,
    ) -> None:
        if max_steps < 1:
            raise UserError(f"max_steps must be at least 1, got {max_steps}")
        self.model = model
        self.registry = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        self.limits = Limits(
            max_steps=max_steps, token_budget=token_budget, timeout=timeout,
            max_observation_chars=max_observation_chars, repeat_limit=repeat_limit,
        )
        self.bus = EventBus([on_event] if on_event else None)
        self.runtime = Runtime(
            model=model, registry=self.registry, limits=self.limits, bus=self.bus,
            instructions=instructions, temperature=temperature, max_tokens=max_tokens,
        )

    def subscribe(self, subscriber: Subscriber) -> None:
        """Receive every event of every later run (see :mod:`miniagent.runtime.events`)."""
        self.bus.subscribe(subscriber)

    async def arun(self, question: str) -> RunResult:
        """Answer ``question``; always returns a RunResult with an explicit status."""
        return await self.runtime.run(AgentSession.start(question))

    def run(self, question: str) -> RunResult:
        """Synchronous ``arun``; use ``await agent.arun(...)`` inside an event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._run_and_close(question))
        raise UserError("Agent.run() was called inside a running event loop; "
                        "use 'await agent.arun(...)' there")

    async def _run_and_close(self, question: str) -> RunResult:
        # asyncio.run makes a new event loop each time: pooled connections die with it.
        try:
            return await self.arun(question)
        finally:
            await self.model.aclose()
