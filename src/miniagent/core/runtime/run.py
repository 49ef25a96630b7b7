"""The one run shell: where a run starts and ends, on every driver.

:func:`run_session` owns the whole run of a session: it starts the step logic, holds the run's
deadline, turns whatever stops the run into a status, settles the run's time, makes the last
checkpoint and returns the result (announced with ``run_finished``). A driver calls it with its
:class:`~miniagent.core.runtime.effects.Effects` and keeps the session where it lives; it decides
nothing of this.

What stops a run, and the status it ends with:

- the step logic's own decisions: ``completed``, ``max_steps``, ``budget_exceeded``,
  ``loop_detected``, or ``awaiting_approval`` when calls wait for a person;
- the deadline (``limits.timeout``): ``timeout``; the run's work gets :data:`CANCEL_GRACE`
  seconds to wind down, then is left behind (a tool that ignores cancellation cannot hold it);
- a :class:`~miniagent.core.errors.RunFailure` from an effect (the model after its retries, a
  payload over a limit): ``error``, with its message; a :class:`~miniagent.core.errors.SessionError`
  (the store refused a checkpoint: another process took the session over) likewise, and the
  last checkpoint is not tried again;
- a bug of ours: ``error``, ``internal error: ...`` (logged with its traceback).

Effects that interrupt a run (:class:`~miniagent.core.errors.RunInterrupted`): a
:class:`~miniagent.core.errors.ToolInterrupted` call is recovered inside the step logic like a call
a
crash interrupted; a :class:`~miniagent.core.errors.Rollover` settles the run's time and passes
through, for the driver to go on in a fresh run (no last checkpoint, no result). A cancellation
of the run's task passes through as well; the driver says what it means with ``cancel_ends``:
in process an interrupted process (the session stays as its last checkpoint left it, and can be
resumed), on Temporal a person who cancelled the session (it ends ``cancelled``, with its last
checkpoint and ``run_finished``, before the cancellation goes on).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from miniagent.core.errors import ModelError, Rollover, RunFailure, SessionError
from miniagent.core.runtime.effects import Effects
from miniagent.core.runtime.loop import StepLogic
from miniagent.core.runtime.spec import Rules
from miniagent.core.session import AgentSession
from miniagent.core.types import RunResult

__all__ = ["CANCEL_GRACE", "run_session"]

log = logging.getLogger("miniagent")

CANCEL_GRACE = 1.0
"""Seconds the run's work gets to wind down after its deadline before it is left behind."""


async def run_session(session: AgentSession, rules: Rules, effects: Effects, *,
                      cancel_ends: bool = False) -> RunResult:
    """Run the step logic on ``session`` until its run stops; always returns a result.

    Raises:
        Rollover: the driver goes on in a fresh run (see the module docstring).
        asyncio.CancelledError: the run's task was cancelled (with ``cancel_ends``, once the
            session has ended ``cancelled``).
    """
    logic = StepLogic(rules, effects)
    timeout = rules.spec.limits.timeout
    save = True
    try:
        await _within(logic.run(session), timeout)
    except asyncio.CancelledError:
        if cancel_ends:
            logic.cancel(session, "cancelled by a person")
            logic.settle(session)
            await effects.checkpoint(session)
            logic.finished(session)
        raise
    except asyncio.TimeoutError:
        logic.stop(session, "timeout", f"the run exceeded its deadline of {timeout} s")
    except Rollover:
        logic.settle(session)
        raise
    except SessionError as exc:  # another process took the session over, or a damaged store
        logic.stop(session, "error", str(exc))
        save = False
    except RunFailure as exc:
        logic.stop(session, "error", _failure(exc))
    except Exception as exc:  # a bug of ours must still end the run with a status
        log.exception("internal error in session %s", session.id)
        logic.stop(session, "error", f"internal error: {type(exc).__name__}: {exc}")
    logic.settle(session)
    if save:
        await effects.checkpoint(session)
    return logic.finished(session)


def _failure(exc: RunFailure) -> str:
    return f"model request failed: {exc}" if isinstance(exc, ModelError) else str(exc)


async def _within(work: Coroutine[Any, Any, None], timeout: float | None) -> None:
    """Await ``work``; past ``timeout`` cancel it and raise TimeoutError within
    :data:`CANCEL_GRACE` seconds, even if something in it ignores the cancellation."""
    if timeout is None:
        return await work
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if done:
        return task.result()
    task.cancel()
    await asyncio.wait({task}, timeout=CANCEL_GRACE)
    raise asyncio.TimeoutError
