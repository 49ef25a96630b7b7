"""Typed events across the Temporal boundary: the workflow keeps them, clients read them back.

The session workflow emits the step logic's events into a bounded log (the latest
``TemporalOptions.event_log``); a client that follows the session asks for what is new with
the ``events`` query and hands the same typed :class:`~miniagent.core.runtime.events.Event` objects
to its subscribers as in process: the CLI's live trace, ``--trace`` JSONL and ``--otlp`` spans
are the same code on both drivers. A record is the event's fields as JSON plus its ``kind``.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from miniagent.core.runtime import events as ev

__all__ = ["EVENT_PAGE", "EventLog", "event_from", "event_record"]

EVENT_PAGE = 200
"""The most events one ``events`` query returns."""


def _kinds() -> dict[str, type[ev.Event]]:
    found: dict[str, type[ev.Event]] = {}
    pending: list[type[ev.Event]] = [ev.Event]
    while pending:
        cls = pending.pop()
        for sub in cls.__subclasses__():
            found[sub.kind] = sub
            pending.append(sub)
    return found


_ADAPTERS: dict[type[ev.Event], Any] = {}


def _adapter(cls: type[ev.Event]) -> Any:
    found = _ADAPTERS.get(cls)
    if found is None:
        from pydantic import TypeAdapter

        found = _ADAPTERS[cls] = TypeAdapter(cls)
    return found


def event_record(event: ev.Event) -> dict[str, Any]:
    """``event`` as plain JSON, with its ``kind``."""
    record: dict[str, Any] = _adapter(type(event)).dump_python(event, mode="json")
    record["kind"] = event.kind
    return record


def event_from(record: dict[str, Any]) -> ev.Event | None:
    """The typed event of a record (None for a kind this miniagent does not know)."""
    cls = _kinds().get(str(record.get("kind")))
    if cls is None:
        return None
    fields = {k: v for k, v in record.items() if k != "kind"}
    event: ev.Event = _adapter(cls).validate_python(fields)
    return event


class EventLog:
    """The latest events of one workflow run, numbered from 0 in emission order."""

    def __init__(self, size: int) -> None:
        self._events: deque[ev.Event] = deque(maxlen=max(1, size))
        self.total = 0
        """How many were ever appended (the index the next one gets)."""

    def append(self, event: ev.Event) -> None:
        self._events.append(event)
        self.total += 1

    def since(self, index: int, limit: int = EVENT_PAGE) -> tuple[int, list[ev.Event]]:
        """``(first index, events)`` from ``index`` on (or from the oldest kept one)."""
        first = self.total - len(self._events)
        start = max(index, first)
        chosen = list(self._events)[start - first:start - first + limit]
        return start, chosen
