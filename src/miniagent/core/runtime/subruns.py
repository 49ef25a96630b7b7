"""The step logic's side of agents used as tools: a sub-run's usage, its waits, its decisions.

An agent used as a tool (:class:`~miniagent.core.tools.agent_tool.AgentTool`) returns an
observation carrying a :class:`~miniagent.core.types.SubRun`. Three things follow in the parent
(the first two when the call is recorded, :func:`~miniagent.core.runtime.calls.record_outcome`):

- the sub-run's tokens join the parent's totals (only what is new since the call's last
  attempt: a resumed sub-run reports its session's whole usage again);
- a sub-run that stops to wait for a person makes the parent's call wait too
  (``started -> awaiting_approval``): the parent session goes ``awaiting_approval`` with a
  pending approval whose reason names the sub-run's waiting calls;
- the person's decision on that call is not the parent's to apply: approving or denying it
  moves the call to ``approved`` (the agent tool must run again) and records the decision in
  the sub-run, which :func:`relayed_decision` hands to the tool through its
  :class:`~miniagent.core.types.ToolContext`. The tool applies it to the sub-run's waiting
  calls and resumes the sub-run: a denied call is then the sub-agent's to work around.

Plain functions over the session's records; times are given by the caller.
"""

from __future__ import annotations

import json

from miniagent.core.types import CallRecord, Decision, SubRun, TokenUsage

__all__ = ["new_usage", "relay_decision", "relayed_decision", "waiting_note"]


def new_usage(total: TokenUsage, counted: TokenUsage | None) -> TokenUsage:
    """What a sub-run used beyond what was counted at the call's last attempt."""
    if counted is None:
        return total
    if not (total.known and counted.known):  # unknown: what is new is estimated too
        return TokenUsage.unknown(
            estimated=max(0, total.counted_tokens - counted.counted_tokens))
    return TokenUsage(
        prompt_tokens=_less(total.prompt_tokens, counted.prompt_tokens),
        completion_tokens=_less(total.completion_tokens, counted.completion_tokens),
        cached_tokens=_less(total.cached_tokens, counted.cached_tokens),
    )


def _less(total: int | None, counted: int | None) -> int:
    return max(0, (total or 0) - (counted or 0))


def waiting_note(sub: SubRun) -> str:
    """Why the parent's call waits: the sub-run's calls a person must decide."""
    calls = "; ".join(
        f"{item.tool} {json.dumps(item.arguments, ensure_ascii=False)}"
        + (f" ({item.reason})" if item.reason else "")
        for item in sub.pending)
    return (f"the agent {sub.agent!r} (session {sub.session_id}) waits for approval of: "
            f"{calls}; the decision is relayed to it")


def relay_decision(record: CallRecord, approved: bool, reason: str | None, *,
                   at: float) -> bool:
    """Take a person's decision on a call that waits for its sub-run; False for other calls.

    The call goes ``approved`` either way, so that the agent tool runs again and hands the
    decision to the sub-run.
    """
    sub = record.observation.sub_run if record.observation is not None else None
    if sub is None or sub.status != "awaiting_approval":
        return False
    verdict = "approved" if approved else "denied"
    record.move("approved", f"{verdict} for the agent {sub.agent!r}: "
                f"{reason or 'decided by a person'}; relayed to its session", at)
    record.note = reason
    sub.decision = Decision(approved=approved, reason=reason)
    return True


def relayed_decision(record: CallRecord) -> Decision | None:
    """The decision to hand to the sub-run of this call when it runs again, if any."""
    sub = record.observation.sub_run if record.observation is not None else None
    return sub.decision if sub is not None else None
