"""The inbox's pages as HTML, built only from the report's escaping helpers.

Everything a model, a tool, a person or a store wrote is hostile: it reaches a page only
through :func:`~miniagent.report.html.esc` (and the helpers built on it: ``pre``,
``details``, ``table``). The pages carry no inline script or style: the one stylesheet and the
one script are served by the server itself, so the Content-Security-Policy allows nothing
inline.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from miniagent._internal.wording import counted, token_count
from miniagent.core.session import FINAL, TURN_ENDED, AgentSession
from miniagent.core.store.listing import SessionQuery, SessionSummary
from miniagent.core.types import CallRecord, Step
from miniagent.report.html import details, esc, pre, status_class
from miniagent.ui.backend import RunHere, parent_of, version
from miniagent.ui.paths import segment

FOLD_CHARS = 160
"""An argument value longer than this is folded (its first characters shown, the rest on a
click)."""

EDIT_BYTES = 32 * 1024
"""Arguments larger than this (as JSON) get no edit form: posted back they would come near the
inbox's form limit (:data:`~miniagent.ui.security.MAX_FORM_BYTES`)."""

STEPS_SHOWN = 50
"""A session's page shows at most this many steps (its last ones; earlier ones a page each,
``?before=STEP``), so a page's size does not grow with the session."""

TRANSITIONS_SHOWN = 50
"""A session's page shows its last this many transitions."""

STATUSES = ("awaiting_approval", "running", "completed", "error", "timeout", "cancelled",
            "max_steps", "budget_exceeded", "loop_detected")


@dataclass(frozen=True, kw_only=True)
class Ctx:
    """What every page needs: where the app is mounted, the browser's CSRF token, the clock."""

    base: str
    csrf: str
    now: float
    where: str
    """Where the sessions are (a store file), shown in the header."""
    runs_here: bool = True
    """Whether sessions go on in this server (else Resume and new questions are not offered)."""
    evals: bool = False
    """Whether this server shows eval reports (a link in the header)."""
    runs_with: Callable[[AgentSession], str] | None = None
    """What a session goes on with after a decision (its model server and tools), shown
    beside the decision."""

    def url(self, path: str, **query: str) -> str:
        """An escaped-ready URL of this app (``esc`` it in an attribute)."""
        tail = f"?{urlencode(query)}" if query else ""
        return f"{self.base}{path}{tail}"


def shell(ctx: Ctx, title: str, body: str, *, notice: str = "", error: str = "") -> str:
    """A whole page: the header, a notice or error, and ``body`` (already safe HTML)."""
    banner = ""
    if notice:
        banner += f'<p class="flash ok" role="status">{esc(notice)}</p>'
    if error:
        banner += f'<p class="flash bad" role="alert">{esc(error)}</p>'
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{esc(title)} · miniagent</title><link rel="icon" href="data:,">'
            f'<link rel="stylesheet" href="{esc(ctx.url("/static/ui.css"))}">'
            f'<script src="{esc(ctx.url("/static/ui.js"))}" defer></script></head><body>'
            '<header class="top"><nav aria-label="pages">'
            f'<a class="brand" href="{esc(ctx.url("/"))}">miniagent</a>'
            f'<a href="{esc(ctx.url("/"))}">Inbox</a>'
            f'<a href="{esc(ctx.url("/sessions"))}">Sessions</a>'
            + (f'<a href="{esc(ctx.url("/evals"))}">Evals</a>' if ctx.evals else "")
            + "</nav>"
            f'<span class="where muted">{esc(ctx.where)}</span></header>'
            f"<main>{banner}{body}</main></body></html>\n")


def path_of(session_id: str, tail: str = "") -> str:
    """The path of a session's page (or of ``tail`` under it): its id as one segment."""
    return f"/sessions/{segment(session_id)}{tail}"


def ago(seconds: float) -> str:
    """``42 s``, ``5 min``, ``3 h``, ``2 d``."""
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _hidden(ctx: Ctx, session: AgentSession, **fields: str) -> str:
    values = {"csrf": ctx.csrf, "version": version(session), **fields}
    return "".join(f'<input type="hidden" name="{esc(k)}" value="{esc(v)}">'
                   for k, v in values.items())


