"""Agent: the configuration of an agent. Each run's state lives in its own AgentSession."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Coroutine, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from miniagent import defaults
from miniagent.bounds import quantity, seconds, whole
from miniagent.errors import SessionNotFound, UserError
from miniagent.ids import random_id
from miniagent.models.base import ALL_AIDS, Model
from miniagent.protocol.base import ActionProtocol
from miniagent.protocol.registry import ProtocolRef, default_protocol, protocol_ref
from miniagent.protocol.tool_choice import check_choice
from miniagent.retry import RetryPolicy
from miniagent.runtime import gcload
from miniagent.runtime.approvals import Approver, InterruptedPolicy, decide
from miniagent.runtime.bus import EventBus, Subscriber
from miniagent.runtime.guards import Limits
from miniagent.runtime.inprocess import InProcessEffects
from miniagent.runtime.late_calls import LateCalls
from miniagent.runtime.run import run_session
from miniagent.runtime.spec import AIDS_FOR, AgentSpec, Compression, rules_for
from miniagent.session import FINAL, AgentSession
from miniagent.store.base import CheckpointStore, new_owner
from miniagent.store.memory import MemoryStore
from miniagent.sync import run_coroutine
from miniagent.text import storable
from miniagent.tool_context import current_context
from miniagent.tools.registry import ApprovalRule, Tool, ToolRegistry
from miniagent.tools.source import ToolSource, records
from miniagent.tools.toolbox import Toolbox
from miniagent.types import RunResult

if TYPE_CHECKING:
    from miniagent.observe.jsonl import JsonlTracer
    from miniagent.tools.agent_tool import AgentTool
    from miniagent.tools.warmup import WarmupReport

T = TypeVar("T")

ToolItem = Tool | Callable[..., Any] | ToolSource


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
    conversation so far, plus those already called (see :mod:`miniagent.runtime.selection`);
    0 offers them all.

    A small model gets the aids for weak models it is measured to need
    (``model.capabilities.needed_aids()``; the embedded model's are decided per model family
    and size by :mod:`miniagent.models.profiles`) unless told otherwise: ``aids="on"`` turns
    every aid on, ``aids="off"`` every one off, and each aid given below wins over both.
    The aids are: ``tool_selection`` defaults to
    :data:`~miniagent.defaults.SMALL_MODEL_TOOLS` and ``worked_example`` (a worked example of
    one round with the first offered tool in the ReAct prompt) to True; for other models
    ``worked_example`` defaults to False. Four more aids are on for a small model and off
    otherwise: ``strict_selection`` (the selection offers only tools the conversation matches,
    best first, none when nothing does, so a question no tool is about gets a direct answer;
    without ``tool_selection``, every matching tool), ``quote_answers`` (after a tool result,
    a ReAct Final Answer is a quote of a result: see :mod:`miniagent.protocol.quotes`) and
    ``answer_after_results`` (after that many steps whose calls all succeeded, the next step
    must answer; :data:`~miniagent.defaults.SMALL_MODEL_ROUNDS` for a small model, no such
    rule for others or with 0; see :class:`~miniagent.runtime.guards.Limits`) and
    ``restate_question`` (after a step's results, the last one ends with the turn's question
    and what to do next: see :func:`~miniagent.runtime.guards.restated`). ``act_first``
    is off unless given: while the turn has called no tool, a step that offers tools must call
    one (unlike ``tool_choice="required"``, it asks nothing of a step that offers no tool).
    After an intervention on a repeated call, the next step must answer
    (``answer_after_repeat``, default True: see :class:`~miniagent.runtime.guards.Limits`).
    ``tool_choice`` (``"auto"``, ``"required"``, ``"none"`` or a tool's name) says whether
    the model must call a tool: the native ``tool_choice`` field, or the ReAct grammar; a reply
    that disobeys is sent back as invalid. ``required`` and a name hold until the run's first
    tool call, then ``auto`` (see :mod:`miniagent.protocol.tool_choice`). None lets the model
    decide (an HTTP model sends ``auto`` with native tools).

    With ``memory`` (a :class:`~miniagent.memory.Memory`), the model gets ``remember`` and
    ``recall`` tools over its ``memory_namespace`` (approval rules and limits apply as to any
    tool), and, unless ``memory_recall`` is False, before the first step of every turn the
    memories found for the question are put before it as a marked block of data, not
    instructions (see :mod:`miniagent.runtime.recall`).

    ``tool_retry`` (a :class:`~miniagent.retry.RetryPolicy`, or a number of attempts) is
    the retry policy of the tools that set none: a call that failed transiently
    (``ToolError(..., retryable=True)``; a timeout or connection error of an idempotent tool)
    is tried again with backoff, within the run's deadline (see :mod:`miniagent.retry`).

    ``await agent.start()`` (or ``async with agent:``, which starts and closes it) runs the
    warm-ups of its tools, sources and model before the first run, concurrently, each at most
    ``warmup_timeout`` seconds and once per process; it returns a
    :class:`~miniagent.tools.warmup.WarmupReport` and never raises for a warm-up that failed
    (the tool stays usable). A run works the same without it: then nothing is warmed, and
    first calls pay their cold start (see :mod:`miniagent.tools.warmup`).

    ``trace`` appends every event of every run to a JSONL file (see
    :class:`~miniagent.observe.jsonl.JsonlTracer`; the model's API key never reaches it).

    Given ``temporal`` (a ``temporalio`` client from :func:`miniagent.temporal.connect`),
    ``arun`` runs the session as a workflow on ``task_queue``, whose workers serve this agent's
    model and tools (:func:`miniagent.temporal.agent_worker`, or ``miniagent worker``); it
    returns as in process (``awaiting_approval`` with the pending approvals when calls wait),
    and ``aapprove``/``adeny``/``aresume``/``acancel`` work on the cluster's session. Such an
    agent needs no ``model`` of its own: then the workers' model decides the protocol.
    ``temporal_options`` (:class:`~miniagent.temporal.TemporalOptions`) set approval and
    activity timeouts there.
    """

    def __init__(
        self,
        *,
        model: Model | None = None,
        tools: ToolRegistry | Iterable[ToolItem] = (),
        instructions: str | None = None,
        max_steps: int = defaults.MAX_STEPS,
        token_budget: int | None = None,
        timeout: float | None = None,
        max_observation_chars: int = defaults.MAX_OBSERVATION_CHARS,
        repeat_limit: int = defaults.REPEAT_LIMIT,
        answer_after_repeat: bool = True,
        answer_after_results: int | None = None,
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
        worked_example: bool | None = None,
        strict_selection: bool | None = None,
        act_first: bool = False,
        quote_answers: bool | None = None,
        restate_question: bool | None = None,
        approval_timeout: float | None = None,
        trace: str | os.PathLike[str] | None = None,
        temporal: Any = None,
        task_queue: str = "miniagent",
        temporal_options: Any = None,
        memory: Any = None,
        memory_namespace: str = "default",
        memory_recall: bool = True,
        tool_retry: RetryPolicy | int | None = None,
        warmup_timeout: float | None = defaults.WARMUP_TIMEOUT,
        aids: Literal["auto", "on", "off"] = "auto",
    ) -> None:
        _check_numbers(max_steps=max_steps, tool_selection=tool_selection,
                       temperature=temperature, max_tokens=max_tokens,
                       approval_timeout=approval_timeout, warmup_timeout=warmup_timeout)
        if model is None and temporal is None:
            raise UserError("an Agent needs a model (or a Temporal client, whose workers "
                            "serve the model)")
        if store is not None and temporal is not None:  # nothing given is silently unused
            raise UserError("an Agent on Temporal keeps its sessions in the workflows' "
                            "history: give it no store")
        self.model = model
        self.registry, others = _split_tools(tools)
        self.memory = memory  # a miniagent.Memory: see the class docstring
        if memory is not None:
            from miniagent.memory.tools import memory_tools
            from miniagent.observe.redact import model_secrets

            others.append(ToolRegistry(memory_tools(memory, memory_namespace,
                                                    secrets=model_secrets(model))))
        self.sources: list[ToolSource] = [self.registry, *others]
        """Where the agent's tools come from: its own functions first, then the others."""
        if aids not in ("auto", "on", "off"):
            raise UserError(f"aids must be auto, on or off, got {aids!r}")
        needed = ALL_AIDS if aids == "on" else () if aids == "off" or model is None else (
            model.capabilities.needed_aids())
        given = dict(tool_selection=tool_selection, worked_example=worked_example,
                     strict_selection=strict_selection, quote_answers=quote_answers,
                     answer_after_results=answer_after_results,
                     restate_question=restate_question)
        chosen = _model_aids(needed, **given)
        worked_example = chosen["worked_example"]
        # without its model (a Temporal client) the defaults are the workers' model's to set;
        # a protocol given here has its own worked example
        from_model = () if model is not None or aids != "auto" else tuple(
            name for name, value in given.items()
            if value is None and (name != "worked_example" or protocol is None))
        if protocol is None and model is not None:
            caps = model.capabilities
            protocol = default_protocol(caps.tool_mode, native_tools=caps.native_tools,
                                        grammar=grammar, max_tokens=max_tokens,
                                        example=worked_example)
        self.protocol = protocol
        """The agent's protocol object (None: a Temporal agent without a model, which uses
        the one its workers' model is configured for)."""
        self.spec = AgentSpec(
            limits=Limits(max_steps=max_steps, token_budget=token_budget, timeout=timeout,
                          max_observation_chars=max_observation_chars,
                          repeat_limit=repeat_limit, answer_after_repeat=answer_after_repeat,
                          answer_after_results=chosen["answer_after_results"],
                          max_calls_per_step=max_calls_per_step,
                          tool_concurrency=tool_concurrency),
            protocol=protocol_ref(protocol) if protocol is not None else ProtocolRef(
                options={"grammar": grammar, "max_tokens": max_tokens,
                         "example": worked_example}),
            instructions=instructions, temperature=temperature, max_tokens=max_tokens,
            on_interrupted=on_interrupted,
            compression=(Compression.of(compress_at, keep_last=keep_last, mode=compress)
                         if compress_at is not None else None),
            tool_selection=chosen["tool_selection"],
            strict_selection=chosen["strict_selection"], quote_answers=chosen["quote_answers"],
            restate_question=chosen["restate_question"],
            act_first=act_first,
            approval_timeout=approval_timeout,
            tool_choice=_checked_choice(tool_choice, None if others else self.registry.names),
            recall="recall" if memory is not None and memory_recall else None,
            tool_retry=RetryPolicy.of(tool_retry), aids_from_model=from_model)
        """What the agent is, for every driver (see :mod:`miniagent.runtime.spec`)."""
        self.store: CheckpointStore = store if store is not None else MemoryStore()
        self.approver = approver
        self.bus = EventBus([on_event] if on_event else ())
        self.tracer = None if trace is None else _tracer(trace, model)
        if self.tracer is not None:
            self.bus.subscribe(self.tracer)
        self.temporal, self.task_queue = temporal, task_queue  # a temporalio Client: see temporal
        self.temporal_options = temporal_options  # a miniagent.temporal.TemporalOptions
        self._temporal_driver: Any = None
        self.warmup_timeout = warmup_timeout
        """Seconds each warm-up of :meth:`start` may take (``None``: no limit)."""
        self.warmup_report: WarmupReport | None = None
        """What the last :meth:`start` warmed, and what failed (``None``: never started)."""

    @property
    def limits(self) -> Limits:
        return self.spec.limits

    def subscribe(self, subscriber: Subscriber) -> None:
        """Receive every event of every later run (see :mod:`miniagent.runtime.events`)."""
        self.bus.subscribe(subscriber)

    async def arun(self, question: str, *, metadata: dict[str, Any] | None = None,
                   on_event: Subscriber | None = None, session_id: str | None = None
                   ) -> RunResult:
        """Answer ``question``; always returns a result with a status.

        Without ``session_id``, or with one no session has yet, in a new session of that id.
        With the id of a session whose last turn ended, as that conversation's next turn: the
        model sees the history so far, and the result's steps and usage are this turn's (see
        :meth:`AgentSession.new_turn <miniagent.session.AgentSession.new_turn>`). ``resume``
        is different: it goes on with a turn that has not ended. ``metadata`` is a new
        session's (a later turn keeps the session's own). ``on_event`` receives this run's
        events (besides the agent's subscribers).

        Raises:
            TurnRefused: the session waits for a person, has calls open, or was cancelled.
            SessionBusy: another live process runs the session.
        """
        listed = records(self.sources)  # e.g. MCP servers, so a resume can rebuild them
        if listed:
            metadata = {**(metadata or {}), "tool_sources": listed}
        if self.temporal is not None:  # a session on the cluster, run by a worker there
            return await self._on_temporal().run(question, metadata=metadata,
                                                  on_event=on_event, session_id=session_id)
        if session_id is not None and self._exists(session_id):
            return await self._run_here(session_id, None, on_event, question=storable(question))
        session = AgentSession.start(storable(question), id=session_id or random_id(),
                                     at=time.time(), metadata=metadata)
        self.store.save(session)
        return await self._run_here(session.id, session, on_event)

    def _on_temporal(self) -> Any:
        """The Temporal driver of this agent (made once: it remembers which events of each
        session it has delivered)."""
        if self._temporal_driver is None:
            from miniagent.temporal.client import TemporalDriver

            self._temporal_driver = TemporalDriver(self)
        return self._temporal_driver

    def _exists(self, session_id: str) -> bool:
        try:
            self.store.load(session_id)
        except SessionNotFound:
            return False
        return True

    async def aresume(self, session_id: str, *, on_event: Subscriber | None = None,
                      force: bool = False) -> RunResult:
        """Continue a saved session: after approvals, a crash, a timeout or an error (on
        Temporal: follow it until it stops again).

        ``force`` takes the session over even from a process that looks alive (a person
        knows it is gone; if it is not, its next checkpoint is refused and it stops).

        Raises:
            SessionNotFound, SessionBusy (another live process runs it), SessionError.
        """
        if self.temporal is not None:
            return await self._on_temporal().follow(session_id, on_event=on_event)
        return await self._run_here(session_id, None, on_event, force)

    async def _run_here(self, session_id: str, fresh: AgentSession | None,
                        on_event: Subscriber | None, force: bool = False, *,
                        question: str | None = None) -> RunResult:
        """The in-process driver: the session under this process's lease, run by
        :func:`~miniagent.runtime.run.run_session` with effects performed here (with
        ``question``: as the session's next turn)."""
        if self.model is None:
            raise UserError("this agent has no model, so it runs only on Temporal (its workers "
                            "serve the model): give Agent(model=...) to run it here")
        owner = new_owner()
        self.store.acquire(session_id, owner, force=force)
        late: LateCalls | None = None
        try:
            session = fresh or self.store.load(session_id)
            if question is not None:
                session.new_turn(question, at=time.time())
                self.store.save(session, owner=owner)
            elif session.status in FINAL:
                return session.result()
            if session.status != "running":
                session.transition("running", f"resumed from {session.status}", at=time.time())
            toolbox = await Toolbox.gather(self.sources)
            rules = rules_for(_within_caller(self.spec, session), toolbox,
                              protocol=self.protocol)
            late = LateCalls(self.store, session_id, owner,
                             max_chars=rules.spec.limits.max_observation_chars)
            effects = InProcessEffects(
                model=self.model, tools=toolbox, store=self.store, bus=self.bus, owner=owner,
                session_id=session_id, late=late, approver=self.approver,
                subscribers=(on_event,) if on_event else ())
            with gcload.load.run():
                result = await run_session(session, rules, effects)
            await self.bus.flush()  # run_finished has reached the subscribers on return
            return result
        finally:  # a call left running by a cancelled run keeps the lease until it is saved
            release = partial(self.store.release, session_id, owner)
            if late is None:
                release()
            else:
                late.release_when_settled(release)

    # -- warming up ----------------------------------------------------------------------

    async def start(self) -> WarmupReport:
        """Run the warm-ups of this agent's tools, sources and model, concurrently, each once
        per process and within ``warmup_timeout``: ``@tool(warmup=...)`` functions run, MCP
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
        from miniagent.tools.warmup import (
            model_warmups,
            run_warmups,
            source_warmups,
            warm_model_prompt,
        )

        warm_model = partial(warm_model_prompt, self.model, self.sources, self.spec,
                             self.protocol)
        warmups = source_warmups(self.sources) + model_warmups(self.model, warm_model)
        self.warmup_report = await run_warmups(warmups, timeout=self.warmup_timeout)
        return self.warmup_report

    def warm_up(self) -> WarmupReport:
        """Synchronous :meth:`start`, for programs that call :meth:`run`.

        What outlives an event loop stays warm (``@tool(warmup=...)`` functions, the embedded
        model and its prompt cache). MCP servers are stopped again at its end, as at the end
        of every synchronous run (each has its own event loop): to keep them connected, use
        ``async with agent:`` and ``arun``.
        """
        return self._sync(self.start())

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
        from miniagent.tools.agent_tool import AgentTool  # agents as tools are a rare path

        return AgentTool(self, name=name, description=description, max_depth=max_depth,
                         requires_approval=requires_approval, timeout=timeout)

    # -- decisions, cancelling, reading: the same on every driver -------------------------

    async def aapprove(self, session_id: str, call_id: str | None = None,
                       reason: str | None = None, *, force: bool = False) -> None:
        """Approve one waiting call, or all of them; ``resume`` then runs them (on Temporal
        the session goes on at once).

        ``force`` decides even while a process that looks alive holds the session.

        Raises:
            DecisionError: the session is not waiting, or has no such waiting call.
        """
        await self._adecide(session_id, call_id, True, reason, force)

    async def adeny(self, session_id: str, call_id: str | None = None,
                    reason: str | None = None, *, force: bool = False) -> None:
        """Deny one waiting call, or all; the model is told it was denied and why."""
        await self._adecide(session_id, call_id, False, reason, force)

    async def _adecide(self, session_id: str, call_id: str | None, approved: bool,
                       reason: str | None, force: bool) -> None:
        if self.temporal is not None:
            await self._on_temporal().sessions.decide(session_id, approved, call_id, reason)
            return
        self.store.update(session_id,
                          lambda s: decide(s, call_id, approved, reason, at=time.time()),
                          force=force)

    async def acancel(self, session_id: str, reason: str = "cancelled by a person", *,
                      force: bool = False) -> None:
        """End a session that no live process is running; it cannot be resumed afterwards
        (on Temporal: cancel its workflow)."""
        if self.temporal is not None:
            await self._on_temporal().sessions.cancel(session_id, reason)
            return
        cancel_session(self.store, session_id, reason, force=force)

    async def asession(self, session_id: str) -> AgentSession:
        """The session, as of its last checkpoint (on Temporal: as the workflow holds it)."""
        if self.temporal is not None:
            return await self._on_temporal().sessions.session(session_id)
        return self.store.load(session_id)

    def approve(self, session_id: str, call_id: str | None = None, reason: str | None = None,
                *, force: bool = False) -> None:
        """Synchronous :meth:`aapprove`."""
        self._now(self.aapprove(session_id, call_id, reason, force=force))

    def deny(self, session_id: str, call_id: str | None = None, reason: str | None = None,
             *, force: bool = False) -> None:
        """Synchronous :meth:`adeny`."""
        self._now(self.adeny(session_id, call_id, reason, force=force))

    def cancel(self, session_id: str, reason: str = "cancelled by a person", *,
               force: bool = False) -> None:
        """Synchronous :meth:`acancel`."""
        self._now(self.acancel(session_id, reason, force=force))

    def session(self, session_id: str) -> AgentSession:
        """Synchronous :meth:`asession`."""
        if self.temporal is None:  # a store read: fine inside an event loop too
            return self.store.load(session_id)
        return self._sync(self.asession(session_id))

    def _now(self, work: Coroutine[Any, Any, None]) -> None:
        """In process, a store operation that needs no event loop (an agent used as a tool
        decides from inside one); on Temporal an RPC, run like :meth:`run`."""
        if self.temporal is None:
            _complete(work)
            return
        self._sync(work)

    def run(self, question: str, *, metadata: dict[str, Any] | None = None,
            on_event: Subscriber | None = None, session_id: str | None = None) -> RunResult:
        """Synchronous :meth:`arun`; use ``await agent.arun(...)`` inside an event loop."""
        return self._sync(self.arun(question, metadata=metadata, on_event=on_event,
                                    session_id=session_id))

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
                        "use its async twin there ('await agent.arun(...)', aresume, aapprove, "
                        "adeny, acancel, asession)")

    async def _then_close(self, work: Coroutine[Any, Any, T]) -> T:
        # asyncio.run makes a new event loop each time: connections and processes die with it.
        try:
            return await work
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Close the tool sources and the model's connections (a later run reopens them, a
        later :meth:`start` warms the sources again)."""
        from miniagent.tools.warmup import forget

        await asyncio.gather(*(source.aclose() for source in self.sources),
                             return_exceptions=True)
        forget(*self.sources)
        if self.model is not None:
            await self.model.aclose()
        if self.tracer is not None:
            await self.bus.flush()  # what was emitted is written before the file closes
            self.tracer.close()


