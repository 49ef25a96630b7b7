"""A tool's retry policy: :class:`RetryPolicy`, and what the shared executor makes of it.

Plain data, like the rest of an agent's spec: the step logic carries a run's default to the
executor in each call's :class:`~miniagent.core.types.ToolContext`; the waiting and the
jitter
are the executor's (:class:`~miniagent.core.tools.toolbox.Toolbox`), never the step logic's.

The executor (:class:`~miniagent.core.tools.toolbox.Toolbox`) tries a call again only after a
*transient* failure, and only where trying again cannot repeat an effect:

- the tool raised ``ToolError(..., retryable=True)``: it says the failure may pass and that it
  raised before any effect, so any tool is tried again (its observation is ``retryable``);
- a timeout, or a connection error (a builtin :class:`ConnectionError`, an MCP server that
  cannot be reached or closed the connection): the outcome is unknown, so only an idempotent
  tool is tried again;
- anything else (wrong arguments, an ordinary error, an unknown tool) never is.

Between attempts it waits ``initial_delay * factor ** (attempt - 1)`` seconds, at most
``max_delay``, with full jitter (a random part of it); never past the run's deadline. Every
attempt of a call has the same :class:`~miniagent.core.types.ToolContext` (so the same
idempotency key) but its ``attempt`` number; the observation records how many were made.

Example:
    >>> policy = RetryPolicy(max_attempts=4, initial_delay=0.5, max_delay=1.5)
    >>> [policy.delay(attempt) for attempt in (1, 2, 3)]
    [0.5, 1.0, 1.5]
    >>> RetryPolicy.of(3).max_attempts
    3
"""

from __future__ import annotations

from dataclasses import dataclass

from miniagent._internal import defaults
from miniagent._internal.bounds import quantity, whole
from miniagent.core.errors import ToolDefinitionError

__all__ = ["RetryPolicy", "RetrySetting"]


@dataclass(kw_only=True, frozen=True)
class RetryPolicy:
    """How often a tool call is tried, and how long to wait between tries.

    Attributes:
        max_attempts: tries in all, the first one included (1: never again; at most
            :data:`~miniagent._internal.defaults.RETRY_MAX_ATTEMPTS`, 100).
        initial_delay: seconds before the second try (0 to 3600).
        factor: each wait is this many times the previous one (at least 1).
        max_delay: the longest wait, in seconds (0 to 3600).
        jitter: wait a random part of the delay ("full jitter"), so that many calls failing
            together do not all come back at the same moment.
    """

    max_attempts: int = 3
    initial_delay: float = 0.1
    factor: float = 2.0
    max_delay: float = 10.0
    jitter: bool = True

    def __post_init__(self) -> None:
        whole("RetryPolicy max_attempts", self.max_attempts, least=1,
              most=defaults.RETRY_MAX_ATTEMPTS, error=ToolDefinitionError)
        longest = defaults.RETRY_MAX_DELAY
        for label, value, least, most in (("initial_delay", self.initial_delay, 0.0, longest),
                                          ("factor", self.factor, 1.0, None),
                                          ("max_delay", self.max_delay, 0.0, longest)):
            quantity(f"RetryPolicy {label}", value, least=least, most=most,
                     error=ToolDefinitionError)
        if not isinstance(self.jitter, bool):
            raise ToolDefinitionError(f"RetryPolicy jitter must be True or False, got "
                                      f"{self.jitter!r}")

    @classmethod
    def of(cls, setting: RetrySetting) -> RetryPolicy | None:
        """A policy from what ``retry=`` accepts: a policy, a number of attempts (the default
        backoff), or ``None`` (none of its own)."""
        if setting is None or isinstance(setting, RetryPolicy):
            return setting
        if isinstance(setting, int) and not isinstance(setting, bool):
            return cls(max_attempts=setting)
        raise ToolDefinitionError(
            f"retry must be a RetryPolicy or a number of attempts, got {setting!r}")

    def delay(self, attempt: int) -> float:
        """The longest wait after failed attempt number ``attempt`` (1 for the first); with
        ``jitter`` the executor waits a random part of it."""
        try:
            return min(self.max_delay, self.initial_delay * self.factor ** (attempt - 1))
        except OverflowError:  # a huge factor: the cap is the wait
            return self.max_delay


RetrySetting = RetryPolicy | int | None
"""What ``retry=`` takes: a :class:`RetryPolicy`, a number of attempts, or ``None``."""