# -- the inbox --------------------------------------------------------------------------------


def inbox_page(ctx: Ctx, sessions: list[AgentSession], *, more: bool, seen: str,
               notice: str = "", error: str = "") -> str:
    """The inbox; ``seen`` is its version (see ``/events``): the page swaps in its new part
    when more sessions wait, or fewer."""
    live = (f'<div id="live" data-live="{esc(ctx.url("/events"))}" '
            f'data-part="{esc(ctx.url("/part"))}" data-version="{esc(seen)}" '
            f'data-since="{esc(seen)}" '
            f'aria-live="polite">{inbox_part(ctx, sessions, more=more, seen=seen)}</div>')
    return shell(ctx, "Inbox", live, notice=notice, error=error)


def inbox_part(ctx: Ctx, sessions: list[AgentSession], *, more: bool, seen: str) -> str:
    if not sessions:
        body = ("<h1>Inbox</h1><p class=\"muted empty\">Nothing waits for a person. Sessions "
                "whose tool calls need approval show up here, oldest first.</p>")
    else:
        cards = "".join(waiting_card(ctx, s) for s in sessions)
        extra = ('<p class="muted">More sessions wait: decide these first, or see '
                 f'<a href="{esc(ctx.url("/sessions", status="awaiting_approval"))}">all '
                 "waiting sessions</a>.</p>") if more else ""
        body = (f"<h1>Inbox <span class=\"count\">{counted(len(sessions), 'session')} "
                f"waiting</span></h1>{cards}{extra}")
    return f'<div data-version="{esc(seen)}" data-since="{esc(seen)}">{body}</div>'


def waiting_card(ctx: Ctx, session: AgentSession, *, heading: bool = True) -> str:
    """A waiting session: its question, each waiting call with its decision form, and a form
    for all of them."""
    waiting = [r for r in session.open_calls() if r.state == "awaiting_approval"]
    link = esc(ctx.url(path_of(session.id)))
    parent = parent_of(session)
    calls = "".join(_waiting_call(ctx, session, r, decide=parent is None) for r in waiting)
    every = _decide_form(ctx, session, None, f"all {len(waiting)} calls") if len(
        waiting) > 1 and parent is None else ""
    if parent is not None:
        every = (f'<p class="why">A sub-agent\'s run: decide on its <a href="'
                 f'{esc(ctx.url(path_of(parent)))}">parent session {esc(parent)}</a>, '
                 "which relays the decision here.</p>")
    head = (f'<h2><a href="{link}">{esc(clip(session.turn.question, 300))}</a></h2>'
            f'<p class="kv">session <span class="id">{esc(session.id)}</span> · '
            f"{counted(len(session.steps), 'step')} · {esc(token_count(session.usage))} · "
            f"{esc(session.reason)}</p>") if heading else ""
    return (f'<section class="card waiting" data-session="{esc(session.id)}">'
            f"{head}{calls}{every}{_runs_with(ctx, session)}</section>")


def _runs_with(ctx: Ctx, session: AgentSession) -> str:
    if ctx.runs_with is None or parent_of(session) is not None:
        return ""
    try:
        text = ctx.runs_with(session)
    except Exception as exc:  # a record that cannot be read: say so, decide all the same
        text = f"cannot tell ({type(exc).__name__})"
    return f'<p class="kv runs-with">Once decided, it goes on with: {esc(text)}</p>'


def _waiting_since(record: CallRecord) -> float:
    return next((m.at for m in reversed(record.moves) if m.target == "awaiting_approval"), 0.0)


