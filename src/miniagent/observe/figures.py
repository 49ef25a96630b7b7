"""What the metrics measure, once, and what each backend calls it.

A :class:`Figure` is one metric: its kind, its OpenTelemetry name, unit and attributes, and its
prometheus-client labels (its prometheus-client name is the OpenTelemetry one with ``_`` for
``.``). :class:`~miniagent.observe.metrics.Metrics` turns events
into values of these figures, keyed by their OpenTelemetry attribute names; each backend
(:mod:`~miniagent.observe.metrics_prom`, :mod:`~miniagent.observe.metrics_otel`) only records
them under its own names. An attribute without a Prometheus label is left out there; a
Prometheus label whose attribute a value lacks reads "" (``error_type`` of a call that
answered).

Through an OpenTelemetry Collector's Prometheus exporter the OpenTelemetry names become the
Prometheus ones (``miniagent.tool.calls`` -> ``miniagent_tool_calls_total``,
``gen_ai.client.operation.duration`` -> ``gen_ai_client_operation_duration_seconds``); the
attribute names stay the conventions' (``gen_ai.tool.name`` where prometheus-client says
``tool``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["DURATION_BUCKETS", "FIGURES", "STEP_BUCKETS", "TOKEN_BUCKETS", "Figure"]

# the GenAI semantic conventions' advice for these two histograms
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24,
                    20.48, 40.96, 81.92)
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
                 16777216, 67108864)
STEP_BUCKETS = (1, 2, 3, 5, 8, 13, 21, 34, 55, 89)

Kind = Literal["counter", "histogram", "gauge", "observed_gauge", "observed_count"]
"""``counter`` adds, ``histogram`` records, ``gauge`` sets; the ``observed_`` kinds are read
from a callback when the backend collects (a gauge, and a count that goes up and down)."""


@dataclass(frozen=True, kw_only=True)
class Figure:
    """One metric, as every backend names it."""

    kind: Kind
    otel: str
    """The OpenTelemetry instrument's name."""
    unit: str
    """Its UCUM unit (``s``, ``{token}``)."""
    description: str
    attributes: tuple[tuple[str, str | None], ...] = ()
    """(OpenTelemetry attribute, Prometheus label or None), in label order."""
    buckets: tuple[float, ...] = ()

    @property
    def prometheus(self) -> str:
        """prometheus-client's name, before the ``_total`` and unit suffixes it adds: the
        OpenTelemetry name with ``_`` for ``.``."""
        return self.otel.replace(".", "_")

    @property
    def prometheus_unit(self) -> str:
        """The unit prometheus-client adds to the name: ``seconds`` for ``s``, else none."""
        return "seconds" if self.unit == "s" else ""

    @property
    def labels(self) -> list[str]:
        """The Prometheus label names."""
        return [label for _, label in self.attributes if label is not None]


_GEN_AI = (("gen_ai.operation.name", "gen_ai_operation_name"),
           ("gen_ai.provider.name", "gen_ai_provider_name"),
           ("gen_ai.request.model", "gen_ai_request_model"))
_SERVER = (("server.address", None), ("server.port", None))
_TOOL = ("gen_ai.tool.name", "tool")

FIGURES: dict[str, Figure] = {
    "operation_duration": Figure(
        kind="histogram", otel="gen_ai.client.operation.duration", unit="s",
        description="GenAI operation duration.", buckets=DURATION_BUCKETS,
        attributes=(*_GEN_AI, ("error.type", "error_type"), *_SERVER)),
    "token_usage": Figure(
        kind="histogram", otel="gen_ai.client.token.usage", unit="{token}",
        description="Number of input and output tokens used.", buckets=TOKEN_BUCKETS,
        attributes=(*_GEN_AI, ("gen_ai.token.type", "gen_ai_token_type"), *_SERVER)),
    "runs": Figure(
        kind="counter", otel="miniagent.runs", unit="{run}",
        description="Runs finished, by status.", attributes=(("miniagent.run.status", "status"),)),
    "run_steps": Figure(
        kind="histogram", otel="miniagent.run.steps", unit="{step}",
        description="Steps of each finished run.", buckets=STEP_BUCKETS),
    "tool_calls": Figure(
        kind="counter", otel="miniagent.tool.calls", unit="{call}",
        description="Tool calls, by tool and outcome (ok, error, timeout, denied; retried, "
        "counted besides: each attempt a retry policy made again, and a call after a failed "
        "one of that tool in the session).",
        attributes=(_TOOL, ("miniagent.tool.outcome", "outcome"))),
    "tool_duration": Figure(
        kind="histogram", otel="miniagent.tool.duration", unit="s",
        description="Duration of tool calls.", buckets=DURATION_BUCKETS, attributes=(_TOOL,)),
    "tool_failures": Figure(
        kind="gauge", otel="miniagent.tool.consecutive_failures", unit="{call}",
        description="Failed calls of a tool since its last success.", attributes=(_TOOL,)),
    "approvals_waiting": Figure(
        kind="observed_count", otel="miniagent.approvals.waiting", unit="{call}",
        description="Calls waiting for a person's decision."),
    "approval_age": Figure(
        kind="observed_gauge", otel="miniagent.approval.oldest_wait", unit="s",
        description="How long the oldest waiting call has waited."),
    "parse_failures": Figure(
        kind="counter", otel="miniagent.parse_failures", unit="{reply}",
        description="Replies that were neither an action nor an answer."),
    "self_repairs": Figure(
        kind="counter", otel="miniagent.self_repairs", unit="{reply}",
        description="Replies that parsed after a parse failure."),
    "guards": Figure(
        kind="counter", otel="miniagent.guard.interventions", unit="{intervention}",
        description="Guard interventions.", attributes=(("miniagent.guard", "guard"),)),
    "model_errors": Figure(
        kind="counter", otel="miniagent.model.errors", unit="{call}",
        description="Failed model calls, by error class and HTTP status.",
        attributes=(("error.type", "error_type"), ("http.response.status_code", "status_code"))),
}
"""Every figure, by the key :class:`~miniagent.observe.metrics.Metrics` records it under."""
