"""The text a model sees about its tool calls: argument checking and result rendering.

:func:`prepare_arguments` turns a call's arguments into the function's ``(args, kwargs)`` or
an error text that names what was wrong and shows the schema; :func:`format_result` renders a
tool's return value. Split from ``registry.py``, which runs the tools.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from miniagent.tools.schema import ToolSpec
from miniagent.types import ToolCall

if TYPE_CHECKING:
    from pydantic import ValidationError

    from miniagent.tools.registry import Tool

# pydantic is imported inside the functions: it is loaded once the first tool is defined.

NO_OUTPUT = "(no output)"
"""The observation text of a tool that returned ``None`` (an empty text confuses models)."""

_PREVIEW_CHARS = 200
_MAX_LISTED_ERRORS = 5


# -- arguments -------------------------------------------------------------------------


def prepare_arguments(target: Tool, call: ToolCall) -> tuple[list[Any], dict[str, Any]] | str:
    """Turn the call's arguments into ``(args, kwargs)``, or an error text for the model."""
    if call.arguments_error:
        return (
            f"The arguments for tool {target.name!r} are not valid JSON "
            f"({shorten(str(call.arguments_error))}). Raw input: {preview(call.raw_arguments)}. "
            f"Send a JSON object matching this schema: {_schema_text(target)}"
        )
    arguments = _arguments_object(target, call)
    if isinstance(arguments, str):
        return arguments
    spec = target.spec
    missing = [p for p in spec.required if p not in arguments]
    unknown = [k for k in arguments if k not in spec.field_names]
    if missing or unknown:
        return _names_error(target, missing, unknown)
    from pydantic import ValidationError  # loaded already: a tool exists

    try:
        validated = spec.args_model.model_validate(arguments)
    except ValidationError as exc:
        return _validation_error(target, exc)
    values = {param: getattr(validated, field) for param, field in spec.field_names.items()}
    args = [values.pop(param) for param in spec.positional_only]
    return args, values


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
    param = _single_parameter(target.spec)
    if param is None:
        return _object_expected(target, preview(raw))
    return {param: value}


def _single_parameter(spec: ToolSpec) -> str | None:
    if len(spec.required) == 1:
        return spec.required[0]
    if len(spec.field_names) == 1:
        return next(iter(spec.field_names))
    return None


def _strip_quotes(text: str) -> str:
    for quote in ('"', "'", "`"):
        if len(text) >= 2 and text[0] == quote and text[-1] == quote:
            return text[1:-1].strip()
    return text


def _object_expected(target: Tool, given: str) -> str:
    fields = ", ".join(
        f"{p} (required)" if p in target.spec.required else p for p in target.spec.field_names
    )
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
    parts.append(f"Valid arguments: {', '.join(target.spec.field_names) or 'none'}.")
    parts.append(f"Schema: {_schema_text(target)}")
    return " ".join(parts)


def _validation_error(target: Tool, exc: ValidationError) -> str:
    lines = [f"Invalid arguments for tool {target.name!r}:"]
    errors = exc.errors(include_url=False)
    for error in errors[:_MAX_LISTED_ERRORS]:
        where = ".".join(str(part) for part in error.get("loc", ())) or "arguments"
        given = "" if error.get("type") == "missing" else f" (got {preview(error.get('input'))})"
        lines.append(f"- {where}: {error.get('msg', 'invalid value')}{given}")
    if len(errors) > _MAX_LISTED_ERRORS:
        lines.append(f"- ... and {len(errors) - _MAX_LISTED_ERRORS} more")
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
