"""Function signature + docstring -> pydantic arguments model -> JSON Schema.

Everything here runs once, when a tool is defined, so the per-call path only has to
validate a dict with a ready-made model. The steps:

1. Read the signature and resolve the type hints (``typing.get_type_hints``), refusing
   ``*args``/``**kwargs`` and hints pydantic cannot turn into a schema. The receiver of a
   method (``self``, a classmethod's ``cls``) is left out (see :mod:`.methods`).
2. Parse the docstring (Google, NumPy or reST, via ``docstring_parser``): the short and
   long descriptions become the tool description, the ``Args`` entries the parameter
   descriptions.
3. Build an arguments model with ``pydantic.create_model``. Fields get neutral internal
   names (``arg0``, ``arg1``, ...) and the parameter name as alias, so a parameter called
   ``json`` or ``model_config`` never collides with ``BaseModel`` attributes. A pydantic
   ``Field(...)`` given as a parameter's default (``n: int = Field(gt=0)``) or in
   ``Annotated[int, Field(...)]`` is the field: its default (``...``: required),
   constraints and description hold, in the schema and when a call is validated. A
   parameter's description is, first found: the ``Field``'s ``description``, the
   docstring's entry, a plain string in ``Annotated[int, "..."]``.
4. Take ``model_json_schema()``, inline ``$ref``/``$defs`` (models follow inlined schemas
   better) and drop ``title`` keywords (noise for the model).
"""

from __future__ import annotations

import copy
import functools
import inspect
import re
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from miniagent.core.errors import ToolDefinitionError
from miniagent.core.tools.methods import method_shape

if TYPE_CHECKING:
    from pydantic import BaseModel, ConfigDict

# pydantic and docstring_parser are imported when the first tool is defined, not at
# `import miniagent` (together ~100 ms of a ~250 ms import).

__all__ = ["ToolSpec", "build_tool_spec", "check_tool_name", "clean_json_schema"]

# What OpenAI-compatible servers accept as a function name.
_NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")

_ARGS_CONFIG: ConfigDict = {
    "extra": "forbid",
    # Models often send 42 where a string is expected; accept it as "42".
    "coerce_numbers_to_str": True,
    "arbitrary_types_allowed": False,
    # A TypedDict's or dataclass's attribute docstrings describe its properties.
    "use_attribute_docstrings": True,
}


