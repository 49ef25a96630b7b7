"""How failures cross the activity boundary, and how tools are described to the workflow."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.exceptions import ActivityError, ApplicationError, RetryState

from miniagent import tool
from miniagent.core import errors
from miniagent.core.errors import UserError
from miniagent.core.retry import RetryPolicy
from miniagent.core.tools.toolbox import ToolRegistry
from miniagent.core.types import ToolCall
from miniagent.temporal.faults import model_error, model_failure, tool_retry, tool_time
from miniagent.temporal.workers import Served, register, served, unregister
from tool_calls import toolbox_of


def http(status: int, retry_after: float | None = None) -> errors.ModelHTTPError:
    return errors.ModelHTTPError(f"answered {status}", status=status, retry_after=retry_after)


def test_the_transport_classification_decides_what_is_retried() -> None:
    for status in (408, 409, 429, 500, 503):
        assert not model_failure(http(status)).non_retryable, status
    for status in (400, 401, 404, 422):
        assert model_failure(http(status)).non_retryable, status
    assert not model_failure(errors.ModelConnectionError("refused")).non_retryable
    assert not model_failure(errors.ModelTimeout("slow")).non_retryable
    assert model_failure(errors.ModelResponseError("not a completion")).non_retryable
    refused = errors.ToolsNotSupported("no tools", status=400)
    assert model_failure(refused).non_retryable


def test_retry_after_is_the_next_delay_only_when_sane() -> None:
    assert model_failure(http(429, 3.0)).next_retry_delay == timedelta(seconds=3)
    assert model_failure(http(429, 3600.0)).next_retry_delay is None
    assert model_failure(http(400, 3.0)).next_retry_delay is None


def test_the_tool_activity_retries_a_dead_worker_with_the_tools_policy() -> None:
    policy = RetryPolicy(max_attempts=4, initial_delay=0.5, factor=3.0, max_delay=2.0)
    retry = tool_retry(True, policy)
    assert (retry.maximum_attempts, retry.initial_interval, retry.backoff_coefficient,
            retry.maximum_interval) == (4, timedelta(seconds=0.5), 3.0, timedelta(seconds=2))
    assert tool_retry(False, policy).maximum_attempts == 1  # its outcome would be unknown
    assert tool_retry(True).maximum_attempts == 5
    # the activity has time for every attempt the executor makes inside it, and the waits
    assert tool_time(10.0, policy) == 10.0 * 4 + 0.5 + 1.5 + 2.0
    assert tool_time(None, None) == 3600.0


def test_the_workflow_gets_the_same_error_back() -> None:
    def failed(exc: errors.ModelError) -> ActivityError:
        error = ActivityError("activity failed", scheduled_event_id=1, started_event_id=2,
                              identity="w", activity_type="miniagent.generate",
                              activity_id="1", retry_state=RetryState.NON_RETRYABLE_FAILURE)
        application = model_failure(exc)
        # what the SDK hands the workflow: the details as decoded values
        error.__cause__ = ApplicationError(application.message, *application.details,
                                           type=application.type)
        return error

    back = model_error(failed(errors.ToolsNotSupported("no tools", status=400)))
    assert isinstance(back, errors.ToolsNotSupported) and back.status == 400
    assert isinstance(model_error(failed(http(503))), errors.ModelHTTPError)
    assert type(model_error(failed(errors.ModelTimeout("slow")))) is errors.ModelTimeout


def test_a_workflow_reads_its_tools_from_the_worker_of_its_task_queue() -> None:
    @tool(requires_approval=lambda args: args["amount"] > 100)
    def pay(amount: int) -> str:
        """Pay."""
        return "paid"

    @tool(idempotent=True, timeout=5)
    def look(q: str) -> str:
        """Look up."""
        return q

    what = Served(tools=toolbox_of(ToolRegistry([pay, look])), tool_mode="react")
    register("q-contracts", what)
    tools = served("q-contracts").tools
    # judged where the tool lives: a predicate that says no asks nobody
    assert not tools.needs_approval(ToolCall(id="1", name="pay", arguments={"amount": 1}))
    assert tools.needs_approval(ToolCall(id="2", name="pay", arguments={"amount": 500}))
    assert not tools.needs_approval(ToolCall(id="3", name="nope"))
    assert tools.is_idempotent("look") and not tools.is_idempotent("pay")
    assert tools.timeout_of("look") == 5.0 and tools.timeout_of("pay") is None
    unregister("q-contracts", what)
    with pytest.raises(UserError, match="no miniagent worker in this process serves task "
                                        "queue 'q-contracts'"):
        served("q-contracts")
