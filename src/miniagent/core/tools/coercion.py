"""Lax coercion of a model's arguments, guided by a JSON Schema, and defaults filled in.

A schema tool gets the same forgiving conversions that pydantic's lax mode gives function
tools, so the two kinds of tool accept the same sloppy-but-clear inputs:

- integer: ``"20"``, ``" -20 "``, ``"20.0"`` and ``20.0`` become 20; ``2.5``, ``"2.5"``
  and ``"1e3"`` stay (and fail validation).
- number: ``"2.5"``, ``"20"``, ``"1e3"`` become numbers; ``"inf"`` and ``"nan"`` stay.
- boolean: ``"true"``/``"false"`` in any case, ``"yes"``/``"no"``, ``"on"``/``"off"``,
  ``"t"``/``"f"``, ``"y"``/``"n"``, ``"1"``/``"0"``, ``1``/``0``; ``2`` or ``" true"`` stay.
- string: a number becomes its text (``20`` -> ``"20"``, ``2.5`` -> ``"2.5"``); ``true``
  and ``null`` stay.

Unlike pydantic, ``true`` never becomes ``1`` (JSON keeps booleans and numbers apart), and
``"inf"``/``"nan"`` stay strings (they are not JSON numbers). Nothing is ever rounded.

The walk follows ``properties``, ``patternProperties``, ``additionalProperties``, ``items``,
``prefixItems``, ``allOf`` and local ``$ref``; for ``anyOf``/``oneOf`` and type lists it
converts only when the choice is unambiguous: a value some alternative already takes stays as
it is, and otherwise exactly one alternative must accept the converted value. Missing object
properties that have a ``default`` get a copy of it, at every level the walk reaches.

The input is never modified; containers are copied where something changes. Validation
itself is :mod:`jsonschema`'s job (see :mod:`miniagent.core.tools.schema_tool`).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["NOT_SHOWN", "ArgumentProblem", "RefResolver", "coerce"]

_MAX_REF_HOPS = 16  # $ref/anyOf/allOf steps without descending into the value: a cycle guard

_INTEGER_TEXT = re.compile(r"\s*[-+]?[0-9]+(\.0*)?\s*")
_NUMBER_TEXT = re.compile(r"\s*[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?\s*")
_TRUE_TEXTS = frozenset({"true", "t", "yes", "y", "on", "1"})
_FALSE_TEXTS = frozenset({"false", "f", "no", "n", "off", "0"})


class RefResolver(Protocol):
    """What the walk needs to follow a ``$ref``: :class:`referencing.Resolver` fits."""

    def lookup(self, ref: str) -> Any:
        """An object with ``contents`` (the target schema) and ``resolver`` (for its refs)."""
        ...


class _Missing:
    """No conversion applies (distinct from ``None``, which is JSON ``null``)."""


_NO = _Missing()


def coerce(value: Any, schema: Any, resolver: RefResolver | None = None) -> Any:
    """``value`` converted where ``schema`` clearly asks for another JSON type.

    Args:
        value: decoded JSON from the model.
        schema: the JSON Schema it should match.
        resolver: follows ``$ref``; without one, references are not followed.

    Example:
        >>> coerce({"n": "20", "tags": [1, 2]}, {"properties": {
        ...     "n": {"type": "integer"}, "tags": {"items": {"type": "string"}},
        ...     "mode": {"default": "fast"}}})
        {'n': 20, 'tags': ['1', '2'], 'mode': 'fast'}
    """
    return _coerce(value, schema, resolver, 0)


def _coerce(value: Any, schema: Any, resolver: RefResolver | None, hops: int) -> Any:
    if not isinstance(schema, dict) or hops > _MAX_REF_HOPS:
        return value
    target = _resolve(schema, resolver)
    if target is not None:
        value = _coerce(value, target[0], target[1], hops + 1)
    for part in _schemas(schema.get("allOf")):
        value = _coerce(value, part, resolver, hops + 1)
    for key in ("anyOf", "oneOf"):
        options = _schemas(schema.get(key))
        if options:
            value = _coerce_union(value, options, resolver, hops + 1)
    value = _coerce_enum(_coerce_type(value, schema.get("type")), schema)
    if isinstance(value, dict):
        return _coerce_object(value, schema, resolver)
    if isinstance(value, list):
        return _coerce_array(value, schema, resolver)
    return value


def _resolve(schema: dict[str, Any], resolver: RefResolver | None) -> tuple[Any, Any] | None:
    """The target of ``schema``'s ``$ref`` and the resolver for refs inside it, if found."""
    ref = schema.get("$ref")
    if resolver is None or not isinstance(ref, str):
        return None
    try:
        resolved = resolver.lookup(ref)
    except Exception:  # unresolvable: nothing to guide the conversion
        return None
    return resolved.contents, resolved.resolver