@dataclass(frozen=True)
class ToolSpec:
    """Everything derived from a function once, at definition time.

    Attributes:
        name: the tool name the model uses.
        description: the tool description (docstring summary or the override).
        parameters: the JSON Schema of the arguments object.
        args_model: the pydantic model that validates and coerces the arguments.
        field_names: parameter name -> internal field name of ``args_model``.
        positional_only: parameters that must be passed positionally, in order.
        required: names of the parameters a call must contain (no default in the signature
            nor in a ``Field``), in signature order.
        function: what the arguments are passed to (the function under a ``classmethod``
            or ``staticmethod``, else the callable given).
        receiver: the method's first parameter, left out of the schema (``self``, a
            classmethod's ``cls``), or ``None``.
        binds_class: the receiver is the owner class (a classmethod), not an instance.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    args_model: type[BaseModel]
    field_names: dict[str, str]
    positional_only: tuple[str, ...]
    required: tuple[str, ...]
    function: Any
    receiver: str | None = None
    binds_class: bool = False


def build_tool_spec(
    fn: Any, *, name: str | None = None, description: str | None = None
) -> ToolSpec:
    """Derive the name, description, schema and arguments model of ``fn``.

    Args:
        fn: the callable to describe.
        name: overrides the function name.
        description: overrides the docstring description.

    Raises:
        ToolDefinitionError: when ``fn`` cannot become a tool; the message says why.
    """
    shape = method_shape(fn)
    target = shape.function
    tool_name = _tool_name(target, name)
    signature = _signature(target, tool_name)
    hints = _type_hints(target, tool_name)
    summary, param_docs = _parse_docstring(inspect.getdoc(target) or "")
    fields: dict[str, Any] = {}
    field_names: dict[str, str] = {}
    positional_only: list[str] = []
    params = list(signature.parameters.values())[1 if shape.receiver else 0 :]
    for index, param in enumerate(params):
        _check_kind(param, tool_name)
        internal = f"arg{index}"
        field_names[param.name] = internal
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            positional_only.append(param.name)
        fields[internal] = _field(param, hints.get(param.name, Any), param_docs.get(param.name),
                                  tool_name)
    model = _create_model(tool_name, fields)
    required = [p for p, f in field_names.items() if model.model_fields[f].is_required()]
    return ToolSpec(
        name=tool_name,
        description=description if description is not None else summary,
        parameters=_parameters_schema(model, tool_name),
        args_model=model,
        field_names=field_names,
        positional_only=tuple(positional_only),
        required=tuple(required),
        function=target,
        receiver=shape.receiver,
        binds_class=shape.binds_class,
    )


def _tool_name(fn: Any, name: str | None) -> str:
    if name is None:
        target = fn.func if isinstance(fn, functools.partial) else fn
        name = getattr(target, "__name__", None) or type(target).__name__
    return check_tool_name(name, hint=" (pass name=... to @tool for lambdas and other unnamed"
                           " callables)")


def check_tool_name(name: Any, hint: str = "") -> str:
    """Return ``name`` if OpenAI-compatible servers accept it as a function name.

    Args:
        name: the proposed tool name.
        hint: appended to the error message.

    Raises:
        ToolDefinitionError: ``name`` is not 1-64 letters, digits, ``_`` or ``-``.
    """
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ToolDefinitionError(
            f"Invalid tool name {name!r}: use 1-64 letters, digits, '_' or '-'{hint}."
        )
    return name


def _signature(fn: Any, tool_name: str) -> inspect.Signature:
    if not callable(fn):
        raise ToolDefinitionError(f"Tool {tool_name!r}: {fn!r} is not callable.")
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: cannot read its signature ({exc})."
        ) from exc


def _type_hints(fn: Any, tool_name: str) -> dict[str, Any]:
    target = fn.func if isinstance(fn, functools.partial) else fn
    if not (inspect.isfunction(target) or inspect.ismethod(target)):
        target = getattr(target, "__call__", target)  # noqa: B004  # callable instances
    try:
        return typing.get_type_hints(target, include_extras=True)
    except Exception as exc:
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: cannot resolve its type hints ({type(exc).__name__}: {exc}). "
            "Define the types it uses at module level."
        ) from exc


def _check_kind(param: inspect.Parameter, tool_name: str) -> None:
    if param.kind is inspect.Parameter.VAR_POSITIONAL:
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: parameter '*{param.name}' is not supported; tools take "
            "named parameters only (use a list parameter instead)."
        )
    if param.kind is inspect.Parameter.VAR_KEYWORD:
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: parameter '**{param.name}' is not supported; tools take "
            "named parameters only (use a dict parameter or a pydantic model instead)."
        )


def _field(param: inspect.Parameter, annotation: Any, doc: str | None,
           tool_name: str) -> tuple[Any, Any]:
    """The field of one parameter; a ``Field(...)`` default goes into ``Annotated`` so that
    pydantic merges it with the alias (the parameter's name) and the docstring entry."""
    from pydantic import Field
    from pydantic.fields import FieldInfo

    options: dict[str, Any] = {"alias": param.name}
    if isinstance(param.default, FieldInfo):
        annotation = Annotated[annotation, param.default]
    elif param.default is not inspect.Parameter.empty:
        options["default"] = param.default
    infos = [m for m in _metadata(annotation) if isinstance(m, FieldInfo)]
    if any(info.alias or info.validation_alias for info in infos):
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: parameter {param.name!r} sets an alias in Field(); the "
            "model sends the parameter's name, so rename the parameter instead.")
    declared = next((i.description for i in reversed(infos) if i.description), None)
    if declared is None:
        text = next((m for m in _metadata(annotation) if isinstance(m, str)), None)
        if doc or text:
            options["description"] = doc or text
    return (annotation, Field(**options))


