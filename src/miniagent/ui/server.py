"""The inbox as an ASGI application (Starlette): its routes and pages (the guard in front of
them is :mod:`miniagent.ui.guard`).

Starlette because it is small, well kept, already installed with the ``mcp`` extra (the MCP
SDK serves HTTP with it) and needs nothing else to stream server-sent events; uvicorn serves
it (``miniagent ui``), or any ASGI server that mounts :func:`app`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from miniagent._internal.jsonscan import json_object
from miniagent.core.agent import Agent
from miniagent.core.errors import MiniAgentError, SessionNotFound
from miniagent.core.session import FINAL, AgentSession
from miniagent.core.store.base import CheckpointStore
from miniagent.core.store.listing import SessionQuery, SessionSummary, stamp_of
from miniagent.ui import paths, views
from miniagent.ui.backend import (
    Done,
    LocalSessions,
    Refusal,
    RunHere,
    Sessions,
    off_loop,
    parent_of,
)
from miniagent.ui.guard import Guarded, read_form
from miniagent.ui.report_pages import ReportPages
from miniagent.ui.security import (
    LOOPBACK_HOSTS,
    Gate,
    LoginThrottle,
    Refused,
    set_cookie,
)
from miniagent.ui.static import SCRIPT, STYLESHEET

if TYPE_CHECKING:
    from miniagent.temporal import TemporalAgent, TemporalSessions

INBOX_SIZE = 50
"""The inbox shows at most this many waiting sessions (oldest first)."""

PAGE_SIZE = 50

LIVE_SECONDS = 600.0
"""An event stream ends after this long (the browser opens it again)."""

POLL_SECONDS = 1.0
"""How often a page following a session run elsewhere reads where it stands (its revision: a
few columns, never the session itself)."""

MAX_STREAMS = 64
"""At most this many pages follow sessions at once (each stream reads its session's revision
every second); more are refused (503) and the pages still work, reloaded by hand."""


def app(agent: Agent | TemporalAgent | None = None, *, store: CheckpointStore | None = None,
        agent_for: Callable[[AgentSession], Agent] | None = None,
        temporal: str | TemporalSessions | None = None, task_queue: str = "miniagent",
        token: str | None = None, allowed_hosts: Iterable[str] = LOOPBACK_HOSTS,
        trace: str | os.PathLike[str] | None = None, where: str | None = None,
        evals: str | os.PathLike[str] | None = None,
        runs_with: Callable[[AgentSession], str] | None = None) -> Starlette:
    """The browser inbox as an ASGI application.

    Args:
        agent: Runs the sessions when they go on (after a decision, a resume, a new
            question); its store is the one shown. A
            :class:`~miniagent.temporal.TemporalAgent` brings its cluster's sessions.
        store: The sessions' store, when no ``agent`` is given.
        agent_for: Instead of ``agent``: the agent of each session (``miniagent ui`` builds
            it from what the session recorded). With neither, the inbox decides and
            cancels, and says how to resume.
        temporal: The sessions of a Temporal cluster instead of a store: its frontend's
            ``HOST:PORT`` (connected on first use) or a :class:`TemporalSessions`.
            ``task_queue``: its workers' queue.
        token: Required to log in (see :mod:`miniagent.ui.security`). Without one the
            inbox answers only clients on this machine (a loopback peer address or a Unix
            socket), whatever ``Host`` they name; give one wherever other people can reach
            the server, other users of this machine included. ``app.state.gate.new_link()``
            makes a one-time login link (``/login?once=CODE``).
        allowed_hosts: Host names requests may name (``"*"``: any).
        trace: A JSONL trace file: runs started here are appended to it, and a session's
            page links to its trace report when the file holds runs of that session
            (default: the ``agent``'s own trace file, if it has one).
        where: Where the sessions are, for the pages' header.
        evals: A folder holding eval output folders (``miniagent eval --out``): their reports
            and traces are shown at ``/evals`` (see :mod:`miniagent.ui.evals`).
        runs_with: What a session goes on with once decided (its model server and tools),
            shown beside each decision; by default, the ``agent``'s model and tools.

    Example:
        >>> from miniagent import Agent, ScriptedModel
        >>> inbox = app(Agent(model=ScriptedModel(["Final Answer: 4"])))
        >>> type(inbox).__name__
        'Starlette'
    """
    inner = getattr(agent, "agent", agent)  # a TemporalAgent's agent
    own = getattr(inner, "tracer", None)  # the agent's own trace file records its runs
    if trace is None and own is not None:
        trace = own.path
    tracer = _tracer(trace) if own is None or Path(own.path) != Path(trace or "") else None
    if agent is not None and not isinstance(agent, Agent):  # a TemporalAgent
        temporal, task_queue = agent.sessions, agent.task_queue
    sessions: Sessions
    if temporal is not None:
        from miniagent.ui.on_temporal import TemporalInbox

        remote = TemporalInbox(address=temporal, task_queue=task_queue) if isinstance(
            temporal, str) else TemporalInbox(sessions=_temporal_sessions(temporal, task_queue))
        sessions, where = remote, where or remote.where
    else:
        if isinstance(agent, Agent):
            store, agent_for = agent.store, (lambda _session: agent)
        if store is None:
            raise ValueError("give the inbox an agent, a store or a Temporal cluster")
        sessions = LocalSessions(store=store, agent_for=agent_for,
                                 shared_agent=agent is not None, trace=tracer)
        where = where or _describe(store)
    if runs_with is None and agent is not None:
        runs_with = _agent_runs_with(agent)
    inbox = Inbox(sessions, Gate(token=token, allowed_hosts=allowed_hosts),
                  trace=Path(trace) if trace is not None else None, where=where,
                  evals=Path(evals) if evals is not None else None, runs_with=runs_with)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await sessions.aclose()
            if tracer is not None:
                tracer.close()

    assert paths.MARK  # {sid:session_id}: registered by miniagent.ui.paths
    pages = ReportPages(ctx=inbox.ctx, trace=inbox.trace, evals=inbox.evals)
    routes = [
        Route("/", inbox.inbox_page),
        Route("/part", inbox.inbox_part),
        Route("/events", inbox.inbox_events),
        Route("/sessions", inbox.sessions_page),
        Route("/sessions/{sid:session_id}", inbox.session_page),
        Route("/sessions/{sid:session_id}/part", inbox.session_part),
        Route("/sessions/{sid:session_id}/events", inbox.events),
        Route("/sessions/{sid:session_id}/report", pages.session_report),
        Route("/sessions/{sid:session_id}/decide", inbox.decide, methods=["POST"]),
        Route("/sessions/{sid:session_id}/resume", inbox.resume, methods=["POST"]),
        Route("/sessions/{sid:session_id}/cancel", inbox.cancel, methods=["POST"]),
        Route("/sessions/{sid:session_id}/ask", inbox.ask, methods=["POST"]),
        Route("/sessions/{sid:session_id}/fork", inbox.fork, methods=["POST"]),
        Route("/evals", pages.evals_page),
        Route("/evals/report", pages.eval_report),
        Route("/evals/trace", pages.eval_trace),
        Route("/login", inbox.login, methods=["GET", "POST"]),
        Route("/static/ui.css", _static(STYLESHEET, "text/css")),
        Route("/static/ui.js", _static(SCRIPT, "text/javascript")),
    ]
    server = Starlette(routes=routes, lifespan=lifespan)
    server.add_middleware(Guarded, gate=inbox.gate)
    server.state.gate = inbox.gate  # e.g. for a one-time login link: gate.new_link()
    return server


def _temporal_sessions(given: Any, task_queue: str) -> TemporalSessions:
    """``given`` as TemporalSessions: itself, or a temporalio Client (an agent's)."""
    from miniagent.temporal import TemporalSessions

    return given if isinstance(given, TemporalSessions) else TemporalSessions(given, task_queue)


def _agent_runs_with(agent: Agent | TemporalAgent) -> Callable[[AgentSession], str]:
    """What every session of the inbox's own agent goes on with."""
    if not isinstance(agent, Agent):
        text = f"the workers of Temporal task queue {agent.task_queue}"
    else:
        from miniagent.core.models.describe import describe_model

        model = describe_model(agent.model)
        at = f" at {model.server_address}" if model.server_address else ""
        tools = ", ".join(agent.registry.names) or "none"
        text = f"this server's agent: model {model.name}{at}; tools: {tools}"
    return lambda _session: text


def _describe(store: CheckpointStore) -> str:
    path = getattr(store, "path", None)
    return f"sessions in {path}" if path is not None else "sessions in this process's memory"


def _tracer(trace: str | os.PathLike[str] | None) -> Any:
    if trace is None:
        return None
    from miniagent.core.trace.jsonl import JsonlTracer

    return JsonlTracer(trace)


def _static(text: str, media_type: str) -> Callable[[Request], Any]:
    body = text.encode("utf-8")

    async def serve(_request: Request) -> Response:
        return Response(body, media_type=f"{media_type}; charset=utf-8",
                        headers={"Cache-Control": "no-cache"})
    return serve


class Inbox:
    """The routes' handlers, over one driver's sessions (:class:`Sessions`)."""

    def __init__(self, sessions: Sessions, gate: Gate, *, trace: Path | None,
                 where: str, evals: Path | None = None,
                 runs_with: Callable[[AgentSession], str] | None = None) -> None:
        self.sessions, self.gate, self.trace, self.where = sessions, gate, trace, where
        self.evals, self.runs_with = evals, runs_with
        self.throttle = LoginThrottle()
        self.notes: OrderedDict[str, str] = OrderedDict()  # what a request did, shown once
        self.streams = 0  # event streams open

    def ctx(self, request: Request) -> views.Ctx:
        cookie = request.state.cookie
        return views.Ctx(base=request.scope.get("root_path", ""),
                         csrf=self.gate.csrf(cookie) if cookie else "", now=time.time(),
                         where=self.where, runs_here=self.sessions.runs_here,
                         evals=self.evals is not None, runs_with=self.runs_with)

    # -- pages ----------------------------------------------------------------------------

    async def inbox_page(self, request: Request) -> Response:
        ctx = self.ctx(request)
        seen, rows = await self._waiting()
        waiting = await self._loaded(rows[:INBOX_SIZE])
        return HTMLResponse(views.inbox_page(ctx, waiting, more=len(rows) > INBOX_SIZE,
                                             seen=seen, notice=self._note(request)))

    async def inbox_part(self, request: Request) -> Response:
        seen, rows = await self._waiting()
        waiting = await self._loaded(rows[:INBOX_SIZE])
        return HTMLResponse(views.inbox_part(self.ctx(request), waiting,
                                             more=len(rows) > INBOX_SIZE, seen=seen))

    async def inbox_events(self, request: Request) -> Response:
        """Server-sent events: ``changed`` whenever a session starts or stops waiting, or its
        calls are decided (read from the listing every second: one indexed query)."""

        async def stream() -> AsyncIterator[str]:
            yield "retry: 3000\n\n"
            shown, until = None, time.monotonic() + LIVE_SECONDS
            while time.monotonic() < until:
                seen, _ = await self._waiting()
                if seen != shown:
                    shown = seen
                    yield f"event: changed\ndata: {seen}\n\n"
                await asyncio.sleep(POLL_SECONDS)

        return self._streamed(stream())

    async def _waiting(self) -> tuple[str, list[SessionSummary]]:
        """The inbox's rows (one more than it shows) and its version: their ids and times."""
        rows = await self.sessions.page(SessionQuery(status="awaiting_approval", oldest_first=True,
                                               limit=INBOX_SIZE + 1))
        text = "|".join(f"{r.session_id}@{r.updated_at!r}" for r in rows)
        return hashlib.sha256(text.encode()).hexdigest()[:16], rows

    async def _loaded(self, rows: list[SessionSummary]) -> list[AgentSession]:
        waiting = []
        for row in rows:
            with contextlib.suppress(MiniAgentError):  # gone, or damaged: the list shows it
                session = await self.sessions.load(row.session_id)
                # a sub-agent's calls are decided on its parent's card, which shows them
                if session.pending_approvals() and parent_of(session) is None:
                    waiting.append(session)
        return waiting

    async def sessions_page(self, request: Request) -> Response:
        ctx = self.ctx(request)
        params = request.query_params
        status = params.get("status") or None
        query = SessionQuery(status=status if status in views.STATUSES else None,
                             text=(params.get("q") or "").strip()[:200] or None,
                             after=_after(params.get("after")), limit=PAGE_SIZE)
        rows = await self.sessions.page(query)
        last = rows[-1] if len(rows) == PAGE_SIZE else None
        after = f"{last.updated_at!r}~{last.session_id}" if last is not None else None
        return HTMLResponse(views.sessions_page(ctx, rows, query, after))

    async def session_page(self, request: Request, *, error: str = "",
                           status: int = 200) -> Response:
        read = await self._current(request)
        if isinstance(read, Response):
            return read
        since, session = read
        report = await self._has_report(session.id)
        return HTMLResponse(views.session_page(
            self.ctx(request), session, self.sessions.run_of(session.id), report=report,
            since=since, before=_number(request.query_params.get("before")),
            notice=self._note(request), error=error), status_code=status)

    async def session_part(self, request: Request) -> Response:
        """What changed on a session's page: nothing (304) while the session stands where the
        page's ``If-None-Match`` says (read without loading it), else the live part, with only
        the steps from position ``from`` on (the page's last one) when they are few."""
        sid = request.path_params["sid"]
        mark = await self._since(request, sid)
        if isinstance(mark, Response):
            return mark
        tag = f'"{mark}"'
        if request.headers.get("if-none-match") == tag:
            return Response(status_code=304, headers={"ETag": tag})
        read = await self._current(request, since=mark)
        if isinstance(read, Response):
            return read
        since, session = read
        start = _number(request.query_params.get("from"))
        fresh = start if start is not None and 0 <= start < len(session.steps) and len(
            session.steps) - start <= views.STEPS_SHOWN else None
        return HTMLResponse(views.live_part(self.ctx(request), session,
                                            self.sessions.run_of(session.id), since=since,
                                            fresh_from=fresh), headers={"ETag": tag})

    async def events(self, request: Request) -> Response:
        """Server-sent events: ``changed`` (data: where the session stands, see
        :meth:`_since`) whenever it moves, woken by the run's events when it runs here, else
        by reading its revision every second (never the session itself); ``end`` once it has
        ended and nothing here runs it."""
        sid = request.path_params["sid"]
        sessions = self.sessions
        signal = sessions.signal(sid)

        async def stream() -> AsyncIterator[str]:
            yield "retry: 3000\n\n"
            seen, until = None, time.monotonic() + LIVE_SECONDS
            while time.monotonic() < until:
                try:
                    mark = await sessions.revision(sid)
                except MiniAgentError:
                    yield "event: end\ndata: gone\n\n"
                    return
                run = sessions.run_of(sid)
                now = _stamp(mark.stamp, run)
                if now != seen:
                    seen = now
                    yield f"event: changed\ndata: {now}\n\n"
                if mark.status in FINAL and not (run is not None and run.running):
                    yield "event: end\ndata: ended\n\n"
                    return
                await signal.wait(POLL_SECONDS)

        return self._streamed(stream())

    def _streamed(self, events: AsyncIterator[str]) -> Response:
        """An event stream, counted against ``MAX_STREAMS`` while it is open."""
        return _CountedStream(self, events)

    # -- what a person does ---------------------------------------------------------------

    async def decide(self, request: Request) -> Response:
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        approved = form.get("decision") == "approve"
        if form.get("decision") not in ("approve", "deny"):
            return self._refused(request, "say approve or deny")
        sid = request.path_params["sid"]
        try:
            edited = _edited_arguments(form.get("arguments"), approved)
        except Refusal as exc:
            return await self.session_page(request, error=str(exc), status=409)
        return await self._act(request, self.sessions.decide(
            sid, form.get("call_id") or None, approved, form.get("reason"),
            form.get("version", ""), edited))

    async def resume(self, request: Request) -> Response:
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        return await self._act(request, self.sessions.resume(request.path_params["sid"],
                                                             form.get("version", "")))

    async def cancel(self, request: Request) -> Response:
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        return await self._act(request, self.sessions.cancel(
            request.path_params["sid"], form.get("reason"), form.get("version", "")))

    async def ask(self, request: Request) -> Response:
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        return await self._act(request, self.sessions.ask(
            request.path_params["sid"], form.get("question", ""), form.get("version", "")))

    async def fork(self, request: Request) -> Response:
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        at_step = _number(form.get("at_step"))
        if at_step is None:
            return self._refused(request, "say after how many steps to fork (a number)")
        return await self._act(request, self.sessions.fork(request.path_params["sid"],
                                                           at_step))

    async def _act(self, request: Request, work: Any) -> Response:
        """Do it: then show the session with what happened (303), or the refusal (409)."""
        try:
            done: Done = await work
        except SessionNotFound as exc:
            return HTMLResponse(views.message_page(self.ctx(request), "No such session",
                                                   str(exc)), status_code=404)
        except Refusal as exc:
            return await self.session_page(request, error=str(exc), status=409)
        sid = done.goto or request.path_params["sid"]
        note = os.urandom(8).hex()
        self.notes[note] = done.message
        while len(self.notes) > 500:
            self.notes.popitem(last=False)
        root = request.scope.get("root_path", "")
        return RedirectResponse(f"{root}{views.path_of(sid)}?done={note}",
                                status_code=303)

    async def login(self, request: Request) -> Response:
        ctx = self.ctx(request)
        peer = request.client.host if request.client is not None else ""
        if request.method != "POST":
            if "once" in request.query_params:
                return self._login_by_link(request, ctx, peer)
            # never the token in a URL: it stays in the browser's history and in the access
            # logs of whatever server or proxy the inbox runs behind (a one-time link does not)
            linked = "token" in request.query_params
            return HTMLResponse(views.login_page(ctx, error=(
                "A token in a link is not accepted (it would stay in the browser's history "
                "and in server logs): type it here." if linked else "")),
                status_code=400 if linked else 200)
        form = await read_form(request)
        if isinstance(form, Response):
            return form
        if not self.throttle.allowed(peer):
            return self._too_many(ctx)
        if not self.gate.login(form.get("token", "")):
            self.throttle.failed(peer)
            return HTMLResponse(views.login_page(ctx, error="That is not the token."),
                                status_code=403)
        return self._logged_in(request, ctx)

    def _login_by_link(self, request: Request, ctx: views.Ctx, peer: str) -> Response:
        """``GET /login?once=CODE``: a one-time link printed at start logs this browser in
        and never works again (so the browser's history keeps nothing that does). A valid
        link works from a throttled address too: its code cannot be guessed, and another user
        of the same address (loopback, a proxy) must not lock its owner out."""
        if self.gate.token is not None and self.gate.redeem(request.query_params["once"]):
            return self._logged_in(request, ctx)
        if not self.throttle.allowed(peer):
            return self._too_many(ctx)
        self.throttle.failed(peer)
        return HTMLResponse(views.login_page(ctx, error=(
            "That login link was used already or has expired: type the token.")),
            status_code=403)

    def _logged_in(self, request: Request, ctx: views.Ctx) -> Response:
        response = RedirectResponse(f"{ctx.base}/", status_code=303)
        response.headers.append("Set-Cookie", set_cookie(
            self.gate.new_cookie(logged_in=True), secure=request.url.scheme == "https"))
        return response

    @staticmethod
    def _too_many(ctx: views.Ctx) -> Response:
        return HTMLResponse(views.login_page(ctx, error="Too many wrong tokens; wait a "
                                             "minute."), status_code=429)

    # -- helpers --------------------------------------------------------------------------

    async def _since(self, request: Request, sid: str) -> str | Response:
        """Where the session stands (its revision and this server's run of it), or the page
        saying why it cannot be read."""
        try:
            mark = await self.sessions.revision(sid)
        except MiniAgentError as exc:
            return self._unreadable(request, exc)
        return _stamp(mark.stamp, self.sessions.run_of(sid))

    async def _current(self, request: Request, *, since: str | None = None
                       ) -> tuple[str, AgentSession] | Response:
        """The session and where it stood just before it was read (so a change that lands
        in between is seen by the next comparison, never missed)."""
        sid = request.path_params["sid"]
        mark = since if since is not None else await self._since(request, sid)
        if isinstance(mark, Response):
            return mark
        try:
            return mark, await self.sessions.load(sid)
        except MiniAgentError as exc:
            return self._unreadable(request, exc)

    def _unreadable(self, request: Request, exc: MiniAgentError) -> Response:
        if isinstance(exc, SessionNotFound):
            return HTMLResponse(views.message_page(self.ctx(request), "No such session",
                                                   str(exc)), status_code=404)
        # damaged, or saved by a newer miniagent
        return HTMLResponse(views.message_page(self.ctx(request), "Cannot show session",
                                               str(exc)), status_code=500)

    def _note(self, request: Request) -> str:
        return self.notes.pop(request.query_params.get("done", ""), "")

    async def _form(self, request: Request) -> dict[str, str] | Response:
        """The posted form, once its CSRF token checks out."""
        form = await read_form(request)
        if isinstance(form, Response):
            return form
        try:
            self.gate.check_csrf(request.state.cookie, form.get("csrf"))
        except Refused as refused:
            return Response(refused.message, refused.status, media_type="text/plain")
        return form

    def _refused(self, request: Request, message: str) -> Response:
        return HTMLResponse(views.message_page(self.ctx(request), "Refused", message),
                            status_code=400)

    async def _has_report(self, session_id: str) -> bool:
        """Whether the trace file holds a run of the session (read off the event loop, and
        only what was appended since the last look: see :mod:`miniagent.report.session`)."""
        if self.trace is None:
            return False
        from miniagent.report.session import has_runs

        return await off_loop(has_runs, self.trace, session_id)


def _edited_arguments(text: str | None, approved: bool) -> dict[str, Any] | None:
    """The edit form's arguments (None: no edit); a refusal when they are not a JSON object."""
    if text is None or not approved:
        return None
    try:
        return json_object(text)
    except TypeError as exc:
        raise Refusal("nothing was decided: the arguments must be a JSON object, not "
                      f"{exc}") from None
    except ValueError as exc:
        raise Refusal(f"nothing was decided: the arguments are not valid JSON ({exc})") from None


class _CountedStream(StreamingResponse):
    """An event stream counted in ``inbox.streams`` from its start until it ends, however it
    ends: a client gone before the first byte, a broken connection, the server stopping.
    (Counting in the stream's generator would miss a generator never started.)"""

    def __init__(self, inbox: Inbox, events: AsyncIterator[str]) -> None:
        super().__init__(events, media_type="text/event-stream",
                         headers={"Cache-Control": "no-store"})
        self.inbox = inbox

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.inbox.streams >= MAX_STREAMS:
            with contextlib.suppress(Exception):
                await self.body_iterator.aclose()  # type: ignore[attr-defined]
            refused = Response("too many pages follow sessions; reload by hand", 503,
                               media_type="text/plain")
            await refused(scope, receive, send)
            return
        self.inbox.streams += 1
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.inbox.streams -= 1
            with contextlib.suppress(Exception):
                await self.body_iterator.aclose()  # type: ignore[attr-defined]


def _stamp(stamp: str, run: RunHere | None) -> str:
    """Where a session's page stands: the session's revision, and whether a run of it here is
    going, failed or ended (shown on the page, not saved in the session)."""
    if run is None:
        return stamp
    return stamp_of(stamp, run.running, run.error, run.result is not None)


def _number(text: str | None) -> int | None:
    """A query parameter's whole number, if it is one."""
    if text is None or not (text.isascii() and text.isdigit()) or len(text) > 12:
        return None
    return int(text)


def _after(text: str | None) -> tuple[float, str] | None:
    """The keyset ``(updated_at, session id)`` of a ``next page`` link."""
    if not text or "~" not in text:
        return None
    stamp, _, sid = text.partition("~")
    try:
        value = float(stamp)
    except ValueError:
        return None
    return (value, sid) if value == value else None  # not NaN
