"""The function-schema cases of three peers, checked against ``@tool``.

The functions and their expected schemas come from the peers' own tests (the test code here
is ours): Hugging Face transformers ``get_json_schema``
(tests/utils/test_chat_template_utils.py, ids ``hf-``), the OpenAI Agents SDK
(tests/test_function_schema.py, ids ``oai-``) and Pydantic AI (tests/test_tools.py, ids
``pai-``). Each case asserts the meaning of the schema (types, nullability, required,
descriptions, defaults, constraints), not the peer's exact dict: the style differences below
are normalised away or written into the expected value, with the reason in a comment.

Style differences (not bugs): no ``title``; ``$ref``/``$defs`` inlined; ``Optional[T]`` is
``anyOf`` with ``null`` (transformers writes ``nullable``); defaults are stated (transformers
leaves them out); ``additionalProperties: false`` at the top; an empty ``required`` list;
a ``tuple`` states its length (``minItems``/``maxItems``).

Design differences (a decision, each asserted as miniagent's behaviour): ``*args``/``**kwargs``
are refused (the peers map them to a list or an object); a missing docstring or type hint is
accepted (transformers refuses); a single model parameter stays nested under its name
(Pydantic AI flattens it); the result's type and description are not part of the tool
description (transformers and Pydantic AI add them); ``(choices: [...])`` in a docstring stays
text (a transformers convention: choices come from ``Literal`` or ``Enum`` here). The peers
disagree on one case: a ``Field(description=...)`` and a docstring entry for the same
parameter. Pydantic AI (and pydantic's own rule for attribute docstrings) keeps the Field's,
the OpenAI SDK the docstring's; miniagent keeps the Field's (``oai-field_description_merge``).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field, WithJsonSchema
from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

from miniagent.core.errors import ToolDefinitionError
from miniagent.core.tools.tool import Tool, tool
from miniagent.core.tools.toolbox import ToolRegistry
from miniagent.core.types import Observation, ToolCall
from tool_calls import execute

# -- normalising a schema to its meaning -----------------------------------------------

_NO_CONSTRAINT = {"items": {}, "additionalProperties": True}


def _meaning(node: Any) -> Any:
    """``node`` with style removed: ``anyOf`` of bare types as a type list, a ``null``
    branch as ``nullable``, keywords that allow anything dropped, descriptions' whitespace
    collapsed."""
    if not isinstance(node, dict):
        return node
    out = {k: _meaning_of(k, v) for k, v in node.items()
           if not (k in _NO_CONSTRAINT and v == _NO_CONSTRAINT[k])}
    branches = out.pop("anyOf", None)
    if branches is None:
        return out
    kept = [b for b in branches if b != {"type": "null"}]
    if len(kept) < len(branches):
        out["nullable"] = True
    if all(set(b) == {"type"} for b in kept):
        types = sorted({b["type"] for b in kept})
        out["type"] = types[0] if len(types) == 1 else types
    elif len(kept) == 1:
        out.update(kept[0])
    else:
        out["anyOf"] = kept
    return out


def _meaning_of(key: str, value: Any) -> Any:
    if key == "description" and isinstance(value, str):
        return " ".join(value.split())
    if key == "properties" and isinstance(value, dict):
        return {name: _meaning(prop) for name, prop in value.items()}
    if isinstance(value, list):
        return [_meaning(item) for item in value]
    return _meaning(value)


async def _call(target: Tool, arguments: dict[str, Any]) -> Observation:
    registry = ToolRegistry([target])
    return await execute(registry, ToolCall(id="c1", name=target.name, arguments=arguments))


# -- the peers' functions (module level: their hints are resolved from here) --------------


def hf_simple_function(x: int):
    """
    Test function

    Args:
         x: The input
    """
    return x


def hf_no_arguments():
    """
    Test function
    """
    return True


def hf_bare_container_types(x: list, y: tuple, z: dict):
    """
    Test function

    Args:
        x: The first input
        y: The second input
        z: The third input
    """
    return x


def hf_union(x: int | float):
    """
    Test function

    Args:
        x: The input
    """
    return x


def hf_union_with_duplicate_types(x: list | tuple, y: list | tuple | dict | None = None):
    """
    Test function

    Args:
        x: The first input
        y: The second input
    """
    return x


def hf_optional(x: int | None):
    """
    Test function

    Args:
        x: The input
    """
    return x


def hf_default_arg(x: int = 42):
    """
    Test function

    Args:
         x: The input
    """
    return x


def hf_nested_list(x: list[list[str | int]]):
    """
    Test function

    Args:
        x: The input
    """
    return x


def hf_multiple_arguments(x: int, y: str):
    """
    Test function

    Args:
        x: The input
        y: Also the input
    """
    return x


def hf_multiple_complex_arguments(x: list[int | float], y: int | str | None = None):
    """
    Test function

    Args:
        x: The input
        y: Also the input
    """
    return x


def hf_union_of_complex_types(x: str | list[str], y: Literal["a", "b"] | int | None = None):
    """
    Test function

    Args:
        x: The input
        y: Also the input
    """
    return x


def hf_missing_docstring(x: int):
    return x


def hf_missing_param_docstring(x: int):
    """
    Test function
    """
    return x


def hf_missing_type_hint(x):  # type: ignore[no-untyped-def]
    """
    Test function

    Args:
         x: The input
    """
    return x


def hf_return_value_docstring(x: int) -> int:
    """
    Test function

    Args:
        x: The input


    Returns:
        The output
    """
    return x


def hf_return_none(x: int) -> None:
    """
    Test function

    Args:
        x: The first input
    """


def hf_tuple(x: tuple[int, str]):
    """
    Test function

    Args:
        x: The input


    Returns:
        The output
    """
    return x


def hf_single_element_tuple(x: tuple[int]):
    """
    Test function

    Args:
        x: The input
    """
    return x


def hf_ellipsis_tuple(x: tuple[int, ...]):
    """
    Test function

    Args:
        x: The input
    """
    return x


def hf_enum_extraction(temperature_format: str):
    """
    Test function

    Args:
        temperature_format: The temperature format to use (Choices: ["celsius", "fahrenheit"])


    Returns:
        The temperature
    """
    return -40.0


def hf_literal(
    temperature_format: Literal["celsius", "fahrenheit"],
    booleanish: Literal[True, False, 0, 1, "y", "n"] = False,
):
    """
    Test function

    Args:
        temperature_format: The temperature format to use
        booleanish: A value that can be regarded as boolean


    Returns:
        The temperature
    """
    return -40.0


def hf_multiline_docstring_with_types(x: int, y: int):
    """
    Test function

    Args:
        x: The first input

        y: The second input. This is a longer description
           that spans multiple lines with indentation and stuff.

    Returns:
        God knows what
    """


def hf_everything_all_at_once(
    x: str, y: list[str | int] | None, z: tuple[str | int, str] = (42, "hello")
) -> tuple[int, str]:
    """
    Test function with multiple args, and docstring args that we have to strip out.

    Args:
        x: The first input. It's got a big multiline
           description and also contains
           (choices: ["a", "b", "c"])

        y: The second input. It's a big list with a single-line description.

        z: The third input. It's some kind of tuple with a default arg.

    Returns:
        The output. The return description is also a big multiline
        description that spans multiple lines.
    """
    return 0, ""


def oai_no_args_function():
    """This function has no args."""

    return "ok"


def oai_simple_function(a: int, b: int = 5):
    """
    Args:
        a: The first argument
        b: The second argument

    Returns:
        The sum of a and b
    """
    return a + b


class OaiFoo(TypedDict):
    a: int
    b: str


class OaiInnerModel(BaseModel):
    a: int
    b: str


class OaiOuterModel(BaseModel):
    inner: OaiInnerModel
    foo: OaiFoo


def oai_complex_args_function(model: OaiOuterModel) -> str:
    return f"{model.inner.a}, {model.inner.b}, {model.foo['a']}, {model.foo['b']}"


def oai_complex_args_and_docs_function(model: OaiOuterModel, some_flag: int = 0) -> str:
    """
    This function takes a model and a flag, and returns a string.

    Args:
        model: A model with an inner and foo field
        some_flag: An optional flag with a default of 0

    Returns:
        A string with the values of the model and flag
    """
    return f"{model.inner.a}, {model.inner.b}, {model.foo['a']}, {model.foo['b']}, {some_flag}"


class OaiEnum(str, enum.Enum):
    FOO = "foo"
    BAR = "bar"
    BAZ = "baz"


def oai_enum_and_literal_function(a: OaiEnum, b: Literal["a", "b", "c"]) -> str:
    return f"{a.value} {b}"


def oai_mapping(test_one: Mapping[str, int]) -> str:
    return "foo"


def oai_field_required_constraints(my_number: int = Field(..., gt=10, le=100)) -> int:
    return my_number * 2


def oai_field_optional_with_default(
    required_param: str,
    optional_param: float = Field(default=5.0, ge=0.0),
) -> str:
    return f"{required_param}: {optional_param}"


def oai_annotated_descriptions(
    a: Annotated[int, "First number to add"],
    b: Annotated[int, "Second number to add"],
) -> int:
    return a + b


def oai_docstring_over_annotated(
    a: Annotated[int, "Annotated description for a"],
    b: Annotated[int, "Annotated description for b"],
) -> int:
    """Adds two integers.

    Args:
        a: Docstring provided description.
    """
    return a + b


def oai_field_description_merge(
    param_with_field_desc: int = Field(..., description="Field description"),
    param_with_both: str = Field(default="hello", description="Field description"),
) -> str:
    """
    Function with both field and docstring descriptions.

    Args:
        param_with_field_desc: Docstring description
        param_with_both: Docstring description
    """
    return f"{param_with_field_desc}: {param_with_both}"


def oai_field_description_only(
    param_with_field_desc: int = Field(..., description="Field description only"),
    param_without_desc: str = Field(default="hello"),
) -> str:
    return f"{param_with_field_desc}: {param_without_desc}"


def oai_field_string_constraints(
    name: str = Field(..., min_length=3, max_length=20, pattern=r"^[A-Za-z]+$"),
) -> str:
    return f"Hello, {name}!"


def oai_field_multiple_constraints(
    score: int = Field(..., ge=0, le=100, description="Score from 0 to 100"),
    name: str = Field(default="Unknown", min_length=1, max_length=50),
    factor: float = Field(default=1.0, gt=0.0, description="Positive multiplier"),
) -> str:
    return f"{name} scored {score * factor}"


def oai_annotated_field_required_constraints(
    my_number: Annotated[int, Field(..., gt=10, le=100)],
) -> int:
    return my_number * 2


def oai_annotated_field_optional_with_default(
    required_param: str,
    optional_param: Annotated[float, Field(default=5.0, ge=0.0)],
) -> str:
    return f"{required_param}: {optional_param}"


def oai_annotated_field_string_constraints(
    name: Annotated[str, Field(..., min_length=3, max_length=20, pattern=r"^[A-Za-z]+$")],
) -> str:
    return f"Hello, {name}!"


def oai_annotated_field_multiple_constraints(
    score: Annotated[int, Field(..., ge=0, le=100, description="Score from 0 to 100")],
    name: Annotated[str, Field(default="Unknown", min_length=1, max_length=50)],
    factor: Annotated[float, Field(default=1.0, gt=0.0, description="Positive multiplier")],
) -> str:
    return f"{name} scored {score * factor}"


def oai_missing_blank_line_google(city: str, units: str):
    """Get the weather for a city.
    Args:
        city: The city to get weather for.
        units: Temperature units to use.
    """
    return f"{city} {units}"


def oai_blank_line_google(city: str, units: str):
    """Get the weather for a city.

    Args:
        city: The city to get weather for.
        units: Temperature units to use.
    """
    return f"{city} {units}"


class _AlwaysEqual:
    """A default whose ``==`` answers True for anything, sentinels included."""

    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 0


_ALWAYS_EQUAL = _AlwaysEqual()


def oai_always_equal_default(x: int, value: Any = _ALWAYS_EQUAL) -> str:
    return type(value).__name__


async def pai_google_style_docstring(foo: int, bar: str) -> str:
    """Do foobar stuff, a lot.

    Args:
        foo: The foo thing.
        bar: The bar thing.
    """
    return f"{foo} {bar}"


def pai_sphinx_style_docstring(foo: int, /) -> str:
    """Sphinx style docstring.

    :param foo: The foo thing.
    """
    return str(foo)


def pai_numpy_style_docstring(*, foo: int, bar: str) -> str:
    """Numpy style docstring.

    Parameters
    ----------
    foo : int
        The foo thing.
    bar : str
        The bar thing.
    """
    return f"{foo} {bar}"


def pai_google_style_with_returns(x: int) -> str:
    """A function that does something.

    Args:
        x: The input value.

    Returns:
        str: The result as a string.
    """
    return str(x)


def pai_sphinx_style_with_returns(x: int) -> str:
    """A sphinx function with returns.

    :param x: The input value.
    :rtype: str
    :return: The result as a string with type.
    """
    return str(x)


def pai_numpy_style_with_returns(x: int) -> str:
    """A numpy function with returns.

    Parameters
    ----------
    x : int
        The input value.

    Returns
    -------
    str
        The result as a string with type.
    """
    return str(x)


def pai_only_returns_type() -> str:
    """

    Returns:
        str: The result as a string.
    """
    return "foo"


async def pai_google_style_docstring_no_body(
    foo: int, bar: Annotated[str, Field(description="from fields")]
) -> str:
    """
    Args:
        foo: The foo thing.
        bar: The bar thing.
    """
    return f"{foo} {bar}"


class PaiFoo(BaseModel):
    x: int
    y: str


def pai_takes_just_model(model: PaiFoo) -> str:
    return f"{model.x} {model.y}"


def pai_takes_model_and_int(model: PaiFoo, z: int) -> str:
    return f"{model.x} {model.y} {z}"


def pai_my_tool_plain(*, a: int = 1, b: int) -> int:
    return a * b


def pai_with_json_schema(x: Annotated[str | None, WithJsonSchema({"type": "string"})] = None):
    return x


class PaiData(TypedDict):
    a: int
    """The first parameter"""
    b: int
    """The second parameter"""


def pai_get_score(data: PaiData) -> int:
    return data["a"] + data["b"]


# -- schema cases ------------------------------------------------------------------------

_INT, _STR = {"type": "integer"}, {"type": "string"}


def _p(kind: str | list[str] | None = None, description: str | None = None,
       **more: Any) -> dict[str, Any]:
    """An expected property: its type, description and any other keywords."""
    prop: dict[str, Any] = {} if kind is None else {"type": kind}
    if description is not None:
        prop["description"] = description
    prop.update(more)
    return prop


_OUTER_MODEL = _p("object", properties={
    "inner": _p("object", properties={"a": _INT, "b": _STR}, required=["a", "b"]),
    "foo": _p("object", properties={"a": _INT, "b": _STR}, required=["a", "b"]),
}, required=["inner", "foo"])
_PAI_FOO = _p("object", properties={"x": _INT, "y": _STR}, required=["x", "y"])

CASES: list[Any] = [
    # (function, tool description, properties by name, required)
    pytest.param(hf_simple_function, "Test function", {"x": _p("integer", "The input")}, ["x"],
                 id="hf-simple_function"),
    pytest.param(hf_no_arguments, "Test function", {}, [], id="hf-no_arguments"),
    pytest.param(hf_bare_container_types, "Test function", {
        "x": _p("array", "The first input"), "y": _p("array", "The second input"),
        "z": _p("object", "The third input")}, ["x", "y", "z"], id="hf-bare_container_types"),
    pytest.param(hf_union, "Test function", {"x": _p(["integer", "number"], "The input")}, ["x"],
                 id="hf-union"),
    pytest.param(hf_union_with_duplicate_types, "Test function", {
        "x": _p("array", "The first input"),
        "y": _p(["array", "object"], "The second input", nullable=True, default=None)},
        ["x"], id="hf-union_with_duplicate_types"),
    pytest.param(hf_optional, "Test function", {"x": _p("integer", "The input", nullable=True)},
                 ["x"], id="hf-optional"),
    pytest.param(hf_default_arg, "Test function", {"x": _p("integer", "The input", default=42)},
                 [], id="hf-default_arg"),
    pytest.param(hf_nested_list, "Test function", {"x": _p(
        "array", "The input", items=_p("array", items=_p(["integer", "string"])))}, ["x"],
        id="hf-nested_list"),
    pytest.param(hf_multiple_arguments, "Test function", {
        "x": _p("integer", "The input"), "y": _p("string", "Also the input")}, ["x", "y"],
        id="hf-multiple_arguments"),
    pytest.param(hf_multiple_complex_arguments, "Test function", {
        "x": _p("array", "The input", items=_p(["integer", "number"])),
        "y": _p(["integer", "string"], "Also the input", nullable=True, default=None)},
        ["x"], id="hf-multiple_complex_arguments"),
    pytest.param(hf_union_of_complex_types, "Test function", {
        "x": _p(None, "The input", anyOf=[_STR, _p("array", items=_STR)]),
        "y": _p(None, "Also the input", nullable=True, default=None,
                anyOf=[_p("string", enum=["a", "b"]), _INT])}, ["x"],
        id="hf-union_of_complex_types"),
    # transformers refuses a function without a docstring or a parameter's entry; here the
    # description is empty and the parameter has none (design)
    pytest.param(hf_missing_docstring, "", {"x": _INT}, ["x"], id="hf-missing_docstring"),
    pytest.param(hf_missing_param_docstring, "Test function", {"x": _INT}, ["x"],
                 id="hf-missing_param_docstring"),
    # transformers refuses a parameter without a type hint; here it takes any value (design)
    pytest.param(hf_missing_type_hint, "Test function", {"x": _p(None, "The input")}, ["x"],
                 id="hf-missing_type_hint"),
    # transformers adds "return": {"type": "integer", "description": "The output"} (style)
    pytest.param(hf_return_value_docstring, "Test function", {"x": _p("integer", "The input")},
                 ["x"], id="hf-return_value_docstring"),
    pytest.param(hf_return_none, "Test function", {"x": _p("integer", "The first input")},
                 ["x"], id="hf-return_none"),
    pytest.param(hf_tuple, "Test function", {"x": _p(
        "array", "The input", prefixItems=[_INT, _STR], minItems=2, maxItems=2)}, ["x"],
        id="hf-tuple"),
    # transformers refuses tuple[int] and tuple[int, ...]; pydantic validates both (design)
    pytest.param(hf_single_element_tuple, "Test function", {"x": _p(
        "array", "The input", prefixItems=[_INT], minItems=1, maxItems=1)}, ["x"],
        id="hf-single_element_tuple"),
    pytest.param(hf_ellipsis_tuple, "Test function", {"x": _p("array", "The input", items=_INT)},
                 ["x"], id="hf-ellipsis_tuple"),
    # transformers turns "(Choices: [...])" into an enum; here the text reaches the model
    # as written (design: an enum comes from Literal or Enum)
    pytest.param(hf_enum_extraction, "Test function", {"temperature_format": _p(
        "string", 'The temperature format to use (Choices: ["celsius", "fahrenheit"])')},
        ["temperature_format"], id="hf-enum_extraction"),
    # transformers also lists the enum's JSON types; the enum alone says it all (style)
    pytest.param(hf_literal, "Test function", {
        "temperature_format": _p("string", "The temperature format to use",
                                 enum=["celsius", "fahrenheit"]),
        "booleanish": _p(None, "A value that can be regarded as boolean",
                         enum=[True, False, 0, 1, "y", "n"], default=False)},
        ["temperature_format"], id="hf-literal"),
    pytest.param(hf_multiline_docstring_with_types, "Test function", {
        "x": _p("integer", "The first input"),
        "y": _p("integer", "The second input. This is a longer description that spans "
                           "multiple lines with indentation and stuff.")}, ["x", "y"],
        id="hf-multiline_docstring_with_types"),
    pytest.param(hf_everything_all_at_once,
                 "Test function with multiple args, and docstring args that we have to strip "
                 "out.", {
                     "x": _p("string", "The first input. It's got a big multiline description "
                                       'and also contains (choices: ["a", "b", "c"])'),
                     "y": _p("array", "The second input. It's a big list with a single-line "
                                      "description.", items=_p(["integer", "string"]),
                             nullable=True),
                     "z": _p("array", "The third input. It's some kind of tuple with a default "
                                      "arg.", prefixItems=[_p(["integer", "string"]), _STR],
                             minItems=2, maxItems=2, default=[42, "hello"])},
                 ["x", "y"], id="hf-everything_all_at_once"),
    pytest.param(oai_no_args_function, "This function has no args.", {}, [],
                 id="oai-no_args_function"),
    pytest.param(oai_simple_function, "", {
        "a": _p("integer", "The first argument"),
        "b": _p("integer", "The second argument", default=5)}, ["a"], id="oai-simple_function"),
    pytest.param(oai_complex_args_function, "", {"model": _OUTER_MODEL}, ["model"],
                 id="oai-nested_data_function"),
    pytest.param(oai_complex_args_and_docs_function,
                 "This function takes a model and a flag, and returns a string.", {
                     "model": {**_OUTER_MODEL,
                               "description": "A model with an inner and foo field"},
                     "some_flag": _p("integer", "An optional flag with a default of 0", default=0)},
                 ["model"], id="oai-complex_args_and_docs_function"),
    # the OpenAI SDK keeps the enum in $defs behind a $ref; here it is inlined (style)
    pytest.param(oai_enum_and_literal_function, "", {
        "a": _p("string", enum=["foo", "bar", "baz"]),
        "b": _p("string", enum=["a", "b", "c"])}, ["a", "b"], id="oai-enum_and_literal"),
    # the OpenAI SDK refuses a Mapping in strict mode; here it is an object of integers
    pytest.param(oai_mapping, "", {"test_one": _p("object", additionalProperties=_INT)},
                 ["test_one"], id="oai-mapping"),
    pytest.param(oai_field_required_constraints, "", {
        "my_number": _p("integer", exclusiveMinimum=10, maximum=100)}, ["my_number"],
        id="oai-field_required_constraints"),
    pytest.param(oai_field_optional_with_default, "", {
        "required_param": _STR, "optional_param": _p("number", minimum=0.0, default=5.0)},
        ["required_param"], id="oai-field_optional_with_default"),
    pytest.param(oai_annotated_descriptions, "", {
        "a": _p("integer", "First number to add"), "b": _p("integer", "Second number to add")},
        ["a", "b"], id="oai-annotated_descriptions_without_docstring"),
    pytest.param(oai_docstring_over_annotated, "Adds two integers.", {
        "a": _p("integer", "Docstring provided description."),
        "b": _p("integer", "Annotated description for b")}, ["a", "b"],
        id="oai-docstring_over_annotated_metadata"),
    # the peers disagree: the OpenAI SDK keeps the docstring's "Docstring description";
    # Pydantic AI (pai-docstring_google_no_body) and miniagent keep the Field's
    pytest.param(oai_field_description_merge,
                 "Function with both field and docstring descriptions.", {
                     "param_with_field_desc": _p("integer", "Field description"),
                     "param_with_both": _p("string", "Field description", default="hello")},
                 ["param_with_field_desc"], id="oai-field_description_merge"),
    pytest.param(oai_field_description_only, "", {
        "param_with_field_desc": _p("integer", "Field description only"),
        "param_without_desc": _p("string", default="hello")}, ["param_with_field_desc"],
        id="oai-field_description_only"),
    pytest.param(oai_field_string_constraints, "", {"name": _p(
        "string", minLength=3, maxLength=20, pattern=r"^[A-Za-z]+$")}, ["name"],
        id="oai-field_string_constraints"),
    pytest.param(oai_field_multiple_constraints, "", {
        "score": _p("integer", "Score from 0 to 100", minimum=0, maximum=100),
        "name": _p("string", minLength=1, maxLength=50, default="Unknown"),
        "factor": _p("number", "Positive multiplier", exclusiveMinimum=0.0, default=1.0)},
        ["score"], id="oai-field_multiple_constraints"),
    pytest.param(oai_annotated_field_required_constraints, "", {
        "my_number": _p("integer", exclusiveMinimum=10, maximum=100)}, ["my_number"],
        id="oai-annotated_field_required_constraints"),
    pytest.param(oai_annotated_field_optional_with_default, "", {
        "required_param": _STR, "optional_param": _p("number", minimum=0.0, default=5.0)},
        ["required_param"], id="oai-annotated_field_optional_with_default"),
    pytest.param(oai_annotated_field_string_constraints, "", {"name": _p(
        "string", minLength=3, maxLength=20, pattern=r"^[A-Za-z]+$")}, ["name"],
        id="oai-annotated_field_string_constraints"),
    pytest.param(oai_annotated_field_multiple_constraints, "", {
        "score": _p("integer", "Score from 0 to 100", minimum=0, maximum=100),
        "name": _p("string", minLength=1, maxLength=50, default="Unknown"),
        "factor": _p("number", "Positive multiplier", exclusiveMinimum=0.0, default=1.0)},
        ["score"], id="oai-annotated_field_multiple_constraints"),
    pytest.param(oai_missing_blank_line_google, "Get the weather for a city.", {
        "city": _p("string", "The city to get weather for."),
        "units": _p("string", "Temperature units to use.")}, ["city", "units"],
        id="oai-google_docstring_missing_blank_line_before_args"),
    pytest.param(oai_blank_line_google, "Get the weather for a city.", {
        "city": _p("string", "The city to get weather for."),
        "units": _p("string", "Temperature units to use.")}, ["city", "units"],
        id="oai-google_docstring_blank_line_form"),
    pytest.param(pai_google_style_docstring, "Do foobar stuff, a lot.", {
        "foo": _p("integer", "The foo thing."), "bar": _p("string", "The bar thing.")},
        ["foo", "bar"], id="pai-docstring_google"),
    pytest.param(pai_sphinx_style_docstring, "Sphinx style docstring.", {
        "foo": _p("integer", "The foo thing.")}, ["foo"], id="pai-docstring_sphinx"),
    pytest.param(pai_numpy_style_docstring, "Numpy style docstring.", {
        "foo": _p("integer", "The foo thing."), "bar": _p("string", "The bar thing.")},
        ["foo", "bar"], id="pai-docstring_numpy"),
    # Pydantic AI adds <returns>...</returns> to the description (design: not here)
    pytest.param(pai_google_style_with_returns, "A function that does something.", {
        "x": _p("integer", "The input value.")}, ["x"], id="pai-google_style_with_returns"),
    pytest.param(pai_sphinx_style_with_returns, "A sphinx function with returns.", {
        "x": _p("integer", "The input value.")}, ["x"], id="pai-sphinx_style_with_returns"),
    pytest.param(pai_numpy_style_with_returns, "A numpy function with returns.", {
        "x": _p("integer", "The input value.")}, ["x"], id="pai-numpy_style_with_returns"),
    pytest.param(pai_only_returns_type, "", {}, [], id="pai-only_returns_type"),
    pytest.param(pai_google_style_docstring_no_body, "", {
        "foo": _p("integer", "The foo thing."), "bar": _p("string", "from fields")},
        ["foo", "bar"], id="pai-docstring_google_no_body"),
    # Pydantic AI makes a lone model parameter the whole arguments object; here it stays
    # under its name (design: the call shape follows the signature)
    pytest.param(pai_takes_just_model, "", {"model": _PAI_FOO}, ["model"],
                 id="pai-takes_just_model"),
    pytest.param(pai_takes_model_and_int, "", {"model": _PAI_FOO, "z": _INT}, ["model", "z"],
                 id="pai-takes_model_and_int"),
    pytest.param(pai_my_tool_plain, "", {"a": _p("integer", default=1), "b": _INT}, ["b"],
                 id="pai-json_schema_required_parameters"),
    # Pydantic AI's version also takes **kwargs, which miniagent refuses (design)
    pytest.param(pai_with_json_schema, "", {"x": _p("string", default=None)}, [],
                 id="pai-schema_generator"),
    # a TypedDict given directly inherits the arguments model's extra="forbid" (style)
    pytest.param(pai_get_score, "", {"data": _p("object", properties={
        "a": _p("integer", "The first parameter"), "b": _p("integer", "The second parameter")},
        required=["a", "b"], additionalProperties=False)}, ["data"],
        id="pai-tool_parameters_with_attribute_docstrings"),
]


@pytest.mark.parametrize(("fn", "description", "properties", "required"), CASES)
def test_peer_schema_case(fn: Any, description: str, properties: dict[str, Any],
                          required: list[str]) -> None:
    made = tool(fn)
    params = made.parameters
    assert made.description == description
    assert params["type"] == "object"
    assert params.get("additionalProperties") is False
    assert params["required"] == required
    assert made.checker.required == tuple(required)  # what the executor asks for first
    assert _meaning(params["properties"]) == properties
    json.dumps(params)  # what is sent to a server


def test_missing_blank_line_before_args_reads_as_the_blank_line_form() -> None:
    # OpenAI SDK: test_google_docstring_missing_blank_line_matches_blank_line_form
    fixed, control = tool(oai_missing_blank_line_google), tool(oai_blank_line_google)
    assert fixed.description == control.description
    assert fixed.parameters["properties"] == control.parameters["properties"]


# -- *args and **kwargs: refused (the peers map them to a list or an object) ---------------


def _varargs(x: int, *numbers: float, flag: bool = False, **kwargs: Any) -> Any:
    return x, numbers, flag, kwargs


def _var_positional(*args: tuple[int, ...]) -> int:
    return 0


def _var_keyword(**kwargs: dict[str, int]) -> Any:
    return kwargs


def _unknown_docstring(**kwargs: int) -> str:
    """Unknown style docstring."""
    return str(kwargs)


def _positional_or_keyword_with_var_args(r0: int, *values: int) -> Any:
    return r0, values


@pytest.mark.parametrize("fn", [
    pytest.param(_varargs, id="oai-varargs_function"),
    pytest.param(_var_positional, id="oai-var_positional_tuple_annotation"),
    pytest.param(_var_keyword, id="oai-var_keyword_dict_annotation"),
    pytest.param(_unknown_docstring, id="pai-docstring_unknown"),
    pytest.param(_positional_or_keyword_with_var_args,
                 id="pai-positional_or_keyword_with_var_args"),
])
def test_star_parameters_are_refused_with_what_to_use(fn: Any) -> None:
    with pytest.raises(ToolDefinitionError, match=r"use a (list|dict) parameter"):
        tool(fn)


# -- calls: the same model validates what the schema says ---------------------------------


async def test_field_constraints_hold_when_called() -> None:
    # OpenAI SDK: test_function_with_field_required_constraints
    doubled = tool(oai_field_required_constraints)
    assert (await _call(doubled, {"my_number": 50})).output == "100"
    too_small = await _call(doubled, {"my_number": 5})
    assert too_small.is_error and "greater than 10" in too_small.output
    assert "my_number" in too_small.output
    too_large = await _call(doubled, {"my_number": 150})
    assert too_large.is_error and "less than or equal to 100" in too_large.output
    missing = await _call(doubled, {})
    assert missing.is_error
    assert "Missing required argument(s): my_number" in missing.output
    assert "FieldInfo" not in missing.output


@pytest.mark.parametrize("fn", [oai_field_optional_with_default,
                                oai_annotated_field_optional_with_default])
async def test_field_default_is_the_value_passed(fn: Any) -> None:
    # OpenAI SDK: test_function_with_field_optional_with_default (and its Annotated twin)
    made = tool(fn)
    assert (await _call(made, {"required_param": "test"})).output == "test: 5.0"
    assert (await _call(made, {"required_param": "test", "optional_param": 10.5})).output == (
        "test: 10.5")
    negative = await _call(made, {"required_param": "test", "optional_param": -1.0})
    assert negative.is_error and "greater than or equal to 0" in negative.output


@pytest.mark.parametrize("fn", [oai_field_string_constraints,
                                oai_annotated_field_string_constraints])
@pytest.mark.parametrize(("name", "problem"), [
    ("Al", "at least 3 characters"), ("A" * 25, "at most 20 characters"),
    ("Alice123", "should match pattern"),
])
async def test_string_constraints_hold_when_called(fn: Any, name: str, problem: str) -> None:
    # OpenAI SDK: test_function_with_field_string_constraints (and its Annotated twin)
    made = tool(fn)
    assert (await _call(made, {"name": "Alice"})).output == "Hello, Alice!"
    refused = await _call(made, {"name": name})
    assert refused.is_error and problem in refused.output


@pytest.mark.parametrize("fn", [oai_field_multiple_constraints,
                                oai_annotated_field_multiple_constraints])
async def test_several_field_constraints_hold_when_called(fn: Any) -> None:
    # OpenAI SDK: test_function_with_field_multiple_constraints (and its Annotated twin)
    made = tool(fn)
    assert (await _call(made, {"score": 85})).output == "Unknown scored 85.0"
    assert (await _call(made, {"score": 90, "name": "Alice", "factor": 1.5})).output == (
        "Alice scored 135.0")
    for wrong in ({"score": 150}, {"score": 50, "name": ""}, {"score": 50, "factor": 0.0}):
        assert (await _call(made, wrong)).is_error, wrong


async def test_a_field_in_annotated_and_a_default_together() -> None:
    def scaled(x: Annotated[int, Field(ge=0, description="How many")] = 3) -> int:
        return x * 2

    made = tool(scaled)
    assert _meaning(made.parameters["properties"]) == {
        "x": _p("integer", "How many", minimum=0, default=3)}
    assert (await _call(made, {})).output == "6"
    assert (await _call(made, {"x": -1})).is_error


def test_an_alias_in_a_field_is_refused() -> None:
    def renamed(n: int = Field(alias="count")) -> int:
        return n

    with pytest.raises(ToolDefinitionError, match="'n' sets an alias in Field"):
        tool(renamed)


async def test_peer_call_cases() -> None:
    # OpenAI SDK: test_simple_function, test_nested_data_function,
    # test_complex_args_and_docs_function, test_enum_and_literal_function;
    # Pydantic AI: test_call_tool_without_unrequired_parameters
    model = {"inner": {"a": 1, "b": "hello"}, "foo": {"a": 2, "b": "world"}}
    cases: list[tuple[Any, dict[str, Any], str]] = [
        (oai_simple_function, {"a": 3}, "8"),
        (oai_simple_function, {"a": 3, "b": 10}, "13"),
        (oai_complex_args_function, {"model": model}, "1, hello, 2, world"),
        (oai_complex_args_and_docs_function, {"model": model}, "1, hello, 2, world, 0"),
        (oai_enum_and_literal_function, {"a": "foo", "b": "a"}, "foo a"),
        (pai_my_tool_plain, {"b": 17}, "17"),  # a defaults to 1 here (3 in the peer's call test)
        (pai_my_tool_plain, {"a": 4, "b": 17}, "68"),
    ]
    for fn, arguments, expected in cases:
        observation = await _call(tool(fn), arguments)
        assert (observation.is_error, observation.output) == (False, expected), fn.__name__
    for fn, wrong in [(oai_simple_function, {"a": "not an integer"}),
                      (oai_enum_and_literal_function, {"a": "not an enum value", "b": "a"}),
                      (oai_enum_and_literal_function, {"a": "foo", "b": "d"})]:
        assert (await _call(tool(fn), wrong)).is_error, wrong


def test_default_with_odd_equality_stays_optional() -> None:
    # OpenAI SDK: test_default_equality_is_not_used_for_sentinel_comparison
    with pytest.warns(UserWarning, match="not JSON serializable"):
        made = tool(oai_always_equal_default)
    assert made.parameters["required"] == ["x"]
    validated = made.checker.validate({"x": 1})
    assert isinstance(validated, dict) and validated["value"] is _ALWAYS_EQUAL


# -- methods: the receiver is never an argument ------------------------------------------


class HfTools:
    def instance_fn(self, x: int):
        """
        Test function

        Args:
            x: The input
        """
        return x

    @staticmethod
    def static_fn(x: int):
        """
        Test function

        Args:
            x: The input
        """
        return x

    @classmethod
    def class_fn(cls, x: int):
        """
        Test function

        Args:
            x: The input
        """
        return x


class OaiMyClass:
    def foo(self, a: int, b: int = 5):
        return a + b

    @classmethod
    def bar(cls, a: int, b: int = 5):
        return a + b

    @staticmethod
    def baz(a: int, b: int = 5):
        return a + b


@pytest.mark.parametrize("get", [
    pytest.param(lambda: HfTools.instance_fn, id="hf-instance_method-unbound"),
    pytest.param(lambda: HfTools().instance_fn, id="hf-instance_method-bound"),
    pytest.param(lambda: HfTools.static_fn, id="hf-static_method"),
    pytest.param(lambda: HfTools().static_fn, id="hf-static_method-instance"),
    pytest.param(lambda: HfTools.class_fn, id="hf-class_method"),
    pytest.param(lambda: HfTools().class_fn, id="hf-class_method-instance"),
])
def test_peer_method_schema(get: Any) -> None:
    made = tool(get())
    assert made.name == get().__name__
    assert made.description == "Test function"
    assert made.parameters["properties"] == {"x": {"type": "integer", "description": "The input"}}
    assert made.parameters["required"] == ["x"]


@pytest.mark.parametrize("get", [
    pytest.param(lambda: OaiMyClass().foo, id="oai-class_based-instance_method"),
    pytest.param(lambda: OaiMyClass.bar, id="oai-class_based-class_method"),
    pytest.param(lambda: OaiMyClass.baz, id="oai-class_based-static_method"),
])
async def test_peer_method_call(get: Any) -> None:
    made = tool(get())
    assert _meaning(made.parameters["properties"]) == {"a": _INT, "b": _p("integer", default=5)}
    assert (await _call(made, {"a": 1, "b": 2})).output == "3"


def test_a_method_taken_from_its_class_cannot_be_registered() -> None:
    # transformers accepts HfTools.instance_fn for a schema; to run, a tool needs its instance
    with pytest.raises(ToolDefinitionError, match=r"needs its 'self'.*from an instance"):
        ToolRegistry([tool(HfTools.instance_fn)])
