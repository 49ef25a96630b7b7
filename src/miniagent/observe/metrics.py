"""Metrics of runs for Prometheus (extra ``metrics``) and OpenTelemetry (extra ``otel``).

:class:`Metrics` is an event subscriber: it turns the events of every run it is subscribed
to into counters, gauges and histograms, read once and recorded by one backend or both
(:mod:`~miniagent.observe.figures` names every figure for each).
:meth:`Metrics.serve` (or :func:`serve_metrics`) serves them in Prometheus' text format on
``/metrics`` (``miniagent run --metrics 127.0.0.1:9464``), to GET requests that name the
server by address or as ``localhost`` only, with bounded connections
(:mod:`~miniagent.observe.metrics_http`)::

    metrics = Metrics(model=describe_model(llm))
    agent.subscribe(metrics)
    server = metrics.serve("127.0.0.1:9464")   # port 0: a free one, server.port says which
    ...
    server.close()

Given a meter provider, the same figures are OpenTelemetry instruments, which
:func:`otlp_meter_provider` exports over OTLP/HTTP (``miniagent run --otlp URL``, with the
spans)::

    provider = otlp_meter_provider("http://127.0.0.1:4318")
    agent.subscribe(Metrics(model=describe_model(llm), meter_provider=provider))
    ...
    provider.shutdown()                        # sends the last figures

Their OpenTelemetry names: ``gen_ai.client.operation.duration`` (s) and
``gen_ai.client.token.usage`` ({token}) with ``gen_ai.operation.name``,
``gen_ai.provider.name``, ``gen_ai.request.model``, ``server.address``, ``server.port`` and
``error.type`` (a failed call only) or ``gen_ai.token.type``; ``miniagent.runs``
{``miniagent.run.status``}, ``miniagent.run.steps``, ``miniagent.tool.calls``
{``gen_ai.tool.name``, ``miniagent.tool.outcome``}, ``miniagent.tool.duration``,
``miniagent.tool.consecutive_failures``, ``miniagent.approvals.waiting``,
``miniagent.approval.oldest_wait``, ``miniagent.parse_failures``, ``miniagent.self_repairs``,
``miniagent.guard.interventions`` {``miniagent.guard``} and ``miniagent.model.errors``
{``error.type``, ``http.response.status_code``}. What they count is said below under their
Prometheus names.

The GenAI semantic conventions' client metrics, under their Prometheus names (dots become
underscores, the unit a suffix), with their recommended bucket boundaries:

- ``gen_ai_client_operation_duration_seconds`` (histogram) of every model call, labels
  ``gen_ai_operation_name`` (``chat``), ``gen_ai_provider_name``, ``gen_ai_request_model``
  and ``error_type`` ("" for a call that answered, else the exception's class); a Temporal
  client, which has no model of its own, names the model the reply says answered (the worker's
  activity keeps that name in the reply; the first :data:`MAX_MODELS` names, later ones
  ``other``), else leaves it "";
- ``gen_ai_client_token_usage`` (histogram, tokens) of every answered call whose server
  reported its usage, the same labels less ``error_type`` plus ``gen_ai_token_type``
  (``input`` or ``output``).

The agent's own, all prefixed ``miniagent_``:

- ``runs_total{status}``; ``run_steps`` (histogram: the steps of each finished run);
- ``tool_calls_total{tool, outcome}``: ``ok``, ``error``, ``timeout``, ``denied`` (a person
  denied it; it never ran) and ``retried``: each attempt the executor made again under the
  tool's retry policy, and each call of a tool whose previous call in the same session failed
  (the model tried again); a call is counted once more under its own ``ok`` / ``error`` /
  ``timeout``, so a success rate is ``ok / (ok + error + timeout)``;
- ``tool_duration_seconds{tool}`` (histogram) and ``tool_consecutive_failures{tool}``
  (gauge: the failed calls of that tool since its last success, across sessions; none for
  ``unknown_tool``, which has no success to end its count);
- ``approvals_waiting`` and ``approval_oldest_wait_seconds`` (gauges): the calls this
  process saw asked for approval and not yet decided (here, or, given the store, anywhere),
  and how long the oldest has waited;
- ``parse_failures_total`` (a reply that was neither an action nor an answer) and
  ``self_repairs_total`` (the next reply of that session that was);
- ``guard_interventions_total{guard}`` (:data:`~miniagent.core.runtime.events.GuardName`);
- ``model_errors_total{error_type, status_code}``: failed model calls, with the HTTP status
  (``429``, ``500``, ...) of a non-2xx answer, else "".

Label values stay few: statuses, outcomes, guards and error classes are fixed sets; tool
names are the registry's, the first :data:`MAX_TOOLS` of them kept and any later one counted
as ``other`` (a call of a tool no source has is ``unknown_tool``); no session id, argument or
text is ever a label.

Prometheus alert rules over these metrics ship beside this module, :data:`ALERT_RULES`
(``alerts.yml``): a tool failing 3 times in a row, a tool's success rate under 90%, over 10%
of runs ending ``error`` / ``loop_detected`` / ``max_steps``, an approval waiting over an hour,
over 5% of model calls failing with 429 or a 5xx.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from miniagent.core.errors import ConfigError, SessionNotFound
from miniagent.core.models.describe import ModelInfo
from miniagent.core.runtime import events as ev
from miniagent.core.types import Observation, TokenUsage
from miniagent.observe.metrics_http import (
    MetricsAddress,
    MetricsServer,
    parse_address,
    serve_metrics,
)

__all__ = ["ALERT_RULES", "MAX_TOOLS", "UNKNOWN_TOOL", "Metrics", "MetricsAddress", "MetricsServer",
           "otlp_meter_provider", "parse_address", "serve_metrics", "tool_outcome"]

log = logging.getLogger("miniagent")

ALERT_RULES = Path(__file__).with_name("alerts.yml")
"""Prometheus alert rules over these metrics (for ``rule_files`` in ``prometheus.yml``)."""
MAX_TOOLS = 100
"""Distinct tool names kept as label values; later ones are counted as ``other``."""
MAX_MODELS = 10
"""Distinct model names a Temporal client's replies may give as label values (see below)."""
UNKNOWN_TOOL = "unknown_tool"
"""The label of calls of a tool no source has (a name the model made up)."""
_UNKNOWN_TOOL = "Unknown tool "  # tools/toolbox.py's wording
STORE_CHECK_SECONDS = 1.0
"""The store is asked about the waiting calls at most this often (a scrape reads two gauges)."""
MAX_STORE_CHECKS = 100
"""Sessions whose waits one check reads from the store (the oldest waits first)."""
MAX_SESSIONS = 10_000
"""Sessions whose state (failed tools, a parse failure) is remembered at once; the oldest is
forgotten first."""
_TIMED_OUT = re.compile(r"^Tool '.*' timed out after ")  # tools/toolbox.py's wording
_HTTP_STATUS = re.compile(r"(?:answered|refused the tools field \()\s*(\d{3})")  # models/
_HTTP_ERRORS = frozenset({"ModelHTTPError", "ToolsNotSupported"})
_NO_ATTRIBUTES: dict[str, Any] = {}
_MAX_MODEL_NAME = 200


