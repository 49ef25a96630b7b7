"""The text a model sees about its tool calls: argument checking and result rendering.

Both kinds of tool (typed functions and :meth:`Tool.from_schema <miniagent.Tool.from_schema>`)
check a call's arguments through :func:`check_arguments`, so the steps the model sees are the
same: not valid JSON, a bare value mapped onto a single parameter, missing and unknown names,
then the tool's own :class:`ArgumentsChecker` (a pydantic model here, :mod:`jsonschema` in
:mod:`miniagent.core.tools.schema_tool`). Every failure becomes one error text that names what was
wrong and shows the schema. :func:`format_result` renders a tool's return value. Split from
``registry.py``, which runs the tools.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any, Protocol

from miniagent.core.tools.schema import ToolSpec
from miniagent.core.types import ToolCall

if TYPE_CHECKING:
    from miniagent.core.tools.registry import Tool

# pydantic is imported inside the functions: it is loaded once the first tool is defined.

__all__ = [
    "NO_OUTPUT",
    "ArgumentProblem",
    "ArgumentsChecker",
    "FunctionArguments",
    "check_arguments",
    "format_result",
    "preview",
    "shorten",
]

NO_OUTPUT = "(no output)"
"""The observation text of a tool that returned ``None`` (an empty text confuses models)."""

_PREVIEW_CHARS = 200
_MAX_LISTED_ERRORS = 5
_NOT_SHOWN = object()


# -- the checker interface -------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ArgumentProblem:
    """One thing wrong with a call's arguments, as a checker reports it.

    Attributes:
        where: the path of the value (``points.0.x``), or ``arguments`` for the whole object.
        message: what is wrong with it.
        given: the value the model sent there; not shown when left out (a missing field).
    """

    where: str
    message: str
    given: Any = _NOT_SHOWN


class ArgumentsChecker(Protocol):
    """How one kind of tool validates its arguments and passes them to its function."""

    @property
    def names(self) -> tuple[str, ...]:
        """The arguments' names, in schema order."""
        ...

    @property
    def required(self) -> tuple[str, ...]:
        """Names the call must contain (required and without a default)."""
        ...

    def is_known(self, name: str) -> bool:
        """Whether an argument called ``name`` may be sent at all."""
        ...

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any] | list[ArgumentProblem]:
        """The validated, coerced arguments by name (defaults filled in), or the problems."""
        ...

    def bind(self, values: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """``(args, kwargs)`` for the tool's function, from :meth:`validate`'s values."""
        ...


@dataclasses.dataclass(frozen=True)
class FunctionArguments:
    """The checker of a function tool: its pydantic arguments model, in lax mode."""

    spec: ToolSpec

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.spec.field_names)

    @property
    def required(self) -> tuple[str, ...]:
        return self.spec.required

    def is_known(self, name: str) -> bool:
        return name in self.spec.field_names

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any] | list[ArgumentProblem]:
        from pydantic import ValidationError  # loaded already: a tool exists

        try:
            validated = self.spec.args_model.model_validate(arguments)
        except ValidationError as exc:
            return [_pydantic_problem(error) for error in exc.errors(include_url=False)]
        return {param: getattr(validated, field) for param, field in self.spec.field_names.items()}

    def bind(self, values: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        kwargs = dict(values)
        return [kwargs.pop(param) for param in self.spec.positional_only], kwargs


def _pydantic_problem(error: Any) -> ArgumentProblem:
    where = ".".join(str(part) for part in error.get("loc", ())) or "arguments"
    message = error.get("msg", "invalid value")
    if error.get("type") == "missing":
        return ArgumentProblem(where=where, message=message)
    return ArgumentProblem(where=where, message=message, given=error.get("input"))


# -- the shared steps ------------------------------------------------------------------


def check_arguments(target: Tool, call: ToolCall) -> dict[str, Any] | str:
    """The call's validated arguments by name, or an error text for the model.

    Args:
        target: the tool the call names.
        call: the model's request.
    """
    if call.arguments_error:
        return (
            f"The arguments for tool {target.name!r} are not valid JSON "
            f"({shorten(str(call.arguments_error))}). Raw input: {preview(call.raw_arguments)}. "
            f"Send a JSON object matching this schema: {_schema_text(target)}"
        )
    arguments = _arguments_object(target, call)
    if isinstance(arguments, str):
        return arguments
    checker = target.checker
    missing = [name for name in checker.required if name not in arguments]
    unknown = [name for name in arguments if not checker.is_known(name)]
    if missing or unknown:
        return _names_error(target, missing, unknown)
    outcome = checker.validate(arguments)
    if isinstance(outcome, list):
        return _validation_error(target, outcome)
    return outcome


def _arguments_object(target: Tool, call: ToolCall) -> dict[str, Any] | str:
    """The arguments as a dict, mapping a bare value onto the tool's single parameter."""
    arguments = call.arguments
    if not isinstance(arguments, dict):
        return _object_expected(target, preview(arguments))
    raw = call.raw_arguments.strip() if isinstance(call.raw_arguments, str) else ""
    if arguments or not raw:
        return arguments
    try:
        value: Any = json.loads(raw)
    except ValueError:
        if raw.startswith("{"):
            return (
                f"The arguments for tool {target.name!r} are not valid JSON. Raw input: "
                f"{preview(raw)}. Send a JSON object matching this schema: {_schema_text(target)}"
            )
        value = _strip_quotes(raw)
    if isinstance(value, dict):
        return value
    param = _single_parameter(target.checker)
    if param is None:
        return _object_expected(target, preview(raw))
    return {param: value}


def _single_parameter(checker: ArgumentsChecker) -> str | None:
    if len(checker.required) == 1:
        return checker.required[0]
    if len(checker.names) == 1:
        return checker.names[0]
    return None


def _strip_quotes(text: str) -> str:
    for quote in ('"', "'", "`"):
        if len(text) >= 2 and text[0] == quote and text[-1] == quote:
            return text[1:-1].strip()
    return text


def _object_expected(target: Tool, given: str) -> str:
    checker = target.checker
    fields = ", ".join(f"{p} (required)" if p in checker.required else p for p in checker.names)
    return (
        f"Tool {target.name!r} expects a JSON object with the fields: {fields or 'none'}. "
        f"Got {given}. Schema: {_schema_text(target)}"
    )


def _names_error(target: Tool, missing: list[str], unknown: list[str]) -> str:
    parts = [f"Invalid arguments for tool {target.name!r}."]
    if missing:
        parts.append(f"Missing required argument(s): {', '.join(missing)}.")
    if unknown:
        shown = ", ".join(shorten(name, 60) for name in unknown[:10])
        parts.append(f"Unknown argument(s): {shown}.")
    parts.append(f"Valid arguments: {', '.join(target.checker.names) or 'none'}.")
    parts.append(f"Schema: {_schema_text(target)}")
    return " ".join(parts)


def _validation_error(target: Tool, problems: list[ArgumentProblem]) -> str:
    lines = [f"Invalid arguments for tool {target.name!r}:"]
    for problem in problems[:_MAX_LISTED_ERRORS]:
        given = "" if problem.given is _NOT_SHOWN else f" (got {preview(problem.given)})"
        lines.append(f"- {problem.where}: {shorten(problem.message)}{given}")
    if len(problems) > _MAX_LISTED_ERRORS:
        lines.append(f"- ... and {len(problems) - _MAX_LISTED_ERRORS} more")
    lines.append(f"Schema: {_schema_text(target)}")
    return "\n".join(lines)


def _schema_text(target: Tool) -> str:
    return json.dumps(target.parameters, ensure_ascii=False)


def preview(value: Any) -> str:
    """A short, safe ``repr`` of something the model sent."""
    try:
        text = repr(value)
    except Exception:  # e.g. an int too large to print
        text = f"<{type(value).__name__}>"
    return shorten(text)


def shorten(text: str, limit: int = _PREVIEW_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- results ---------------------------------------------------------------------------


def format_result(value: Any) -> str:
    """Render a tool's return value as observation text.

    ``str`` as is; ``None`` as :data:`NO_OUTPUT`; dicts, lists, tuples, sets, pydantic
    models and dataclasses as JSON (non-ASCII kept readable); anything else with ``str()``.

    Args:
        value: what the tool returned.
    """
    if isinstance(value, str):
        return value
    if value is None:
        return NO_OUTPUT
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    import pydantic_core
    from pydantic import BaseModel

    is_dataclass = dataclasses.is_dataclass(value) and not isinstance(value, type)
    if isinstance(value, dict | list | tuple | set | frozenset | BaseModel) or is_dataclass:
        plain = pydantic_core.to_jsonable_python(value, fallback=str)
        return json.dumps(plain, ensure_ascii=False)
    return str(value)
