"""Sessions on a Temporal cluster (``--temporal HOST:PORT``): each is a workflow; its model
calls and tool calls run in the workers (``miniagent worker``), this process follows them.

A session id is given whole; a decision goes to the workflow, whose workers go on with it.
``run --temporal`` starts a session here too (:meth:`TemporalBackend.ask`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from miniagent.cli.build import RunConfig, temporal_agent
from miniagent.cli.common import SessionTracker, asks_in_terminal, show_progress
from miniagent.cli.display import terminal
from miniagent.cli.observing import observing
from miniagent.cli.safe_text import markup
from miniagent.cli.session_backend import Decided, Forked, Listed, ResumeOptions, SessionBackend
from miniagent.cli.session_commands import resume_command
from miniagent.cli.temporal_client import connect, on_the_cluster
from miniagent.core.session import AgentSession
from miniagent.core.types import RunResult

if TYPE_CHECKING:
    from miniagent.temporal import TemporalSessions
    from miniagent.temporal.agent import TemporalAgent

T = TypeVar("T")


class TemporalBackend(SessionBackend):
    """The sessions of the cluster at ``address``; runs go to ``task_queue``'s workers."""

    counts_steps = False

    def __init__(self, address: str, task_queue: str = "miniagent") -> None:
        self.address = self.temporal = address
        self.task_queue = task_queue

    def recent(self, limit: int) -> list[Listed]:
        rows = self._call(lambda sessions: sessions.list(limit))
        return [Listed(session_id=r["session_id"], status=r["status"], question=r["question"],
                       started_at=r["started_at"]) for r in rows]

    def load(self, session_id: str) -> AgentSession:
        return self._call(lambda sessions: sessions.session(session_id))

    def decide(self, session_id: str, call_id: str | None, approved: bool,
               reason: str | None, *, force: bool,
               arguments: dict[str, Any] | None = None) -> Decided:
        """``force`` changes nothing here: the workflow holds the session, no lease; it checks
        edited ``arguments`` itself."""
        calls = self._call(lambda sessions: sessions.decide(session_id, approved, call_id,
                                                            reason, arguments=arguments))
        follow = resume_command(session_id, None, self.address)
        return Decided(session_id=session_id, calls=calls,
                       then=f"it continues on the cluster (follow it: {follow})")

    def cancel(self, session_id: str, reason: str, *, force: bool) -> str:
        how = self._call(lambda sessions: sessions.cancel(session_id, reason))
        if how == "cancelling":
            return f"cancelled session {session_id} on the cluster"
        return (f"terminated session {session_id}: no worker polls its task queue, so nothing "
                "could record the cancellation")

    def fork(self, session_id: str, at_step: int) -> Forked:
        """The fork as a workflow of its own, run at once with its parent's spec (the model
        and tools are the workers')."""
        child = self._call(lambda sessions: sessions.fork(session_id, at_step))
        return Forked(session_id=child.id, parent=session_id, step=at_step,
                      status=child.status, then="its workflow goes on in the cluster's "
                      "workers; follow it with:",
                      command=resume_command(child.id, None, self.address))

    def resume(self, session_id: str, options: ResumeOptions) -> RunResult:
        """Follow the session until it ends or waits again (the model options are the
        workers')."""
        return self._follow(RunConfig(), options,
                            lambda agent, tracker: agent.aresume(session_id, on_event=tracker))

    def ask(self, question: str, config: RunConfig, options: ResumeOptions,
            continue_id: str | None = None) -> RunResult:
        """``miniagent run --temporal``: the same agent, display, trace and result as in
        process; the model and tools are the workers'. ``options`` say how it is followed here
        (``as_json``, ``detach``, ``verbose``, ``observe``). With ``continue_id``, the next
        turn of that session."""
        _warn_ignored(config)

        async def work(agent: TemporalAgent, tracker: SessionTracker) -> RunResult:
            if continue_id is not None:  # SessionNotFound: --continue names one that exists
                await agent.asession(continue_id)
            return await agent.arun(question, metadata=config.metadata(), on_event=tracker,
                                    session_id=continue_id)

        return self._follow(config, options, work)

    def _follow(self, config: RunConfig, options: ResumeOptions,
                work: Callable[[TemporalAgent, SessionTracker], Awaitable[RunResult]]) -> RunResult:
        interactive = asks_in_terminal(detach=options.detach, as_json=options.as_json)

        async def followed() -> RunResult:
            client = await connect(self.address)
            agent = temporal_agent(config, client, self.task_queue, interactive=interactive)
            show_progress(agent, as_json=options.as_json, verbose=options.verbose)
            tracker = SessionTracker()
            with observing(agent, **options.observe):
                result = await work(agent, tracker)
            if not options.as_json and tracker.session_id:
                terminal().print(f"[dim]session {markup(tracker.session_id)} on "
                                 f"{markup(self.address)} (task queue "
                                 f"{markup(self.task_queue)})[/dim]")
            return result

        with on_the_cluster():
            return asyncio.run(followed())

    def _call(self, work: Callable[[TemporalSessions], Awaitable[T]]) -> T:
        """``work`` on this cluster's sessions, in an event loop of its own."""
        async def called() -> T:
            from miniagent.temporal import TemporalSessions

            return await work(TemporalSessions(await connect(self.address),
                                               self.task_queue))

        with on_the_cluster():
            return asyncio.run(called())


def _warn_ignored(config: RunConfig) -> None:
    """The options of ``run`` that a cluster's workers decide, said once each."""
    for given, flag in ((config.tools, "--tools"), (config.mcp or config.mcp_urls, "--mcp")):
        if given:
            typer.echo(f"miniagent: warning: {flag} is ignored with --temporal: the workers' "
                       f"tools are used (miniagent worker {flag} ...)", err=True)
    limits = (config.model_concurrency, config.requests_per_minute, config.tokens_per_minute)
    for ignored, what in ((config.stream, "--stream"), (any(limits), "the model's limits")):
        if ignored:
            typer.echo(f"miniagent: warning: {what} is ignored with --temporal: the workers' "
                       "model settings are used", err=True)
