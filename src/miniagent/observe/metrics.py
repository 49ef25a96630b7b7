"""Metrics of runs for Prometheus (extra ``metrics``): an event subscriber and its endpoint.

:class:`Metrics` turns the events of every run it is subscribed to into counters, gauges
and histograms; :meth:`Metrics.serve` (or :func:`serve_metrics`) serves them in Prometheus'
text format on ``/metrics`` (``miniagent run --metrics 127.0.0.1:9464``)::

    metrics = Metrics(model=describe_model(llm))
    agent.subscribe(metrics)
    server = metrics.serve("127.0.0.1:9464")   # port 0: a free one, server.port says which
    ...
    server.close()

The GenAI semantic conventions' client metrics, under their Prometheus names (dots become
underscores, the unit a suffix), with their recommended bucket boundaries:

- ``gen_ai_client_operation_duration_seconds`` (histogram) of every model call, labels
  ``gen_ai_operation_name`` (``chat``), ``gen_ai_provider_name``, ``gen_ai_request_model``
  and ``error_type`` ("" for a call that answered, else the exception's class);
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
  (gauge: the failed calls of that tool since its last success, across sessions);
- ``approvals_waiting`` and ``approval_oldest_wait_seconds`` (gauges): the calls this
  process saw asked for approval and not yet decided, and how long the oldest has waited;
- ``parse_failures_total`` (a reply that was neither an action nor an answer) and
  ``self_repairs_total`` (the next reply of that session that was);
- ``guard_interventions_total{guard}`` (:data:`~miniagent.runtime.events.GuardName`);
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

import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from miniagent.errors import ConfigError
from miniagent.observe.describe import ModelInfo
from miniagent.runtime import events as ev
from miniagent.types import Observation, TokenUsage

__all__ = ["ALERT_RULES", "MAX_TOOLS", "UNKNOWN_TOOL", "Metrics", "MetricsServer",
           "parse_address", "serve_metrics", "tool_outcome"]

ALERT_RULES = Path(__file__).with_name("alerts.yml")
"""Prometheus alert rules over these metrics (for ``rule_files`` in ``prometheus.yml``)."""
MAX_TOOLS = 100
"""Distinct tool names kept as label values; later ones are counted as ``other``."""
UNKNOWN_TOOL = "unknown_tool"
"""The label of calls of a tool no source has (a name the model made up)."""
_UNKNOWN_TOOL = "Unknown tool "  # tools/toolbox.py's wording
MAX_SESSIONS = 10_000
"""Sessions whose state (failed tools, a parse failure) is remembered at once; the oldest is
forgotten first."""
_MISSING = "prometheus-client is not installed: pip install 'miniagent[metrics]'"
# the GenAI semantic conventions' advice for these two histograms
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24,
                    20.48, 40.96, 81.92)
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
                 16777216, 67108864)
STEP_BUCKETS = (1, 2, 3, 5, 8, 13, 21, 34, 55, 89)
_TIMED_OUT = re.compile(r"^Tool '.*' timed out after ")  # tools/toolbox.py's wording
_HTTP_STATUS = re.compile(r"(?:answered|refused the tools field \()\s*(\d{3})")  # models/
_HTTP_ERRORS = frozenset({"ModelHTTPError", "ToolsNotSupported"})


def tool_outcome(observation: Observation) -> str:
    """``ok``, ``timeout`` or ``error``: what a finished call's observation says.

    Example:
        >>> from miniagent.types import Observation
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
    """An event subscriber that counts runs, model calls and tool calls for Prometheus.

    Args:
        model: How the GenAI metrics name the model
            (:func:`~miniagent.observe.describe.describe_model`).
        registry: A ``prometheus_client.CollectorRegistry`` to register in; a new one when
            None (so several agents, or tests, in one process never share counters).

    Raises:
        ConfigError: prometheus-client is not installed.
    """

    def __init__(self, *, model: ModelInfo, registry: Any = None) -> None:
        try:
            import prometheus_client as prom
        except ImportError:
            raise ConfigError(_MISSING) from None
        self.model = model
        self.registry = prom.CollectorRegistry() if registry is None else registry
        r = self.registry
        gen_ai = ["gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model"]
        self.operation_duration = prom.Histogram(
            "gen_ai_client_operation_duration", "GenAI operation duration.",
            [*gen_ai, "error_type"], unit="seconds", buckets=DURATION_BUCKETS, registry=r)
        self.token_usage = prom.Histogram(
            "gen_ai_client_token_usage", "Number of input and output tokens used.",
            [*gen_ai, "gen_ai_token_type"], buckets=TOKEN_BUCKETS, registry=r)
        self.runs = prom.Counter("miniagent_runs", "Runs finished, by status.", ["status"],
                                 registry=r)
        self.run_steps = prom.Histogram("miniagent_run_steps", "Steps of each finished run.",
                                        buckets=STEP_BUCKETS, registry=r)
        self.tool_calls = prom.Counter(
            "miniagent_tool_calls", "Tool calls, by tool and outcome (ok, error, timeout, "
            "denied; retried: a call after a failed one of that tool).", ["tool", "outcome"],
            registry=r)
        self.tool_duration = prom.Histogram(
            "miniagent_tool_duration", "Duration of tool calls.", ["tool"], unit="seconds",
            buckets=DURATION_BUCKETS, registry=r)
        self.tool_failures = prom.Gauge(
            "miniagent_tool_consecutive_failures", "Failed calls of a tool since its last "
            "success.", ["tool"], registry=r)
        self.approvals_waiting = prom.Gauge(
            "miniagent_approvals_waiting", "Calls waiting for a person's decision.", registry=r)
        self.approval_age = prom.Gauge(
            "miniagent_approval_oldest_wait_seconds", "How long the oldest waiting call has "
            "waited.", registry=r)
        self.parse_failures = prom.Counter(
            "miniagent_parse_failures", "Replies that were neither an action nor an answer.",
            registry=r)
        self.self_repairs = prom.Counter(
            "miniagent_self_repairs", "Replies that parsed after a parse failure.", registry=r)
        self.guards = prom.Counter("miniagent_guard_interventions", "Guard interventions.",
                                   ["guard"], registry=r)
        self.model_errors = prom.Counter(
            "miniagent_model_errors", "Failed model calls, by error class and HTTP status.",
            ["error_type", "status_code"], registry=r)
        self.approvals_waiting.set_function(lambda: len(self._waiting))
        self.approval_age.set_function(self._oldest_wait)
        self._sessions: dict[str, _Session] = {}
        self._waiting: dict[tuple[str, str], _Waiting] = {}
        self._tools: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, event: ev.Event) -> None:
        handler = getattr(self, f"_on_{event.kind}", None)
        if handler is not None:
            with self._lock:
                handler(event)

    def model_call(self, *, elapsed: float, usage: TokenUsage | None = None,
                   error: BaseException | None = None) -> None:
        """Count one model call made outside an event stream (a Temporal worker's activity)."""
        with self._lock:
            status = getattr(error, "status", None)
            self._model_call(elapsed, usage, None if error is None else type(error).__name__,
                             str(status) if isinstance(status, int) else "")

    def tool_call(self, *, session_id: str, observation: Observation) -> None:
        """Count one tool call made outside an event stream (a Temporal worker's activity);
        one of a tool that failed last time in ``session_id`` counts as ``retried`` too."""
        with self._lock:
            name, session = observation.tool_name, self._session(session_id)
            if name in session.failed_tools:
                self.tool_calls.labels(self._tool(name), "retried").inc()
            self._tool_call(session_id, observation.tool_name, observation)
            if not session.failed_tools:  # nothing to remember of this session
                self._sessions.pop(session_id, None)

    def serve(self, address: str) -> MetricsServer:
        """Serve these metrics on ``http://HOST:PORT/metrics`` (:func:`serve_metrics`)."""
        return serve_metrics(address, self.registry)

    # -- helpers --------------------------------------------------------------------------

    def _tool(self, name: str) -> str:
        """``name`` as a label value: one of the first :data:`MAX_TOOLS` names, or ``other``."""
        if name in self._tools:
            return name
        if len(self._tools) < MAX_TOOLS:
            self._tools.add(name)
            return name
        return "other"

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            if len(self._sessions) >= MAX_SESSIONS:  # a worker sees no run end: forget
                del self._sessions[next(iter(self._sessions))]  # the oldest
            session = self._sessions[session_id] = _Session()
        return session

    def _gen_ai(self) -> dict[str, str]:
        return {"gen_ai_operation_name": "chat", "gen_ai_provider_name": self.model.provider,
                "gen_ai_request_model": self.model.name}

    def _oldest_wait(self) -> float:
        with self._lock:
            since = min((w.since for w in self._waiting.values()), default=None)
        return 0.0 if since is None else max(0.0, time.time() - since)

    def _settle_waiting(self, session_id: str, *, denied: bool) -> None:
        for key in [k for k in self._waiting if k[0] == session_id]:
            waiting = self._waiting.pop(key)
            if denied:
                self.tool_calls.labels(waiting.tool, "denied").inc()

    # -- events ---------------------------------------------------------------------------

    def _on_run_finished(self, event: ev.RunFinished) -> None:
        result = event.result
        self.runs.labels(result.status).inc()
        session = self._sessions.pop(event.session_id, _Session())
        self.run_steps.observe(max(session.last_step, len(result.steps)))
        if result.status != "awaiting_approval":  # cancelled, failed: no longer waiting
            self._settle_waiting(event.session_id, denied=False)

    def _on_step_started(self, event: ev.StepStarted) -> None:
        session = self._session(event.session_id)
        session.last_step = max(session.last_step, event.step)

    def _on_model_started(self, event: ev.ModelStarted) -> None:
        # the tools of a resumed step ran first: a call still waiting was denied
        self._settle_waiting(event.session_id, denied=True)

    def _on_model_responded(self, event: ev.ModelResponded) -> None:
        self._model_call(event.elapsed, event.response.usage, None, "")
        session = self._session(event.session_id)
        if session.repairing and event.parsed.kind in ("action", "final"):
            session.repairing = False
            self.self_repairs.inc()

    def _on_model_failed(self, event: ev.ModelFailed) -> None:
        error_type = event.error_type or "_OTHER"
        found = _HTTP_STATUS.search(event.error) if error_type in _HTTP_ERRORS else None
        self._model_call(event.elapsed, None, error_type, found.group(1) if found else "")

    def _model_call(self, elapsed: float, usage: TokenUsage | None, error_type: str | None,
                    status_code: str) -> None:
        labels = self._gen_ai()
        self.operation_duration.labels(**labels, error_type=error_type or "").observe(elapsed)
        if usage is not None and usage.known:
            self.token_usage.labels(**labels, gen_ai_token_type="input").observe(
                usage.prompt_tokens or 0)
            self.token_usage.labels(**labels, gen_ai_token_type="output").observe(
                usage.completion_tokens or 0)
        if error_type is not None:
            self.model_errors.labels(error_type, status_code).inc()

    def _on_tool_started(self, event: ev.ToolStarted) -> None:
        name = event.call.name
        self._waiting.pop((event.session_id, event.call.id), None)  # approved, now running
        if name in self._session(event.session_id).failed_tools:
            self.tool_calls.labels(self._tool(name), "retried").inc()

    def _on_tool_finished(self, event: ev.ToolFinished) -> None:
        self._tool_call(event.session_id, event.call.name, event.observation)

    def _tool_call(self, session_id: str, name: str, observation: Observation) -> None:
        # a name the model made up is no label value: the registry's names are
        unknown = observation.is_error and observation.output.startswith(_UNKNOWN_TOOL)
        tool, outcome = UNKNOWN_TOOL if unknown else self._tool(name), tool_outcome(observation)
        self.tool_calls.labels(tool, outcome).inc()
        if observation.attempts > 1:  # the executor tried it again (its retry policy)
            self.tool_calls.labels(tool, "retried").inc(observation.attempts - 1)
        self.tool_duration.labels(tool).observe(observation.elapsed)
        failed = self._session(session_id).failed_tools
        if outcome == "ok":
            failed.discard(name)
            self.tool_failures.labels(tool).set(0)
        else:
            if not unknown:
                failed.add(name)
            self.tool_failures.labels(tool).inc()

    def _on_approval_requested(self, event: ev.ApprovalRequested) -> None:
        for pending in event.pending:
            self._waiting.setdefault((event.session_id, pending.call_id),
                                     _Waiting(self._tool(pending.tool), event.at))

    def _on_guard_intervened(self, event: ev.GuardIntervened) -> None:
        self.guards.labels(event.guard).inc()
        if event.guard == "format_error":
            self.parse_failures.inc()
            self._session(event.session_id).repairing = True


