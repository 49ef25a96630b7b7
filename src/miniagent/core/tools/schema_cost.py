"""A bound on what a tool's JSON Schema may cost, checked once when the tool is defined.

Validating arguments (:mod:`jsonschema`), coercing them (:mod:`miniagent.core.tools.coercion`) and
building the ReAct grammar (:mod:`miniagent.core.protocol.grammar`) all walk a schema through
its ``$ref`` links, so their cost grows with the schema *expanded*: a 1.7 KB schema whose
definitions each refer twice to the next one expands to millions of nodes, and a list of a
million ``enum`` values is large by itself. :func:`check_schema_cost` measures the expanded
size in one linear pass (each reference's size is computed once and reused; a reference back
into its own expansion counts once) and refuses, with a message naming the tool and the limit,
a schema nested deeper than :data:`MAX_SCHEMA_DEPTH`, longer than :data:`MAX_SCHEMA_BYTES` as
JSON, or larger than :data:`MAX_EXPANDED_NODES` expanded. Everything past that point is then
bounded by those figures.
"""

from __future__ import annotations

import json
from typing import Any

from miniagent._internal.jsonscan import deeper_than
from miniagent.core.errors import ToolDefinitionError

__all__ = ["MAX_EXPANDED_NODES", "MAX_SCHEMA_BYTES", "MAX_SCHEMA_DEPTH", "check_schema_cost",
           "schema_cost_problem"]

MAX_SCHEMA_DEPTH = 64
"""The deepest nesting of a schema's JSON (real tool schemas rarely pass 10)."""
MAX_SCHEMA_BYTES = 512 * 1024
"""The longest schema as JSON text."""
MAX_EXPANDED_NODES = 20_000
"""The most values a schema may hold once every ``$ref`` is expanded (enum members included;
real schemas, BFCL's included, stay under a few thousand)."""


class _TooLarge(Exception):
    pass


def check_schema_cost(tool_name: str, schema: Any) -> None:
    """Refuse a schema whose checking could cost without bound (see the module docstring).

    Raises:
        ToolDefinitionError: the schema is too deep, too long, or too large expanded.
    """
    problem = schema_cost_problem(schema)
    if problem is not None:
        raise ToolDefinitionError(f"Tool {tool_name!r}: its schema {problem}")


def schema_cost_problem(schema: Any) -> str | None:
    """Why checking ``schema`` could cost without bound, worded to follow "its schema"; None
    when it is within every limit (a typed result's schema is bounded by it too)."""
    if deeper_than(schema, MAX_SCHEMA_DEPTH):
        return f"nests deeper than {MAX_SCHEMA_DEPTH} levels."
    try:
        size = len(json.dumps(schema, ensure_ascii=False, default=repr))
    except (TypeError, ValueError):
        size = MAX_SCHEMA_BYTES + 1
    if size > MAX_SCHEMA_BYTES:
        return f"is {size:,} characters as JSON, over the limit of {MAX_SCHEMA_BYTES:,}."
    try:
        expanded_size(schema, limit=MAX_EXPANDED_NODES)
    except _TooLarge:
        return (f"expands (through its $ref links and enum values) to more than "
                f"{MAX_EXPANDED_NODES:,} values, so checking a value could take without bound; "
                "simplify it (fewer references to references, shorter enums).")
    return None


def expanded_size(root: Any, *, limit: int) -> int:
    """How many values ``root`` holds with every local ``$ref`` expanded (memoised per node,
    iterative); raises _TooLarge past ``limit``."""
    sizes: dict[int, int] = {}
    busy: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        children = _children(node, root)
        if children_done:
            busy.discard(key)
            total = 1 + sum(sizes.get(id(child), 1) for child in children)
            if total > limit:
                raise _TooLarge
            sizes[key] = total
            continue
        if key in busy:
            continue  # a reference back into its own expansion: counted once
        busy.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children
                     if isinstance(child, dict | list) and id(child) not in sizes
                     and id(child) not in busy)
    return sizes.get(id(root), 1)


def _children(node: Any, root: Any) -> list[Any]:
    if isinstance(node, list):
        return node
    if not isinstance(node, dict):
        return []
    children = list(node.values())
    if "$ref" in node:  # rare: the grammar module loads only for a schema with references
        from miniagent.core.protocol.grammar import MISSING, local_ref

        target = local_ref(root, node["$ref"])
        if target is not MISSING:
            children.append(target)
    return children