def tool_outcome(observation: Observation) -> str:
    """``ok``, ``timeout`` or ``error``: what a finished call's observation says.

    Example:
        >>> from miniagent.core.types import Observation
        >>> tool_outcome(Observation(call_id="1", tool_name="t", output="Tool 't' timed out "
        ...              "after 2 s.", is_error=True))
        'timeout'
    """
    if not observation.is_error:
        return "ok"
    return "timeout" if _TIMED_OUT.match(observation.output) else "error"


@dataclass
class _Session:
    """What the metrics remember of one session between its events."""

    failed_tools: set[str] = field(default_factory=set)
    repairing: bool = False
    last_step: int = 0


@dataclass
class _Waiting:
    tool: str
    since: float


class Metrics:
    """An event subscriber that counts runs, model calls and tool calls, for Prometheus and/or
    OpenTelemetry.

    The events are read here once; each backend only records the figures
    (:mod:`~miniagent.observe.figures`) under its own names.

    Args:
        model: How the GenAI metrics name the model
            (:func:`~miniagent.core.models.describe.describe_model`).
        registry: A ``prometheus_client.CollectorRegistry`` to register in. When None, a new
            one (so several agents, or tests, in one process never share counters), unless
            ``meter_provider`` is given: then there are no Prometheus metrics.
        meter_provider: An OpenTelemetry meter provider (:func:`otlp_meter_provider`, or the
            SDK's own) whose ``miniagent`` meter records the figures too.
        store: The agent's checkpoint store: a call waiting for approval that another process
            decided (or a session it ended) stops counting as waiting when the approval
            gauges are read, at most once a second (:data:`STORE_CHECK_SECONDS`): each
            session's revision is read, and the session loaded only while it still waits and
            has changed since it was last loaded. Without one, only this process's events
            end a wait.

    Raises:
        ConfigError: prometheus-client (for a registry) or OpenTelemetry (for a meter
            provider) is not installed.
    """

    def __init__(self, *, model: ModelInfo, registry: Any = None,
                 meter_provider: Any = None, store: Any = None) -> None:
        self.model, self.store = model, store
        self._checked = -STORE_CHECK_SECONDS
        self._pending_at: dict[str, tuple[str, frozenset[str]]] = {}
        """The waiting calls of a session as last loaded, and its revision's stamp then."""
        self.registry: Any = None
        """The Prometheus registry, or None when only OpenTelemetry records."""
        self.sinks: list[Any] = []
        if registry is not None or meter_provider is None:
            from miniagent.observe.metrics_prom import PrometheusSink

            self.sinks.append(PrometheusSink(registry))
            self.registry = self.sinks[-1].registry
        if meter_provider is not None:
            from miniagent.observe.metrics_otel import OtelSink

            self.sinks.append(OtelSink(meter_provider))
        for sink in self.sinks:
            sink.observe("approvals_waiting", self._waiting_count)
            sink.observe("approval_age", self._oldest_wait)
        self._chat = {"gen_ai.operation.name": "chat",
                      "gen_ai.provider.name": model.provider or None,
                      "gen_ai.request.model": model.name or None,
                      "server.address": model.server_address, "server.port": model.server_port}
        self._sessions: dict[str, _Session] = {}
        self._waiting: dict[tuple[str, str], _Waiting] = {}
        self._tools: set[str] = set()
        self._models: set[str] = set()
        self._failures: dict[str, int] = {}  # by tool label: at most MAX_TOOLS + 1 (other)
        self._failed_sinks: list[Any] = []
        self._lock = threading.Lock()
        self._handlers = {name.removeprefix("_on_"): getattr(self, name) for name in dir(self)
                          if name.startswith("_on_")}
        self._workflow_handlers: dict[str, Callable[[Any], None]] = {  # not the calls' events
            "run_finished": self._on_run_finished, "step_started": self._on_step_started,
            "approval_requested": self._on_approval_requested,
            "model_started": self._on_model_started, "tool_started": self._approved}

    def __call__(self, event: ev.Event) -> None:
        handler = self._handlers.get(event.kind)
        if handler is not None:
            with self._lock:
                handler(event)

    def model_call(self, *, elapsed: float, usage: TokenUsage | None = None,
                   error: BaseException | None = None) -> None:
        """Count one model call made outside an event stream (a Temporal worker's activity)."""
        with self._lock:
            status = getattr(error, "status", None)
            self._model_call(elapsed, usage, None if error is None else type(error).__name__,
                             status if isinstance(status, int) else None)

    def tool_call(self, *, session_id: str, observation: Observation) -> None:
        """Count one tool call made outside an event stream (a Temporal worker's activity);
        one of a tool that failed last time in ``session_id`` counts as ``retried`` too."""
        with self._lock:
            name, session = observation.tool_name, self._session(session_id)
            if name in session.failed_tools:
                self._count_call(self._tool(name), "retried")
            self._tool_call(session_id, observation.tool_name, observation)
            if not session.failed_tools:  # nothing to remember of this session
                self._sessions.pop(session_id, None)

    def workflow_event(self, event: ev.Event) -> None:
        """Count a run's end, its approvals and their decisions from an event of a workflow
        this Temporal worker runs (the worker's activities count the model and tool calls)."""
        handler = self._workflow_handlers.get(event.kind)
        if handler is not None:
            with self._lock:
                handler(event)

    def _approved(self, event: ev.ToolStarted) -> None:
        self._waiting.pop((event.session_id, event.call.id), None)

    def serve(self, address: MetricsAddress, *, hosts: Iterable[str] = ()) -> MetricsServer:
        """Serve these metrics on ``http://HOST:PORT/metrics`` (:func:`serve_metrics`: only
        ``GET /metrics``, only to IP addresses, ``localhost`` and ``hosts`` as Host names).

        Raises:
            ConfigError: these metrics have no Prometheus registry (only a meter provider).
        """
        if self.registry is None:
            raise ConfigError("these metrics go to an OpenTelemetry meter provider only; "
                              "give Metrics a registry to serve them for Prometheus too")
        return serve_metrics(address, self.registry, hosts=hosts)

    # -- helpers --------------------------------------------------------------------------

    def _put(self, key: str, value: float, attributes: dict[str, Any] = _NO_ATTRIBUTES
             ) -> None:
        for sink in self.sinks:
            try:
                sink.put(key, value, attributes)
            except Exception as exc:  # a broken meter never fails a run or an activity
                self._sink_failed(sink, exc)

    def _sink_failed(self, sink: Any, error: Exception) -> None:
        """Say a backend's first failure (one line per backend); its figures are lost."""
        if sink not in self._failed_sinks:
            self._failed_sinks.append(sink)
            log.warning("metrics: %s failed (%s: %s); its later failures are not reported",
                        type(sink).__name__, type(error).__name__, error)

    def _count_call(self, tool: str, outcome: str, count: int = 1) -> None:
        self._put("tool_calls", count, {"gen_ai.tool.name": tool,
                                        "miniagent.tool.outcome": outcome})

    def _tool(self, name: str) -> str:
        """``name`` as a label value: one of the first :data:`MAX_TOOLS` names, or ``other``."""
        if name in self._tools:
            return name
        if len(self._tools) < MAX_TOOLS:
            self._tools.add(name)
            return name
        return "other"

    def _model_name(self, name: str) -> str:
        """A name a server answered with, as a label value: one of the first
        :data:`MAX_MODELS`, or ``other`` (a server may name any model in any reply)."""
        if name in self._models or len(self._models) < MAX_MODELS:
            self._models.add(name)
            return name
        return "other"

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            if len(self._sessions) >= MAX_SESSIONS:  # a worker sees no run end: forget
                del self._sessions[next(iter(self._sessions))]  # the oldest
            session = self._sessions[session_id] = _Session()
        return session

    def _waiting_count(self) -> int:
        self._forget_decided()
        with self._lock:
            return len(self._waiting)

    def _oldest_wait(self) -> float:
        self._forget_decided()
        with self._lock:
            since = min((w.since for w in self._waiting.values()), default=None)
        return 0.0 if since is None else max(0.0, time.time() - since)

    def _forget_decided(self) -> None:
        """Forget the waits the store says are over: a call decided, or a session ended or
        gone, by another process (whose events never reach this one)."""
        if self.store is None or time.monotonic() - self._checked < STORE_CHECK_SECONDS:
            return
        self._checked = time.monotonic()
        with self._lock:
            sessions = list(dict.fromkeys(key[0] for key in self._waiting))
            self._pending_at = {s: v for s, v in self._pending_at.items() if s in sessions}
        for session_id in sessions[:MAX_STORE_CHECKS]:
            pending = self._still_pending(session_id)
            if pending is None:  # an unreadable store: the waits stay as they are
                continue
            with self._lock:
                for key in [k for k in self._waiting if k[0] == session_id]:
                    if key[1] not in pending:
                        del self._waiting[key]

    def _still_pending(self, session_id: str) -> frozenset[str] | None:
        """The session's calls the store says still wait; None when it cannot say.

        The session's revision (a few columns) is read first: a session no longer waiting
        has no waiting call, and one whose stamp is the one seen at the last load has the
        calls found then. Only a waiting session that changed is loaded (a scrape reads the
        gauges once a second, and a session may be large)."""
        revision = None
        try:
            if hasattr(self.store, "revision"):  # a store of the protocol alone has none
                revision = self.store.revision(session_id)
                if revision.status != "awaiting_approval":
                    return frozenset()
                known = self._pending_at.get(session_id)
                if known is not None and known[0] == revision.stamp:
                    return known[1]
            session = self.store.load(session_id)
        except SessionNotFound:
            return frozenset()
        except Exception as exc:
            log.debug("metrics: cannot read session %s: %s", session_id, exc)
            return None
        pending = frozenset(p.call_id for p in session.pending_approvals())
        if revision is not None:
            with self._lock:
                self._pending_at[session_id] = (revision.stamp, pending)
        return pending

    def _settle_waiting(self, session_id: str, *, denied: bool) -> None:
        for key in [k for k in self._waiting if k[0] == session_id]:
            waiting = self._waiting.pop(key)
            if denied:
                self._count_call(waiting.tool, "denied")

    # -- events ---------------------------------------------------------------------------

    def _on_run_finished(self, event: ev.RunFinished) -> None:
        result = event.result
        self._put("runs", 1, {"miniagent.run.status": result.status})
        session = self._sessions.pop(event.session_id, _Session())
        self._put("run_steps", max(session.last_step, len(result.steps)))
        if result.status != "awaiting_approval":  # cancelled, failed: no longer waiting
            self._settle_waiting(event.session_id, denied=False)

    def _on_step_started(self, event: ev.StepStarted) -> None:
        session = self._session(event.session_id)
        session.last_step = max(session.last_step, event.step)

    def _on_model_started(self, event: ev.ModelStarted) -> None:
        # the tools of a resumed step ran first: a call still waiting was denied
        self._settle_waiting(event.session_id, denied=True)

    def _on_model_responded(self, event: ev.ModelResponded) -> None:
        response = event.response
        self._model_call(event.elapsed, response.usage, None, None,
                         answered_by=_response_model(response.raw), asked=response.model)
        session = self._session(event.session_id)
        if session.repairing and event.parsed.kind in ("action", "final"):
            session.repairing = False
            self._put("self_repairs", 1)

    def _on_model_failed(self, event: ev.ModelFailed) -> None:
        error_type = event.error_type or "_OTHER"
        found = _HTTP_STATUS.search(event.error) if error_type in _HTTP_ERRORS else None
        self._model_call(event.elapsed, None, error_type,
                         int(found.group(1)) if found else None)

    def _model_call(self, elapsed: float, usage: TokenUsage | None, error_type: str | None,
                    status_code: int | None, answered_by: str | None = None,
                    asked: str | None = None) -> None:
        chat = self._chat
        if asked:  # which of a FallbackModel's models answered
            chat = {**chat, "gen_ai.request.model": self._model_name(asked[:_MAX_MODEL_NAME])}
        elif chat["gen_ai.request.model"] is None and answered_by:  # a client without a model
            chat = {**chat, "gen_ai.request.model": self._model_name(answered_by)}
        self._put("operation_duration", elapsed, {**chat, "error.type": error_type})
        if usage is not None and usage.known:
            self._put("token_usage", usage.prompt_tokens or 0,
                      {**chat, "gen_ai.token.type": "input"})
            self._put("token_usage", usage.completion_tokens or 0,
                      {**chat, "gen_ai.token.type": "output"})
        if error_type is not None:
            self._put("model_errors", 1, {"error.type": error_type,
                                          "http.response.status_code": status_code})

    def _on_tool_started(self, event: ev.ToolStarted) -> None:
        name = event.call.name
        self._waiting.pop((event.session_id, event.call.id), None)  # approved, now running
        if name in self._session(event.session_id).failed_tools:
            self._count_call(self._tool(name), "retried")

    def _on_tool_finished(self, event: ev.ToolFinished) -> None:
        self._tool_call(event.session_id, event.call.name, event.observation)

    def _tool_call(self, session_id: str, name: str, observation: Observation) -> None:
        # a name the model made up is no label value: the registry's names are
        unknown = observation.is_error and observation.output.startswith(_UNKNOWN_TOOL)
        tool, outcome = UNKNOWN_TOOL if unknown else self._tool(name), tool_outcome(observation)
        self._count_call(tool, outcome)
        if observation.attempts > 1:  # the executor tried it again (its retry policy)
            self._count_call(tool, "retried", observation.attempts - 1)
        self._put("tool_duration", observation.elapsed, {"gen_ai.tool.name": tool})
        if unknown:  # the model's mistake, not a failing tool: no tool can succeed it
            return
        failed = self._session(session_id).failed_tools
        if outcome == "ok":
            failed.discard(name)
            self._failures[tool] = 0
        else:
            failed.add(name)
            self._failures[tool] = self._failures.get(tool, 0) + 1
        self._put("tool_failures", self._failures[tool], {"gen_ai.tool.name": tool})

    def _on_approval_requested(self, event: ev.ApprovalRequested) -> None:
        for pending in event.pending:
            self._waiting.setdefault((event.session_id, pending.call_id),
                                     _Waiting(self._tool(pending.tool), event.at))

    def _on_guard_intervened(self, event: ev.GuardIntervened) -> None:
        self._put("guards", 1, {"miniagent.guard": event.guard})
        if event.guard == "format_error":
            self._put("parse_failures", 1)
            self._session(event.session_id).repairing = True


