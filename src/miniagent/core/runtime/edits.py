"""Approval with edits: a person approves a waiting call with other arguments than the model's.

The call's record keeps both: ``call`` as the model asked for it, ``edited_arguments`` as the
person wrote them. An edit is checked before anything is decided (:func:`check_edit`) against
the JSON Schema recorded on the call when it was put to a person (``CallRecord.parameters``,
:func:`parameters_of`), with :mod:`jsonschema` as the schema is written (required names,
unknown names where the schema closes the object, types: a person's JSON is not coerced the
lax way a model's arguments are). So a store, the inbox and a Temporal workflow check an edit
the same way, none of them with the tool at hand. The tool then runs with the person's
arguments (:func:`call_to_run`), and the model's observation begins with a note that says so
(:func:`with_edit_note`).

This module is part of the step logic: it does no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from miniagent.core.errors import DecisionError
from miniagent.core.types import CallRecord, ToolCall, ToolLike, replaced

__all__ = ["call_to_run", "check_edit", "edit_note", "parameters_of", "with_edit_note"]

_LISTED = 5
"""The most problems a refusal lists."""


def parameters_of(tools: Sequence[ToolLike], name: str) -> dict[str, Any] | None:
    """The JSON Schema of the arguments of the tool ``name`` among ``tools`` (None: unknown)."""
    for tool in tools:
        if tool.name == name:
            return dict(tool.parameters)
    return None


def check_edit(record: CallRecord, arguments: Any) -> dict[str, Any] | None:
    """The person's ``arguments`` for the waiting call ``record``, as they are to be recorded;
    None when they are the model's own (then it is a plain approval).

    Raises:
        DecisionError: they are not an object, the call waits for a sub-run (whose own calls
            are edited in its session), no schema was recorded for it, or the schema refuses
            them (the message lists what is wrong).
    """
    call_id, name = record.call.id, record.call.name
    if not isinstance(arguments, dict):
        raise DecisionError(f"the arguments for call {call_id} must be a JSON object, not "
                            f"{type(arguments).__name__}")
    if arguments == record.call.arguments:
        return None
    sub = record.observation.sub_run if record.observation is not None else None
    if sub is not None:
        raise DecisionError(f"call {call_id} waits for calls of the agent {sub.agent!r}: its "
                            "arguments cannot be edited here; approve or deny it as it is")
    if record.parameters is None:
        raise DecisionError(f"call {call_id} has no recorded schema for the arguments of "
                            f"{name!r} (it was saved by an older miniagent): approve it as it "
                            "is, or deny it")
    problems = _problems(record.parameters, arguments)
    if problems:
        raise DecisionError(f"the edited arguments for call {call_id} ({name!r}) do not fit "
                            f"its schema, nothing was decided: {problems}")
    return dict(arguments)


def _problems(schema: dict[str, Any], arguments: dict[str, Any]) -> str:
    """What is wrong with ``arguments`` for ``schema``, in words ("" when nothing is)."""
    import jsonschema  # loaded by the first edit: ``import miniagent`` does not load it
    from jsonschema.validators import validator_for

    try:
        cls = validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        errors = list(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(arguments))
    except Exception as exc:  # an invalid or damaged schema (it was read from a session)
        return f"the recorded schema cannot be checked ({type(exc).__name__})"
    found = [f"{'.'.join(str(p) for p in e.absolute_path) or 'arguments'}: "
             f"{_shorten(e.message)}" for e in errors]
    more = f"; and {len(found) - _LISTED} more" if len(found) > _LISTED else ""
    return "; ".join(found[:_LISTED]) + more


def _shorten(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def call_to_run(record: CallRecord) -> ToolCall:
    """The call as it runs: the model's, or with the person's arguments."""
    edited = record.edited_arguments
    if edited is None:
        return record.call
    return replaced(record.call, arguments=dict(edited), arguments_error=None,
                    raw_arguments=json.dumps(edited, ensure_ascii=False))


def edit_note(record: CallRecord) -> str:
    """What the model is told before the result of a call a person edited ("" for others)."""
    if record.edited_arguments is None:
        return ""
    edited = json.dumps(record.edited_arguments, ensure_ascii=False)
    return (f"[A person approved this call with changed arguments; it ran with {edited}, "
            "not with the arguments you gave.]\n")


def with_edit_note(record: CallRecord, output: str) -> str:
    """``output`` of the call ``record``, after the note of its edit if it was edited."""
    return edit_note(record) + output