def _waiting_call(ctx: Ctx, session: AgentSession, record: CallRecord, *,
                  decide: bool = True) -> str:
    since = _waiting_since(record)
    waited = f"waiting {ago(ctx.now - since)}" if since else "waiting"
    why = (f'<p class="why">Why it waits: {esc(record.note)}</p>' if record.note else "")
    sub = ""
    if record.observation is not None and record.observation.sub_run is not None:
        run = record.observation.sub_run
        inner = "".join(f"<li><strong>{esc(p.tool)}</strong> {arguments(p.arguments)}"
                        f'<p class="why">{esc(p.reason)}</p></li>' for p in run.pending)
        sub = (f'<p class="kv">It waits for calls of the sub-agent {esc(run.agent)} '
               f"(session {esc(run.session_id)}); the decision is relayed to them:</p>"
               f"<ul class=\"sub\">{inner}</ul>")
    return (f'<div class="call" data-call="{esc(record.call.id)}">'
            f'<p class="head"><strong class="tool">{esc(record.call.name)}</strong> '
            f'<span class="kv">call {esc(record.call.id)}</span> '
            f'<span class="tag warn">{esc(waited)}</span></p>{why}'
            f"{arguments(record.call.arguments)}{sub}"
            f"{_decide_form(ctx, session, record.call.id, record.call.name) if decide else ''}"
            f"{_edit_form(ctx, session, record) if decide and not sub else ''}"
            "</div>")


def _edit_form(ctx: Ctx, session: AgentSession, record: CallRecord) -> str:
    """Approve with edited arguments: the model's as JSON to change (checked against the
    tool's schema when posted). A form of its own, folded: a plain approval never posts the
    arguments back (a call's may be larger than a form may be)."""
    text = json.dumps(record.call.arguments, ensure_ascii=False, indent=2)
    if len(text.encode()) > EDIT_BYTES:
        return (f'<p class="kv">Its arguments are too large to edit here ({len(text):,} '
                "characters): use <code>miniagent sessions approve ... --arguments</code>.</p>")
    action = esc(ctx.url(path_of(session.id, "/decide")))
    field_id = f"a-{session.id}-{record.call.id}"
    fields = _hidden(ctx, session, call_id=record.call.id)
    rows = min(12, text.count("\n") + 2)
    form = (f'<form method="post" action="{action}" class="decide edit">{fields}'
            f'<label for="{esc(field_id)}">Arguments (JSON; checked against the tool\'s '
            f'schema; the model is told it ran with yours)</label>'
            f'<textarea id="{esc(field_id)}" name="arguments" rows="{rows}" spellcheck="false" '
            f'required>{esc(text)}</textarea><span class="buttons">'
            f'<button type="submit" name="decision" value="approve" class="approve">'
            "Approve with these arguments</button></span></form>")
    return details("Edit the arguments, then approve", form, cls="edit")


def _decide_form(ctx: Ctx, session: AgentSession, call_id: str | None, what: str) -> str:
    action = esc(ctx.url(path_of(session.id, "/decide")))
    label_id = f"r-{session.id}-{call_id or 'all'}"
    fields = _hidden(ctx, session, call_id=call_id or "")
    everything = call_id is None
    approve = f"Approve {what}" if everything else "Approve"
    deny = f"Deny {what}" if everything else "Deny"
    return (f'<form method="post" action="{action}" class="decide{" all" if everything else ""}">'
            f"{fields}<label for=\"{esc(label_id)}\">Reason (optional; the model is told)"
            f'</label><input id="{esc(label_id)}" name="reason" type="text" maxlength="2000" '
            f'autocomplete="off"><span class="buttons">'
            f'<button type="submit" name="decision" value="approve" class="approve">'
            f"{esc(approve)}</button>"
            f'<button type="submit" name="decision" value="deny" class="deny">{esc(deny)}'
            "</button></span></form>")


def arguments(args: dict[str, Any]) -> str:
    """A call's arguments: each as pretty JSON, a long value folded behind its beginning."""
    if not args:
        return '<p class="kv">no arguments</p>'
    rows = []
    for name, value in args.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                               indent=2)
        label = f'<span class="arg">{esc(name)}</span>'
        if len(text) > FOLD_CHARS:
            summary = (f"{label} <span class=\"kv\">{esc(clip(text, 60))} "
                       f"({len(text):,} characters)</span>")
            rows.append(details(summary, pre(text), cls="fold"))
        else:
            rows.append(f'<div class="argrow">{label}{pre(text)}</div>')
    return f'<div class="args">{"".join(rows)}</div>'


# -- the sessions list ------------------------------------------------------------------------