def _response_model(raw: Any) -> str | None:
    """The model a server said answered (its body's ``model``), cut to a sane length."""
    name = raw.get("model") if isinstance(raw, dict) else None
    return name[:_MAX_MODEL_NAME] if isinstance(name, str) and name else None


def otlp_meter_provider(url: str, *, service_name: str = "miniagent", timeout: float = 5.0,
                        interval: float | None = None,
                        shutdown_timeout: float | None = None) -> Any:
    """A meter provider whose metrics go to an OTLP/HTTP collector at ``url`` every
    ``interval`` seconds (None: ``OTEL_METRIC_EXPORT_INTERVAL``, else 60 s), and once more at
    ``shutdown()``; give it to :class:`Metrics` as ``meter_provider``.

    ``url`` is the metrics endpoint (``http://127.0.0.1:4318/v1/metrics``), a collector's base
    URL (``/v1/metrics`` is added), or its traces endpoint (``.../v1/traces`` becomes
    ``.../v1/metrics``), so the URL given for spans serves. Sending never affects a run: the
    first failure of the process is one line on the ``miniagent`` logger, and ``shutdown()``
    waits at most ``shutdown_timeout`` seconds for a collector that is down, ``timeout`` for one
    that accepted the last request and does not answer (:mod:`miniagent.observe.otlp_metrics`).

    Raises:
        ConfigError: ``url`` is not an http(s) URL, the export interval (``interval`` or
            ``OTEL_METRIC_EXPORT_INTERVAL``) is not above 0, or the OTLP exporter is not
            installed.
    """
    try:
        from miniagent.observe import otlp_metrics
    except ImportError:
        raise ConfigError("the OTLP exporter is not installed: pip install 'miniagent[otel]'"
                          ) from None
    return otlp_metrics.otlp_meter_provider(
        url, service_name=service_name, timeout=timeout, interval=interval,
        shutdown_timeout=shutdown_timeout)
