"""The CLI's live trace: an event subscriber that prints each step with rich.

Everything a model, a tool or a server wrote goes through :func:`~miniagent.cli.safe_text.markup`
(control characters escaped, long texts clipped, rich markup escaped) before it is printed.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.status import Status

from miniagent._internal.wording import counted, token_count, unreported_tokens
from miniagent.cli.safe_text import TERMINAL_CHARS, clip, markup, visible
from miniagent.cli.session_commands import session_command
from miniagent.core.runtime import events as ev
from miniagent.core.trace.records import result_record
from miniagent.core.types import RunResult, Step, TokenUsage

_SHOWN_CHARS = 600
"""Thoughts and observations in the live trace are shown up to this many characters."""


def _short(text: str, limit: int = _SHOWN_CHARS) -> str:
    return markup(text.strip(), limit)


def terminal() -> Console:
    """A console that adds no highlighting and reads no ``:emoji:`` codes into the text."""
    return Console(highlight=False, emoji=False)


class TraceDisplay:
    """Prints thought, action, arguments, observation, tokens and time for each step.

    With a streaming model, the reply is written as it arrives (``model_delta`` events), the
    reasoning of a reasoning model dimmed; the thought is then not repeated. On a terminal, a
    spinner says the model is working until its first text or its reply (a small local model
    may take tens of seconds per step).
    """

    def __init__(self, console: Console | None = None, *, verbose: bool = False) -> None:
        self.console = console or terminal()
        self.verbose = verbose
        self._streamed = 0  # characters of the current model call written so far
        self._channel: str | None = None
        self._status: Status | None = None

    def __call__(self, event: ev.Event) -> None:
        self._stop_waiting()
        if isinstance(event, ev.RunStarted):
            self.console.print(f"[bold]Question:[/bold] {markup(event.question)}")
        elif isinstance(event, ev.StepStarted):
            self.console.rule(f"step {event.step}", style="dim")
        elif isinstance(event, ev.ModelStarted):
            self._streamed, self._channel = 0, None
            self._offered(event)
            self._wait(f"step {event.step}: waiting for the model")
        elif isinstance(event, ev.ModelDelta):
            self._delta(event)
        elif isinstance(event, ev.ModelResponded):
            self._end_stream()
            self._model_responded(event)
        elif isinstance(event, ev.ToolFinished):
            self._tool_finished(event)
        elif isinstance(event, ev.RunFinished):
            self._run_finished(event)
        elif isinstance(event, ev.MemoryRecalled):
            self._recalled(event)
        elif isinstance(event, ev.SlotWaiting):
            self._slot_waiting(event)
        elif isinstance(event, ev.ContextCompacted):
            done = event.compaction
            self.console.print(f"[dim]context compacted: rounds 1-{done.rounds} summarised "
                               f"({done.mode}), {done.size_before:,} -> {done.size_after:,} "
                               f"{done.unit}[/dim]")

    def _offered(self, event: ev.ModelStarted) -> None:
        """Which tools a selection offered: always when it offered none of several, else
        with ``-v`` (the selection picks by the words of the question and its shape)."""
        if event.offered is None or not event.available:
            return
        if not event.offered:
            self.console.print(f"[yellow]tools offered: none of {event.available}: nothing in "
                               "the question matched a tool (strict selection); the model "
                               "answers without tools (--aids off offers every tool)[/yellow]")
        elif self.verbose:
            self.console.print(f"[dim]tools offered: {markup(', '.join(event.offered))} "
                               f"({len(event.offered)} of {event.available}, chosen by the "
                               "question's words and shape)[/dim]")

    def stop(self) -> None:
        """Tidy what a run stopped mid-way (Ctrl-C) left on screen: the spinner ends, a
        half-written streamed line is closed."""
        self._stop_waiting()
        self._end_stream()

    def _wait(self, text: str) -> None:
        if self.console.is_terminal:
            self._status = self.console.status(f"[dim]{text}[/dim]", spinner="dots")
            self._status.start()

    def _stop_waiting(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _delta(self, event: ev.ModelDelta) -> None:
        if event.channel == "restart":
            self._end_stream()
            self.console.print("[dim](the stream broke off; asked again without streaming)[/dim]")
            self._streamed = 0
            return
        if self._streamed >= TERMINAL_CHARS:
            return
        if event.channel != self._channel:
            if self._channel is not None:
                self.console.print()
            label = "[dim]reasoning:[/dim] " if event.channel == "reasoning" else ""
            self.console.print(label, end="")
            self._channel = event.channel
        text = event.text[: TERMINAL_CHARS - self._streamed]
        self._streamed += len(event.text)
        style = "dim" if event.channel == "reasoning" else None
        self.console.print(escape(visible(text)), end="", style=style, soft_wrap=True)
        if self._streamed >= TERMINAL_CHARS:
            self.console.print(" [dim]… (more not shown; --json prints it all)[/dim]", end="")

    def _end_stream(self) -> None:
        if self._channel is not None:
            self.console.print()
            self._channel = None

    def _model_responded(self, event: ev.ModelResponded) -> None:
        parsed, response = event.parsed, event.response
        if self.verbose and response.content:
            self.console.print(Panel(markup(response.content), title="raw output", style="dim"))
        written = 0 < self._streamed < TERMINAL_CHARS  # the whole reply is on screen already
        if parsed.kind == "invalid":  # the model wrote no Thought: show what it did write
            if not self._streamed:
                self.console.print(f"[red]Unparsed reply:[/red] {_short(response.content or '')}")
            self.console.print(f"[red]Format error:[/red] {_short(parsed.error or '')}")
        elif parsed.thought and not self._streamed:
            self.console.print(f"[italic cyan]Thought:[/italic cyan] {_short(parsed.thought)}")
        # calls written in the reply's text were streamed; native calls never are
        for call in parsed.tool_calls if response.tool_calls or not written else []:
            args = json.dumps(call.arguments, ensure_ascii=False) if call.arguments else (
                call.raw_arguments or "{}")
            self.console.print(f"[bold yellow]Action:[/bold yellow] {markup(call.name, 200)} "
                               f"{_short(args, 300)}")
        by = f"{markup(response.model, 100)} · " if response.model else ""  # a FallbackModel's
        self.console.print(f"[dim]model {event.elapsed:.2f} s · {by}"
                           f"{call_tokens(response.usage)}[/dim]")

    def _slot_waiting(self, event: ev.SlotWaiting) -> None:
        what, reason = markup(event.what, 200), markup(event.reason, 200)
        self.console.print(f"[yellow]waiting for a slot:[/yellow] [dim]{what} ({reason})[/dim]")
        if event.what.startswith("model"):  # the model spinner goes on
            self._wait(f"step {event.step}: waiting for a slot ({what})")

    def _recalled(self, event: ev.MemoryRecalled) -> None:
        if event.error:
            self.console.print(f"[dim]memory: nothing recalled ({_short(event.error)})[/dim]")
            return
        found = sum(1 for line in event.text.splitlines() if line.startswith("- ["))
        self.console.print(f"[dim]memory: {counted(found, 'memory', 'memories')} recalled "
                           "for the question[/dim]")

    def _tool_finished(self, event: ev.ToolFinished) -> None:
        obs = event.observation
        style = "red" if obs.is_error else "green"
        self.console.print(f"[{style}]Observation[/{style}] [dim]({obs.elapsed * 1000:.0f} ms)"
                           f"[/dim]: {_short(obs.output)}")

    def _run_finished(self, event: ev.RunFinished) -> None:
        result = event.result
        status = markup(result.status, 40)
        footer = (f"{status} · {counted(len(result.steps), 'step')} · "
                  f"{token_count(result.usage)} · "
                  f"{result.elapsed:.2f} s")
        if result.answered_at_limit:  # the model's best answer when max_steps was reached
            self.console.print(Panel(markup(result.final_answer or ""), subtitle=footer,
                                     title="Answer at the step limit", border_style="yellow"))
        elif result.final_answer is not None:
            self.console.print(Panel(markup(result.final_answer), title="Final Answer",
                                     subtitle=footer, border_style="green"))
        else:
            self.console.print(Panel(markup(result.reason), title=f"Stopped: {status}",
                                     subtitle=footer, border_style="red"))


def call_tokens(usage: TokenUsage) -> str:
    """One model call's tokens: prompt, completion and cached as reported, or the estimate."""
    if usage.known:
        cached = f", {usage.cached_tokens:,} cached" if usage.cached_tokens else ""
        return (f"{usage.prompt_tokens:,} prompt + {usage.completion_tokens:,} completion "
                f"tokens{cached}")
    return unreported_tokens(usage)