def sessions_page(ctx: Ctx, rows: list[SessionSummary], query: SessionQuery,
                  next_after: str | None) -> str:
    options = "".join(f'<option value="{esc(s)}"{" selected" if s == query.status else ""}>'
                      f"{esc(s)}</option>" for s in STATUSES)
    form = (f'<form method="get" action="{esc(ctx.url("/sessions"))}" class="filter">'
            '<label for="f-status">Status</label><select id="f-status" name="status">'
            f'<option value="">any</option>{options}</select>'
            '<label for="f-text">Question or id holds</label>'
            f'<input id="f-text" name="q" type="search" value="{esc(query.text or "")}">'
            '<button type="submit">Filter</button></form>')
    if rows:
        lines = "".join(_session_row(ctx, r) for r in rows)
        listing = ('<div class="scroll"><table class="sessions"><thead><tr><th>Session</th>'
                   '<th>Status</th><th class="num">Steps</th><th class="num wide">Tokens</th>'
                   '<th class="wide">Updated</th><th>Question</th></tr></thead>'
                   f"<tbody>{lines}</tbody></table></div>")
    else:
        listing = '<p class="muted empty">No session matches.</p>'
    paging = ""
    if next_after is not None:
        kept = {k: v for k, v in (("status", query.status), ("q", query.text)) if v}
        paging = (f'<p class="paging"><a rel="next" href="'
                  f'{esc(ctx.url("/sessions", **kept, after=next_after))}">Older sessions'
                  "</a></p>")
    return shell(ctx, "Sessions", f"<h1>Sessions</h1>{form}{listing}{paging}")


def _session_row(ctx: Ctx, r: SessionSummary) -> str:
    link = esc(ctx.url(path_of(r.session_id)))
    tokens = f"{r.tokens:,}" if r.tokens is not None else "?"
    return (f'<tr><td><a class="id" href="{link}">{esc(clip(r.session_id, 24))}</a></td>'
            f"<td>{_listed_status(r)}</td>"
            f'<td class="num">{r.steps if r.steps >= 0 else "?"}</td>'
            f'<td class="num wide">{tokens}</td>'
            f'<td class="wide">{esc(ago(ctx.now - r.updated_at))} ago</td>'
            f'<td class="question">{esc(clip(r.question, 160))}</td></tr>')


def _listed_status(r: SessionSummary) -> str:
    """A listed session's status badge: ``interrupted`` for a run that no process runs."""
    if r.interrupted:
        return ('<span class="tag warn" title="saved as running, but its process is gone: '
                'miniagent sessions resume picks it up">interrupted</span>')
    return f'<span class="tag {status_class(r.status)}">{esc(r.status)}</span>'


# -- one session ------------------------------------------------------------------------------


def session_page(ctx: Ctx, session: AgentSession, run: RunHere | None, *, report: bool,
                 since: str, before: int | None = None, notice: str = "",
                 error: str = "") -> str:
    """A session's page: its last ``STEPS_SHOWN`` steps, followed live (``since`` is where the
    session stood when read, see :func:`live_part`); with ``before``, the steps before step
    number ``before`` (at least the first ``STEPS_SHOWN``), as they are (a page of its
    history is not followed)."""
    sid = esc(session.id)
    links = (f'<p class="links"><a href="{esc(ctx.url(path_of(session.id, "/report")))}">'
             "Trace report</a></p>") if report else ""
    # a page of the history holds STEPS_SHOWN steps, the first one too
    stop = len(session.steps) if before is None else min(max(before - 1, STEPS_SHOWN),
                                                         len(session.steps))
    part = live_part(ctx, session, run, since=since, stop=stop)
    if stop == len(session.steps):
        live = esc(ctx.url(path_of(session.id, "/events")))
        follow = esc(ctx.url(path_of(session.id, "/part")))
        part = (f'<div id="live" data-live="{live}" data-part="{follow}" '
                f'data-version="{esc(version(session))}" data-since="{esc(since)}" '
                f'aria-live="polite">{part}</div>')
    body = (f'<h1 class="question">{esc(clip(session.question, 400))}</h1>'
            f'<p class="kv">session <span class="id">{sid}</span></p>{links}{part}')
    return shell(ctx, clip(session.question, 80), body, notice=notice, error=error)