def _metadata(annotation: Any) -> tuple[Any, ...]:
    """The metadata of ``Annotated[T, ...]`` (nested ones are flattened by ``typing``)."""
    if typing.get_origin(annotation) is Annotated:
        return typing.get_args(annotation)[1:]
    return ()


def _create_model(tool_name: str, fields: dict[str, Any]) -> type[BaseModel]:
    from pydantic import create_model
    from pydantic.errors import PydanticSchemaGenerationError, PydanticUserError

    model_name = "".join(part.capitalize() for part in re.split(r"[_-]+", tool_name)) + "Args"
    try:
        return create_model(model_name, __config__=_ARGS_CONFIG, **fields)
    except (PydanticSchemaGenerationError, PydanticUserError, TypeError, NameError) as exc:
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: unsupported parameter type ({_first_line(exc)}). Supported: "
            "str, int, float, bool, list[T], dict[str, T], Optional[T], Literal, Enum, "
            "pydantic models, dataclasses and TypedDicts."
        ) from exc


def _parameters_schema(model: type[BaseModel], tool_name: str) -> dict[str, Any]:
    try:
        raw = model.model_json_schema()
    except Exception as exc:
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: a parameter type has no JSON Schema ({_first_line(exc)})."
        ) from exc
    schema = clean_json_schema(raw)
    ordered: dict[str, Any] = {
        "type": "object",
        "properties": schema.pop("properties", {}),
        "required": schema.pop("required", []),
    }
    schema.pop("type", None)
    ordered.update(schema)
    return ordered


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    if not doc.strip():
        return "", {}
    import docstring_parser

    try:
        # ``doc`` is ``inspect.getdoc``'s text: its first line is flush left, the next
        # keep their relative indent. The parsers clean it once more, which dedents every
        # line after the first: a docstring that opens with ``Args:`` lost its entries'
        # indent and Google's parser refused it. A leading newline makes that second
        # clean-up change nothing.
        parsed = docstring_parser.parse("\n" + doc)
    except Exception:  # a malformed docstring must not stop a tool from being defined
        return doc.strip(), {}
    parts = [p.strip() for p in (parsed.short_description, parsed.long_description) if p]
    params = {p.arg_name: p.description.strip() for p in parsed.params if p.description}
    return "\n\n".join(parts), params


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


# -- JSON Schema clean-up ------------------------------------------------------------

_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_VALUES = ("items", "additionalProperties", "not", "contains", "propertyNames")


def clean_json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Return ``schema`` with local ``$ref`` inlined and ``title`` keywords removed.

    Recursive references cannot be inlined; they are kept, and so are the ``$defs``
    they point to, so the result is always a valid JSON Schema.

    Args:
        schema: a JSON Schema as pydantic produces it (``$defs`` at the top).
    """
    defs = schema.get("$defs", {})
    kept: set[str] = set()
    body = {k: v for k, v in schema.items() if k != "$defs"}
    result = _clean(body, defs, (), kept)
    # Definitions referenced from kept definitions must stay as well.
    pending = list(kept)
    while pending:
        name = pending.pop()
        before = set(kept)
        _clean(defs.get(name, {}), defs, (name,), kept)
        pending.extend(kept - before)
    if kept:
        result["$defs"] = {n: _clean(defs[n], defs, (n,), set()) for n in sorted(kept) if n in defs}
    return result


def _clean(node: Any, defs: dict[str, Any], stack: tuple[str, ...], kept: set[str]) -> Any:
    if isinstance(node, list):
        return [_clean(item, defs, stack, kept) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = ref[len("#/$defs/") :]
        if target in stack or target not in defs:
            kept.add(target)
            return {k: copy.deepcopy(v) for k, v in node.items() if k != "title"}
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        merged = {**copy.deepcopy(defs[target]), **siblings}
        return _clean(merged, defs, (*stack, target), kept)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title":
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: _clean(v, defs, stack, kept) for k, v in value.items()}
        elif key in _SCHEMA_LISTS or key in _SCHEMA_VALUES:
            out[key] = _clean(value, defs, stack, kept)
        else:
            out[key] = copy.deepcopy(value)
    return out
