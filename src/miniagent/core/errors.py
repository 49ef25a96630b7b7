"""Exceptions, in three families, and the signals a driver's effects raise to stop a run.

::

    MiniAgentError
    ├── ToolSignal              raised by a tool on purpose
    │   └── ToolError           "this input is wrong, tell the model this message"
    │                           (``retryable=True``: "it may pass, try again")
    ├── UserError               a mistake of the developer using the library
    │   ├── ToolDefinitionError a function that cannot become a tool
    │   ├── ConfigError         missing or contradictory configuration
    │   ├── DecisionError       a decision on a session that is not waiting, or an unknown call
    │   └── TurnRefused         a new turn on a session that cannot take one now
    └── RunFailure              the run could not go on
        └── ModelError          the model server failed (after retries)
            ├── ModelConnectionError  refused, reset, DNS
            ├── ModelTimeout          no answer within the request timeout
            ├── ModelHTTPError        a non-2xx answer (``status`` set)
            │   └── ToolsNotSupported the server rejected the ``tools`` field
            ├── ModelResponseError    a 2xx answer that is not a chat completion
            └── ModelSwitched         a fallback model goes on with another model: render
                                      the turn for it and ask again
        └── SessionError        a session cannot be loaded, saved or moved that way
            ├── SessionNotFound
            ├── SessionVersionError   saved by a newer miniagent
            ├── SessionBusy           another process is running it (or has the store
            │                         locked for now: try again)
            └── StoreCorrupted        the store file (or one session in it) is damaged
        └── PayloadTooLarge     a payload over a driver's size limit (Temporal's 2 MB)
    └── RunInterrupted          raised by a driver's effects: the run cannot go on here
        ├── ToolInterrupted     a tool call's outcome is unknown (its worker died)
        └── Rollover            the run continues elsewhere (Temporal's continue-as-new)

Nothing a model writes raises any of these: model mistakes become observations.
``RunInterrupted`` is the one way an effect may stop a run
(:mod:`miniagent.core.runtime.run` documents what the step logic does with each); every other
failure of an effect is a ``RunFailure`` and ends the run with status ``error``.
Constructing an exception has no side effects.
"""

from __future__ import annotations


class MiniAgentError(Exception):
    """Base of every exception miniagent raises."""


class ToolSignal(MiniAgentError):
    """Raised by a tool on purpose to steer the run."""


class ToolError(ToolSignal):
    """Raised by a tool to send ``message`` to the model as an error observation, verbatim.

    ``retryable=True`` marks a transient failure the tool raised before any effect: the
    executor tries the call again under the tool's retry policy (even a tool that is not
    idempotent), and the model reads the message only if every attempt fails.
    """

    def __init__(self, message: str = "", *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class UserError(MiniAgentError):
    """The developer using miniagent did something the library cannot work with."""


class ToolDefinitionError(UserError):
    """A function cannot be turned into a tool (for example, an unsupported parameter kind)."""


class ConfigError(UserError):
    """Configuration is missing or contradictory (for example, no endpoint)."""


class DecisionError(UserError):
    """An approval or denial the session cannot take: it is not waiting, no waiting call has
    that id, or edited arguments do not fit the tool's schema. A caller's mistake, distinct from
    a store fault (:class:`SessionError`)."""


class TurnRefused(UserError):
    """A new turn on a session that cannot take one: it waits for a person, has calls still
    open, or was cancelled."""


class RunFailure(MiniAgentError):
    """The run cannot go on; the loop turns it into a RunResult with status ``error``."""


class ModelError(RunFailure):
    """The model server failed, after any retries."""


class ModelConnectionError(ModelError):
    """The server could not be reached."""


class ModelTimeout(ModelError):
    """The server did not answer within the request timeout."""


class ModelHTTPError(ModelError):
    """The server answered with a non-2xx status."""

    def __init__(self, message: str, *, status: int, body: str = "",
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.retry_after = retry_after
        """The server's ``Retry-After``, in seconds, when it sent a usable one."""


class ToolsNotSupported(ModelHTTPError):
    """The server rejected a request because of its ``tools`` field."""


class ModelResponseError(ModelError):
    """The server answered 2xx with something that is not a chat completion."""


class ModelSwitched(ModelError):
    """A :class:`~miniagent.FallbackModel`'s model failed, and the next one to ask takes
    requests of another shape (``tool_mode``, ``native_tools``): the step renders the turn for
    it (the ``auto`` protocol's ``recover`` learns its ``native_tools``) and asks again. No
    request was sent to the next model yet."""

    def __init__(self, message: str, *, model: str, tool_mode: str,
                 native_tools: bool | None) -> None:
        super().__init__(message)
        self.model = model
        """The name of the model that answers next."""
        self.tool_mode = tool_mode
        self.native_tools = native_tools


class SessionError(RunFailure):
    """A session cannot be loaded, saved, or moved to the requested status."""


class SessionNotFound(SessionError):
    """No session with that id in the store."""


class SessionVersionError(SessionError):
    """The session was saved by a newer miniagent (a higher schema_version)."""


class SessionBusy(SessionError):
    """Another live process holds the session's lease, or held the store's file locked for
    longer than the store waits (trying again later may succeed)."""


class StoreCorrupted(SessionError):
    """The store file, or one session in it, cannot be read."""


class PayloadTooLarge(RunFailure):
    """A payload (a request, a response, a session) over a driver's size limit."""


class RunInterrupted(MiniAgentError):
    """Raised by a driver's effect: the run cannot go on the way it was going."""


class ToolInterrupted(RunInterrupted):
    """``run_tool``: the call's outcome is unknown (the worker running it died). The step logic
    treats the call as a crash interrupted it: rerun if idempotent, else a person decides."""

    def __init__(self, call_id: str) -> None:
        super().__init__(f"tool call {call_id} was interrupted")
        self.call_id = call_id


class Rollover(RunInterrupted):
    """``checkpoint``: the run goes on in a fresh run of its driver from this step boundary (a
    Temporal workflow continues as new). The step logic accounts the run's time and re-raises."""
