"""Agent: what an agent is, and its runs in this process. Each run's state lives in its own
AgentSession; to run on Temporal, wrap it (:class:`miniagent.temporal.TemporalAgent`)."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any

from miniagent._internal import defaults
from miniagent._internal.aio import SyncTwins
from miniagent._internal.bounds import seconds, whole
from miniagent.core.agent_setup import ToolItem, describe, memory_source, split_tools, tracer_for
from miniagent.core.errors import SessionNotFound, UserError
from miniagent.core.output import OutputType, typed_events, typed_result, typed_subscriber
from miniagent.core.runtime.guards import Limits
from miniagent.core.session import FINAL, AgentSession, decide, storable
from miniagent.core.settings import Aids, MemorySettings, ModelSettings
from miniagent.core.store.base import CheckpointStore, InMemoryStore, new_owner, random_id

if TYPE_CHECKING:
    from miniagent.core.models.base import Model
    from miniagent.core.protocol.base import ActionProtocol
    from miniagent.core.retry import RetryPolicy
    from miniagent.core.runtime.events import Event
    from miniagent.core.runtime.inprocess import EventBus, Subscriber
    from miniagent.core.runtime.run import Compression
    from miniagent.core.session import Approver, InterruptedPolicy
    from miniagent.core.settings import AidsPreset
    from miniagent.core.tools.agent_tool import AgentTool
    from miniagent.core.tools.tool import ApprovalRule
    from miniagent.core.tools.toolbox import ToolRegistry, ToolSource
    from miniagent.core.tools.warmup import WarmupReport
    from miniagent.core.types import RunResult
    from miniagent.memory.sqlite import Memory


__all__ = ["Agent", "ToolItem", "cancel_session", "with_sources"]


class Agent(SyncTwins):
    """What an agent is: a model, tools, instructions, settings and a store; ``run`` / ``arun``
    answer one question each.

    Example:
        >>> from miniagent import Agent, Limits, ScriptedModel, tool
        >>> @tool
        ... def add(a: int, b: int) -> int:
        ...     '''Add two integers.'''
        ...     return a + b
        >>> model = ScriptedModel([
        ...     'Thought: add\\nAction: add\\nAction Input: {"a": 2, "b": 3}',
        ...     "Thought: I know it\\nFinal Answer: 5",
        ... ])
        >>> result = Agent(model=model, tools=[add], limits=Limits(max_steps=4)).run("2+3?")
        >>> result.status, result.final_answer
        ('completed', '5')

    Sessions are saved to ``store`` after every step (an in-process :class:`InMemoryStore` by
    default; pass a :class:`~miniagent.core.store.SQLiteStore` to resume in another process). A call
    of a tool declared ``requires_approval`` stops the run with status ``awaiting_approval``
    (unless ``approver`` decides it); ``approve`` / ``deny`` (from this or any process sharing
    the store) and ``resume`` go on. ``on_interrupted`` says what becomes of a call a crash
    interrupted (see :mod:`miniagent.core.session`).

    The settings come as values, each checked when it is made: ``model_settings``
    (:class:`~miniagent.core.settings.ModelSettings`: temperature, max_tokens, grammar),
    ``limits`` (:class:`~miniagent.core.runtime.guards.Limits`), ``compression``
    (:class:`~miniagent.core.runtime.run.Compression`; ``None``: off), ``aids``
    (:class:`~miniagent.core.settings.Aids`, or a preset's name: ``"auto"`` gives a small
    model the aids it is measured to need, ``"on"`` every aid, ``"off"`` none) and ``memory``
    (a :class:`~miniagent.memory.Memory`, or :class:`~miniagent.core.settings.MemorySettings`
    for its namespace and recall). A ``protocol`` given replaces the one the model's profile
    chooses (see :mod:`miniagent.core.protocol`).

    ``output_type`` (a pydantic model, dataclass, TypedDict or JSON Schema dict) makes every
    answer a validated instance in ``result.output`` (see :mod:`miniagent.core.output`).

    ``tool_retry`` (a :class:`~miniagent.core.retry.RetryPolicy`, or a number of attempts) is
    the retry policy of the tools that set none: a call that failed transiently is tried again
    with backoff, within the run's deadline (see :mod:`miniagent.core.retry`).

    ``await agent.start()`` (or ``async with agent:``) runs the warm-ups of its tools, sources
    and model before the first run (see :meth:`start`); a run works the same without it.

    ``trace`` appends every event of every run to a JSONL file (see
    :class:`~miniagent.core.trace.jsonl.JsonlTracer`; the model's API key never reaches it).
    Other subscribers: :meth:`subscribe` for every run, ``on_event`` of :meth:`arun` for one.

    To run its sessions on a Temporal cluster, wrap it:
    :class:`miniagent.temporal.TemporalAgent`. Such an agent needs no ``model`` of its own
    (the workers serve it, and their model then decides the protocol and the aids left to it).
    """

    def __init__(
        self,
        *,
        model: Model | None = None,
        tools: ToolRegistry | Iterable[ToolItem] = (),
        instructions: str | None = None,
        protocol: ActionProtocol | None = None,
        model_settings: ModelSettings | None = None,
        limits: Limits | None = None,
        compression: Compression | None = None,
        aids: Aids | AidsPreset = "auto",
        memory: Memory | MemorySettings | None = None,
        tool_retry: RetryPolicy | int | None = None,
        store: CheckpointStore | None = None,
        approver: Approver | None = None,
        on_interrupted: InterruptedPolicy = "ask",
        trace: str | os.PathLike[str] | None = None,
        output_type: Any = None,
    ) -> None:
        limits = limits or Limits()
        whole("max_steps", limits.max_steps, least=1)  # a Limits may hold 0 (a sub-run's share)
        self.model = model
        self.registry, others = split_tools(tools)
        self.memory = None if memory is None else MemorySettings.of(memory)
        """The agent's long-term memory and how it uses it (``None``: none)."""
        if self.memory is not None:
            others.append(memory_source(self.memory, model))
        self.sources: list[ToolSource] = [self.registry, *others]
        """Where the agent's tools come from: its own functions first, then the others."""
        described = describe(
            model=model, protocol=protocol, instructions=instructions,
            settings=model_settings or ModelSettings(), limits=limits, compression=compression,
            aids=Aids.of(aids), memory=self.memory, tool_retry=tool_retry,
            on_interrupted=on_interrupted, names=None if others else self.registry.names,
            output=output_type)
        self.output_type = described.output
        """What every answer must be (``output_type`` made a JSON Schema; None: free text)."""
        self.protocol = described.protocol
        """The agent's protocol object (None: an agent without a model, which runs wrapped in a
        TemporalAgent with the one its workers' model is configured for)."""
        self.spec = described.spec
        """What the agent is, for every driver (see :mod:`miniagent.core.runtime.run`)."""
        self.store_given = store is not None
        """Whether a store was given (a TemporalAgent refuses one: its sessions live in the
        workflows' history)."""
        self.store: CheckpointStore = store if store is not None else InMemoryStore()
        self.approver = approver
        self.tracer = None if trace is None else tracer_for(trace, model)
        if self.tracer is not None:
            self.bus.subscribe(self.tracer)
        self.warmup_report: WarmupReport | None = None
        """What the last :meth:`start` warmed, and what failed (``None``: never started)."""

    @cached_property
    def bus(self) -> EventBus:
        """The agent's subscribers (made on first use: it loads the run machinery)."""
        from miniagent.core.runtime.inprocess import EventBus

        return EventBus()

    @property
    def limits(self) -> Limits:
        return self.spec.limits

    def subscribe(self, subscriber: Subscriber) -> None:
        """Receive every event of every later run (see :mod:`miniagent.core.runtime.events`)."""
        self.bus.subscribe(subscriber)

    async def arun(self, question: str, *, metadata: dict[str, Any] | None = None,
                   on_event: Subscriber | None = None, session_id: str | None = None,
                   output_type: Any = None) -> RunResult:
        """Answer ``question``; always returns a result with a status.

        Without ``session_id``, or with one no session has yet, in a new session of that id.
        With the id of a session whose last turn ended, as that conversation's next turn: the
        model sees the history so far, and the result's steps and usage are this turn's (see
        :meth:`AgentSession.new_turn <miniagent.core.session.AgentSession.new_turn>`). ``resume``
        is different: it goes on with a turn that has not ended. ``metadata`` is a new
        session's (a later turn keeps the session's own). ``on_event`` receives this run's
        events (besides the agent's subscribers). ``output_type`` replaces the agent's for this
        turn (see :mod:`miniagent.core.output`): ``result.output`` is then an instance of it.

        Raises:
            TurnRefused: the session waits for a person, has calls open, or was cancelled.
            SessionBusy: another live process runs the session.
            UserError: the agent has no model.
        """
        self._check_model()
        given = None if output_type is None else OutputType.of(output_type)
        schema, typed = None if given is None else given.schema, given or self.output_type
        metadata = with_sources(self.sources, metadata)
        if session_id is not None and self._exists(session_id):
            return await self._run_here(session_id, None, on_event, typed=typed,
                                        question=storable(question), schema=schema)
        session = AgentSession.start(storable(question), id=session_id or random_id(),
                                     at=time.time(), metadata=metadata)
        session.turn.output_schema = schema
        self.store.save(session)
        return await self._run_here(session.id, session, on_event, typed=typed)

    def astream(self, question: str, *, metadata: dict[str, Any] | None = None,
                session_id: str | None = None, output_type: Any = None) -> AsyncIterator[Event]:
        """:meth:`arun`, its events yielded as they happen (a streaming model's text as
        ``model_delta``), the last a ``RunFinished`` with the result; leaving the loop early
        cancels the run as Ctrl-C does (see :mod:`miniagent.core.runtime.stream`)."""
        from miniagent.core.runtime.stream import stream_run  # events load with a stream

        typed = OutputType.of(output_type) if output_type is not None else self.output_type
        return typed_events(stream_run(partial(self.arun, question, metadata=metadata,
                                               session_id=session_id, output_type=typed),
                                       self.bus), typed)

    def _check_model(self) -> None:
        if self.model is None:
            raise UserError("this agent needs a model to run here: give Agent(model=...), or "
                            "wrap it in miniagent.temporal.TemporalAgent, whose workers serve "
                            "the model")

    def _exists(self, session_id: str) -> bool:
        try:
            self.store.load(session_id)
        except SessionNotFound:
            return False
        return True

    async def aresume(self, session_id: str, *, on_event: Subscriber | None = None,
                      force: bool = False) -> RunResult:
        """Continue a saved session: after approvals, a crash, a timeout or an error.

        ``force`` takes the session over even from a process that looks alive (a person
        knows it is gone; if it is not, its next checkpoint is refused and it stops).

        Raises:
            SessionNotFound: No session has that id.
            SessionBusy: Another live process runs it.
            SessionError: The session cannot go on as asked.
            UserError: The agent has no model.
        """
        self._check_model()
        return await self._run_here(session_id, None, on_event, force, typed=self.output_type)

    async def _run_here(self, session_id: str, fresh: AgentSession | None,
                        on_event: Subscriber | None, force: bool = False, *,
                        question: str | None = None, schema: dict[str, Any] | None = None,
                        typed: OutputType | None = None) -> RunResult:
        """The session under this process's lease, run by the run shell with effects performed
        here (with ``question``: as its next turn); a ``typed`` run's result and ``on_event``'s
        ``RunFinished`` both have ``output`` as its type."""
        from miniagent.core.runtime import inprocess  # the run machinery: loaded by a first run
        from miniagent.core.runtime.loop import run_session
        from miniagent.core.runtime.run import rules_for
        from miniagent.core.tools.toolbox import Toolbox

        assert self.model is not None  # _check_model
        if typed is not None:  # an untyped run never loads core/output's code
            on_event = typed_subscriber(on_event, typed, session_id)
        owner = new_owner()
        self.store.acquire(session_id, owner, force=force)
        late: inprocess.LateCalls | None = None
        try:
            session = fresh or self.store.load(session_id)
            if question is not None:
                session.new_turn(question, at=time.time())
                session.turn.output_schema = schema
                self.store.save(session, owner=owner)
            elif session.status in FINAL:
                return typed_result(session.result(), typed) if typed else session.result()
            if session.status != "running":
                session.transition("running", f"resumed from {session.status}", at=time.time())
            toolbox = await Toolbox.gather(self.sources)
            rules = rules_for(inprocess.within_caller(self.spec, session), toolbox,
                              protocol=self.protocol)
            late = inprocess.LateCalls(self.store, session_id, owner,
                                       max_chars=rules.spec.limits.max_observation_chars)
            effects = inprocess.InProcessEffects(
                model=self.model, tools=toolbox, store=self.store, bus=self.bus, owner=owner,
                session_id=session_id, late=late, approver=self.approver,
                subscribers=(on_event,) if on_event else ())
            with inprocess.run_load.run():
                result = await run_session(session, rules, effects)
            await self.bus.flush()  # run_finished has reached the subscribers on return
            return typed_result(result, typed) if typed else result
        finally:  # a call left running by a cancelled run keeps the lease until it is saved
            release = partial(self.store.release, session_id, owner)
            if late is None:
                release()
            else:
                late.release_when_settled(release)

    # -- warming up ----------------------------------------------------------------------

    async def start(self, *, timeout: float | None = defaults.WARMUP_TIMEOUT) -> WarmupReport:
        """Run the warm-ups of this agent's tools, sources and model, concurrently, each once
        per process and within ``timeout`` seconds (``None``: no limit; ``async with agent:``
        uses the default): ``@tool(warmup=...)`` functions run, MCP
        servers connect and list their tools, the embedded model loads and evaluates the prompt
        of a first request (so the first step finds the system prompt in its cache). A failure
        is reported (and logged), never raised: the tool stays usable, cold.

        Example:
            >>> import asyncio
            >>> from miniagent import ScriptedModel, tool
            >>> index: list[str] = []
            >>> @tool(warmup=lambda: index.append("loaded"))
            ... def search(query: str) -> str:
            ...     '''Search the index.'''
            ...     return f"{query}: the index was {index[0]} before the first call"
            >>> async def main() -> str:
            ...     model = ScriptedModel(['Action: search\\nAction Input: {"query": "cats"}',
            ...                            "Final Answer: done"])
            ...     async with Agent(model=model, tools=[search]) as agent:  # starts: warms
            ...         print(agent.warmup_report)
            ...         result = await agent.arun("Find cats")
            ...     return result.steps[0].observations[0].output
            >>> asyncio.run(main())  # doctest: +ELLIPSIS
            1 of 1 warm in ... s
            'cats: the index was loaded before the first call'
        """
        from miniagent.core.runtime.inprocess import warm_model_prompt
        from miniagent.core.tools.warmup import model_warmups, run_warmups, source_warmups

        if timeout is not None:
            seconds("warmup_timeout", timeout)
        warm_model = partial(warm_model_prompt, self.model, self.sources, self.spec,
                             self.protocol)
        warmups = source_warmups(self.sources) + model_warmups(self.model, warm_model)
        self.warmup_report = await run_warmups(warmups, timeout=timeout)
        return self.warmup_report

    def warm_up(self, *, timeout: float | None = defaults.WARMUP_TIMEOUT) -> WarmupReport:
        """Synchronous :meth:`start`, for programs that call :meth:`run`.

        What outlives an event loop stays warm (``@tool(warmup=...)`` functions, the embedded
        model and its prompt cache). MCP servers are stopped again at its end, as at the end
        of every synchronous run (each has its own event loop): to keep them connected, use
        ``async with agent:`` and ``arun``.
        """
        return self._sync(self.start(timeout=timeout))

    async def __aenter__(self) -> Agent:
        """Start (:meth:`start`); leaving closes the agent (:meth:`aclose`)."""
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def as_tool(self, *, name: str, description: str,
                max_depth: int = defaults.AGENT_TOOL_MAX_DEPTH,
                requires_approval: ApprovalRule = False, timeout: float | None = None) -> AgentTool:
        """This agent as a tool of another agent: it answers the ``question`` argument.

        The sub-run goes through this agent's own loop and store; its steps, usage and status
        are recorded on the parent's call, its tokens count in the parent's usage, and a call
        of it that needs approval makes the parent wait (see
        :mod:`miniagent.core.tools.agent_tool`).

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
        from miniagent.core.tools.agent_tool import AgentTool  # agents as tools are a rare path

        return AgentTool(self, name=name, description=description, max_depth=max_depth,
                         requires_approval=requires_approval, timeout=timeout)

    # -- decisions, cancelling, reading: the same on every driver -------------------------

    async def aapprove(self, session_id: str, call_id: str | None = None,
                       reason: str | None = None, *, arguments: dict[str, Any] | None = None,
                       force: bool = False) -> None:
        """Approve one waiting call, or all of them; ``resume`` then runs them.

        ``arguments`` approves the call with these instead of the model's (checked against the
        tool's schema first; the model is told); ``force`` decides even while a process that
        looks alive holds the session.

        Raises:
            DecisionError: the session is not waiting, has no such waiting call, or the edited
                arguments do not fit the tool's schema (then nothing is decided).
        """
        await self._adecide(session_id, call_id, True, reason, force, arguments)

    async def adeny(self, session_id: str, call_id: str | None = None,
                    reason: str | None = None, *, force: bool = False) -> None:
        """Deny one waiting call, or all; the model is told it was denied and why."""
        await self._adecide(session_id, call_id, False, reason, force)

    async def _adecide(self, session_id: str, call_id: str | None, approved: bool,
                       reason: str | None, force: bool,
                       arguments: dict[str, Any] | None = None) -> None:
        self.store.update(session_id, lambda s: decide(s, call_id, approved, reason,
                                                       at=time.time(), arguments=arguments),
                          force=force)

    async def acancel(self, session_id: str, reason: str = "cancelled by a person", *,
                      force: bool = False) -> None:
        """End a session that no live process is running; it cannot be resumed afterwards."""
        cancel_session(self.store, session_id, reason, force=force)

    async def asession(self, session_id: str) -> AgentSession:
        """The session, as of its last checkpoint."""
        return self.store.load(session_id)

    async def afork(self, session_id: str, *, at_step: int) -> str:
        """A new session whose history is the first ``at_step`` steps of ``session_id``
        (0: its first question alone), linked to it (``forked_from``); returns the new id.

        The old session is only read. The fork goes on as any session: ``resume`` (calls left
        open at that step are settled as a resume settles them), ``approve``/``deny``, or a
        next question with ``arun(..., session_id=...)``. See
        :mod:`miniagent.core.runtime.fork` for what a fork keeps.

        Raises:
            SessionNotFound: No session has that id.
            UserError: ``at_step`` is out of range.
        """
        return self.fork(session_id, at_step=at_step)

    def fork(self, session_id: str, *, at_step: int) -> str:
        """Synchronous :meth:`afork` (a store read and write: it never waits)."""
        from miniagent.core.runtime.fork import fork_stored  # a rare path: loaded on first use

        return fork_stored(self.store, session_id, at_step).id

    def session(self, session_id: str) -> AgentSession:
        """Synchronous :meth:`asession` (a store read: fine inside an event loop too)."""
        return self.store.load(session_id)

    def _now(self, work: Coroutine[Any, Any, None]) -> None:
        """A store operation that needs no event loop (an agent used as a tool decides from
        inside one)."""
        _complete(work)

    async def aclose(self) -> None:
        """Close the tool sources and the model's connections (a later run reopens them, a
        later :meth:`start` warms the sources again)."""
        import asyncio  # loaded already by whatever ran this coroutine

        from miniagent.core.tools.toolbox import ToolRegistry

        await asyncio.gather(*(source.aclose() for source in self.sources),
                             return_exceptions=True)
        # a registry's warm-ups are its tools', warm for the process: only a source warmed as
        # a whole (an MCP server) goes cold, and a run of plain functions never loads the record
        warmed = [source for source in self.sources if not isinstance(source, ToolRegistry)
                  and callable(getattr(source, "warmup", None))]
        if warmed:
            from miniagent.core.tools.warmup_record import forget

            forget(*warmed)
        if self.model is not None:
            await self.model.aclose()
        if self.tracer is not None:
            await self.bus.flush()  # what was emitted is written before the file closes
            self.tracer.close()


def with_sources(sources: Iterable[ToolSource], metadata: dict[str, Any] | None
                 ) -> dict[str, Any] | None:
    """A new session's metadata with the records of its tool sources (e.g. MCP servers), so
    that a resume elsewhere can rebuild them."""
    from miniagent.core.tools.toolbox import records

    listed = records(list(sources))
    return {**(metadata or {}), "tool_sources": listed} if listed else metadata


def _complete(work: Coroutine[Any, Any, None]) -> None:
    """Run a coroutine that never suspends (an in-process decision: plain store calls)."""
    try:
        work.send(None)
    except StopIteration:
        return
    work.close()
    raise RuntimeError("an in-process decision suspended")  # pragma: no cover


def cancel_session(store: CheckpointStore, session_id: str, reason: str, *,
                   force: bool = False,
                   check: Callable[[AgentSession], None] | None = None) -> None:
    """End a session that no live process is running; it cannot be resumed afterwards.

    ``check`` sees the session as it is saved, under its lease, just before it is cancelled,
    and may raise to leave it as it is (the inbox checks that its page is not stale)."""
    owner = new_owner()
    store.acquire(session_id, owner, force=force)

    def cancel(session: AgentSession) -> None:
        if check is not None:
            check(session)
        session.transition("cancelled", reason, at=time.time())

    try:
        store.update(session_id, cancel, owner=owner)
    finally:
        store.release(session_id, owner)
