"""Model and tool failures across the activity boundary, and the retry policies they imply.

An activity raises :class:`~temporalio.exceptions.ApplicationError`: its ``type`` names the
miniagent error, ``non_retryable`` follows the HTTP transport's classification (connection
errors, timeouts, 408, 409, 429 and 5xx are worth retrying; other 4xx, and 2xx answers that
are not a completion, are not), and a ``Retry-After`` becomes ``next_retry_delay``. In the
workflow the final failure is turned back into the same :class:`~miniagent.core.errors.ModelError`
subclass, which the step logic handles as it does in process (a
:class:`~miniagent.core.errors.ModelSwitched` with the next model's name and shape).
"""

from __future__ import annotations

import math
from datetime import timedelta

from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from miniagent.core import errors
from miniagent.core.retry import RetryPolicy as ToolRetry

RETRYABLE_STATUSES = frozenset({408, 409, 429})
RETRY_AFTER_MAX = 60.0
PAYLOAD_LIMIT = 2 * 1024 * 1024
"""Temporal refuses a single payload larger than this (2 MB, the server's default)."""
PAYLOAD_TOO_LARGE = "PayloadTooLarge"
PayloadTooLarge = errors.PayloadTooLarge


def retryable_status(status: int) -> bool:
    return status >= 500 or status in RETRYABLE_STATUSES


def model_failure(exc: errors.ModelError) -> ApplicationError:
    """The activity-side form of a model error."""
    status = exc.status if isinstance(exc, errors.ModelHTTPError) else None
    retry_after = exc.retry_after if isinstance(exc, errors.ModelHTTPError) else None
    if isinstance(exc, errors.ModelHTTPError):
        retry = retryable_status(exc.status) and not isinstance(exc, errors.ToolsNotSupported)
    else:
        retry = isinstance(exc, errors.ModelConnectionError | errors.ModelTimeout)
    delay = None
    if retry and retry_after is not None and math.isfinite(retry_after) and (
            0 <= retry_after <= RETRY_AFTER_MAX):
        delay = timedelta(seconds=retry_after)
    details: dict[str, object] = {"status": status}
    if isinstance(exc, errors.ModelSwitched):  # a signal to render anew: never retried as is
        details["switched"] = {"model": exc.model, "tool_mode": exc.tool_mode,
                               "native_tools": exc.native_tools}
    return ApplicationError(str(exc), details, type=type(exc).__name__,
                            non_retryable=not retry, next_retry_delay=delay)


_MODEL_ERRORS: dict[str, type[errors.ModelError]] = {
    cls.__name__: cls for cls in (errors.ModelError, errors.ModelConnectionError,
                                  errors.ModelTimeout, errors.ModelResponseError)
}


def model_error(failure: ActivityError) -> errors.ModelError:
    """The workflow-side form of a model activity that failed for good."""
    cause = failure.cause
    if isinstance(cause, ApplicationError):
        status = _status(cause)
        if cause.type in ("ModelHTTPError", "ToolsNotSupported") and status is not None:
            kind = errors.ToolsNotSupported if cause.type == "ToolsNotSupported" \
                else errors.ModelHTTPError
            return kind(cause.message, status=status)
        switched = _detail(cause, "switched")
        if cause.type == "ModelSwitched" and isinstance(switched, dict):
            native = switched.get("native_tools")
            return errors.ModelSwitched(
                cause.message, model=str(switched.get("model", "")),
                tool_mode=str(switched.get("tool_mode", "auto")),
                native_tools=native if isinstance(native, bool) else None)
        return _MODEL_ERRORS.get(cause.type or "", errors.ModelError)(cause.message)
    return errors.ModelTimeout(f"the model call did not finish: {cause or failure}")


def _status(cause: ApplicationError) -> int | None:
    status = _detail(cause, "status")
    return status if isinstance(status, int) else None


def _detail(cause: ApplicationError, key: str) -> object:
    details = cause.details
    if details and isinstance(details[0], dict):
        return details[0].get(key)
    return None


def model_retry(attempts: int) -> RetryPolicy:
    return RetryPolicy(initial_interval=timedelta(milliseconds=500), backoff_coefficient=2.0,
                       maximum_interval=timedelta(seconds=8), maximum_attempts=max(1, attempts))


def tool_retry(idempotent: bool, policy: ToolRetry | None = None) -> RetryPolicy:
    """The tool activity's retry policy, for the failures of its *worker* (it died, it lost
    its heartbeat): the tool's own transient failures are tried again inside the activity, by
    the same executor as in process (:mod:`miniagent.core.retry`).

    A non-idempotent tool is tried once: after a worker died mid-call its outcome is unknown,
    and a person decides (as in process). An idempotent one is tried again, with the tool's
    retry policy when it has one (the same attempts, backoff and cap), else five times."""
    if not idempotent:
        return RetryPolicy(maximum_attempts=1)
    if policy is not None:
        first = max(policy.initial_delay, 0.001)  # Temporal wants a positive interval
        return RetryPolicy(initial_interval=timedelta(seconds=first),
                           backoff_coefficient=policy.factor,
                           maximum_interval=timedelta(seconds=max(policy.max_delay, first)),
                           maximum_attempts=policy.max_attempts)
    return RetryPolicy(initial_interval=timedelta(milliseconds=200), backoff_coefficient=2.0,
                       maximum_interval=timedelta(seconds=5), maximum_attempts=5)


def tool_time(timeout: float | None, policy: ToolRetry | None) -> float:
    """Seconds one tool activity may take: every attempt the executor may make within it, at
    the tool's timeout (an hour without one), and the waits between them."""
    per_attempt = timeout or 3600.0
    if policy is None:
        return per_attempt
    waits = sum(policy.delay(attempt) for attempt in range(1, policy.max_attempts))
    return per_attempt * policy.max_attempts + waits
