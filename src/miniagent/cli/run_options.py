"""The options ``miniagent run`` and ``miniagent chat`` share, declared once.

:class:`RunOptions` is both the declaration (each field is a typer option) and what the
command receives; :func:`with_run_options` gives a command those options::

    @app.command()
    @with_run_options
    def run(question: ..., as_json: JsonOption = False, *, options: RunOptions) -> None:
        agent, headers = options.agent(options.config(), interactive=True)
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Any, get_type_hints

import typer
from typer.models import ArgumentInfo

from miniagent._internal import defaults
from miniagent.cli.build import (
    ModelConcurrencyOption,
    RequestsPerMinuteOption,
    RunConfig,
    TokensPerMinuteOption,
    build_agent,
    env,
    open_store,
)
from miniagent.cli.common import Aids, Compress, Mode, StoreOption, positive_seconds
from miniagent.cli.mcp_cmd import (
    McpApproveOption,
    McpHeaderOption,
    McpOption,
    McpUrlOption,
    parse_headers,
)
from miniagent.cli.memory_cmd import MemoryFileOption, MemoryNamespaceOption
from miniagent.cli.observing import MetricsOption, OtlpContentOption, OtlpOption, TraceOption
from miniagent.cli.temporal_cmd import TaskQueueOption, TemporalOption
from miniagent.core.agent import Agent
from miniagent.core.store.sqlite import SQLiteStore


@dataclass(kw_only=True)
class RunOptions:
    """How an agent is built, connected and observed: every option of ``run`` but its own
    (the question, ``--detach``, ``--continue``, ``--json``). ``--help`` lists a command's own
    options right after ``--store``, where ``run`` always listed them."""

    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1 [env: MINIAGENT_BASE_URL, OPENAI_BASE_URL]")] = None  # noqa: E501
    model: Annotated[str | None, typer.Option(help="Model name sent to the server [env: MINIAGENT_MODEL]")] = None  # noqa: E501
    api_key: Annotated[str | None, typer.Option(help="API key [env: MINIAGENT_API_KEY, OPENAI_API_KEY]")] = None  # noqa: E501
    mode: Annotated[Mode, typer.Option(help="react (text + stop words), native (tools field), hybrid (a Thought, then a native call) or auto")] = Mode.auto  # noqa: E501
    tools: Annotated[list[str] | None, typer.Option("--tools", help="A Python file or module whose @tool functions are loaded, or 'builtin'. Repeatable.")] = None  # noqa: E501
    workspace: Annotated[Path, typer.Option(help="Root the built-in file tools are confined to.")] = Path(".")  # noqa: E501
    max_steps: Annotated[int, typer.Option(min=1, help="Model calls allowed before giving up.")] = defaults.MAX_STEPS  # noqa: E501
    timeout: Annotated[float | None, typer.Option(callback=positive_seconds, help="Wall-clock limit for the run, seconds.")] = None  # noqa: E501
    request_timeout: Annotated[float, typer.Option(callback=positive_seconds, help="Timeout of one model request, seconds.")] = 120.0  # noqa: E501
    max_tokens: Annotated[int | None, typer.Option(min=1, help="Tokens per model turn [default: 1024; 256 for the embedded model]")] = None  # noqa: E501
    model_path: Annotated[str | None, typer.Option(help="GGUF file, or an installed model's name (miniagent model list), for the embedded model, used when no --base-url is set [env: MINIAGENT_MODEL_PATH]")] = None  # noqa: E501
    grammar: Annotated[bool, typer.Option("--grammar/--no-grammar", help="Constrain ReAct output with a grammar where the backend supports it.")] = True  # noqa: E501
    grammar_field: Annotated[str | None, typer.Option(help="Send the grammar to the server in this field: grammar (llama.cpp), guided_grammar or structured_outputs (vLLM).")] = None  # noqa: E501
    max_tools: Annotated[int | None, typer.Option(min=1, help="Offer each model request only the K tools most relevant to the conversation (plus those already used).")] = None  # noqa: E501
    stream: Annotated[bool, typer.Option("--stream/--no-stream", help="Stream the server's answers: thought and answer are shown as they are written (--base-url servers).")] = False  # noqa: E501
    tool_choice: Annotated[str | None, typer.Option(help="auto, required (call a tool before answering), none, or a tool's name [default: auto]")] = None  # noqa: E501
    aids: Annotated[Aids, typer.Option(help="Aids for weak models (tool selection, a worked example, ...): auto (those measured to help this model), on or off.")] = Aids.auto  # noqa: E501
    instructions: Annotated[str | None, typer.Option(help="Extra instructions put in the system prompt.")] = None  # noqa: E501
    temperature: Annotated[float | None, typer.Option(min=0.0, max=2.0, help="Sampling temperature.")] = defaults.TEMPERATURE  # noqa: E501
    token_budget: Annotated[int | None, typer.Option(min=1, help="Total tokens the run may spend (prompt and completion, all steps).")] = None  # noqa: E501
    max_observation_chars: Annotated[int, typer.Option(min=100, help="Longer tool results are cut, with a notice.")] = defaults.MAX_OBSERVATION_CHARS  # noqa: E501
    repeat_limit: Annotated[int, typer.Option(min=2, help="The same call this many times gets an intervention; once more ends the run.")] = defaults.REPEAT_LIMIT  # noqa: E501
    model_concurrency: ModelConcurrencyOption = None
    requests_per_minute: RequestsPerMinuteOption = None
    tokens_per_minute: TokensPerMinuteOption = None
    mcp: McpOption = None
    mcp_url: McpUrlOption = None
    mcp_header: McpHeaderOption = None
    mcp_approve: McpApproveOption = None
    store: StoreOption = None
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show raw model output too.")] = False  # noqa: E501
    compress_at: Annotated[str | None, typer.Option(help="Summarise the oldest rounds once the history crosses this size: estimated tokens (8000) or characters (12000c).")] = None  # noqa: E501
    keep_last: Annotated[int, typer.Option(min=1, help="Rounds kept whole by --compress-at.")] = 4
    compress: Annotated[Compress, typer.Option(help="Who writes the summary: truncate (results cut to ~200 characters) or model.")] = Compress.truncate  # noqa: E501
    trace: TraceOption = None
    otlp: OtlpOption = None
    otlp_content: OtlpContentOption = False
    metrics: MetricsOption = None
    memory: MemoryFileOption = None
    memory_namespace: MemoryNamespaceOption = "default"
    temporal: TemporalOption = None
    task_queue: TaskQueueOption = "miniagent"

    def config(self) -> RunConfig:
        """What the session records of these options (environment defaults filled in)."""
        return RunConfig(
            base_url=self.base_url or env("MINIAGENT_BASE_URL", "OPENAI_BASE_URL"),
            model=self.model or env("MINIAGENT_MODEL"), mode=self.mode.value,
            tools=[_absolute(t) for t in self.tools or []],
            workspace=str(self.workspace.resolve()), max_steps=self.max_steps,
            timeout=self.timeout, request_timeout=self.request_timeout,
            max_tokens=self.max_tokens, model_path=self.model_path, grammar=self.grammar,
            grammar_field=self.grammar_field, compress_at=self.compress_at,
            keep_last=self.keep_last, compress=self.compress.value, stream=self.stream,
            tool_choice=self.tool_choice, mcp=list(self.mcp or []),
            mcp_urls=list(self.mcp_url or []), mcp_approve=list(self.mcp_approve or []),
            max_tools=self.max_tools, model_concurrency=self.model_concurrency,
            requests_per_minute=self.requests_per_minute,
            tokens_per_minute=self.tokens_per_minute,
            memory=str(self.memory.resolve()) if self.memory else None,
            memory_namespace=self.memory_namespace, aids=self.aids.value,
            instructions=self.instructions, temperature=self.temperature,
            token_budget=self.token_budget, max_observation_chars=self.max_observation_chars,
            repeat_limit=self.repeat_limit,
        )

    def observe(self) -> dict[str, Any]:
        """The keyword arguments of :func:`~miniagent.cli.observing.observing`."""
        return dict(trace=self.trace, otlp=self.otlp, otlp_content=self.otlp_content,
                    metrics=self.metrics)

    def agent(self, config: RunConfig, *, interactive: bool, store: SQLiteStore | None = None
              ) -> tuple[Agent, dict[str, str]]:
        """The agent of ``config`` on ``store`` (default: the ``--store`` file), and the MCP
        headers given (their values are secrets to redact)."""
        headers = parse_headers(self.mcp_header)
        store = store if store is not None else open_store(self.store)
        agent = build_agent(config, store, api_key=self.api_key,
                            interactive=interactive, mcp_headers=headers,
                            verbose=self.verbose)
        return agent, headers


def _absolute(source: str) -> str:
    """Tool files are recorded with absolute paths so that resume works from anywhere."""
    path = Path(source)
    return str(path.resolve()) if source.endswith(".py") or path.is_file() else source


_OWN_OPTIONS_AFTER = "store"


def with_run_options(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` with every :class:`RunOptions` field as an option of its own, collected
    into its keyword-only ``options`` parameter.

    Its arguments come first in ``--help``, then the shared options up to ``--store``, then
    its own options, then the other shared ones.
    """
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values()
           if p.name != "options"]
    hints = get_type_hints(RunOptions, include_extras=True)
    shared = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                                annotation=hints[f.name]) for f in fields(RunOptions)]
    names = {p.name for p in shared}
    cut = [p.name for p in shared].index(_OWN_OPTIONS_AFTER) + 1
    arguments = [p for p in own if _is_argument(p)]
    own_options = [p for p in own if not _is_argument(p)]
    ordered = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)  # typer passes keywords only
               for p in (*arguments, *shared[:cut], *own_options, *shared[cut:])]

    @functools.wraps(command)
    def wrapper(**values: Any) -> None:
        options = RunOptions(**{k: v for k, v in values.items() if k in names})
        command(**{k: v for k, v in values.items() if k not in names}, options=options)

    wrapper.__signature__ = inspect.Signature(ordered)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in ordered}
    del wrapper.__wrapped__  # typer reads the signature above, not the command's
    return wrapper


def _is_argument(parameter: inspect.Parameter) -> bool:
    return any(isinstance(info, ArgumentInfo)
               for info in getattr(parameter.annotation, "__metadata__", ()))


def with_output_schema(config: RunConfig, path: Path | None) -> RunConfig:
    """``config`` whose answers must fit the JSON Schema in the file at ``path`` (None: as it
    is).

    Raises:
        typer.BadParameter: the file cannot be read, is not JSON, or is no valid JSON Schema.
    """
    if path is None:
        return config
    import json

    from miniagent.core.errors import UserError
    from miniagent.core.output import OutputType

    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(schema, dict):
            raise UserError(f"a JSON Schema is a JSON object, not {type(schema).__name__}")
        OutputType.of(schema)
    except (OSError, ValueError, UserError) as exc:
        raise typer.BadParameter(f"{path}: {exc}", param_hint="--output-schema") from None
    return dataclasses.replace(config, output_schema=schema)