def _schemas(value: Any) -> list[Any]:
    return [s for s in value if isinstance(s, dict)] if isinstance(value, list) else []


# -- one value -------------------------------------------------------------------------


def _coerce_type(value: Any, kind: Any) -> Any:
    kinds = [kind] if isinstance(kind, str) else kind
    if not isinstance(kinds, list) or not kinds:
        return value
    if "integer" in kinds and "number" not in kinds and _integral_float(value):
        return int(value)
    if any(_has_type(value, k) for k in kinds):
        return value
    converted = [c for c in (_convert(value, k) for k in kinds) if c is not _NO]
    return _only(converted, value)


def _coerce_enum(value: Any, schema: dict[str, Any]) -> Any:
    if "const" in schema:
        members = [schema["const"]]
    elif isinstance(schema.get("enum"), list):
        members = schema["enum"]
    else:
        return value
    if any(_json_equal(value, member) for member in members):
        return value
    matches = [m for m in members if _json_equal(_convert(value, _type_of(m)), m)]
    return _only(matches, value)


def _coerce_union(
    value: Any, options: list[dict[str, Any]], resolver: RefResolver | None, hops: int
) -> Any:
    fitting = [o for o in options if _admits(o, value, resolver, hops)]
    if len(fitting) == 1:
        return _coerce(value, fitting[0], resolver, hops)
    if fitting:
        return value  # several alternatives take it as it is: nothing to decide
    converted = []
    for option in options:
        candidate = _coerce(value, option, resolver, hops)
        if candidate is not value and _admits(option, candidate, resolver, hops):
            converted.append(candidate)
    return _only(converted, value)


def _admits(schema: dict[str, Any], value: Any, resolver: RefResolver | None, hops: int) -> bool:
    """Whether ``schema`` can take ``value``'s JSON type (a cheap pre-check, not validation)."""
    if hops > _MAX_REF_HOPS:
        return True
    target = _resolve(schema, resolver)
    if (
        target is not None
        and isinstance(target[0], dict)
        and not _admits(target[0], value, target[1], hops + 1)
    ):
        return False
    kind = schema.get("type")
    kinds = [kind] if isinstance(kind, str) else kind
    if isinstance(kinds, list) and not any(_has_type(value, k) for k in kinds):
        return False
    if "const" in schema:
        return _json_equal(value, schema["const"])
    if isinstance(schema.get("enum"), list):
        return any(_json_equal(value, member) for member in schema["enum"])
    for key in ("anyOf", "oneOf"):
        options = _schemas(schema.get(key))
        if options and not any(_admits(o, value, resolver, hops + 1) for o in options):
            return False
    return True


def _only(candidates: list[Any], original: Any) -> Any:
    """The one distinct candidate, else ``original`` (none, or an ambiguous choice)."""
    distinct: list[Any] = []
    for candidate in candidates:
        if not any(_json_equal(candidate, seen) for seen in distinct):
            distinct.append(candidate)
    return distinct[0] if len(distinct) == 1 else original


# -- containers ------------------------------------------------------------------------


def _coerce_object(
    value: dict[str, Any], schema: dict[str, Any], resolver: RefResolver | None
) -> Any:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    result: dict[str, Any] = {}
    for key, item in value.items():
        sub = properties[key] if key in properties else _other_property(key, schema)
        result[key] = _coerce(item, sub, resolver, 0) if sub is not None else item
    for key, sub in properties.items():
        if key not in result:
            default = _default(sub, resolver)
            if default is not _NO:
                result[key] = copy.deepcopy(default)
    return value if _same_items(result, value) else result


