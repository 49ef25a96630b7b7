"""Asking the inline approver, and taking a decision made elsewhere meanwhile.

The in-process driver asks its approver (a terminal's y/n prompt) one waiting call after
another, on a worker thread. While it asks, the run holds the session's lease; a store that
can take decisions for a lease holder (the SQLite store: :mod:`miniagent.core.store.decision_door`)
lets ``miniagent sessions approve`` in another shell record one, and :func:`ask_or_take` sees it
by polling: the question is given up (the approver's ``give_up()``, when it has one) and the
run goes on with the decision as recorded. A decision made elsewhere wins over an answer given
here to the same call.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from miniagent._internal.threads import run_in_daemon_thread
from miniagent.core.runtime.calls import Approver, relayed_decision
from miniagent.core.session import AgentSession
from miniagent.core.types import Decision, PendingApproval

__all__ = ["POLL_SECONDS", "DecisionDoor", "ask", "ask_or_take", "decided"]

log = logging.getLogger("miniagent")

POLL_SECONDS = 0.25
"""How often a run waiting at the approval prompt looks for a decision made elsewhere."""


class DecisionDoor(Protocol):
    """What a store offers a lease holder that waits for decisions (the SQLite store)."""

    def accept_decisions(self, session_id: str, owner: str, accept: bool = True) -> int: ...

    def decisions_arrived(self, session_id: str, owner: str) -> int: ...

    def load(self, session_id: str) -> AgentSession: ...


async def ask(approver: Approver, pending: list[PendingApproval],
              answers: dict[str, Decision] | None = None,
              stopped: asyncio.Event | None = None) -> dict[str, Decision]:
    """Ask ``approver`` about each call in turn, on a worker thread, until ``stopped``;
    the answers (None leaves a call waiting), gathered in ``answers``."""
    answers = {} if answers is None else answers
    for item in pending:
        if stopped is not None and stopped.is_set():
            break
        try:
            answer = await run_in_daemon_thread(approver, item)
        except Exception as exc:  # the call stays waiting: it never runs unapproved
            log.warning("the approver failed on call %s (%s: %s); it keeps waiting",
                        item.call_id, type(exc).__name__, exc)
            continue
        if answer is not None:
            answers[item.call_id] = Decision(approved=bool(answer))
    return answers


async def ask_or_take(approver: Approver, pending: list[PendingApproval], store: DecisionDoor,
                      session_id: str, owner: str) -> dict[str, Decision]:
    """:func:`ask`, while the store takes decisions from other processes for ``owner``; the
    answers given here, and over them the decisions recorded elsewhere."""
    store.accept_decisions(session_id, owner)
    answers: dict[str, Decision] = {}
    stopped = asyncio.Event()
    asking = asyncio.ensure_future(ask(approver, pending, answers, stopped))
    try:
        while not asking.done():
            await asyncio.wait({asking}, timeout=POLL_SECONDS)
            if asking.done():
                break
            # off the loop: the read may wait as long as the store's busy timeout
            came: int = await run_in_daemon_thread(store.decisions_arrived, session_id, owner)
            if came and not asking.done():
                stopped.set()
                await _give_up(approver)
                break
    finally:
        if not asking.done():  # a question nobody answers now: its thread is abandoned
            asking.cancel()
        arrived = store.accept_decisions(session_id, owner, accept=False)
    if asking.done() and not asking.cancelled():
        asking.result()  # (it raises nothing: a failing approver is logged)
    if not arrived:
        return answers
    return {**answers, **decided(store.load(session_id), pending)}


async def _give_up(approver: Any) -> None:
    """End the question being asked, unanswered, if the approver can (off the event loop:
    it may wait a moment for its thread)."""
    give_up = getattr(approver, "give_up", None)
    if callable(give_up):
        await run_in_daemon_thread(give_up)


def decided(session: AgentSession, pending: list[PendingApproval]) -> dict[str, Decision]:
    """The decisions recorded in ``session`` for the ``pending`` calls."""
    wanted = {p.call_id for p in pending}
    found: dict[str, Decision] = {}
    for record in session.open_calls():
        if record.call.id not in wanted or record.state not in ("approved", "denied"):
            continue
        found[record.call.id] = relayed_decision(record) or Decision(
            approved=record.state == "approved", reason=record.note)
    return found