def result_to_json(result: RunResult) -> dict[str, Any]:
    """The machine-readable form of a run that ``miniagent run --json`` prints."""
    # the trace's record, in its order after these two, with all the usage and a total
    from pydantic_core import to_jsonable_python  # a typed run's output: its JSON

    return {
        "session_id": result.session_id,
        "turn": result.turn,
        **result_record(result),
        "usage": {**asdict(result.usage), "total_tokens": result.usage.total_tokens},
        "elapsed": round(result.elapsed, 3),
        "trace": [step_to_json(step) for step in result.steps],
        **({} if result.output is None else {"output": to_jsonable_python(result.output)}),
    }


def step_to_json(step: Step) -> dict[str, Any]:
    """One step for machines: what the model said, what ran, what came back."""
    return {
        "index": step.index,
        "thought": step.thought,
        "tool_calls": [
            {"id": r.call.id, "name": r.call.name, "arguments": r.call.arguments,
             "state": r.state, "outcome": r.outcome}
            for r in step.calls
        ],
        "observations": [asdict(o) for o in step.observations],
        "final_answer": step.final_answer,
        "error": step.error,
        "usage": asdict(step.usage),
        "model_time": round(step.model_time, 4),
        "model": step.model,
        "raw_output": step.raw_output,
    }


_HINTS = (
    ("To approve {calls}:", "approve", ()),
    ("To deny {calls} (the model is told the reason):", "deny", ("--reason", "your reason")),
    ("Then continue the session:", "resume", ()),
)
"""What to do with a session that awaits approval: a label, then the command on its own line."""


def approval_hint(result: RunResult, store: Path | None = None,
                  temporal: str | None = None) -> str:
    """How to approve or deny what a session waits for, as commands to copy.

    Each command stands alone on its line, quoted for a shell, so that it can be copied whole
    however narrow the terminal (it wraps, but nothing else is on the line).
    """
    session_id = visible(result.session_id)
    pending = result.pending_approvals
    lines = [f"Session {session_id} is awaiting approval:"]
    for p in pending:
        args = json.dumps(p.arguments, ensure_ascii=False)
        lines.append(visible(f"  call {p.call_id}: {p.tool} {clip(args, 500)}  ({p.reason})"))
    calls = "it" if len(pending) == 1 else "all of them (or add one call's id after the session's)"
    for label, verb, extra in _HINTS:
        command = session_command(verb, result.session_id, store, temporal, *extra)
        lines += [label.format(calls=calls), f"  {visible(command)}"]
    return "\n".join(lines)
