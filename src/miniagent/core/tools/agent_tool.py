"""Agents as tools: :meth:`Agent.as_tool <miniagent.core.agent.Agent.as_tool>` and
:class:`AgentTool`.

An agent used as a tool takes one argument, ``question``, and answers it with a run of its own:
the normal loop of that agent (its model, tools, limits and store), in a session whose id is
made from the parent's session and call ids (``<parent>-<call id>``). That makes the call safe
to run again: a second attempt finds the sub-session and resumes it instead of starting over,
so the sub-run's own completed calls never repeat.

The observation the parent gets carries a :class:`~miniagent.core.types.SubRun` (status, steps,
usage, what waits): saved with the parent's step, added to the parent's usage by the step logic
(:mod:`miniagent.core.session`). When the sub-run stops to wait for a person, the parent's
call waits too; the person decides on the parent's call, the decision comes back to this tool
through :func:`~miniagent.core.types.tool_context` when the parent resumes, and the tool
applies
it to the sub-run's waiting calls before it resumes the sub-run. For that to work across
processes the sub-agent needs a durable store (a :class:`~miniagent.core.store.SQLiteStore`; it may
be the parent's file).

Nesting is limited: a sub-run deeper than ``max_depth`` is not started; the model gets an error
observation saying so (this also stops an agent that lists itself among its tools).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from typing import TYPE_CHECKING, Any

from miniagent._internal import defaults
from miniagent.core.errors import DecisionError, SessionNotFound, ToolError, UserError
from miniagent.core.session import storable
from miniagent.core.store.base import random_id
from miniagent.core.tools.tool import ApprovalRule, Tool
from miniagent.core.types import (
    Observation,
    RunResult,
    SubRun,
    ToolCall,
    ToolContext,
    current_context,
)

if TYPE_CHECKING:
    from miniagent.core.agent import Agent

__all__ = ["DEFAULT_MAX_DEPTH", "AgentTool"]

DEFAULT_MAX_DEPTH = defaults.AGENT_TOOL_MAX_DEPTH
"""How deep agents used as tools may nest by default (a direct sub-agent is depth 1)."""

DEPTH_KEY, PARENT_KEY = "agent_depth", "parent_session"
"""Keys of a sub-session's metadata: its depth, and the parent's session and call."""

_SAFE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"question": {
        "type": "string", "description": "The question or task for the agent, self-contained."}},
    "required": ["question"],
}


class AgentTool:
    """An agent offered to another agent as one tool (a tool source with one tool).

    Args:
        agent: the agent that answers.
        name: the tool's name (1-64 letters, digits, ``_`` or ``-``).
        description: what the agent is good at, for the model that delegates to it.
        max_depth: the deepest nesting allowed for this agent's runs (1: only as a direct
            sub-agent of a top-level run).
        requires_approval: a person approves each delegation first (``True`` or a predicate
            on ``{"question": ...}``).
        timeout: seconds the parent waits for the answer (the sub-agent's own ``timeout``
            limits its run too).

    Raises:
        ToolDefinitionError: an invalid name or description.
        UserError: ``max_depth`` below 1.
    """

    def __init__(self, agent: Agent, *, name: str, description: str,
                 max_depth: int = DEFAULT_MAX_DEPTH, requires_approval: ApprovalRule = False,
                 timeout: float | None = None) -> None:
        if max_depth < 1:
            raise UserError(f"max_depth must be at least 1, got {max_depth}")
        self.agent, self.max_depth = agent, max_depth
        self._closing = False
        # idempotent: running it again resumes the same sub-session
        self.tool = Tool.from_schema(name=name, description=description, parameters=PARAMETERS,
                                     fn=lambda arguments: self._answer(arguments,
                                                                       current_context()),
                                     idempotent=True, timeout=timeout,
                                     requires_approval=requires_approval)
        # judged before the call waits for a slot: a call too deep never waits for its parent
        self.tool.precheck = self._too_deep

    @property
    def name(self) -> str:
        return self.tool.name

    def __repr__(self) -> str:
        return f"AgentTool(name={self.name!r}, max_depth={self.max_depth})"

    async def list_tools(self) -> list[Tool]:
        return [self.tool]

    async def call_tool(self, call: ToolCall, context: ToolContext | None = None
                        ) -> Observation:
        try:
            return await self._answer(call.arguments, context)
        except ToolError as exc:
            return Observation(call_id=call.id, tool_name=call.name, output=str(exc),
                               is_error=True)

    async def warmup(self) -> None:
        """Warm the sub-agent (its tools, sources and model: :meth:`Agent.start
        <miniagent.core.agent.Agent.start>`, with its default timeout).

        Raises:
            ToolError: some of its warm-ups failed (the message says which, and why).
        """
        report = await self.agent.start()
        if not report.ok:
            raise ToolError("; ".join(str(outcome) for outcome in report.failed))

    async def aclose(self) -> None:
        """Close the sub-agent's tools and model (a later run reopens them); an agent among
        its own tools, directly or through others, is closed once."""
        if self._closing:
            return
        self._closing = True
        try:
            await self.agent.aclose()
        finally:
            self._closing = False

    async def _answer(self, arguments: dict[str, Any], context: ToolContext | None
                      ) -> Observation:
        refused = self._too_deep(context)
        if refused is not None:
            raise ToolError(refused)
        depth = _depth_of(context) + 1
        session_id = sub_session_id(context)
        result = await self._run(session_id, storable(str(arguments["question"])),
                                 context, depth)
        return self._observation(result, depth)

    def _too_deep(self, context: ToolContext | None) -> str | None:
        """Why a call in ``context`` would nest past ``max_depth``; ``None`` when it may run."""
        depth = _depth_of(context) + 1
        if depth <= self.max_depth:
            return None
        return (f"The agent {self.name!r} was not run: agents used as tools may nest at most "
                f"{self.max_depth} deep, and this call would run at depth {depth}. Answer with "
                "what you know, or use another tool.")

    async def _run(self, session_id: str, question: str, context: ToolContext | None,
                   depth: int) -> RunResult:
        """The sub-run, through the agent's public API: a new session, or the same one
        resumed (with a person's relayed decision applied first)."""
        agent = self.agent
        try:
            existing = agent.session(session_id)
        except SessionNotFound:
            existing = None
        decision = context.decision if context is not None else None
        if existing is None and decision is not None:
            raise ToolError(
                f"The agent {self.name!r} cannot go on: its session {session_id} is gone from "
                "its store, so the decision could not be applied (a sub-agent whose parent "
                "resumes in another process needs a durable store). Do not retry this call.")
        if existing is None:
            # not the parent's metadata: what it holds (the CLI's run options, say) is the
            # parent's configuration; the link lets a reader find it
            metadata = {DEPTH_KEY: depth, PARENT_KEY: _parent(context)}
            return await agent.arun(question, session_id=session_id, metadata=metadata)
        if decision is not None and existing.status == "awaiting_approval":
            decide = agent.approve if decision.approved else agent.deny
            # every call still waiting (those a person decided there keep that decision);
            # with nothing left undecided the resume goes on with what was decided
            with contextlib.suppress(DecisionError):
                decide(session_id, None, decision.reason)
        return await agent.aresume(session_id)

    def _observation(self, result: RunResult, depth: int) -> Observation:
        sub = SubRun(agent=self.name, session_id=result.session_id, status=result.status,
                     reason=result.reason, depth=depth, final_answer=result.final_answer,
                     steps=result.steps, usage=result.usage, pending=result.pending_approvals)
        if result.status == "completed":
            text, failed = result.final_answer or "(the agent gave an empty answer)", False
        elif result.status == "awaiting_approval":
            text, failed = f"The agent {self.name!r} waits for a person's approval.", False
        elif result.answered_at_limit:
            text, failed = (f"The agent {self.name!r} reached its step limit; its best answer "
                            f"from what it had: {result.final_answer}"), False
        else:
            text = (f"The agent {self.name!r} stopped without an answer ({result.status}: "
                    f"{result.reason}). Answer with what you know, or try another way.")
            failed = True
        return Observation(call_id="", tool_name=self.name, output=text, is_error=failed,
                           sub_run=sub)


def sub_session_id(context: ToolContext | None) -> str:
    """The sub-session of this call: the same on every attempt of the call."""
    if context is None:  # called outside a run (a test calling the tool directly)
        return f"sub-{random_id()}"
    call = context.call_id
    if not _SAFE_ID.fullmatch(call):
        call = hashlib.sha256(call.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{context.session_id}-{call}"


def _depth_of(context: ToolContext | None) -> int:
    depth = context.metadata.get(DEPTH_KEY, 0) if context is not None else 0
    return depth if isinstance(depth, int) and depth >= 0 else 0


def _parent(context: ToolContext | None) -> dict[str, Any] | None:
    if context is None:
        return None
    return {"session_id": context.session_id, "call_id": context.call_id, "step": context.step}
