"""What ``miniagent eval`` shows: a progress bar while it runs, tables at the end, changes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from miniagent._internal.wording import counted
from miniagent.cli.safe_text import markup
from miniagent.evals.metrics import mean_tokens

ETA_AFTER = 3
"""Finished task runs before the bar shows an ETA: one run's time says too little."""


class EtaColumn(ProgressColumn):
    """The time left, from the mean time of the runs finished so far, once a few are."""

    def render(self, task: Task) -> Text:
        left = task.remaining
        if task.completed < ETA_AFTER or left is None or not task.elapsed:
            return Text("")
        seconds = round(task.elapsed / task.completed * left)
        return Text(f"ETA {timedelta(seconds=seconds)}", style="progress.remaining")


class EvalProgress:
    """A rich progress bar on stderr, advanced by each finished task run.

    It is drawn only once the runs are planned (:meth:`start`): an eval refused before that
    (a folder of another configuration) prints its error alone.
    """

    def __init__(self, console: Console, get_time: Callable[[], float] | None = None) -> None:
        self.progress = Progress(TextColumn("[bold]eval[/bold]"), BarColumn(),
                                 MofNCompleteColumn(), TextColumn("{task.fields[last]}"),
                                 TimeElapsedColumn(), EtaColumn(), console=console,
                                 transient=False, get_time=get_time)
        self.task: TaskID | None = None
        self.correct = 0
        self.done = 0

    def __enter__(self) -> EvalProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def start(self, todo: int, already: int) -> None:
        if already:
            self.progress.console.print(f"resuming: {counted(already, 'task run')} already "
                                        f"done, {todo} to go")
        self.task = self.progress.add_task("eval", total=todo, last="")
        self.progress.start()

    def result(self, record: dict[str, Any]) -> None:
        self.done += 1
        self.correct += bool(record["correct"])
        mark = "[green]ok[/green]" if record["correct"] else "[red]wrong[/red]"
        last = f"{mark} {markup(record['key'], 60)} ({self.correct}/{self.done} correct)"
        if self.task is not None:
            self.progress.update(self.task, advance=1, last=last)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def summary_tables(report: dict[str, Any]) -> list[Table]:
    """Accuracy per category and mode side by side, then each mode's other metrics."""
    modes = report["modes"]
    main = Table(title=f"miniagent eval: {counted(report['tasks'], 'task')}, "
                       f"{counted(report['runs'], 'run')}")
    main.add_column("category", no_wrap=True)
    main.add_column("n", justify="right")
    for mode in modes:
        main.add_column(f"{mode}\naccuracy", justify="right")
        main.add_column(f"{mode}\ntool calls", justify="right")
        main.add_column(f"{mode}\nsteps", justify="right")
    categories = sorted({r["category"] for r in report["results"]})
    for name in [*categories, None]:
        row = [markup(name) if name else "[bold]all[/bold]"]
        first = report["by_mode"][modes[0]]
        row.append(str((first["by_category"][name] if name else first)["n"]))
        for mode in modes:
            group = report["by_mode"][mode]
            group = group["by_category"].get(name) if name else group
            row += ([_pct(group["accuracy"]), _pct(group["tool_call_accuracy"]),
                     _num(group["steps"]["mean"])] if group else ["-", "-", "-"])
        main.add_row(*row, end_section=name == categories[-1])
    return [main, _details(report)]


def _details(report: dict[str, Any]) -> Table:
    modes = report["modes"]
    table = Table(title="per mode")
    table.add_column("metric")
    for mode in modes:
        table.add_column(mode, justify="right")
    groups = [report["by_mode"][m] for m in modes]
    rows: list[tuple[str, Any]] = [
        ("call validity", lambda g: _pct(g["call_validity"])),
        ("parse failures / reply", lambda g: _pct(g["parse_failure_rate"])),
        ("self-repair (n)", lambda g: f"{_pct(g['self_repair_rate'])} ({g['met_error_n']})"),
        ("steps distribution", lambda g: " ".join(f"{k}:{v}" for k, v in
                                                  g["steps"]["distribution"].items())),
        ("prompt tokens / task", lambda g: mean_tokens(g["tokens"], "prompt")),
        ("completion tokens / task", lambda g: mean_tokens(g["tokens"], "completion")),
        ("cached tokens / task", lambda g: mean_tokens(g["tokens"], "cached")),
        ("wall time / task (s)", lambda g: _num(g["wall_time"]["mean"], 2)),
        ("statuses", lambda g: " ".join(f"{k}:{v}" for k, v in g["statuses"].items())),
        ("faults injected (tool)", lambda g: str(g["faults"]["injected"]["tool_failures"])),
        ("faults met: tool errors", lambda g: str(g["faults"]["met"]["tool_errors"])),
        ("faults met: parse failures", lambda g: str(g["faults"]["met"]["parse_failures"])),
        ("faults met: model errors", lambda g: str(g["faults"]["met"]["model_errors"])),
        ("accuracy spread (repeats)", lambda g: "-" if not g["spread"] else
         f"{_pct(g['spread']['min'])}..{_pct(g['spread']['max'])} "
         f"sd {_pct(g['spread']['stdev'])}"),
    ]
    for label, cell in rows:
        table.add_row(label, *(markup(cell(g)) for g in groups))
    model_faults = report.get("model_faults")
    if model_faults:
        for mode in modes:
            injected = model_faults.get(mode, {}).get("injected", {})
            text = " ".join(f"{k}:{v}" for k, v in sorted(injected.items())) or "0"
            table.caption = (table.caption or "") + f"model faults injected ({mode}): {text}  "
    return table


def compare_table(changes: dict[str, Any]) -> Table:
    """Metric deltas, then each task run whose outcome changed."""
    table = Table(title=f"compared with the earlier report: {changes['fixed']} fixed, "
                        f"{changes['broken']} broken")
    table.add_column("what")
    table.add_column("before", justify="right")
    table.add_column("after", justify="right")
    table.add_column("delta", justify="right")
    for name, delta in changes["overall"].items():
        if delta["before"] is None and delta["after"] is None:
            continue
        sign = "" if delta["delta"] is None else f"{100 * delta['delta']:+.0f} pts"
        table.add_row(name, _pct(delta["before"]), _pct(delta["after"]), sign,
                      end_section=name == "self_repair_rate")
    for change in changes["changed"]:
        was, now = change["correct"]
        table.add_row(markup(change["key"], 60), "ok" if was else "wrong",
                      "ok" if now else "wrong",
                      markup(f"{change['status'][0]} -> {change['status'][1]}"))
    return table