def _tracer(trace: str | os.PathLike[str], model: Model | None) -> JsonlTracer:
    """The JSONL trace file's subscriber (its modules load only for an agent that traces)."""
    from miniagent.observe.describe import describe_model
    from miniagent.observe.jsonl import JsonlTracer
    from miniagent.observe.redact import model_secrets

    return JsonlTracer(trace, secrets=model_secrets(model) if model else (),
                       model=describe_model(model).name if model else None)


def _check_numbers(*, max_steps: object, tool_selection: object, temperature: object,
                   max_tokens: object, approval_timeout: object, warmup_timeout: object
                   ) -> None:
    """The agent's own numbers (``Limits`` checks its fields): each finite, in range, and a
    count where a count is meant (a ``NaN`` would switch its limit off).

    Raises:
        UserError: which setting, what it accepts, and what was given.
    """
    whole("max_steps", max_steps, least=1)  # a Limits may hold 0 (a sub-run's share), not this
    for label, value in (("tool_selection", tool_selection), ("max_tokens", max_tokens)):
        if value is not None:
            whole(label, value, least=0 if label == "tool_selection" else 1)
    if temperature is not None:
        quantity("temperature", temperature, least=0.0)
    for label, value in (("approval_timeout", approval_timeout),
                         ("warmup_timeout", warmup_timeout)):
        if value is not None:
            seconds(label, value)