def parse_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` as a host and a port (``[::1]:9464`` for IPv6).

    Example:
        >>> parse_address("127.0.0.1:9464")
        ('127.0.0.1', 9464)

    Raises:
        ConfigError: not HOST:PORT with a port from 0 to 65535.
    """
    host, sep, port = address.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"--metrics wants HOST:PORT, e.g. 127.0.0.1:9464, got {address!r}")
    return host, int(port)


@dataclass(kw_only=True)
class MetricsServer:
    """A running ``/metrics`` endpoint; :meth:`close` stops it."""

    host: str
    port: int
    server: Any
    thread: threading.Thread

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve_metrics(address: str, registry: Any = None) -> MetricsServer:
    """Serve ``registry`` (prometheus-client's default one when None) on
    ``http://HOST:PORT/metrics`` from a daemon thread.

    Raises:
        ConfigError: ``address`` is not HOST:PORT, the port cannot be bound, or
            prometheus-client is not installed.
    """
    host, port = parse_address(address)
    try:
        import prometheus_client as prom
    except ImportError:
        raise ConfigError(_MISSING) from None
    try:
        server, thread = prom.start_http_server(
            port, addr=host, registry=prom.REGISTRY if registry is None else registry)
    except OSError as exc:
        raise ConfigError(f"cannot serve metrics on {address}: {exc.strerror or exc}"
                          ) from None
    return MetricsServer(host=host, port=server.server_address[1], server=server,
                         thread=thread)
