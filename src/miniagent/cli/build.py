"""Turning CLI options (or what a session recorded) into an Agent."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO, cast

import typer

from miniagent._internal import defaults
from miniagent.cli.loading import load_tools
from miniagent.cli.seal import RECORD, sealed, unsealed
from miniagent.core.agent import Agent
from miniagent.core.errors import ConfigError, ModelError
from miniagent.core.models.base import Model
from miniagent.core.models.openai_compat import GrammarField
from miniagent.core.protocol.base import ActionProtocol
from miniagent.core.protocol.registry import default_protocol
from miniagent.core.runtime.guards import Limits
from miniagent.core.runtime.run import Compression
from miniagent.core.settings import Aids, AidsPreset, MemorySettings, ModelSettings
from miniagent.core.store.sqlite import SQLiteStore, default_store_path
from miniagent.core.throttles import EndpointLimits
from miniagent.core.trace.redact import redact_command, redact_url
from miniagent.core.types import PendingApproval, ToolMode

if TYPE_CHECKING:
    from miniagent.core.models.local import LocalModel
    from miniagent.temporal.agent import TemporalAgent


def env(*names: str) -> str | None:
    """The first of these environment variables that is set and not empty."""
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


@dataclass(kw_only=True)
class RunConfig:
    """What a CLI run was configured with; recorded in the session (never the API key)."""

    base_url: str | None = None
    model: str | None = None
    mode: str = "auto"
    tools: list[str] = field(default_factory=list)
    workspace: str = "."
    max_steps: int = defaults.MAX_STEPS
    timeout: float | None = None
    request_timeout: float = 120.0
    max_tokens: int | None = None
    model_path: str | None = None
    grammar: bool = True
    grammar_field: str | None = None
    compress_at: str | None = None
    keep_last: int = 4
    compress: str = "truncate"
    max_tools: int | None = None
    stream: bool = False
    tool_choice: str | None = None
    mcp: list[str] = field(default_factory=list)  # MCP stdio command lines
    mcp_urls: list[str] = field(default_factory=list)  # MCP HTTP URLs (headers never recorded)
    mcp_approve: list[str] = field(default_factory=list)
    memory: str | None = None  # a long-term memory file (absolute path)
    memory_namespace: str = "default"
    model_concurrency: int | None = None  # the endpoint's limits (miniagent.core.throttles)
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    aids: str = "auto"  # auto, on or off (miniagent.core.models.profiles)
    instructions: str | None = None
    temperature: float | None = defaults.TEMPERATURE
    token_budget: int | None = None
    max_observation_chars: int = defaults.MAX_OBSERVATION_CHARS
    repeat_limit: int = defaults.REPEAT_LIMIT
    output_schema: dict[str, Any] | None = None  # --output-schema: the answer is this JSON

    @classmethod
    def recorded(cls, metadata: dict[str, Any]) -> RunConfig:
        """What a CLI run recorded in a session, if this user's miniagent sealed it (see
        :mod:`miniagent.cli.seal`); else the defaults: a record anyone else wrote (e.g. a
        Python application's caller, through ``run(metadata=...)``) never names the tools
        files imported or the servers connected to."""
        known = cls.__dataclass_fields__
        saved = unsealed(metadata) or {}
        return cls(**{k: v for k, v in saved.items() if k in known})

    @staticmethod
    def forged(metadata: dict[str, Any]) -> bool:
        """Whether ``metadata`` has a CLI record this user's miniagent did not seal."""
        return RECORD in metadata and unsealed(metadata) is None

    def merged(self, **overrides: Any) -> RunConfig:
        """This config with every override that is not None."""
        values = asdict(self)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return RunConfig(**values)

    def metadata(self) -> dict[str, Any]:
        """What a session keeps of this run's options: credentials in MCP command lines and
        URLs replaced (``${NAME}`` references kept, for a resume to expand again)."""
        values = asdict(self)
        values["mcp"] = [shlex.join(redact_command(_words(line))) for line in self.mcp]
        values["mcp_urls"] = [redact_url(url) for url in self.mcp_urls]
        return sealed(values)


def _words(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError:
        return [line]


def open_store(path: Path | None, *, readonly: bool = False) -> SQLiteStore:
    """``--store``, else MINIAGENT_STORE, else the per-user default file.

    Commands that only read open it ``readonly``: they create and write nothing.

    Raises:
        ConfigError: The file or its folder cannot be made or opened (a file where a folder
            should be, ``/proc``, ``HOME`` pointing at a file, no permission); one line.
    """
    try:
        target = path if path is not None else default_store_path()
        return SQLiteStore(target, readonly=readonly)
    except RuntimeError as exc:  # Path.home(): no HOME and no passwd entry
        raise ConfigError(f"cannot find the session store ({exc}); choose a file with "
                          "--store or MINIAGENT_STORE") from None
    except (OSError, sqlite3.InterfaceError) as exc:
        raise ConfigError(f"cannot open the session store {target}: {_why(target, exc)}; "
                          "choose another file with --store or MINIAGENT_STORE") from None


def _why(target: Path, exc: Exception) -> str:
    """The reason in the user's terms: which file stands where a folder must be, if one does."""
    for folder in target.parents:
        if folder.exists() and not folder.is_dir():
            return f"{folder} is a file, not a folder"
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    culprit = getattr(exc, "filename", None)
    return f"{reason} ({culprit})" if culprit and str(culprit) != str(target) else reason


def build_agent(config: RunConfig, store: SQLiteStore, *, api_key: str | None,
                interactive: bool, mcp_headers: dict[str, str] | None = None,
                verbose: bool = False) -> Agent:
    """An agent for ``config``; with ``interactive``, approvals are asked in the terminal."""
    from miniagent.cli.mcp_cmd import mcp_servers

    registry = load_tools(config.tools, Path(config.workspace))
    servers = mcp_servers(config.mcp, config.mcp_urls, headers=mcp_headers or {},
                          approve=config.mcp_approve, verbose=verbose)
    model = build_model(config, api_key)
    # a small embedded model can ramble until max_tokens: keep its turns short by default
    default_tokens = defaults.MAX_TOKENS if config.base_url else 256
    return config_agent(config, interactive=interactive,
                        max_tokens=config.max_tokens or default_tokens, model=model,
                        tools=[*registry, *servers] if servers else registry, store=store)


def temporal_agent(config: RunConfig, client: Any, task_queue: str, *,
                   interactive: bool) -> TemporalAgent:
    """The agent of ``config`` on a Temporal cluster: the same options as :func:`build_agent`
    (the same spec), while its model and tools are the workers'."""
    from miniagent.temporal.agent import TemporalAgent

    max_tokens = config.max_tokens or defaults.MAX_TOKENS
    protocol = None if config.mode == "auto" else default_protocol(  # else the workers' own
        config.mode, grammar=config.grammar, max_tokens=max_tokens)
    agent = config_agent(config, interactive=interactive, max_tokens=max_tokens,
                         protocol=protocol)
    return TemporalAgent(agent, client, task_queue=task_queue)


def config_agent(config: RunConfig, *, interactive: bool, max_tokens: int,
                 model: Model | None = None, tools: Any = (), store: SQLiteStore | None = None,
                 protocol: ActionProtocol | None = None) -> Agent:
    """The agent a CLI run builds, whichever driver runs it: ``config``'s options as the
    Agent's values (with ``interactive``, approvals are asked in the terminal; ``--memory``'s
    file is opened, created when missing)."""
    memory = None
    if config.memory is not None:
        from miniagent.memory import Memory

        memory = MemorySettings(memory=Memory(config.memory), namespace=config.memory_namespace)
    compression = None if config.compress_at is None else Compression.of(
        config.compress_at, keep_last=config.keep_last, mode=config.compress)
    return Agent(
        model=model, tools=tools, store=store, protocol=protocol,
        instructions=config.instructions, memory=memory, compression=compression,
        approver=ask_in_terminal if interactive else None,
        model_settings=ModelSettings(temperature=config.temperature, max_tokens=max_tokens,
                                     grammar=config.grammar),
        limits=Limits(max_steps=config.max_steps, timeout=config.timeout,
                      token_budget=config.token_budget,
                      max_observation_chars=config.max_observation_chars,
                      repeat_limit=config.repeat_limit),
        aids=Aids(preset=cast(AidsPreset, config.aids), tool_selection=config.max_tools,
                  tool_choice=config.tool_choice),
        output_type=config.output_schema)


def _load_with_status(model: LocalModel) -> None:
    """On a terminal, load the embedded model now under a spinner (not a silent first step);
    elsewhere the first step loads it."""
    from rich.console import Console

    console = Console(stderr=True, highlight=False)
    if not console.is_terminal:
        return
    # a model that cannot load: the first step meets the error again and ends the run with it
    with console.status(f"[dim]loading {model.model_path.name}[/dim]", spinner="dots"), \
            contextlib.suppress(ModelError):
        model.load()


def build_model(config: RunConfig, api_key: str | None) -> Model:
    """The configured server, or the embedded llama.cpp model when there is none."""
    if not config.base_url:
        from miniagent.cli.local import local_model, local_notice

        local = local_model(config.model_path, config.mode, config.grammar)
        from miniagent.cli.safe_text import visible

        typer.echo(visible(local_notice(local)), err=True)
        _load_with_status(local)
        return local
    from miniagent.core.models.openai_compat import OpenAICompatibleModel

    return OpenAICompatibleModel(
        base_url=config.base_url, model=config.model or "default",
        api_key=api_key or env("MINIAGENT_API_KEY", "OPENAI_API_KEY"),
        tool_mode=cast(ToolMode, config.mode), timeout=config.request_timeout,
        grammar_field=cast(GrammarField | None, config.grammar_field) if config.grammar else None,
        stream=config.stream, limits=EndpointLimits(
            max_concurrency=config.model_concurrency,
            requests_per_minute=config.requests_per_minute,
            tokens_per_minute=config.tokens_per_minute),
        aids=served_aids(config.base_url, config.model, api_key) if config.aids == "auto" else (),
    )


SERVED_PROBE_TIMEOUT = 3.0
"""Seconds to wait for a server's list of models (``GET /models``) when deciding aids."""


def served_aids(base_url: str, model: str | None, api_key: str | None) -> tuple[str, ...]:
    """The aids a served model is measured to need, from its name
    (:func:`~miniagent.core.models.profiles.aids_for_served`); when the name tells no size (e.g.
    llama.cpp's server, which serves any name), from the server's ``GET /models`` entry: its
    id and, from llama.cpp, its parameter count. Only a server on this machine is asked (a
    remote one serves large models); one that does not answer: none."""
    from miniagent.core.models.profiles import aids_for_served

    found = aids_for_served(model) if model else None
    if found is not None or not _on_this_machine(base_url):
        return found or ()
    entry = _served_model_entry(base_url, model, api_key)
    if entry is None:
        return ()
    meta = entry.get("meta")
    parameters = meta.get("n_params") if isinstance(meta, dict) else None
    found = aids_for_served(str(entry.get("id", "")), float(parameters)
                            if isinstance(parameters, (int, float)) else 0.0)
    return found or ()


def _on_this_machine(base_url: str) -> bool:
    import ipaddress
    from urllib.parse import urlsplit

    try:  # a malformed URL is refused, with its reason, by the model built from it
        host = urlsplit(base_url).hostname or ""
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _served_model_entry(base_url: str, model: str | None,
                        api_key: str | None) -> dict[str, Any] | None:
    """The server's ``/models`` entry for ``model`` (its only one when the name is not
    listed); None when it cannot be had. Reads at most 1 MiB."""
    import urllib.request

    request = urllib.request.Request(f"{base_url.rstrip('/')}/models")
    if api_key:
        request.add_unredirected_header("Authorization", f"Bearer {api_key}")
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback
        with opener.open(request, timeout=SERVED_PROBE_TIMEOUT) as reply:
            listing = json.loads(reply.read(1 << 20))
    except (OSError, ValueError):
        return None
    entries = listing.get("data") if isinstance(listing, dict) else None
    entries = [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    named = [e for e in entries if e.get("id") == model]
    chosen = named or (entries if len(entries) == 1 else [])
    return chosen[0] if chosen else None


ModelConcurrencyOption = Annotated[int | None, typer.Option(
    min=1, help="At most this many requests to the model endpoint at once, shared by every "
    "session of this process (a worker: all its activities).")]
RequestsPerMinuteOption = Annotated[int | None, typer.Option(
    min=1, help="At most this many requests to the model endpoint a minute (retries count).")]
TokensPerMinuteOption = Annotated[int | None, typer.Option(
    min=1, help="At most this many tokens a minute to the model endpoint: each request "
    "reserves its estimated prompt plus its max_tokens, corrected to the usage reported.")]


def ask_in_terminal(pending: PendingApproval, *, stream: TextIO | None = None) -> bool | None:
    """Ask y/n for one call; end of input, or a terminal that fails, leaves it waiting.

    The answer is read from ``stream`` if given, else from standard input.
    """
    from rich.prompt import Confirm

    from miniagent.cli.display import terminal
    from miniagent.cli.safe_text import markup, visible

    console = terminal()
    arguments = json.dumps(pending.arguments, ensure_ascii=False)
    console.print(f"[bold magenta]Approval needed[/bold magenta]: {markup(pending.tool, 200)} "
                  f"{markup(arguments, 2000)} [dim]({markup(pending.reason)}; call "
                  f"{markup(pending.call_id, 100)})[/dim]")
    try:
        return Confirm.ask("Run it?", default=False, console=console, stream=stream)
    except EOFError:
        return None
    except Exception as exc:  # the terminal went away or sent bytes it cannot decode
        typer.echo(visible(f"miniagent: cannot ask for approval here ({type(exc).__name__}: "
                           f"{exc}); call {pending.call_id} keeps waiting"), err=True)
        return None