def _within_caller(spec: AgentSpec, session: AgentSession) -> AgentSpec:
    """``spec``, its limits narrowed to what the tool call running this run has left (its
    budget, deadline and model calls), when a run is started from inside one (an agent used
    as a tool): nested runs draw on their parent's limits instead of starting afresh."""
    context = current_context()
    if context is None:
        return spec
    limits, changes = spec.limits, dict[str, Any]()
    if context.tokens_left is not None:
        allowed = session.turn.usage.counted_tokens + context.tokens_left
        changes["token_budget"] = min(limits.token_budget or allowed, allowed)
    if context.deadline is not None:
        left = max(0.001, context.deadline - time.time())
        changes["timeout"] = min(limits.timeout or left, left)
    if context.steps_left is not None:
        changes["max_steps"] = min(limits.max_steps, len(session.turn_steps) + context.steps_left)
    return spec.replace(limits=changes) if changes else spec


def _complete(work: Coroutine[Any, Any, None]) -> None:
    """Run a coroutine that never suspends (an in-process decision: plain store calls)."""
    try:
        work.send(None)
    except StopIteration:
        return
    work.close()
    raise RuntimeError("an in-process decision suspended")  # pragma: no cover


def _checked_choice(choice: str | None, names: list[str] | None) -> str | None:
    try:
        return check_choice(choice, names)
    except ValueError as exc:
        raise UserError(str(exc)) from None


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


def _model_aids(needed: Iterable[str], **given: Any) -> dict[str, Any]:
    """Each aid as given, else its default for a small model where the model needs it (it is
    in ``needed``), else off; a selection or a number of rounds of 0 means none."""
    wanted = set(needed)
    aids = {name: AIDS_FOR[name in wanted][name] if value is None else value
            for name, value in given.items()}
    for name in ("tool_selection", "answer_after_results"):
        aids[name] = aids[name] or None
    return aids


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
