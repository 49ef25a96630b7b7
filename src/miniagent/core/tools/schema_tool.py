"""The arguments checker of a tool made from a JSON Schema (:meth:`Tool.from_schema`).

At definition time the schema is checked once: its cost must be bounded
(:mod:`miniagent.core.tools.schema_cost`: depth, length, size with every ``$ref`` expanded), it must
describe an object, be valid for its draft (``$schema``, else 2020-12; jsonschema's
``check_schema``) and every ``$ref`` in it must resolve. Per call, the arguments are coerced the
lax way function tools get them and missing defaults filled in
(:mod:`miniagent.core.tools.coercion`; a default that does not fit its property's type is left out),
then validated by :mod:`jsonschema`, whose errors become
:class:`~miniagent.core.tools.coercion.ArgumentProblem` values with their path. The shared steps
(bad JSON, bare values, missing and unknown names, the error texts) are in
:mod:`miniagent.core.tools.tool`.

``jsonschema`` is imported when the first schema tool is defined: ``import miniagent`` does
not load it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

from miniagent.core.errors import ToolDefinitionError
from miniagent.core.tools.coercion import ArgumentProblem, coerce
from miniagent.core.tools.schema_cost import check_schema_cost

__all__ = ["SchemaArguments"]

_DEFAULT_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})  # values, not schemas
_NO_GIVEN = frozenset({"required", "dependentRequired", "dependencies"})  # about the parent


class SchemaArguments:
    """Checks a schema tool's arguments: lax coercion and defaults, then :mod:`jsonschema`.

    Args:
        tool_name: the tool's name, for error messages.
        parameters: the JSON Schema of the arguments object; a deep copy is kept.

    Attributes:
        schema: the schema as the tool exposes it (``"type": "object"`` added if absent).

    Raises:
        ToolDefinitionError: the schema is not an object schema, is invalid, or has a
            ``$ref`` that does not resolve.
    """

    def __init__(self, tool_name: str, parameters: Any) -> None:
        check_schema_cost(tool_name, parameters)  # before any walk: each is bounded by it
        self.schema = _object_schema(tool_name, parameters)
        validator_class = _validator_class(tool_name, self.schema)
        self._resolver = _resolver(self.schema, validator_class)
        _check_refs(tool_name, self.schema, self._resolver)
        self._validator = validator_class(
            self.schema, format_checker=validator_class.FORMAT_CHECKER
        )
        properties = self.schema.get("properties", {})
        required = [r for r in self.schema.get("required", []) if isinstance(r, str)]
        self._properties: dict[str, Any] = properties
        self._names = (*properties, *(r for r in required if r not in properties))
        self._required = tuple(r for r in required if not _has_default(properties.get(r)))
        patterns = self.schema.get("patternProperties", {})
        self._patterns = list(patterns) if isinstance(patterns, dict) else []
        self._closed = self.schema.get("additionalProperties") is False

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    @property
    def required(self) -> tuple[str, ...]:
        return self._required

    def is_known(self, name: str) -> bool:
        """Listed in ``properties``, matching a ``patternProperties`` pattern, or extras allowed."""
        if not self._closed or name in self._properties:
            return True
        return any(_search(pattern, name) for pattern in self._patterns)

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any] | list[ArgumentProblem]:
        try:
            values = coerce(arguments, self.schema, self._resolver)
        except RecursionError:  # nested deeper than the walk can go: validate as sent
            values = arguments
        try:
            errors = list(self._validator.iter_errors(values))
        except Exception as exc:  # e.g. a recursive schema that never consumes a value
            message = f"the schema could not be checked ({type(exc).__name__})"
            return [ArgumentProblem(where="arguments", message=message)]
        if errors:
            return [_problem(error) for error in errors]
        return copy.deepcopy(values)  # the function may change it; the call's record stays

    def bind(self, values: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """The function of a schema tool takes one argument: the arguments dict."""
        return [values], {}


def _object_schema(tool_name: str, parameters: Any) -> dict[str, Any]:
    if not isinstance(parameters, dict):
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: parameters must be a JSON Schema object (a dict), "
            f"got {type(parameters).__name__}."
        )
    kind = parameters.get("type")
    if kind is None and not isinstance(parameters.get("properties"), dict):
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: parameters must describe a JSON object: give "
            '"type": "object" or "properties".'
        )
    if kind is not None and kind != "object":
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: parameters must describe a JSON object, but its type is "
            f"{kind!r}; tool arguments are always an object."
        )
    schema = copy.deepcopy(parameters)
    return schema if kind is not None else {"type": "object", **schema}


def _validator_class(tool_name: str, schema: dict[str, Any]) -> Any:
    import jsonschema
    from jsonschema.validators import validator_for

    cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path) or "(top level)"
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: parameters is not a valid JSON Schema: at {where}: "
            f"{exc.message}."
        ) from None
    return cls


def _resolver(schema: dict[str, Any], validator_class: Any) -> Any:
    """A :class:`referencing.Resolver` for the ``$ref`` values inside ``schema``."""
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012, specification_with

    dialect = validator_class.META_SCHEMA.get("$id", _DEFAULT_DIALECT)
    specification = specification_with(dialect, default=DRAFT202012)
    resource = Resource.from_contents(schema, default_specification=specification)
    uri = resource.id() or ""
    return Registry().with_resource(uri, resource).crawl().resolver(base_uri=uri)


def _check_refs(tool_name: str, schema: dict[str, Any], resolver: Any) -> None:
    for ref in _refs(schema):
        try:
            resolver.lookup(ref)
        except Exception:
            raise ToolDefinitionError(
                f"Tool {tool_name!r}: cannot resolve \"$ref\": {ref!r}; references must "
                "point inside the schema (for example \"#/$defs/Name\")."
            ) from None


def _refs(node: Any) -> Iterator[str]:
    """Every ``$ref`` string in a schema, not looking into data such as ``enum`` values.

    Parts with their own ``$id`` are left out: their references have another base, and the
    validator resolves them itself.
    """
    if isinstance(node, list):
        for item in node:
            yield from _refs(item)
    elif isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for key, value in node.items():
            if key in _DATA_KEYWORDS or (isinstance(value, dict) and "$id" in value):
                continue
            yield from _refs(value)


def _has_default(schema: Any) -> bool:
    return isinstance(schema, dict) and "default" in schema


def _search(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return False


def _problem(error: Any) -> ArgumentProblem:
    where = ".".join(str(part) for part in error.absolute_path) or "arguments"
    if error.validator in _NO_GIVEN:
        return ArgumentProblem(where=where, message=error.message)
    return ArgumentProblem(where=where, message=error.message, given=error.instance)
