"""Agent: the configuration of an agent. Each run's state lives in its own AgentSession."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, TypeVar

from miniagent.errors import UserError
from miniagent.models.base import Model
from miniagent.runtime.approvals import Approver, InterruptedPolicy, cancel, decide
from miniagent.runtime.events import EventBus, Subscriber
from miniagent.runtime.guards import Limits
from miniagent.runtime.loop import Runtime
from miniagent.runtime.session import FINAL, AgentSession
from miniagent.store.base import CheckpointStore, new_owner
from miniagent.store.memory import MemoryStore
from miniagent.tools.registry import Tool, ToolRegistry
from miniagent.types import RunResult

T = TypeVar("T")


class Agent:
    """A model, tools, limits and a store; ``run`` / ``arun`` answer one question each.

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

    Sessions are saved to ``store`` after every step (an in-process :class:`MemoryStore` by
    default; pass a :class:`~miniagent.store.SQLiteStore` to resume in another process). A call
    of a tool declared ``requires_approval`` stops the run with status ``awaiting_approval``;
    ``approve`` / ``deny`` (from this or any process sharing the store) and ``resume`` go on.

    With ``grammar`` (the default), ReAct requests carry a GBNF grammar built from the tools'
    schemas; backends that support constrained decoding (the embedded llama.cpp model, or a
    server given ``grammar_field``) then only produce well-formed steps.
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
        store: CheckpointStore | None = None,
        approver: Approver | None = None,
        on_interrupted: InterruptedPolicy = "ask",
        grammar: bool = True,
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
        self.store: CheckpointStore = store if store is not None else MemoryStore()
        self.bus = EventBus([on_event] if on_event else None)
        self.runtime = Runtime(
            model=model, registry=self.registry, limits=self.limits, bus=self.bus,
            store=self.store, instructions=instructions, temperature=temperature,
            max_tokens=max_tokens, approver=approver, on_interrupted=on_interrupted,
            grammar=grammar,
        )

    def subscribe(self, subscriber: Subscriber) -> None:
        """Receive every event of every later run (see :mod:`miniagent.runtime.events`)."""
        self.bus.subscribe(subscriber)

    async def arun(self, question: str, *, metadata: dict[str, Any] | None = None) -> RunResult:
        """Answer ``question`` in a new session; always returns a result with a status."""
        session = AgentSession.start(question, metadata)
        self.store.save(session)
        return await self._drive(session.id, session)

    async def aresume(self, session_id: str) -> RunResult:
        """Continue a saved session: after approvals, a crash, a timeout or an error.

        Raises:
            SessionNotFound, SessionBusy (another live process runs it), SessionError.
        """
        return await self._drive(session_id, None)

    async def _drive(self, session_id: str, fresh: AgentSession | None) -> RunResult:
        owner = new_owner()
        self.store.acquire(session_id, owner)
        try:
            session = fresh or self.store.load(session_id)
            if session.status in FINAL:
                return session.result()
            if session.status != "running":
                session.transition("running", f"resumed from {session.status}")
            return await self.runtime.run(session, owner)
        finally:
            self.store.release(session_id, owner)

    def approve(self, session_id: str, call_id: str | None = None, reason: str | None = None
                ) -> None:
        """Approve one waiting call, or all of them; ``resume`` then runs them."""
        self.store.update(session_id, lambda s: decide(s, call_id, True, reason))

    def deny(self, session_id: str, call_id: str | None = None, reason: str | None = None
             ) -> None:
        """Deny one waiting call, or all; on ``resume`` the model is told it was denied and why."""
        self.store.update(session_id, lambda s: decide(s, call_id, False, reason))

    def cancel(self, session_id: str, reason: str = "cancelled by a person") -> None:
        """End a session that is not running; it cannot be resumed afterwards."""
        cancel(self.store, session_id, reason)

    def session(self, session_id: str) -> AgentSession:
        """The saved session, as of its last checkpoint."""
        return self.store.load(session_id)

    def run(self, question: str, *, metadata: dict[str, Any] | None = None) -> RunResult:
        """Synchronous :meth:`arun`; use ``await agent.arun(...)`` inside an event loop."""
        return self._sync(self.arun(question, metadata=metadata))

    def resume(self, session_id: str) -> RunResult:
        """Synchronous :meth:`aresume`."""
        return self._sync(self.aresume(session_id))

    def _sync(self, work: Coroutine[Any, Any, T]) -> T:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._then_close(work))
        work.close()
        raise UserError("a synchronous Agent method was called inside a running event loop; "
                        "use 'await agent.arun(...)' / 'await agent.aresume(...)' there")

    async def _then_close(self, work: Coroutine[Any, Any, T]) -> T:
        # asyncio.run makes a new event loop each time: pooled connections die with it.
        try:
            return await work
        finally:
            await self.model.aclose()