def live_part(ctx: Ctx, session: AgentSession, run: RunHere | None, *, since: str,
              stop: int | None = None, fresh_from: int | None = None) -> str:
    """What changes while a session runs: the page swaps it in on each change.

    Its steps are the ``STEPS_SHOWN`` before position ``stop`` (default: the last ones); with
    ``fresh_from``, only the steps from that position on (``data-partial``: the page keeps
    the ones it shows before it), so a page that follows a long session is sent what changed.
    ``since`` is where the session stood when read (the ``/events`` stream's ``changed``).
    """
    usage = token_count(session.usage)
    facts = (f'<p class="facts"><span class="tag {status_class(session.status)}" '
             f'data-status="{esc(session.status)}">{esc(session.status)}</span> '
             f"<span>{esc(session.reason)}</span> · {counted(len(session.steps), 'step')} · "
             f"{esc(usage)} · {session.elapsed:.2f} s · updated "
             f"{esc(ago(ctx.now - session.updated_at))} ago</p>")
    here = _run_here(run)
    answer = (f'<h2>Final answer</h2>{pre(session.final_answer, cls="answer")}'
              if session.final_answer is not None else "")
    waiting = (f'<h2>Waiting for a decision</h2>{waiting_card(ctx, session, heading=False)}'
               if session.pending_approvals() else "")
    stop = len(session.steps) if stop is None else stop
    if fresh_from is not None:
        steps = _steps(ctx, session, fresh_from, stop, partial=True)
    else:
        steps = _steps(ctx, session, max(0, stop - STEPS_SHOWN), stop)
    return (f'<div data-version="{esc(version(session))}" data-since="{esc(since)}">{facts}'
            f"{here}{answer}{waiting}{_actions(ctx, session, run)}<h2>Steps</h2>{steps}"
            f"<h2>Transitions</h2>{_transitions(session)}</div>")


def _run_here(run: RunHere | None) -> str:
    if run is None:
        return ""
    if run.running:
        return (f'<p class="flash run" role="status">Running in this server ({esc(run.what)}'
                f", {counted(run.events, 'event')} so far).</p>")
    if run.error is not None:
        return (f'<p class="flash bad" role="alert">The run started here failed: '
                f"{esc(run.error)}</p>")
    if run.result is not None:
        return (f'<p class="flash ok" role="status">The run started here ended: '
                f"{esc(run.result.status)} ({esc(run.result.reason)}).</p>")
    return ""


def _actions(ctx: Ctx, session: AgentSession, run: RunHere | None) -> str:
    """Resume, ask-again, fork and cancel forms, where they apply."""
    if run is not None and run.running:
        return ""
    if parent_of(session) is not None:
        return ""  # its parent's page acts on it (the waiting card links there)
    base = path_of(session.id)
    forms = []
    decided = session.status == "awaiting_approval" and not session.pending_approvals()
    if ctx.runs_here and (session.status in ("timeout", "error", "running") or decided):
        forms.append(f'<form method="post" action="{esc(ctx.url(base + "/resume"))}">'
                     f'{_hidden(ctx, session)}<button type="submit">Resume</button></form>')
    if ctx.runs_here and session.status in TURN_ENDED and session.phase != "tools":
        forms.append(f'<form method="post" action="{esc(ctx.url(base + "/ask"))}" class="ask">'
                     f'{_hidden(ctx, session)}<label for="ask-q">Continue the conversation: '
                     'ask a next question</label><textarea id="ask-q" name="question" rows="2" '
                     'maxlength="20000" required></textarea><button type="submit">Ask</button>'
                     "</form>")
    forms.append(_fork_form(ctx, session))
    if session.status not in FINAL:
        forms.append(f'<form method="post" action="{esc(ctx.url(base + "/cancel"))}" '
                     f'class="cancel">{_hidden(ctx, session)}<label for="cancel-r">Reason'
                     '</label><input id="cancel-r" name="reason" type="text" maxlength="2000">'
                     '<button type="submit" class="deny">Cancel the session</button></form>')
    return f'<div class="actions">{"".join(forms)}</div>' if forms else ""