def _other_property(key: str, schema: dict[str, Any]) -> Any:
    """The schema for a name not in ``properties``: one matching pattern, else the extras'."""
    patterns = schema.get("patternProperties")
    if isinstance(patterns, dict):
        matching = [sub for pattern, sub in patterns.items() if _search(pattern, key)]
        if matching:
            return matching[0] if len(matching) == 1 else None
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


def _search(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except (re.error, TypeError):  # an ECMA-262 pattern Python cannot read
        return False


def _default(schema: Any, resolver: RefResolver | None) -> Any:
    """The property's default, when it fits the property's own ``type``/``enum`` (schemas
    often say ``"type": "string", "default": null``: filling that in would make a valid call
    invalid)."""
    if not isinstance(schema, dict):
        return _NO
    if "default" not in schema:
        target = _resolve(schema, resolver)
        if target is None or not isinstance(target[0], dict) or "default" not in target[0]:
            return _NO
        schema = target[0]
    default = schema["default"]
    return default if _fits(default, schema) else _NO


def _fits(value: Any, schema: dict[str, Any]) -> bool:
    """Whether ``value`` has one of the schema's ``type`` values and is among its ``enum``."""
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if isinstance(kinds, list) and kinds and not any(_has_type(value, k) for k in kinds):
        return False
    members = schema.get("enum")
    return not isinstance(members, list) or any(
        value == m and type(value) is type(m) for m in members)


def _coerce_array(
    value: list[Any], schema: dict[str, Any], resolver: RefResolver | None
) -> Any:
    items = schema.get("items")
    prefix: Any = schema.get("prefixItems")
    rest: Any = items
    if isinstance(items, list):  # drafts before 2020-12: a tuple, then additionalItems
        prefix, rest = items, schema.get("additionalItems")
    prefix = prefix if isinstance(prefix, list) else []
    result = [
        _coerce(item, prefix[i] if i < len(prefix) else rest, resolver, 0)
        for i, item in enumerate(value)
    ]
    return value if _same_items(result, value) else result


def _same_items(new: Any, old: Any) -> bool:
    """Whether nothing was converted (same keys and the very same objects)."""
    if isinstance(new, dict):
        return new.keys() == old.keys() and all(new[k] is old[k] for k in new)
    return len(new) == len(old) and all(a is b for a, b in zip(new, old))


# -- JSON types ------------------------------------------------------------------------


def _has_type(value: Any, kind: Any) -> bool:
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or _integral_float(value)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    check = _TYPE_CHECKS.get(kind) if isinstance(kind, str) else None
    return check(value) if check else True  # an unknown type name: let validation say


_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "other"


def _integral_float(value: Any) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()


def _convert(value: Any, kind: Any) -> Any:
    """``value`` as JSON type ``kind`` when the conversion keeps its meaning, else ``_NO``."""
    if kind == "integer":
        return _to_integer(value)
    if kind == "number":
        return _to_number(value)
    if kind == "boolean":
        return _to_boolean(value)
    if kind == "string" and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return _NO


def _to_integer(value: Any) -> Any:
    if _integral_float(value):
        return int(value)
    if isinstance(value, str) and _INTEGER_TEXT.fullmatch(value):
        try:
            return int(value.strip().split(".")[0])
        except ValueError:  # more digits than Python converts
            return _NO
    return _NO


def _to_number(value: Any) -> Any:
    if not isinstance(value, str) or not _NUMBER_TEXT.fullmatch(value):
        return _NO
    text = value.strip()
    try:
        number = int(text) if text.lstrip("+-").isdigit() else float(text)
    except ValueError:
        return _NO
    return number if isinstance(number, int) or math.isfinite(number) else _NO


def _to_boolean(value: Any) -> Any:
    if isinstance(value, str):
        text = value.lower()
        return True if text in _TRUE_TEXTS else False if text in _FALSE_TEXTS else _NO
    if isinstance(value, int | float) and not isinstance(value, bool) and value in (0, 1):
        return bool(value)
    return _NO


def _json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON Schema sees it: ``1 == 1.0``, but ``true`` is not ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return bool(a == b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and bool(a == b)

# -- what a checker reports -------------------------------------------------------------

NOT_SHOWN = object()
"""``ArgumentProblem.given`` when the model sent no value there (a missing field)."""


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
    given: Any = NOT_SHOWN
