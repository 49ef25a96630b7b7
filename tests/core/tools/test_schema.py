"""Schema generation: signature + type hints + docstring -> JSON Schema."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any, Literal, Optional

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

from miniagent.core.errors import ToolDefinitionError
from miniagent.core.tools.schema import clean_json_schema
from miniagent.core.tools.tool import tool


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Address(BaseModel):
    street: str
    city: str = "Paris"


@dataclass
class Point:
    x: float
    y: float


class Movie(TypedDict):
    title: str
    year: int


class TreeNode(BaseModel):
    value: int
    children: list[TreeNode] = []


def _props(fn: Any) -> dict[str, Any]:
    return tool(fn).parameters["properties"]


def _walk(node: Any) -> list[Any]:
    """Every dict in a JSON document, depth first."""
    found: list[Any] = []
    if isinstance(node, dict):
        found.append(node)
        for value in node.values():
            found.extend(_walk(value))
    elif isinstance(node, list):
        for item in node:
            found.extend(_walk(item))
    return found


def test_primitives_and_required() -> None:
    def f(s: str, i: int, x: float, flag: bool = False) -> None:
        """Primitives."""

    params = tool(f).parameters
    assert params["type"] == "object"
    assert params["required"] == ["s", "i", "x"]
    assert params["properties"]["s"] == {"type": "string"}
    assert params["properties"]["i"] == {"type": "integer"}
    assert params["properties"]["x"] == {"type": "number"}
    assert params["properties"]["flag"] == {"type": "boolean", "default": False}


def test_no_parameters_has_empty_required() -> None:
    def ping() -> str:
        """Ping."""
        return "pong"

    params = tool(ping).parameters
    assert params["properties"] == {}
    assert params["required"] == []


def test_lists_and_dicts() -> None:
    def f(tags: list[str], scores: dict[str, float], anything: dict, raw: list) -> None:  # type: ignore[type-arg]
        """Containers."""

    props = _props(f)
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["scores"] == {"type": "object", "additionalProperties": {"type": "number"}}
    assert props["anything"]["type"] == "object"
    assert props["raw"]["type"] == "array"


def test_optional_and_union_none() -> None:
    def f(a: Optional[int], b: str | None = None) -> None:  # noqa: UP045
        """Optionals."""

    params = tool(f).parameters
    assert params["required"] == ["a"]
    assert params["properties"]["a"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    assert params["properties"]["b"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert params["properties"]["b"]["default"] is None


def test_literal() -> None:
    def f(unit: Literal["celsius", "fahrenheit"] = "celsius") -> None:
        """Literal."""

    prop = _props(f)["unit"]
    assert prop["enum"] == ["celsius", "fahrenheit"]
    assert prop["default"] == "celsius"


def test_enum_is_inlined() -> None:
    def f(color: Color) -> None:
        """Enum."""

    params = tool(f).parameters
    assert params["properties"]["color"]["enum"] == ["red", "green"]
    assert "$defs" not in params


@pytest.mark.parametrize(
    ("kind", "fields"),
    [(Address, {"street", "city"}), (Point, {"x", "y"}), (Movie, {"title", "year"})],
)
def test_nested_types_are_inlined_without_titles(kind: type, fields: set[str]) -> None:
    def f(item: Any) -> None:
        """Nested."""

    f.__annotations__ = {"item": kind, "return": None}
    params = tool(f).parameters
    text = json.dumps(params)
    assert "$ref" not in text
    assert "$defs" not in text
    nested = params["properties"]["item"]
    assert nested["type"] == "object"
    assert set(nested["properties"]) == fields
    # "title" may be a property name (Movie), never a schema keyword.
    assert all("title" not in node for node in _walk(params) if "type" in node)


def test_property_named_title_is_kept() -> None:
    def f(movie: Movie, title: str) -> None:
        """A property called title is data, not the title keyword."""

    props = _props(f)
    assert "title" in props
    assert set(props["movie"]["properties"]) == {"title", "year"}


def test_recursive_model_keeps_valid_refs() -> None:
    def f(tree: TreeNode) -> None:
        """Recursive."""

    params = tool(f).parameters
    refs = [node["$ref"] for node in _walk(params) if "$ref" in node]
    assert refs, "a recursive model cannot be fully inlined"
    for ref in refs:
        name = ref.rsplit("/", 1)[-1]
        assert name in params["$defs"]


def test_nested_model_description_survives_inlining() -> None:
    def f(address: Address) -> None:
        """Ship it.

        Args:
            address: where to ship
        """

    prop = _props(f)["address"]
    assert prop["description"] == "where to ship"
    assert prop["required"] == ["street"]


def test_google_docstring() -> None:
    def f(a: int, b: int = 1) -> int:
        """Add two integers.

        Longer explanation here.

        Args:
            a: first addend
            b: second addend

        Returns:
            the sum
        """
        return a + b

    t = tool(f)
    assert t.description == "Add two integers.\n\nLonger explanation here."
    assert t.parameters["properties"]["a"]["description"] == "first addend"
    assert t.parameters["properties"]["b"]["description"] == "second addend"
    assert "Args" not in t.description


def test_numpy_docstring() -> None:
    def f(query: str, limit: int = 5) -> list[str]:
        """Search the documents.

        Parameters
        ----------
        query : str
            what to look for
        limit : int
            how many results
        """
        return []

    t = tool(f)
    assert t.description == "Search the documents."
    assert t.parameters["properties"]["query"]["description"] == "what to look for"
    assert t.parameters["properties"]["limit"]["description"] == "how many results"


def test_rest_docstring() -> None:
    def f(path: str) -> str:
        """Read a file.

        :param path: the file to read
        :returns: its text
        """
        return path

    t = tool(f)
    assert t.description == "Read a file."
    assert t.parameters["properties"]["path"]["description"] == "the file to read"


def test_no_docstring_and_description_override() -> None:
    def f(a: int) -> int:
        return a

    assert tool(f).description == ""
    assert tool(description="Custom.")(f).description == "Custom."


def test_unannotated_parameter_accepts_anything() -> None:
    def f(a, b: int = 2):  # type: ignore[no-untyped-def]
        """Untyped."""

    props = _props(f)
    assert "type" not in props["a"]
    assert props["b"]["type"] == "integer"


def test_var_args_rejected_with_clear_message() -> None:
    def f(*items: int) -> None:
        """Var positional."""

    with pytest.raises(ToolDefinitionError, match=r"\*items"):
        tool(f)


def test_var_kwargs_rejected_with_clear_message() -> None:
    def f(a: int, **options: str) -> None:
        """Var keyword."""

    with pytest.raises(ToolDefinitionError, match=r"\*\*options"):
        tool(f)


def test_unsupported_type_rejected() -> None:
    class Opaque:
        pass

    def f(thing: Opaque) -> None:
        """Opaque."""

    f.__annotations__ = {"thing": Opaque}
    with pytest.raises(ToolDefinitionError, match="unsupported parameter type"):
        tool(f)


def test_unresolvable_hint_rejected() -> None:
    def f(thing: DoesNotExist) -> None:  # type: ignore[name-defined]  # noqa: F821
        """Broken annotation."""

    with pytest.raises(ToolDefinitionError, match="type hints"):
        tool(f)


def test_invalid_name_rejected() -> None:
    with pytest.raises(ToolDefinitionError, match="name"):
        tool(lambda x: x)
    assert tool(name="identity")(lambda x: x).name == "identity"


def test_parameter_names_that_shadow_basemodel_attributes() -> None:
    def f(json: str, schema: int, model_config: bool = True, copy: str = "x") -> None:
        """Awkward names."""

    params = tool(f).parameters
    assert list(params["properties"]) == ["json", "schema", "model_config", "copy"]
    assert params["required"] == ["json", "schema"]


def test_clean_json_schema_drops_only_title_keywords() -> None:
    schema = {
        "title": "Top",
        "type": "object",
        "properties": {"title": {"title": "Title", "type": "string"}},
        "$defs": {},
    }
    assert clean_json_schema(schema) == {
        "type": "object",
        "properties": {"title": {"type": "string"}},
    }


def test_openai_schema_shape() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    assert add.openai_schema() == {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": add.parameters,
        },
    }
    json.dumps(add.openai_schema())  # serialisable
