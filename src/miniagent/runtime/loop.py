"""The loop: render -> generate -> parse -> guard -> execute -> append. The only place it lives."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from miniagent.errors import ModelError, ToolsNotSupported
from miniagent.models.base import Model
from miniagent.protocol.native import NativeProtocol
from miniagent.protocol.react import ReactProtocol, format_error_observation
from miniagent.runtime.events import Event, EventBus
from miniagent.runtime.guards import Deadline, Limits, LoopDetector, truncate_observation
from miniagent.runtime.session import AgentSession
from miniagent.tools.registry import ToolRegistry
from miniagent.types import Message, ModelResponse, Observation, ParsedOutput, RunResult, Step

log = logging.getLogger("miniagent")

Protocol = ReactProtocol | NativeProtocol


class Runtime:
    """Runs sessions for one agent configuration. Holds no per-run state."""

    def __init__(
        self,
        *,
        model: Model,
        registry: ToolRegistry,
        limits: Limits,
        bus: EventBus,
        instructions: str | None = None,
        temperature: float | None = 0.0,
        max_tokens: int | None = 1024,
    ) -> None:
        self.model, self.registry, self.limits, self.bus = model, registry, limits, bus
        self.instructions, self.temperature, self.max_tokens = instructions, temperature, max_tokens
        self._react, self._native = ReactProtocol(), NativeProtocol()

    async def run(self, session: AgentSession) -> RunResult:
        """Step ``session`` until it has a status; always returns a result, never raises."""
        start = time.monotonic()
        deadline = Deadline(self.limits.timeout)
        detector = LoopDetector(self.limits.repeat_limit)
        for step in session.steps:  # a resumed session keeps its repetition counts
            for call in step.tool_calls:
                detector.check(call)
        self._emit(session, "run_started", question=session.question)
        try:
            while not session.done:
                remaining = deadline.remaining()
                if remaining is None:
                    await self.step(session, detector)
                else:
                    await asyncio.wait_for(self.step(session, detector), remaining)
        except asyncio.TimeoutError:
            session.finish("timeout", f"the run exceeded its deadline of {self.limits.timeout} s")
        except ModelError as exc:
            session.finish("error", f"model request failed: {exc}")
        except Exception as exc:  # a bug of ours must still end the run with a status
            log.exception("internal error in session %s", session.id)
            session.finish("error", f"internal error: {type(exc).__name__}: {exc}")
        session.elapsed += time.monotonic() - start
        result = session.result()
        self._emit(session, "run_finished", result=result)
        return result

    async def step(self, session: AgentSession, detector: LoopDetector) -> None:
        """One model call and what follows from it; sets ``session.status`` when the run ends."""
        if self._limit_reached(session):
            return
        index = len(session.steps) + 1
        self._emit(session, "step_started", step=index)
        response, protocol, elapsed = await self._generate(session)
        parsed = protocol.parse(response)
        step = Step(
            index=index, thought=parsed.thought, raw_output=response.content,
            usage=response.usage, model_time=elapsed,
        )
        session.steps.append(step)
        session.usage = session.usage + response.usage
        self._emit(session, "model_responded", step=index, response=response, parsed=parsed,
                   elapsed=elapsed)
        if parsed.kind == "final":
            session.messages.append(Message(role="assistant", content=parsed.text))
            step.final_answer = parsed.final_answer
            session.finish("completed", "the model gave a final answer", parsed.final_answer)
        elif parsed.kind == "action":
            await self._act(session, step, parsed, detector)
        else:
            self._reject(session, step, parsed, protocol)

    def _limit_reached(self, session: AgentSession) -> bool:
        limits = self.limits
        if len(session.steps) >= limits.max_steps:
            session.finish("max_steps", f"no final answer after max_steps={limits.max_steps}")
        elif limits.token_budget is not None and session.usage.total_tokens >= limits.token_budget:
            session.finish(
                "budget_exceeded",
                f"used {session.usage.total_tokens:,} tokens of a budget of "
                f"{limits.token_budget:,}",
            )
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
        request = protocol.render(session.messages, list(self.registry), self.instructions)
        request.temperature, request.max_tokens = self.temperature, self.max_tokens
        return request

    async def _act(
        self, session: AgentSession, step: Step, parsed: ParsedOutput, detector: LoopDetector
    ) -> None:
        calls = parsed.tool_calls
        step.tool_calls = calls
        session.messages.append(Message(role="assistant", content=parsed.text, tool_calls=calls))
        verdicts = [detector.check(call) for call in calls]
        if "stop" in verdicts:
            name = calls[verdicts.index("stop")].name
            session.finish("loop_detected", f"'{name}' was repeated with the same arguments "
                           "after an intervention")
            return
        runnable = [call for call, verdict in zip(calls, verdicts) if verdict == "ok"]
        for call in runnable:
            self._emit(session, "tool_started", step=step.index, call=call)
        results = iter(await self.registry.execute_all(runnable))
        for call, verdict in zip(calls, verdicts):
            if verdict == "ok":
                observation = next(results)
            else:
                text = LoopDetector.intervention(call, self.limits.repeat_limit)
                observation = Observation(
                    call_id=call.id, tool_name=call.name, output=text, is_error=True
                )
            self._observe(session, step, observation, call)

    def _observe(
        self, session: AgentSession, step: Step, observation: Observation, call: Any
    ) -> None:
        observation.output = truncate_observation(
            observation.output, self.limits.max_observation_chars
        )
        step.observations.append(observation)
        step.tool_time = max(step.tool_time, observation.elapsed)
        session.messages.append(Message(
            role="tool", content=observation.output, tool_call_id=call.id, name=call.name
        ))
        self._emit(session, "tool_finished", step=step.index, call=call, observation=observation)

    def _reject(
        self, session: AgentSession, step: Step, parsed: ParsedOutput, protocol: Protocol
    ) -> None:
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
