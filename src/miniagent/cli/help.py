"""``--help`` that reads at 80 columns: click's two columns, and values named by words.

Typer's rich help lays options out in four columns (cramped at 80) and names values by
their Python type (``<str>``, ``<list[str]>``, ``{question}``). :func:`readable_help` turns
that off for every command of the app in one place, so a command added later gets it too.
The same commands word a bad option value themselves (typer passes on pydantic's
``Value error, ...``), and :class:`EverydayFirst` lists the commands a user needs first.
"""

from __future__ import annotations

from typing import Any

import typer
from typer import _click  # typer 0.29 builds its commands on its own copy of click
from typer._click.exceptions import BadParameter
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

VALUE_NAMES = {
    "base_url": "URL", "mcp_url": "URL", "otlp": "URL", "model": "NAME", "api_key": "KEY",
    "tools": "SOURCE", "workspace": "DIR", "model_path": "FILE", "store": "FILE",
    "trace": "FILE", "out": "FILE", "html": "FILE", "compare_with": "FILE",
    "mcp": "COMMAND", "mcp_header": "HEADER", "mcp_approve": "PATTERN",
    "temporal": "HOST:PORT", "http": "HOST:PORT", "allow_host": "HOST", "task_queue": "QUEUE",
    "token_env": "VAR", "timeout": "SECONDS", "request_timeout": "SECONDS",
    "tool_latency": "SECONDS", "compress_at": "SIZE",
    "tool_choice": "CHOICE", "grammar_field": "FIELD", "mode": "MODE", "reason": "TEXT",
    "model_faults": "FAULTS", "tool_failure_rate": "RATE", "model_failure_rate": "RATE",
}
"""The value of an option, by parameter name, where the type alone says too little."""

_BY_TYPE = {int: "N", float: "NUMBER", str: "TEXT"}

COMMAND_ORDER = ("run", "chat", "sessions", "model", "eval", "ui", "trace", "tools", "memory",
                 "demo", "parse", "worker", "mcp-serve")
"""The order ``miniagent --help`` lists its commands in: the everyday ones first."""


class EverydayFirst(TyperGroup):
    """A group that lists its commands in :data:`COMMAND_ORDER` (any other one last)."""

    def list_commands(self, ctx: _click.Context) -> list[str]:
        names = super().list_commands(ctx)
        rank = {name: at for at, name in enumerate(COMMAND_ORDER)}
        return sorted(names, key=lambda name: rank.get(name, len(rank)))


class ReadableCommand(TyperCommand):
    """A command whose arguments and option values are named in words (``QUESTION``,
    ``--base-url URL``, ``--max-steps N``) and whose usage line lists its arguments bare."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if param.metavar is None and not getattr(param, "is_flag", False):
                param.metavar = value_name(param)

    def get_short_help_str(self, limit: int = 45) -> str:
        """The help's first sentence, whole (the command list wraps it), not cut at ``limit``
        with "..." as click cuts it."""
        if self.short_help:
            return self.short_help
        paragraph = " ".join((self.help or "").split("\n\n")[0].split())
        return paragraph.split(". ")[0].rstrip(".") + "."

    def parse_args(self, ctx: _click.Context, args: list[str]) -> list[str]:
        """Parse as typer does, but say in words what a bad option value should have been."""
        try:
            return super().parse_args(ctx, args)
        except BadParameter as exc:
            reworded = bad_value_message(exc)
            if reworded is not None:
                exc.message = reworded
            raise

    def format_options(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        """Arguments, then options, as typer lists them, but an argument without its type."""
        sections: dict[str, list[tuple[str, str]]] = {"Arguments": [], "Options": []}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if isinstance(param, TyperArgument):
                sections["Arguments"].append((param.metavar or record[0], record[1]))
            else:
                sections["Options"].append(record)
        for title, records in sections.items():
            if records:
                with formatter.section(title):
                    formatter.write_dl(records)

    def collect_usage_pieces(self, ctx: _click.Context) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                name = param.metavar or param.name or ""
                pieces.append(name if param.required else f"[{name}]")
        return pieces


def value_name(param: TyperArgument | TyperOption | Any) -> str:
    """The word that names what ``param`` takes: an argument's own name, an option's value."""
    name = param.name or ""
    if isinstance(param, TyperArgument):
        return name.upper()
    described = param.type_descriptor
    if described.is_choice:
        return "|".join(str(getattr(c, "value", c)) for c in described.choices or ())
    if name in VALUE_NAMES:
        return VALUE_NAMES[name]
    if described.is_path:
        return "DIR" if described.path_type == "directory" else "FILE"
    return _BY_TYPE.get(_element_type(described), name.upper().replace("_", "-"))


def _element_type(described: Any) -> Any:
    """The type of one value of an option: ``int`` for ``int``, ``str`` for ``list[str]``."""
    annotation = getattr(described, "annotation", None)
    return (getattr(annotation, "__args__", None) or (annotation,))[0]


def bad_value_message(exc: BadParameter) -> str | None:
    """What ``exc`` should say when typer's pydantic check refused a value, or None.

    Typer words a refused choice ``Value error, 'foo' is not one of 'react', ...`` and a
    refused number ``Input should be a valid integer, ...``; the user typed an option, so
    the message names the value and what the option takes, as a sentence of its own.
    """
    errors = getattr(exc.__cause__, "errors", None)
    if exc.param is None or not callable(errors) or not errors():
        return None
    given = errors()[0].get("input")
    described = getattr(exc.param, "type_descriptor", None)
    if described is not None and described.is_choice:
        allowed = ", ".join(str(getattr(c, "value", c)) for c in described.choices or ())
        return f"{given!r} is not one of: {allowed}."
    wanted = {int: "a whole number", float: "a number"}.get(_element_type(described))
    return None if wanted is None else f"{given!r} is not {wanted}."


def readable_help(app: typer.Typer) -> None:
    """Plain two-column help for ``app``, its commands and its sub-apps' (recursively)."""
    app.rich_markup_mode = None
    for command in app.registered_commands:
        if command.cls in (None, TyperCommand):  # a command's own class is left alone
            command.cls = ReadableCommand
    for group in app.registered_groups:
        if group.typer_instance is not None:
            readable_help(group.typer_instance)
