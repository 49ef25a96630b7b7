"""The loop: render -> generate -> parse -> guard -> execute -> append -> checkpoint.

The only place the loop lives. A step's tool calls are recorded before they run and again when
they complete, and the session is saved at each point, so a resumed run never repeats a
completed call (see ``runtime/approvals.py`` for what happens to an interrupted one).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from miniagent.errors import ModelError, SessionError, ToolsNotSupported
from miniagent.models.base import Model
from miniagent.protocol.grammar import react_grammar
from miniagent.protocol.native import NativeProtocol
from miniagent.protocol.react import ReactProtocol, format_error_observation
from miniagent.runtime.approvals import (
    Approver,
    InterruptedPolicy,
    denial,
    recover_interrupted,
)
from miniagent.runtime.events import Event, EventBus
from miniagent.runtime.guards import Deadline, Limits, LoopDetector, truncate_observation
from miniagent.runtime.session import AgentSession
from miniagent.store.base import CheckpointStore
from miniagent.threads import run_in_daemon_thread
from miniagent.tools.registry import ToolRegistry
from miniagent.types import (
    CallRecord,
    Message,
    ModelResponse,
    Observation,
    ParsedOutput,
    PendingApproval,
    RunResult,
    Step,
)

log = logging.getLogger("miniagent")

Protocol = ReactProtocol | NativeProtocol


class Runtime:
    """Runs sessions for one agent configuration. Holds no per-run state."""

    def __init__(
        self, *, model: Model, registry: ToolRegistry, limits: Limits, bus: EventBus,
        store: CheckpointStore, instructions: str | None = None,
        temperature: float | None = 0.0, max_tokens: int | None = 1024,
        approver: Approver | None = None, on_interrupted: InterruptedPolicy = "ask",
        grammar: bool = True,
    ) -> None:
        self.model, self.registry, self.limits, self.bus = model, registry, limits, bus
        self.store, self.instructions = store, instructions
        self.temperature, self.max_tokens = temperature, max_tokens
        self.approver, self.on_interrupted = approver, on_interrupted
        self.grammar = grammar
        self._react, self._native = ReactProtocol(), NativeProtocol()
        self._grammars: dict[tuple[tuple[str, int], ...], str] = {}

    async def run(self, session: AgentSession, owner: str | None = None) -> RunResult:
        """Step ``session`` until it has a status; always returns a result, never raises."""
        start = time.monotonic()
        deadline = Deadline(self.limits.timeout)
        detector = LoopDetector(self.limits.repeat_limit)
        for step in session.steps:  # a resumed session keeps its repetition counts
            for call in step.tool_calls:
                detector.check(call)
        recover_interrupted(session, self._idempotent, self.on_interrupted)
        self._emit(session, "run_started", question=session.question)
        store_failed = False
        try:
            while not session.done:
                remaining = deadline.remaining()
                advance = self._advance(session, detector, owner)
                await (advance if remaining is None else asyncio.wait_for(advance, remaining))
        except asyncio.TimeoutError:
            session.finish("timeout", f"the run exceeded its deadline of {self.limits.timeout} s")
        except ModelError as exc:
            session.finish("error", f"model request failed: {exc}")
        except SessionError as exc:  # another process took the session over, or a damaged store
            session.finish("error", str(exc))
            store_failed = True
        except Exception as exc:  # a bug of ours must still end the run with a status
            log.exception("internal error in session %s", session.id)
            session.finish("error", f"internal error: {type(exc).__name__}: {exc}")
        session.elapsed += time.monotonic() - start
        if not store_failed:
            self.store.save(session, owner=owner)
        result = session.result()
        self._emit(session, "run_finished", result=result)
        return result

    async def _advance(self, session: AgentSession, detector: LoopDetector, owner: str | None
                       ) -> None:
        last = session.steps[-1] if session.steps else None
        # resumed with calls still to run, to decide, or whose observations are not yet in the
        # history (a crash between the last call's checkpoint and the step's)
        if last is not None and last.calls and session.messages[-1].role == "assistant":
            await self._run_calls(session, last, owner)
        else:
            await self.step(session, detector, owner)

    async def step(self, session: AgentSession, detector: LoopDetector, owner: str | None = None
                   ) -> None:
        """One model call and what follows from it; sets ``session.status`` when the run ends."""
        if self._limit_reached(session):
            return
        index = len(session.steps) + 1
        self._emit(session, "step_started", step=index)
        response, protocol, elapsed = await self._generate(session)
        parsed = protocol.parse(response)
        step = Step(index=index, thought=parsed.thought, raw_output=response.content,
                    usage=response.usage, model_time=elapsed)
        session.steps.append(step)
        session.usage = session.usage + response.usage
        self._emit(session, "model_responded", step=index, response=response, parsed=parsed,
                   elapsed=elapsed)
        if parsed.kind == "final":
            session.messages.append(Message(role="assistant", content=parsed.text))
            step.final_answer = parsed.final_answer
            session.finish("completed", "the model gave a final answer", parsed.final_answer)
        elif parsed.kind == "action":
            self._plan(session, step, parsed, detector)
            if not session.done:
                await self._run_calls(session, step, owner)
                return  # _run_calls checkpoints
        else:
            self._reject(session, step, parsed, protocol)
        self.store.save(session, owner=owner)

    def _limit_reached(self, session: AgentSession) -> bool:
        limits, used = self.limits, session.usage.total_tokens
        if len(session.steps) >= limits.max_steps:
            session.finish("max_steps", f"no final answer after max_steps={limits.max_steps}")
        elif limits.token_budget is not None and used >= limits.token_budget:
            session.finish("budget_exceeded",
                           f"used {used:,} tokens of a budget of {limits.token_budget:,}")
        return session.done

    async def _generate(self, session: AgentSession) -> tuple[ModelResponse, Protocol, float]:
        protocol = self._protocol()
        started = time.perf_counter()
        try:
            response = await self.model.generate(self._render(protocol, session))
        except ToolsNotSupported:
            if self.model.tool_mode != "auto":
                raise
            log.info("server rejected native tools; falling back to ReAct")
            protocol = self._react
            response = await self.model.generate(self._render(protocol, session))
        return response, protocol, time.perf_counter() - started

    def _protocol(self) -> Protocol:
        mode = self.model.tool_mode
        if mode == "react" or (mode == "auto" and self.model.supports_native_tools() is False):
            return self._react
        return self._native

    def _render(self, protocol: Protocol, session: AgentSession) -> Any:
        tools = list(self.registry)
        request = protocol.render(session.messages, tools, self.instructions)
        request.temperature, request.max_tokens = self.temperature, self.max_tokens
        if self.grammar and protocol is self._react:
            request.grammar = self._grammar_for(tools)
        return request

    def _grammar_for(self, tools: list[Any]) -> str:
        """The ReAct grammar for these tools, built once per tool set (it takes ~0.2 ms).

        The key holds each schema's identity too: a tool registered again under the same name
        brings a new schema."""
        key = tuple((tool.name, id(tool.parameters)) for tool in tools)
        if key not in self._grammars:
            self._grammars[key] = react_grammar(tools)
        return self._grammars[key]

    def _plan(self, session: AgentSession, step: Step, parsed: ParsedOutput,
              detector: LoopDetector) -> None:
        """Record the step's calls: ready, waiting for approval, or answered by an intervention."""
        session.messages.append(
            Message(role="assistant", content=parsed.text, tool_calls=parsed.tool_calls))
        for call in parsed.tool_calls:
            verdict = detector.check(call)
            if verdict == "stop":
                session.finish("loop_detected", f"'{call.name}' was repeated with the same "
                               "arguments after an intervention")
                return
            record = CallRecord(call=call)
            if verdict == "intervene":
                text = LoopDetector.intervention(call, self.limits.repeat_limit)
                record.state = "completed"
                record.observation = Observation(
                    call_id=call.id, tool_name=call.name, output=text, is_error=True)
            elif self.registry.needs_approval(call):
                record.state, record.note = "awaiting_approval", f"'{call.name}' needs approval"
            step.calls.append(record)

    async def _run_calls(self, session: AgentSession, step: Step, owner: str | None) -> None:
        """Run what may run, then append the observations or wait for a person."""
        await self._ask_approver(session, step)
        for record in step.calls:
            if record.state == "denied":
                record.state, record.observation = "completed", denial(record)
        runnable = [r for r in step.calls if r.state in ("ready", "approved")]
        for record in runnable:
            record.state = "started"
            self._emit(session, "tool_started", step=step.index, call=record.call)
        self.store.save(session, owner=owner)  # started is on disk before any tool runs
        outcomes = await asyncio.gather(
            *(self._execute(session, step, r, owner) for r in runnable), return_exceptions=True)
        for outcome in outcomes:  # every call has finished; now a failed checkpoint may surface
            if isinstance(outcome, BaseException):
                raise outcome
        waiting = [r for r in step.calls if r.state == "awaiting_approval"]
        if waiting:
            names = ", ".join(f"{r.call.name} ({r.call.id})" for r in waiting)
            session.transition("awaiting_approval", f"waiting for approval of {names}")
        else:
            for record in step.calls:
                assert record.observation is not None
                session.messages.append(Message(
                    role="tool", content=record.observation.output, tool_call_id=record.call.id,
                    name=record.call.name))
        self.store.save(session, owner=owner)

    async def _execute(self, session: AgentSession, step: Step, record: CallRecord,
                       owner: str | None) -> None:
        observation = await self.registry.execute(record.call)
        observation.output = truncate_observation(
            observation.output, self.limits.max_observation_chars)
        record.observation, record.state = observation, "completed"
        step.tool_time = max(step.tool_time, observation.elapsed)
        self.store.save(session, owner=owner)  # completed is on disk as soon as it is known
        self._emit(session, "tool_finished", step=step.index, call=record.call,
                   observation=observation)

    async def _ask_approver(self, session: AgentSession, step: Step) -> None:
        if self.approver is None:
            return
        for record in [r for r in step.calls if r.state == "awaiting_approval"]:
            decision = await run_in_daemon_thread(self.approver, PendingApproval.of(record))
            if decision is not None:
                record.state = "approved" if decision else "denied"

    def _idempotent(self, name: str) -> bool:
        tool = self.registry.get(name)
        return tool is not None and tool.idempotent

    def _reject(self, session: AgentSession, step: Step, parsed: ParsedOutput,
                protocol: Protocol) -> None:
        """Output that is neither an action nor an answer: tell the model the exact format."""
        step.error = parsed.error or "unparseable output"
        if parsed.text:
            session.messages.append(Message(role="assistant", content=parsed.text))
        if protocol is self._react:
            note = format_error_observation(step.error, self.registry.names)
        else:
            names = ", ".join(self.registry.names) or "none"
            note = (f"Your last reply could not be used ({step.error}). Call one of the tools "
                    f"({names}) or reply with your final answer as plain text.")
        session.messages.append(Message(role="user", content=note))

    def _emit(self, session: AgentSession, kind: Any, **fields: Any) -> None:
        self.bus.emit(Event(kind=kind, session_id=session.id, **fields))
