"""``miniagent eval``: run an eval set through the agent and report its metrics."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Annotated, Any

import typer

from miniagent._internal import defaults
from miniagent._internal.files import write_private
from miniagent.cli.build import RunConfig, build_model, env
from miniagent.cli.common import cli_errors, echo_json, fail, positive_seconds
from miniagent.cli.loading import import_source, module_tools
from miniagent.core.errors import UserError
from miniagent.core.models.base import Model
from miniagent.core.tools.tool import Tool
from miniagent.core.tools.toolbox import ToolRegistry

if TYPE_CHECKING:  # the eval package loads when an eval runs, not with every command
    from miniagent.evals.checks import Checker

MODES = ("react", "native", "auto")


def eval_command(
    tasks: Annotated[Path | None, typer.Argument(help="A JSONL file, one task per line (see README).")] = None,  # noqa: E501
    tools: Annotated[list[str] | None, typer.Option("--tools", help="Python file(s) whose module-level tools are loaded; python:NAME checks are looked up there too.")] = None,  # noqa: E501
    builtin: Annotated[bool, typer.Option("--builtin", help="Run the bundled task set with its bundled tools.")] = False,  # noqa: E501
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible base URL [env: MINIAGENT_BASE_URL, OPENAI_BASE_URL]; without it, the embedded model")] = None,  # noqa: E501
    model: Annotated[str | None, typer.Option(help="Model name sent to the server [env: MINIAGENT_MODEL]")] = None,  # noqa: E501
    api_key: Annotated[str | None, typer.Option(help="API key [env: MINIAGENT_API_KEY, OPENAI_API_KEY]")] = None,  # noqa: E501
    model_path: Annotated[str | None, typer.Option(help="GGUF file, or an installed model's name, for the embedded model [env: MINIAGENT_MODEL_PATH]")] = None,  # noqa: E501
    mode: Annotated[str, typer.Option(help="Comma-separated modes run side by side: react, native, auto.")] = "react",  # noqa: E501
    repeat: Annotated[int, typer.Option(min=1, help="Runs of each task per mode.")] = 1,
    concurrency: Annotated[int, typer.Option(min=1, help="Task runs at once.")] = 1,
    max_steps: Annotated[int, typer.Option(min=1, help="Model calls allowed per task.")] = defaults.MAX_STEPS,  # noqa: E501
    max_tokens: Annotated[int | None, typer.Option(min=1, help="Tokens per model turn [default: 1024; 256 for the embedded model]")] = None,  # noqa: E501
    timeout: Annotated[float | None, typer.Option(callback=positive_seconds, help="Wall-clock limit per task, seconds.")] = None,  # noqa: E501
    request_timeout: Annotated[float, typer.Option(callback=positive_seconds, help="Timeout of one model request, seconds.")] = 120.0,  # noqa: E501
    grammar: Annotated[bool, typer.Option("--grammar/--no-grammar", help="Constrain ReAct output with a grammar where the backend supports it.")] = True,  # noqa: E501
    grammar_field: Annotated[str | None, typer.Option(help="Send the grammar in this request field (grammar, guided_grammar, structured_outputs).")] = None,  # noqa: E501
    worked_example: Annotated[bool | None, typer.Option("--worked-example/--no-worked-example", help="Show a worked example in the ReAct prompt [default: on for a small model]")] = None,  # noqa: E501
    tool_selection: Annotated[int | None, typer.Option(min=0, help="Tools offered per step, the most relevant; 0 = all [default: 2 for a small model, else all]")] = None,  # noqa: E501
    answer_after_repeat: Annotated[bool, typer.Option("--answer-after-repeat/--no-answer-after-repeat", help="After an intervention on a repeated call, the next step must answer.")] = True,  # noqa: E501
    strict_selection: Annotated[bool | None, typer.Option("--strict-selection/--no-strict-selection", help="Offer only the tools the question matches, none when nothing does [default: on for a small model]")] = None,  # noqa: E501
    act_first: Annotated[bool, typer.Option("--act-first/--no-act-first", help="A step that offers tools must call one until the turn has called a tool.")] = False,  # noqa: E501
    answer_after_results: Annotated[int | None, typer.Option(min=0, help="After N steps whose calls all succeeded, the next step must answer; 0 = never [default: 1 for a small model, else never]")] = None,  # noqa: E501
    quote_answers: Annotated[bool | None, typer.Option("--quote-answers/--no-quote-answers", help="After a tool result, a ReAct Final Answer quotes a result [default: on for a small model]")] = None,  # noqa: E501
    restate_question: Annotated[bool | None, typer.Option("--restate-question/--no-restate-question", help="After a step's results, the last one ends with the question and what to do next [default: on for a small model]")] = None,  # noqa: E501
    ground_figures: Annotated[bool | None, typer.Option("--ground-figures/--no-ground-figures", help="A call whose figures appear nowhere in the question or the results is asked to fetch them first, once [default: per the model's profile]")] = None,  # noqa: E501
    seed: Annotated[int, typer.Option(help="Seed of every injected fault.")] = 0,
    tool_failure_rate: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of tool calls that fail with 'service unavailable'.")] = 0.0,  # noqa: E501
    tool_latency: Annotated[float, typer.Option(min=0.0, help="Seconds added to every tool call.")] = 0.0,  # noqa: E501
    model_failure_rate: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of model requests that meet a transport fault (a fault proxy on 127.0.0.1 in front of --base-url).")] = 0.0,  # noqa: E501
    model_faults: Annotated[str, typer.Option(help="Comma-separated transport faults to draw from: 500, 429, timeout, drop, truncate.")] = "500,429,timeout,drop,truncate",  # noqa: E501
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N tasks of each category.")] = None,  # noqa: E501
    out: Annotated[Path, typer.Option(metavar="DIR", help="Folder of results (resumable) and per-task traces.")] = Path("miniagent-eval"),  # noqa: E501
    fresh: Annotated[bool, typer.Option("--fresh", help="Forget results already in --out and start over.")] = False,  # noqa: E501
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as one JSON object.")] = False,  # noqa: E501
    html: Annotated[Path | None, typer.Option(help="Write an HTML report with charts to this file.")] = None,  # noqa: E501
    compare_with: Annotated[Path | None, typer.Option("--compare", help="A report (from --json or OUT/report.json) to compare with, task by task.")] = None,  # noqa: E501
) -> None:
    """Run TASKS (or --builtin) through the agent in each mode and report the metrics."""
    with cli_errors():
        from miniagent.evals.builtin import TASKS, TOOLS
        from miniagent.evals.tasks import load_tasks

        if tasks is None and not builtin:
            raise fail("give a tasks file (TASKS.jsonl --tools FILE) or --builtin")
        earlier = _earlier_report(compare_with)  # checked before anything runs
        task_list = load_tasks(tasks or TASKS)
        if limit is not None:
            task_list = _first_per_category(task_list, limit)
        sources = list(tools or ([] if tasks else [str(TOOLS)]))
        if not sources:
            raise fail("give --tools FILE: the tools the tasks call")
        registry, checkers = load_eval_tools(sources)
        _check_checkers(task_list, checkers, sources)
        modes = _modes(mode)
        base = base_url or env("MINIAGENT_BASE_URL", "OPENAI_BASE_URL")
        if model_failure_rate and not base:
            raise fail("--model-failure-rate needs --base-url: the fault proxy stands in front "
                       "of an HTTP endpoint, not the embedded model")
        config = RunConfig(base_url=base, model=model or env("MINIAGENT_MODEL"),
                           model_path=model_path, request_timeout=request_timeout,
                           grammar=grammar, grammar_field=grammar_field)
        try:
            report = _run(task_list, registry, checkers, modes, config, api_key=api_key,
                          repeat=repeat, concurrency=concurrency, max_steps=max_steps,
                          max_tokens=max_tokens or (defaults.MAX_TOKENS if base else 256),
                          timeout=timeout, seed=seed, tool_failure_rate=tool_failure_rate,
                          tool_latency=tool_latency, model_failure_rate=model_failure_rate,
                          model_faults=model_faults, out=out, fresh=fresh,
                          agent_options={"worked_example": worked_example,
                                         "tool_selection": tool_selection,
                                         "answer_after_repeat": answer_after_repeat,
                                         "strict_selection": strict_selection,
                                         "act_first": act_first,
                                         "answer_after_results": answer_after_results,
                                         "quote_answers": quote_answers,
                                         "restate_question": restate_question,
                                         "ground_figures": ground_figures},
                          label={"tasks": str(tasks or "builtin"),
                                 "tools": sources if tools else ["builtin"]})
        except KeyboardInterrupt:
            raise fail(f"interrupted: the finished task runs are kept in {out}; run the same "
                       "command again to resume", 130) from None
        _finish(report, out=out, as_json=as_json, html=html, earlier=earlier)


def _earlier_report(path: Path | None) -> dict[str, Any] | None:
    from miniagent.evals.compare import load_report

    return load_report(path) if path is not None else None


def load_eval_tools(sources: list[str]) -> tuple[ToolRegistry, dict[str, Checker]]:
    """Every module-level tool of the files, and their functions (for ``python:NAME``)."""
    registry = ToolRegistry()
    checkers: dict[str, Checker] = {}
    for source in sources:
        module: ModuleType = import_source(str(Path(source).resolve())
                                           if source.endswith(".py") else source)
        found = module_tools(module)
        if not found:
            raise UserError(f"no tools found in {source!r} (@tool functions or "
                            "Tool.from_schema(...) objects at module level)")
        for item in found:
            if item.name not in registry:
                registry.register(item)
        # Only functions the file defines: an imported name (``from shutil import rmtree``)
        # must not become a checker that task files can call with a model's text.
        checkers.update({name: value for name, value in vars(module).items()
                         if callable(value) and not isinstance(value, (Tool, type))
                         and getattr(value, "__module__", None) == module.__name__})
    return registry, checkers


def _check_checkers(task_list: list[Any], checkers: dict[str, Checker],
                    sources: list[str]) -> None:
    """Every ``python:NAME`` check of the tasks names a function the tools files define."""
    for task in task_list:
        check = task.expected.check
        name = check.removeprefix("python:")
        if check.startswith("python:") and name not in checkers:
            raise UserError(f"task {task.id!r}: check {check!r} names no function defined in "
                            f"the tools file ({', '.join(sources)}); imported names and "
                            "classes are not checkers")


def _modes(text: str) -> list[str]:
    modes = list(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise UserError(f"--mode takes a comma-separated list of {', '.join(MODES)}; "
                        f"got {text!r}")
    return modes


def _first_per_category(tasks: list[Any], limit: int) -> list[Any]:
    seen: Counter[str] = Counter()
    kept = []
    for task in tasks:
        seen[task.category] += 1
        if seen[task.category] <= limit:
            kept.append(task)
    return kept


def _run(task_list: list[Any], registry: ToolRegistry, checkers: dict[str, Checker],
         modes: list[str], config: RunConfig, *, api_key: str | None, repeat: int,
         concurrency: int, max_steps: int, max_tokens: int, timeout: float | None,
         seed: int, tool_failure_rate: float, tool_latency: float,
         model_failure_rate: float, model_faults: str, out: Path, fresh: bool,
         agent_options: dict[str, Any], label: dict[str, Any]) -> dict[str, Any]:
    from miniagent.cli.eval_view import EvalProgress
    from miniagent.evals.faults import ToolFaults
    from miniagent.evals.metrics import summarize
    from miniagent.evals.runner import EvalConfig, EvalHooks, run_eval

    try:
        faults = ToolFaults(rate=tool_failure_rate, latency=tool_latency, seed=seed)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    label = {**label, "base_url": config.base_url, "model": config.model,
             "model_path": config.model_path, "model_failure_rate": model_failure_rate,
             "model_faults": model_faults if model_failure_rate else None}
    eval_config = EvalConfig(modes=modes, repeat=repeat, concurrency=concurrency,
                             max_steps=max_steps, max_tokens=max_tokens, timeout=timeout,
                             grammar=config.grammar, faults=faults, out=out, fresh=fresh,
                             agent_options=agent_options, label=label)
    with _model_source(config, api_key, model_failure_rate, model_faults, seed) as source:
        progress = EvalProgress(_stderr_console())
        hooks = EvalHooks(on_start=progress.start, on_result=progress.result)
        with progress:
            results = run_eval(task_list, eval_config, model_for=source.model_for,
                               tools=registry, checkers=checkers, hooks=hooks)
        report = summarize(results)
        report["config"] = eval_config.identity() | {"modes": modes, "repeat": repeat}
        if source.proxy is not None:
            report["model_faults"] = source.faults_by_mode()
    return report


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True, highlight=False, emoji=False)


class _ModelSource:
    """Builds the model of each mode (through the fault proxy, when there is one) and keeps
    the transport faults the proxy injected while each mode ran."""

    def __init__(self, config: RunConfig, api_key: str | None, proxy: Any) -> None:
        self.config, self.api_key, self.proxy = config, api_key, proxy
        self._current: tuple[str, Model] | None = None
        self._seen: Counter[str] = Counter()
        self._by_mode: dict[str, dict[str, Any]] = {}

    def model_for(self, mode: str) -> Model:
        self._close_mode()
        base = self.proxy.base_url if self.proxy is not None else self.config.base_url
        model = build_model(self.config.merged(mode=mode, base_url=base), self.api_key)
        self._current = (mode, model)
        return model

    def _close_mode(self) -> None:
        if self._current is None:
            return
        mode, model = self._current
        unload = getattr(model, "unload", None)
        if callable(unload):
            unload()  # the embedded model of the next mode needs the memory
        if self.proxy is not None:
            now = Counter(self.proxy.injected)
            self._by_mode[mode] = {"injected": dict(now - self._seen),
                                   "requests": self.proxy.requests}
            self._seen = now
        self._current = None

    def faults_by_mode(self) -> dict[str, dict[str, Any]]:
        self._close_mode()
        return self._by_mode


@contextlib.contextmanager
def _model_source(config: RunConfig, api_key: str | None, rate: float, kinds: str,
                  seed: int) -> Iterator[_ModelSource]:
    if not rate:
        source = _ModelSource(config, api_key, None)
        yield source
        source.faults_by_mode()
        return
    from miniagent.testing.fault_proxy import FaultProxy

    assert config.base_url is not None
    try:
        proxy = FaultProxy(config.base_url, rate=rate, seed=seed,
                           kinds=[k.strip() for k in kinds.split(",") if k.strip()],
                           hang=config.request_timeout + 2)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    with proxy.run_in_thread():
        source = _ModelSource(config, api_key, proxy)
        yield source
        source.faults_by_mode()


def _finish(report: dict[str, Any], *, out: Path, as_json: bool, html: Path | None,
            earlier: dict[str, Any] | None) -> None:
    from miniagent.evals.compare import compare
    from miniagent.evals.results import dumps, finite

    if earlier is not None:
        report["compare"] = compare(earlier, report)
    report = finite(report)  # the same strict JSON in report.json and on stdout
    write_private(out / "report.json", dumps(report, indent=1))
    if html is not None:
        from miniagent.report.evals import write_html

        write_html(report, html, traces_root=out)
    if as_json:
        echo_json(report)
        return
    from miniagent.cli.display import terminal
    from miniagent.cli.eval_view import compare_table, summary_tables

    console = terminal()
    for table in summary_tables(report):
        console.print(table)
    if "compare" in report:
        console.print(compare_table(report["compare"]))
    console.print(f"[dim]results and traces: {out}  (rerun the same command to resume)[/dim]")