def _fork_form(ctx: Ctx, session: AgentSession) -> str:
    """Fork: a new session of the first K steps (all of them unless a person says fewer)."""
    last = len(session.steps)
    return (f'<form method="post" action="{esc(ctx.url(path_of(session.id, "/fork")))}" '
            f'class="fork">{_hidden(ctx, session)}<label for="fork-at">Fork: a new session '
            'of its first</label><input id="fork-at" name="at_step" type="number" min="0" '
            f'max="{last}" value="{last}" required><span>steps</span>'
            '<button type="submit">Fork</button></form>')


def _steps(ctx: Ctx, session: AgentSession, start: int, stop: int, *,
           partial: bool = False) -> str:
    """The steps at positions ``start`` to ``stop``, each item marked with its position
    (``data-step``), after links to the pages of the steps before and after them (none in a
    ``partial`` list: the page keeps its own)."""
    if not session.steps:
        return '<p class="muted">No step yet.</p>'
    turn_at = {t.first_step: (n, t) for n, t in enumerate(session.turns, 1)}
    out = []
    for position in range(start, stop):
        step = session.steps[position]
        if position in turn_at and len(session.turns) > 1:
            number, turn = turn_at[position]
            out.append((position, f'<h3 class="turn">Turn {number}: '
                                  f"{esc(clip(turn.question, 300))}</h3>"))
        if position in turn_at and turn_at[position][1].recalled:
            out.append((position, details(esc("recalled from memory"),
                                          pre(turn_at[position][1].recalled or ""))))
        last = position == len(session.steps) - 1
        out.append((position, _step(step, open_=last,
                                    answered_above=last and step.final_answer is not None
                                    and step.final_answer == session.final_answer)))
    items = "".join(f'<li data-step="{p}">{s}</li>' for p, s in out)
    paging = "" if partial else _steps_paging(ctx, session, start, stop)
    mark = " data-partial" if partial else ""
    return (f'<nav class="paging steps" aria-label="steps">{paging}</nav>'
            f'<ol class="steps" data-from="{start}"{mark}>{items}</ol>')


def _steps_paging(ctx: Ctx, session: AgentSession, start: int, stop: int) -> str:
    """Where the shown steps sit among all, with links to the earlier and later ones."""
    total = len(session.steps)
    # the range only on a page of the history: the last steps' page grows as it follows
    links = [f"Steps {start + 1:,}–{stop:,} of {total:,}."] if stop < total else []
    base = path_of(session.id)
    if start > 0:
        links.append(f'<a rel="prev" href="{esc(ctx.url(base, before=str(start + 1)))}">'
                     "Earlier steps</a>")
    if stop < total:
        later = stop + STEPS_SHOWN
        href = ctx.url(base) if later >= total else ctx.url(base, before=str(later + 1))
        links.append(f'<a rel="next" href="{esc(href)}">Later steps</a>')
        links.append(f'<a href="{esc(ctx.url(base))}">The last steps</a>')
    return " ".join(links)


def _step(step: Step, *, open_: bool, answered_above: bool = False) -> str:
    """One step, opened or not; with ``answered_above`` (the step that gave the session's
    final answer, which the page shows above the steps) the answer is not repeated."""
    answer = None if answered_above else step.final_answer
    what = ("Final Answer (above)" if answered_above and step.final_answer is not None
            else f"Final Answer: {answer}" if answer is not None
            else f"format error: {step.error}" if step.error
            else " · ".join(r.call.name for r in step.calls) or "no action")
    summary = (f'<span class="idx">step {step.index}</span> '
               f'<span class="what">{esc(clip(what, 160))}</span> '
               f'<span class="kv">{step.model_time:.2f} s model · {step.tool_time:.2f} s tools · '
               f"{esc(token_count(step.usage))}</span>")
    body = []
    if step.thought:
        label = "Unparsed reply" if step.error else "Thought"
        body.append(f'<p class="kv">{label}</p>{pre(step.thought, cls="thought")}')
    if step.offered_tools is not None:
        body.append(f'<p class="kv">Offered: {esc(", ".join(step.offered_tools))}</p>')
    for record in step.calls:
        body.append(_call(record))
    if step.error:
        body.append(f'<p class="kv bad">Format error</p>{pre(step.error)}')
    if answer is not None:
        body.append(f'<p class="kv">Final answer</p>{pre(answer)}')
    return details(summary, "".join(body), open_=open_, cls="step",
                   attrs=f'id="step-{step.index}"')


