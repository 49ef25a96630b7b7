"""Agent: the configuration of an agent. Each run's state lives in its own AgentSession."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Literal, TypeVar

from miniagent import defaults
from miniagent.errors import UserError
from miniagent.models.base import Capabilities, Model
from miniagent.observe.describe import describe_model
from miniagent.observe.jsonl import JsonlTracer
from miniagent.observe.redact import model_secrets
from miniagent.protocol.auto import AutoProtocol
from miniagent.protocol.base import ActionProtocol
from miniagent.protocol.hybrid import HybridProtocol
from miniagent.protocol.native import NativeProtocol
from miniagent.protocol.react import ReactProtocol
from miniagent.protocol.tool_choice import check_choice
from miniagent.runtime.approvals import Approver, InterruptedPolicy, decide
from miniagent.runtime.bus import EventBus, Subscriber
from miniagent.runtime.compress import Compression
from miniagent.runtime.driver import InProcessEffects, drive, random_id
from miniagent.runtime.guards import Limits
from miniagent.runtime.loop import Rules
from miniagent.session import FINAL, AgentSession
from miniagent.store.base import CheckpointStore, new_owner
from miniagent.store.memory import MemoryStore
from miniagent.sync import run_coroutine
from miniagent.text import storable
from miniagent.tools.agent_tool import DEFAULT_MAX_DEPTH, AgentTool
from miniagent.tools.registry import ApprovalRule, Tool, ToolRegistry
from miniagent.tools.source import ToolSet, ToolSource
from miniagent.types import RunResult

T = TypeVar("T")

ToolItem = Tool | Callable[..., Any] | ToolSource


def protocol_for(capabilities: Capabilities, *, grammar: bool = True,
                 max_tokens: int | None = None) -> ActionProtocol:
    """The protocol a transport was configured for: react, native, hybrid, or auto (a ReAct
    grammar bounds free strings for turns of ``max_tokens``)."""
    if capabilities.tool_mode == "react":
        return ReactProtocol(grammar=grammar, max_tokens=max_tokens)
    if capabilities.tool_mode == "hybrid":
        return HybridProtocol()
    if capabilities.tool_mode == "native":
        return NativeProtocol()
    return AutoProtocol(native_tools=capabilities.native_tools, grammar=grammar,
                        max_tokens=max_tokens)


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

    With ``compress_at`` (estimated tokens as an int, characters as a string such as
    ``"12000c"``), once the history sent to the model crosses it, the oldest rounds are
    replaced by one summary block and the last ``keep_last`` rounds stay whole; ``compress``
    says who writes the summary: ``"truncate"`` (results cut to about 200 characters) or
    ``"model"`` (the model). See :mod:`miniagent.runtime.compress`.

    With ``tool_selection=K``, each request offers only the ``K`` tools most relevant to the
    conversation so far, plus those already called (see :mod:`miniagent.runtime.selection`).
    ``tool_choice`` (``"auto"``, ``"required"``, ``"none"`` or a tool's name) says whether
    the model must call a tool: the native ``tool_choice`` field, or the ReAct grammar; a reply
    that disobeys is sent back as invalid. ``required`` and a name hold until the run's first
    tool call, then ``auto`` (see :mod:`miniagent.protocol.tool_choice`). None sends nothing.

    ``trace`` appends every event of every run to a JSONL file (see
    :class:`~miniagent.observe.jsonl.JsonlTracer`; the model's API key never reaches it).

    Given ``temporal`` (a ``temporalio`` client from :func:`miniagent.durable.connect`),
    ``arun`` runs the session as a workflow on ``task_queue``, whose workers serve this agent's
    model and tools (:func:`miniagent.durable.agent_worker`, or ``miniagent worker``).
    """

    def __init__(
        self,
        *,
        model: Model,
        tools: ToolRegistry | Iterable[ToolItem] = (),
        instructions: str | None = None,
        max_steps: int = defaults.MAX_STEPS,
        token_budget: int | None = None,
        timeout: float | None = None,
        max_observation_chars: int = defaults.MAX_OBSERVATION_CHARS,
        repeat_limit: int = defaults.REPEAT_LIMIT,
        max_calls_per_step: int = defaults.MAX_CALLS_PER_STEP,
        tool_concurrency: int = defaults.TOOL_CONCURRENCY,
        temperature: float | None = defaults.TEMPERATURE,
        max_tokens: int | None = defaults.MAX_TOKENS,
        store: CheckpointStore | None = None,
        approver: Approver | None = None,
        on_interrupted: InterruptedPolicy = "ask",
        grammar: bool = True,
        protocol: ActionProtocol | None = None,
        on_event: Subscriber | None = None,
        compress_at: int | str | None = None,
        keep_last: int = 4,
        compress: Literal["truncate", "model"] = "truncate",
        tool_selection: int | None = None,
        tool_choice: str | None = None,
        trace: str | os.PathLike[str] | None = None,
        temporal: Any = None,
        task_queue: str = "miniagent",
    ) -> None:
        for label, value in (("max_steps", max_steps), ("max_calls_per_step", max_calls_per_step),
                             ("tool_concurrency", tool_concurrency),
                             ("tool_selection", 1 if tool_selection is None else tool_selection)):
            if value < 1:
                raise UserError(f"{label} must be at least 1, got {value}")
        self.model = model
        self.registry, sources = _split_tools(tools)
        self.tools = ToolSet(self.registry, sources)
        self.limits = Limits(
            max_steps=max_steps, token_budget=token_budget, timeout=timeout,
            max_observation_chars=max_observation_chars, repeat_limit=repeat_limit,
            max_calls_per_step=max_calls_per_step, tool_concurrency=tool_concurrency,
        )
        self.protocol = protocol or protocol_for(model.capabilities, grammar=grammar,
                                                 max_tokens=max_tokens)
        self.instructions, self.temperature, self.max_tokens = instructions, temperature, max_tokens
        self.store: CheckpointStore = store if store is not None else MemoryStore()
        self.approver, self.on_interrupted = approver, on_interrupted
        self.bus = EventBus([on_event] if on_event else ())
        self.compression = (Compression.of(compress_at, keep_last=keep_last, mode=compress)
                            if compress_at is not None else None)
        self.tool_selection = tool_selection
        self.tool_choice = _checked_choice(tool_choice, None if sources else self.registry.names)
        self.tracer = None if trace is None else JsonlTracer(
            trace, secrets=model_secrets(model), model=describe_model(model).name)
        if self.tracer is not None:
            self.bus.subscribe(self.tracer)
        self.temporal, self.task_queue = temporal, task_queue  # a temporalio Client: see durable

    def subscribe(self, subscriber: Subscriber) -> None:
        """Receive every event of every later run (see :mod:`miniagent.runtime.events`)."""
        self.bus.subscribe(subscriber)

    async def arun(self, question: str, *, metadata: dict[str, Any] | None = None,
                   on_event: Subscriber | None = None) -> RunResult:
        """Answer ``question`` in a new session; always returns a result with a status.

        ``on_event`` receives this run's events (besides the agent's subscribers).
        """
        records = self.tools.records()  # e.g. MCP servers, so a resume can rebuild them
        if records:
            metadata = {**(metadata or {}), "tool_sources": records}
        if self.temporal is not None:  # a session on the cluster, run by a worker there
            from miniagent.durable.client import run_agent

            return await run_agent(self, question, metadata=metadata)
        session = AgentSession.start(storable(question), id=random_id(), at=time.time(),
                                     metadata=metadata)
        self.store.save(session)
        return await self._drive(session.id, session, on_event)

    async def aresume(self, session_id: str, *, on_event: Subscriber | None = None,
                      force: bool = False) -> RunResult:
        """Continue a saved session: after approvals, a crash, a timeout or an error.

        ``force`` takes the session over even from a process that looks alive (a person
        knows it is gone; if it is not, its next checkpoint is refused and it stops).

        Raises:
            SessionNotFound, SessionBusy (another live process runs it), SessionError.
        """
        return await self._drive(session_id, None, on_event, force)

    async def _drive(self, session_id: str, fresh: AgentSession | None,
                     on_event: Subscriber | None, force: bool = False) -> RunResult:
        owner = new_owner()
        self.store.acquire(session_id, owner, force=force)
        try:
            session = fresh or self.store.load(session_id)
            if session.status in FINAL:
                return session.result()
            if session.status != "running":
                session.transition("running", f"resumed from {session.status}", at=time.time())
            tools = await self.tools.for_run()
            _checked_choice(self.tool_choice, tools.names)
            effects = InProcessEffects(
                model=self.model, tools=tools, store=self.store,
                bus=self.bus, owner=owner, approver=self.approver,
                subscribers=(on_event,) if on_event else ())
            return await drive(session, self._rules(effects.tools), effects, self.limits.timeout)
        finally:
            self.store.release(session_id, owner)

    def _rules(self, tools: ToolRegistry) -> Rules:
        return Rules(protocol=self.protocol, tools=tools, limits=self.limits,
                     instructions=self.instructions, temperature=self.temperature,
                     max_tokens=self.max_tokens, on_interrupted=self.on_interrupted,
                     compression=self.compression, tool_choice=self.tool_choice,
                     tool_selection=self.tool_selection)

    def as_tool(self, *, name: str, description: str,
                max_depth: int = DEFAULT_MAX_DEPTH, requires_approval: ApprovalRule = False,
                timeout: float | None = None) -> AgentTool:
        """This agent as a tool of another agent: it answers the ``question`` argument.

        The sub-run goes through this agent's own loop and store; its steps, usage and status
        are recorded on the parent's call, its tokens count in the parent's usage, and a call
        of it that needs approval makes the parent wait (see :mod:`miniagent.tools.agent_tool`).

        Example:
            >>> from miniagent import ScriptedModel
            >>> helper = Agent(model=ScriptedModel(["Final Answer: 42"]))
            >>> boss = Agent(model=ScriptedModel([
            ...     'Action: ask_helper\\nAction Input: {"question": "6 times 7?"}',
            ...     "Final Answer: the helper says 42"]),
            ...     tools=[helper.as_tool(name="ask_helper", description="Knows arithmetic.")])
            >>> result = boss.run("What is 6 times 7?")
            >>> result.final_answer, result.steps[0].calls[0].observation.sub_run.status
            ('the helper says 42', 'completed')
        """
        return AgentTool(self, name=name, description=description, max_depth=max_depth,
                         requires_approval=requires_approval, timeout=timeout)

    def approve(self, session_id: str, call_id: str | None = None, reason: str | None = None,
                *, force: bool = False) -> None:
        """Approve one waiting call, or all of them; ``resume`` then runs them.

        ``force`` decides even while a process that looks alive holds the session.

        Raises:
            DecisionError: the session is not waiting, or has no such waiting call.
        """
        self._decide(session_id, call_id, True, reason, force)

    def deny(self, session_id: str, call_id: str | None = None, reason: str | None = None,
             *, force: bool = False) -> None:
        """Deny one waiting call, or all; on ``resume`` the model is told it was denied and why."""
        self._decide(session_id, call_id, False, reason, force)

    def _decide(self, session_id: str, call_id: str | None, approved: bool,
                reason: str | None, force: bool = False) -> None:
        self.store.update(session_id,
                          lambda s: decide(s, call_id, approved, reason, at=time.time()),
                          force=force)

    def cancel(self, session_id: str, reason: str = "cancelled by a person", *,
               force: bool = False) -> None:
        """End a session that no live process is running; it cannot be resumed afterwards."""
        cancel_session(self.store, session_id, reason, force=force)

    def session(self, session_id: str) -> AgentSession:
        """The saved session, as of its last checkpoint."""
        return self.store.load(session_id)

    def run(self, question: str, *, metadata: dict[str, Any] | None = None,
            on_event: Subscriber | None = None) -> RunResult:
        """Synchronous :meth:`arun`; use ``await agent.arun(...)`` inside an event loop."""
        return self._sync(self.arun(question, metadata=metadata, on_event=on_event))

    def resume(self, session_id: str, *, on_event: Subscriber | None = None,
               force: bool = False) -> RunResult:
        """Synchronous :meth:`aresume`."""
        return self._sync(self.aresume(session_id, on_event=on_event, force=force))

    def _sync(self, work: Coroutine[Any, Any, T]) -> T:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return run_coroutine(self._then_close(work))
        work.close()
        raise UserError("a synchronous Agent method was called inside a running event loop; "
                        "use 'await agent.arun(...)' / 'await agent.aresume(...)' there")

    async def _then_close(self, work: Coroutine[Any, Any, T]) -> T:
        # asyncio.run makes a new event loop each time: connections and processes die with it.
        try:
            return await work
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Close the tool sources and the model's connections (a later run reopens them)."""
        await self.tools.aclose()
        await self.model.aclose()
        if self.tracer is not None:
            await self.bus.flush()  # what was emitted is written before the file closes
            self.tracer.close()


def _checked_choice(choice: str | None, names: list[str] | None) -> str | None:
    try:
        return check_choice(choice, names)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def cancel_session(store: CheckpointStore, session_id: str, reason: str, *,
                   force: bool = False) -> None:
    """End a session that no live process is running; it cannot be resumed afterwards."""
    owner = new_owner()
    store.acquire(session_id, owner, force=force)
    try:
        store.update(session_id, lambda s: s.transition("cancelled", reason, at=time.time()),
                     owner=owner)
    finally:
        store.release(session_id, owner)


def _split_tools(tools: ToolRegistry | Iterable[ToolItem]
                 ) -> tuple[ToolRegistry, list[ToolSource]]:
    """The agent's own tools (functions, schema tools) apart from other tool sources."""
    if isinstance(tools, ToolRegistry):
        return tools, []
    own: list[Tool | Callable[..., Any]] = []
    sources: list[ToolSource] = []
    for item in tools:
        if isinstance(item, ToolRegistry) or (
                not isinstance(item, Tool) and isinstance(item, ToolSource)):
            sources.append(item)
        else:
            own.append(item)
    return ToolRegistry(own), sources
