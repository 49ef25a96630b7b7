"""Typed results, the facade's part: an output type made a JSON Schema, and back.

``Agent(output_type=...)`` and ``run(..., output_type=...)`` take a pydantic model, a
dataclass, a TypedDict (any type pydantic's ``TypeAdapter`` takes) or a JSON Schema given as a
dict. :class:`OutputType` turns it into a JSON Schema once: that schema is all a run carries
(the spec, a session's turn, a Temporal workflow's input), and the step logic checks the answer
against it (:mod:`miniagent.core.runtime.output`). At the end the facade turns the checked JSON
into the user's type (:meth:`OutputType.instance`), so ``result.output`` is, e.g., an
``Invoice``; with a schema dict it is the JSON value itself.

Example:
    >>> from pydantic import BaseModel
    >>> class City(BaseModel):
    ...     name: str
    ...     population: int
    >>> typed = OutputType.of(City)
    >>> typed.schema["required"]
    ['name', 'population']
    >>> typed.instance({"name": "Lyon", "population": 522000})
    City(name='Lyon', population=522000)
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from miniagent.core.errors import UserError
from miniagent.core.types import RunResult

if TYPE_CHECKING:
    from miniagent.core.runtime.events import Event
    from miniagent.core.runtime.inprocess import Subscriber

__all__ = ["OutputType", "typed_events", "typed_result", "typed_subscriber"]


@dataclass(frozen=True)
class OutputType:
    """An output type and its JSON Schema (``kind`` None: the schema was given as a dict)."""

    schema: dict[str, Any]
    kind: Any = None

    @classmethod
    def of(cls, output_type: Any) -> OutputType:
        """The JSON Schema of ``output_type``.

        Raises:
            UserError: a type pydantic cannot describe, a dict that is no valid JSON Schema, or
                a schema whose checking could cost without bound (too deep, too long, or too
                large with its ``$ref`` links expanded: the bounds of a tool's schema).
        """
        if isinstance(output_type, OutputType):
            return output_type
        if isinstance(output_type, dict):
            return cls(schema=_checked_schema(output_type))
        from pydantic import PydanticUserError, TypeAdapter

        try:
            adapter = TypeAdapter(output_type)
            schema = adapter.json_schema()
        except (PydanticUserError, TypeError, ValueError) as exc:
            raise UserError(f"output_type {output_type!r} has no JSON Schema: give a pydantic "
                            f"model, a dataclass, a TypedDict or a JSON Schema dict "
                            f"({type(exc).__name__}: {str(exc).splitlines()[0]})") from None
        return cls(schema=_bounded(schema), kind=output_type)

    def instance(self, value: Any) -> Any:
        """``value`` (JSON that fits the schema) as the output type."""
        if self.kind is None:
            return value
        from pydantic import TypeAdapter

        return TypeAdapter(self.kind).validate_python(value)


def _bounded(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema``, refused where the grammar or the validator could spend without bound on it
    (checked before any walk of it, :mod:`jsonschema`'s own included)."""
    from miniagent.core.tools.schema_cost import schema_cost_problem

    problem = schema_cost_problem(schema)
    if problem is not None:
        raise UserError(f"output_type: its schema {problem}")
    return schema


def _checked_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` if it is a valid JSON Schema within the cost bounds."""
    _bounded(schema)
    import jsonschema
    from jsonschema.validators import validator_for

    try:
        validator_for(schema, default=jsonschema.Draft202012Validator).check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path) or "(top level)"
        raise UserError(f"output_type is not a valid JSON Schema: at {where}: "
                        f"{exc.message}") from None
    return dict(schema)


def typed_result(result: RunResult, typed: OutputType | None) -> RunResult:
    """``result`` with ``output`` as ``typed``'s type, where the run gave one (the step logic
    left its JSON value; a result read back from a session, its final answer's)."""
    if typed is None or result.status != "completed" or result.final_answer is None:
        return result
    value = result.output
    if value is None:
        from miniagent.core.runtime.output import answer_of

        value, problem = answer_of(result.final_answer, typed.schema)
        if problem is not None:
            return result
    from pydantic import ValidationError

    try:
        return dataclasses.replace(result, output=typed.instance(value))
    except ValidationError:  # a turn typed otherwise (resumed by an agent of another type)
        return dataclasses.replace(result, output=value)


def typed_events(events: AsyncIterator[Event], typed: OutputType | None
                 ) -> AsyncIterator[Event]:
    """``events`` of a run, its own ``RunFinished`` (not a sub-agent's) with ``output`` as
    ``typed``'s type (``events`` itself without a type); leaving early closes ``events`` (which
    cancels the run)."""
    return events if typed is None else _typed_events(events, typed)


async def _typed_events(events: AsyncIterator[Event], typed: OutputType
                        ) -> AsyncIterator[Event]:
    from miniagent.core.runtime.events import RunStarted

    own: str | None = None
    try:
        async for event in events:
            if own is None and isinstance(event, RunStarted):
                own = event.session_id
            yield _typed_event(event, typed, (own, ""))
    finally:
        close = getattr(events, "aclose", None)  # a generator's: it cancels the run
        if close is not None:
            await close()


def typed_subscriber(on_event: Subscriber | None, typed: OutputType | None, session_id: str
                     ) -> Subscriber | None:
    """``on_event``, given the ``RunFinished`` of session ``session_id`` (not a sub-agent's)
    with ``output`` as ``typed``'s type, as the run's caller gets it (the step logic, which
    knows only the schema, announces the JSON value)."""
    if on_event is None or typed is None:
        return on_event
    deliver = on_event

    def typed_delivery(event: Event) -> None:
        deliver(_typed_event(event, typed, (session_id,)))

    return typed_delivery


def _typed_event(event: Event, typed: OutputType, own: tuple[str | None, ...]) -> Event:
    """``event``, a ``RunFinished`` of a session in ``own`` with its output typed."""
    from miniagent.core.runtime.events import RunFinished

    if isinstance(event, RunFinished) and event.session_id in own:
        return dataclasses.replace(event, result=typed_result(event.result, typed))
    return event