def _call(record: CallRecord) -> str:
    state = record.outcome or record.state
    note = f' <span class="kv">— {esc(record.note)}</span>' if record.note else ""
    out = [f'<div class="call"><p class="head"><span class="kv">Action</span> '
           f'<strong class="tool">{esc(record.call.name)}</strong> '
           f'<span class="kv">call {esc(record.call.id)}</span> '
           f'<span class="tag">{esc(state)}</span>{note}</p>{arguments(record.call.arguments)}']
    if record.edited_arguments is not None:
        out.append(f'<p class="kv edited">Edited by a person: it ran with</p>'
                   f"{arguments(record.edited_arguments)}")
    obs = record.observation
    if obs is not None:
        label = "Observation (error)" if obs.is_error else "Observation"
        out.append(f'<p class="kv">{label} · {obs.elapsed * 1000:.0f} ms</p>'
                   f'{pre(obs.output, cls="observation" + (" error" if obs.is_error else ""))}')
        if obs.sub_run is not None:
            sub = obs.sub_run
            out.append(f'<p class="kv">sub-run {esc(sub.session_id)}: {esc(sub.status)}, '
                       f"{counted(len(sub.steps), 'step')}, {esc(token_count(sub.usage))}</p>")
    out.append("</div>")
    return "".join(out)


def _transitions(session: AgentSession) -> str:
    shown = session.transitions[-TRANSITIONS_SHOWN:]
    rows = "".join(f"<tr><td>{esc(time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(t.at)))}"
                   f"</td><td>{esc(t.source)} → {esc(t.target)}</td><td>{esc(t.reason)}</td></tr>"
                   for t in shown)
    if not rows:
        return '<p class="muted">None yet.</p>'
    earlier = len(session.transitions) - len(shown)
    note = (f'<p class="kv">The last {len(shown)} of {len(session.transitions):,} '
            f"(<code>miniagent sessions show</code> prints them all).</p>") if earlier else ""
    return (f'{note}<div class="scroll"><table class="transitions"><thead><tr><th>When</th>'
            f"<th>Move</th><th>Why</th></tr></thead><tbody>{rows}</tbody></table></div>")


def evals_page(ctx: Ctx, runs: list[Any]) -> str:
    """The eval folders (:class:`~miniagent.ui.evals.EvalRun`), newest first."""
    if not runs:
        listing = ('<p class="muted empty">No eval report here yet: <code>miniagent eval '
                   "--out DIR</code> writes one into a folder under this one.</p>")
    else:
        rows = "".join(
            f'<tr><td><a class="id" href="{esc(ctx.url("/evals/report", run=r.name))}">'
            f'{esc(r.name)}</a></td><td>{esc(ago(ctx.now - r.written))} ago</td></tr>'
            for r in runs)
        listing = ('<div class="scroll"><table class="evals"><thead><tr><th>Eval</th>'
                   f"<th>Written</th></tr></thead><tbody>{rows}</tbody></table></div>")
    return shell(ctx, "Eval reports", f"<h1>Eval reports</h1>{listing}")


def login_page(ctx: Ctx, *, error: str = "") -> str:
    body = ("<h1>Log in</h1><p>This inbox asks for the token its server was started with: "
            "the one <code>miniagent ui</code> printed, or the one in the environment "
            "variable named by <code>--token-env</code>. The one-time link it printed logs "
            "a browser in without typing.</p>"
            f'<form method="post" action="{esc(ctx.url("/login"))}" class="login">'
            '<label for="token">Token</label><input id="token" name="token" type="password" '
            'autocomplete="current-password" required autofocus>'
            '<button type="submit">Log in</button></form>')
    return shell(ctx, "Log in", body, error=error)


def message_page(ctx: Ctx, title: str, message: str) -> str:
    return shell(ctx, title, f"<h1>{esc(title)}</h1><p>{esc(message)}</p>")
