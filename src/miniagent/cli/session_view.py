"""How the CLI prints saved sessions: the ``sessions list`` table, ``sessions show`` (text and
JSON). Every text of a session is printed through ``markup``: a session file may be hostile."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from miniagent._internal.wording import counted, token_count
from miniagent.cli.safe_text import markup
from miniagent.cli.session_backend import Listed
from miniagent.core.session import AgentSession
from miniagent.core.store.listing import SessionSummary
from miniagent.core.types import CallRecord


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def sessions_table(rows: Sequence[SessionSummary | Listed],
                   turns: dict[str, str] | None = None) -> Table:
    """Sessions as ``sessions list`` shows them: id, status, steps, age, question; with
    ``turns`` (by session id), a turns column after the status."""
    table = Table("id", "status", *(["turns"] if turns is not None else []), "steps", "age",
                  "question")
    now = time.time()
    for r in rows:
        counted_turns = [turns.get(r.session_id, "?")] if turns is not None else []
        status = "interrupted" if r.interrupted else r.status
        table.add_row(markup(r.session_id, 40), markup(status, 40), *counted_turns,
                      str(r.steps), _age(now - (r.updated_at or now)), markup(r.question[:80]))
    return table


def listing_table(rows: list[Listed], *, counts_steps: bool) -> Table:
    """``sessions list`` as a table: with ``counts_steps`` as :func:`sessions_table` shows a
    store's sessions, else (a cluster) id, status, start time and question."""
    if counts_steps:
        return sessions_table(rows)
    table = Table("id", "status", "started", "question")
    for r in rows:
        table.add_row(markup(r.session_id, 40), markup(r.status, 40),
                      time.ctime(r.started_at or 0), markup(r.question[:80]))
    return table


def session_json(session: AgentSession) -> dict[str, object]:
    """The saved form, with each call's ``outcome`` added: derived, not saved, so that a
    denied call (saved ``completed``, as it has its observation) reads as denied."""
    data = session.to_dict()
    for step, saved in zip(session.steps, data["steps"], strict=True):
        for record, call in zip(step.calls, saved["calls"], strict=True):
            call["outcome"] = record.outcome
    return data


def _call_state(record: CallRecord) -> str:
    """Where a call stands, in words: ``completed`` alone would hide that it never ran."""
    if record.outcome == "denied":
        return "denied, not run again" if record.interrupted else "denied, not run"
    if record.outcome == "not_run":
        return "answered without running"
    return record.state


def print_session(console: Console, s: AgentSession) -> None:
    """Every text of a session file is printed through ``markup``: the file may be hostile."""
    console.print(f"[bold]Session {markup(s.id)}[/bold]: {markup(s.status, 40)} — "
                  f"{markup(s.reason)}")
    console.print(f"Question: {markup(s.question)}")
    turns = f"{counted(len(s.turns), 'turn')} · " if len(s.turns) > 1 else ""
    console.print(f"[dim]{turns}{counted(len(s.steps), 'step')} · "
                  f"{token_count(s.usage)} · "
                  f"{s.elapsed:.2f} s · created {time.ctime(s.created_at)}[/dim]")
    starts = {turn.first_step: (n, turn) for n, turn in enumerate(s.turns, 1) if n > 1}
    for position, step in enumerate(s.steps):
        if position in starts:
            number, turn = starts[position]
            console.rule(f"turn {number}", style="bold")
            console.print(f"Question: {markup(turn.question)}")
        by = f" · {markup(step.model, 100)}" if step.model else ""  # a FallbackModel's
        console.rule(f"step {step.index}{by}", style="dim")
        if step.thought:  # an unparsed reply's text is kept as its thought: say what it is
            label = ("[red]Unparsed reply:[/red]" if step.error
                     else "[italic cyan]Thought:[/italic cyan]")
            console.print(f"{label} {markup(step.thought)}")
        if step.offered_tools is not None:
            console.print(f"[dim]offered: {markup(', '.join(step.offered_tools))}[/dim]")
        for record in step.calls:
            args = json.dumps(record.call.arguments, ensure_ascii=False)
            note = f" — {markup(record.note)}" if record.note else ""
            console.print(f"[bold yellow]Action[/bold yellow] {markup(record.call.name, 200)} "
                          f"{markup(args)} [dim]({markup(record.call.id, 100)}: "
                          f"{markup(_call_state(record), 40)}{note})[/dim]")
            if record.edited_arguments is not None:
                edited = json.dumps(record.edited_arguments, ensure_ascii=False)
                console.print(f"[bold magenta]Edited by a person[/bold magenta] to "
                              f"{markup(edited)}")
            if record.observation is not None:
                style = "red" if record.observation.is_error else "green"
                console.print(f"[{style}]Observation:[/{style}] "
                              f"{markup(record.observation.output)}")
                sub = record.observation.sub_run
                if sub is not None:
                    console.print(f"[dim]sub-run {markup(sub.session_id, 200)}: "
                                  f"{markup(sub.status, 40)}, {counted(len(sub.steps), 'step')}, "
                                  f"{token_count(sub.usage)}[/dim]")
        if step.error:
            console.print(f"[red]Format error:[/red] {markup(step.error)}")
        if step.final_answer is not None:
            console.print(f"[bold green]Final Answer:[/bold green] {markup(step.final_answer)}")
    console.rule("transitions", style="dim")
    for t in s.transitions:
        console.print(f"[dim]{time.ctime(t.at)}[/dim] {markup(t.source, 40)} -> "
                      f"{markup(t.target, 40)}: {markup(t.reason)}")
