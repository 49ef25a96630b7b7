"""What ``miniagent sessions ...`` needs of the place where sessions live.

Each command is written once against :class:`SessionBackend`; two implementations, one file
each: :class:`~miniagent.cli.store_backend.StoreBackend` (a SQLite store, runs resumed in this
process) and :class:`~miniagent.cli.temporal_backend.TemporalBackend` (a Temporal cluster, runs
followed from here while its workers make them). A backend raises the library's errors
(:class:`~miniagent.core.errors.UserError` and kin); the command turns them into one line.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from miniagent.core.session import AgentSession
from miniagent.core.types import RunResult


@dataclass(frozen=True, kw_only=True)
class Listed:
    """One row of ``sessions list``; what a backend cannot tell is None (and left out of
    the JSON): a cluster counts no steps, a store keeps no start time."""

    session_id: str
    status: str
    steps: int | None = None
    question: str
    updated_at: float | None = None
    started_at: float | None = None
    interrupted: bool | None = None
    """True where the store tells that nothing runs a session saved as running."""

    def to_json(self) -> dict[str, Any]:
        """The row as ``sessions list --json`` prints it."""
        return {name: value for name, value in asdict(self).items() if value is not None}


@dataclass(frozen=True, kw_only=True)
class Decided:
    """What ``approve``/``deny`` did: the calls decided, and what happens next in words
    (``then``), with the command to run next on a line of its own if there is one."""

    session_id: str
    calls: list[str]
    then: str
    command: str | None = None


@dataclass(frozen=True, kw_only=True)
class Forked:
    """What ``fork`` made: the new session, where it came from, its status, and how it goes
    on in words (``then``), with the command to run next on a line of its own."""

    session_id: str
    parent: str
    step: int
    status: str
    then: str
    command: str | None = None

    def to_json(self) -> dict[str, Any]:
        """What ``sessions fork --json`` prints."""
        return {"session_id": self.session_id, "status": self.status,
                "forked_from": {"session_id": self.parent, "step": self.step}}


@dataclass(frozen=True, kw_only=True)
class ResumeOptions:
    """The options of ``sessions resume``. The model options override what a stored session
    recorded; on a cluster the workers' model and tools are used."""

    as_json: bool = False
    detach: bool = False
    verbose: bool = False
    force: bool = False
    observe: dict[str, Any] = field(default_factory=dict)
    """The keyword arguments of :func:`~miniagent.cli.observing.observing`."""
    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    mode: str | None = None
    tools: list[str] | None = None
    mcp_header: list[str] | None = None


class SessionBackend(ABC):
    """Sessions where they live; ``store`` or ``temporal`` names the place in the commands
    printed for a person to copy."""

    store: Path | None = None
    temporal: str | None = None
    counts_steps: bool = True
    """Whether :meth:`recent` tells each session's steps and last update (else its start)."""

    @abstractmethod
    def recent(self, limit: int) -> list[Listed]:
        """At most ``limit`` sessions, the most recent first."""

    @abstractmethod
    def load(self, session_id: str) -> AgentSession:
        """The whole session (``session_id`` may be a prefix where the backend allows)."""

    @abstractmethod
    def decide(self, session_id: str, call_id: str | None, approved: bool,
               reason: str | None, *, force: bool,
               arguments: dict[str, Any] | None = None) -> Decided:
        """Approve or deny one waiting call, or all of them; ``arguments`` approves one call
        with them instead of the model's (refused, nothing decided, when they do not fit the
        schema the call recorded)."""

    @abstractmethod
    def cancel(self, session_id: str, reason: str, *, force: bool) -> str:
        """End the session; what was done, in words."""

    @abstractmethod
    def fork(self, session_id: str, at_step: int) -> Forked:
        """A new session whose history is the session's first ``at_step`` steps."""

    @abstractmethod
    def resume(self, session_id: str, options: ResumeOptions) -> RunResult:
        """Continue the session (or follow it) until it ends or waits again, shown live."""
