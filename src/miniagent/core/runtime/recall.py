"""Recall before a turn: what the agent's memory holds on the turn's question, put before it.

With a memory (``Agent(memory=...)``), the spec names its recall tool (``AgentSpec.recall``).
Before the first step of every turn, the step logic calls that tool once with the turn's
question, through the driver like any call (an activity on Temporal, so the workflow stays
deterministic), and keeps the block it returns on the turn (``Turn.recalled``). What the model
is sent (:func:`with_recalls`) then has the block before the question, in the same user message:
the messages themselves never change, and the block, fixed once recalled, keeps every later
request a byte extension of the one before.

A recall tool that needs approval is not called before the turn (it never runs without one);
a recall that fails leaves the turn with nothing recalled, and the run goes on. Either way the
``memory_recalled`` event says what happened.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from miniagent.core.runtime.guards import admit_observation
from miniagent.core.session import AgentSession, truncate_observation
from miniagent.core.types import Message, ToolCall, ToolContext

if TYPE_CHECKING:
    from miniagent.core.runtime.effects import Effects
    from miniagent.core.runtime.run import Rules

__all__ = ["MAX_QUERY_CHARS", "Recalled", "before_turn", "with_recalls"]

MAX_QUERY_CHARS = 1000
"""The longest part of a question sent to the recall tool (its start)."""
NOTHING_FOUND = "(none matched)"
"""How a recall that found nothing ends (:mod:`miniagent.memory.tools`): then nothing is put
before the question."""


@dataclass(frozen=True, slots=True)
class Recalled:
    """What one recall before a turn gave."""

    query: str
    text: str
    error: str | None = None


async def before_turn(session: AgentSession, rules: Rules, effects: Effects,
                      call_id: str) -> Recalled | None:
    """Recall for the current turn, once, before its first step; None when there is nothing
    to do (no memory, recalled already, or the turn has steps)."""
    name, turn = rules.spec.recall, session.turn
    if name is None or turn.recalled is not None or session.turn_steps:
        return None
    query = turn.question[:MAX_QUERY_CHARS]
    call = ToolCall(id=call_id, name=name, arguments={"query": query},
                    raw_arguments=json.dumps({"query": query}, ensure_ascii=False))
    if rules.tools.needs_approval(call):
        turn.recalled = ""
        return Recalled(query=query, text="", error=f"'{name}' needs approval: not called "
                                                    "before the turn")
    context = ToolContext.for_call(session.id, call.id, name, 0, session.metadata)
    observation = admit_observation(await effects.run_tool(call, context))
    if observation.is_error:
        turn.recalled = ""
        return Recalled(query=query, text="", error=observation.output)
    found = not observation.output.endswith(NOTHING_FOUND)
    turn.recalled = truncate_observation(observation.output,
                                         rules.spec.limits.max_observation_chars) if found else ""
    return Recalled(query=query, text=turn.recalled)


def with_recalls(session: AgentSession) -> Sequence[Message]:
    """The messages, each turn's question carrying the block recalled for it."""
    recalled = {t.first_message: t.recalled for t in session.turns if t.recalled}
    if not recalled:
        return session.messages
    return [dataclasses.replace(m, content=f"{recalled[i]}\n\n{m.content}")
            if i in recalled else m for i, m in enumerate(session.messages)]
