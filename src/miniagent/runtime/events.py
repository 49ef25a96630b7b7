"""Events the loop emits, and the bus that hands them to subscribers.

The loop never prints; the CLI (and anything else that wants to watch a run) subscribes::

    agent = Agent(model=..., on_event=lambda e: print(e.kind))

A subscriber that raises is reported through :mod:`logging` and never breaks the run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from miniagent.types import ModelResponse, Observation, ParsedOutput, RunResult, ToolCall

log = logging.getLogger("miniagent")

EventKind = Literal[
    "run_started", "step_started", "model_responded", "tool_started", "tool_finished",
    "run_finished",
]


@dataclass(kw_only=True)
class Event:
    """Something that happened in a run. Fields beyond ``kind`` are set per kind."""

    kind: EventKind
    session_id: str
    step: int = 0
    question: str | None = None
    response: ModelResponse | None = None
    parsed: ParsedOutput | None = None
    elapsed: float = 0.0
    call: ToolCall | None = None
    observation: Observation | None = None
    result: RunResult | None = None


Subscriber = Callable[[Event], None]


class EventBus:
    """Calls every subscriber with every event, in subscription order."""

    def __init__(self, subscribers: list[Subscriber] | None = None) -> None:
        self._subscribers: list[Subscriber] = list(subscribers or [])

    def subscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.append(subscriber)

    def emit(self, event: Event) -> None:
        for subscriber in self._subscribers:
            try:
                subscriber(event)
            except Exception:
                log.exception("event subscriber %r failed on %s", subscriber, event.kind)
