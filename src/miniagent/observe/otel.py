"""OpenTelemetry spans of runs, after the GenAI semantic conventions (extra ``otel``).

:class:`OtelTracer` is an event subscriber: it turns a run's events into spans, started and
ended at the times the events carry::

    invoke_agent {agent}    INTERNAL  AGENT  gen_ai.operation.name=invoke_agent
      step {n}              INTERNAL  CHAIN  miniagent.step (guard interventions as events)
        chat {model}        CLIENT    LLM    gen_ai.operation.name=chat
        execute_tool {tool} INTERNAL  TOOL   gen_ai.operation.name=execute_tool

The span kinds are the GenAI conventions' (an agent in process and its tools are INTERNAL, a
model call over the network is CLIENT); beside them, ``openinference.span.kind``, the kind
Phoenix and other OpenInference backends show: without it a step, which no GenAI operation
names, shows as UNKNOWN. Every span carries ``gen_ai.conversation.id`` (the session id).

Chat spans carry the request settings (``gen_ai.request.model``, ``.temperature``,
``.max_tokens``, ``.stop_sequences``), ``gen_ai.provider.name``, ``server.address`` /
``server.port``, and the answer's ``gen_ai.response.model``, ``.id`` and ``.finish_reasons``
and token usage (``gen_ai.usage.input_tokens``, ``.output_tokens``,
``.cache_read.input_tokens``); the agent span sums the usage and counts the steps started
(``miniagent.steps``: one whose model call failed too). Usage the server did not report is left
out, not sent as 0: such a chat span carries ``miniagent.usage.estimated_tokens`` instead, and
so does the agent span when any of its model calls did (its estimate counts the reported ones).
Tool spans carry ``gen_ai.tool.name``, ``gen_ai.tool.call.id`` and ``gen_ai.tool.type``. A
failed model call, a tool that returned an error and a run that did not complete set
``error.type`` (the exception's class, ``tool_error``, the run's status) and an error status.

Message content (``gen_ai.input.messages``, ``gen_ai.output.messages``,
``gen_ai.tool.definitions``, ``gen_ai.tool.call.arguments`` / ``.result``) is recorded only
when asked for: ``capture_content=True``, or the environment variable
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``. Even then it is redacted like a
JSONL trace (:class:`~miniagent.core.trace.redact.Redactor`).

Every text attribute (and each text of a sequence attribute, of a span event, and a status
description) is cut to :func:`attribute_limit` characters: the limit of OpenTelemetry's
``OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT`` / ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``, else
:data:`ATTRIBUTE_LIMIT` (64 Ki), so that a 20 MB reply costs no 40 MB export. The cut is
marked (``... [cut 19,934,508 of 20,000,000 chars]``, :mod:`miniagent.core.trace.cut`), where the
SDK's own limits cut silently; message content stays valid JSON, its longest texts cut.

:func:`otlp_provider` builds a tracer provider exporting over OTLP/HTTP (protobuf) to any
collector: Jaeger, Phoenix, Langfuse, Logfire, an OpenTelemetry Collector
(``miniagent run --otlp URL``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from miniagent._internal.version import installed_version
from miniagent.core.errors import ConfigError
from miniagent.core.models.describe import ModelInfo
from miniagent.core.runtime import events as ev
from miniagent.core.trace.cut import cut_text, fitted_json
from miniagent.core.trace.redact import Redactor
from miniagent.core.types import RunResult, TokenUsage

try:
    from opentelemetry import trace as otel_trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode

    _MISSING = ""
except ImportError:  # pragma: no cover - depends on the environment; said when used
    _MISSING = "OpenTelemetry is not installed: pip install 'miniagent[otel]'"

__all__ = ["ATTRIBUTE_LIMIT", "CONTENT_ENV", "OtelTracer", "attribute_limit", "otlp_provider"]

CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
ATTRIBUTE_LIMIT = 64 * 1024
"""Characters an attribute's text keeps when no OpenTelemetry length limit is set: a whole
prompt of a long run, yet a few spans fit in a collector's request."""
INSTRUMENTATION = "miniagent"
_NOT_ERRORS = frozenset({"completed", "awaiting_approval"})
_OPENINFERENCE_KINDS = {"invoke_agent": "AGENT", "chat": "LLM", "execute_tool": "TOOL"}
_OTEL_SETTING = {"stop": "stop_sequences"}  # a request's setting: its gen_ai.request.* name
"""``openinference.span.kind`` per GenAI operation, as OpenInference maps them; a span of no
operation (a step) is a CHAIN, OpenInference's link between the agent and its calls."""


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


def attribute_limit() -> int:
    """The characters a span attribute's text may have: ``OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT``,
    else ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`` (read by the SDK's ``SpanLimits``, which gives
    them that precedence), else :data:`ATTRIBUTE_LIMIT`.

    Raises:
        ConfigError: a limit is set to something other than a non-negative integer.
    """
    try:
        from opentelemetry.sdk.trace import SpanLimits
    except ImportError:  # the API alone: no SDK limits to follow
        return ATTRIBUTE_LIMIT
    try:
        limit = SpanLimits().max_span_attribute_length
    except ValueError as exc:  # the SDK's message names the variable and its value
        raise ConfigError(str(exc)) from None
    return ATTRIBUTE_LIMIT if limit is None else limit


@dataclass
class _Run:
    """The open spans of one run, by the span ids its events carry."""

    agent: Span
    spans: dict[str, Span] = field(default_factory=dict)
    usage: TokenUsage = field(default_factory=TokenUsage)
    first_step: int = 0
    last_step: int = 0
    """The numbers of the first and last step started: a step whose model call failed counts
    too, though the result keeps only the steps that ended."""


class OtelTracer:
    """An event subscriber that records runs as OpenTelemetry spans.

    Args:
        model: What to call the model (:func:`~miniagent.core.models.describe.describe_model`).
        agent_name: ``gen_ai.agent.name`` and the agent span's name.
        tracer_provider: Where spans go; the global provider when None.
        capture_content: Record messages, tool definitions, arguments and results; None reads
            :data:`CONTENT_ENV`.
        secrets: Values never to record, besides what a Redactor always removes.

    Attributes:
        limit: The characters an attribute's text keeps (:func:`attribute_limit`, read once).
    """

    def __init__(self, *, model: ModelInfo, agent_name: str = "miniagent",
                 tracer_provider: Any = None, capture_content: bool | None = None,
                 secrets: Iterable[str | None] = ()) -> None:
        if _MISSING:
            raise ConfigError(_MISSING)
        self.model, self.agent_name = model, agent_name
        self.tracer = otel_trace.get_tracer(INSTRUMENTATION, installed_version(),
                                            tracer_provider=tracer_provider)
        if capture_content is None:
            capture_content = os.environ.get(CONTENT_ENV, "").strip().lower() in ("1", "true")
        self.capture_content = capture_content
        self.redact = Redactor(secrets)
        # Cut here, marked, rather than by the SDK's SpanLimits: those cut silently, and only
        # on a provider built with them; a content attribute also stays valid JSON this way.
        self.limit = attribute_limit()
        self._runs: dict[str, _Run] = {}
        self._lock = threading.Lock()

    def __call__(self, event: ev.Event) -> None:
        handler = getattr(self, f"_on_{event.kind}", None)
        if handler is not None:
            with self._lock:
                handler(event)

    # -- spans ----------------------------------------------------------------------------

    def _start(self, run: _Run | None, event: ev.Event, name: str, kind: SpanKind,
               attributes: dict[str, Any]) -> Span:
        parent = None
        if run is not None:
            parent = run.spans.get(event.parent_id or "", run.agent)
        context = otel_trace.set_span_in_context(parent) if parent is not None else None
        operation = attributes.get("gen_ai.operation.name", "")
        attributes = self._bounded({
            "gen_ai.conversation.id": event.session_id,
            "openinference.span.kind": _OPENINFERENCE_KINDS.get(operation, "CHAIN"), **attributes})
        return self.tracer.start_span(name, context=context, kind=kind, attributes=attributes,
                                      start_time=_ns(event.at))

    def _child(self, event: ev.Event, name: str, kind: SpanKind,
               attributes: dict[str, Any]) -> None:
        run = self._runs.get(event.session_id)
        if run is not None:
            run.spans[event.span_id] = self._start(run, event, name, kind, attributes)

    def _end(self, event: ev.Event) -> tuple[_Run, Span] | None:
        run = self._runs.get(event.session_id)
        span = run.spans.pop(event.span_id, None) if run is not None else None
        if run is None or span is None:
            return None
        return run, span

    def _bounded(self, attributes: dict[str, Any]) -> dict[str, Any]:
        """``attributes`` with each text (alone or in a sequence) cut to :attr:`limit`."""
        return {name: self._cut(value) for name, value in attributes.items()}

    def _cut(self, value: Any) -> Any:
        if isinstance(value, str):
            return cut_text(value, self.limit)
        if isinstance(value, (list, tuple)):
            return [self._cut(item) for item in value]
        return value

    def _set(self, span: Span, name: str, value: Any) -> None:
        span.set_attributes(self._bounded({name: value}))

    def _error(self, span: Span, description: str) -> None:
        span.set_status(Status(StatusCode.ERROR, cut_text(self.redact.text(description),
                                                          self.limit)))

    def _content(self, span: Span, name: str, value: Any) -> None:
        if self.capture_content:  # redacted whole first: a cut never splits a secret
            span.set_attribute(name, fitted_json(self.redact(value), self.limit))

    # -- the run --------------------------------------------------------------------------

    def _on_run_started(self, event: ev.RunStarted) -> None:
        span = self._start(None, event, f"invoke_agent {self.agent_name}", SpanKind.INTERNAL, {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": self.agent_name,
            **_known(self.model)})
        self._content(span, "gen_ai.input.messages", [_text_message("user", event.question)])
        self._runs[event.session_id] = _Run(agent=span)

    def _on_run_finished(self, event: ev.RunFinished) -> None:
        run = self._runs.pop(event.session_id, None)
        if run is None:
            return
        at, result = _ns(event.at), event.result
        for span in reversed(list(run.spans.values())):  # what never ended ends with the run
            span.end(end_time=at)
        agent = run.agent
        _set_usage(agent, run.usage)
        agent.set_attribute("miniagent.status", result.status)
        agent.set_attribute("miniagent.steps", _steps(run, result))
        if result.final_answer is not None:
            self._content(agent, "gen_ai.output.messages",
                          [_text_message("assistant", result.final_answer, "stop")])
        if result.status not in _NOT_ERRORS:
            agent.set_attribute("error.type", result.status)
            self._error(agent, result.reason)
        agent.end(end_time=at)

    def _on_step_started(self, event: ev.StepStarted) -> None:
        run = self._runs.get(event.session_id)
        if run is not None:
            run.last_step = max(run.last_step, event.step)
            run.first_step = min(run.first_step or event.step, event.step)
        self._child(event, f"step {event.step}", SpanKind.INTERNAL, {"miniagent.step": event.step})

    def _on_step_finished(self, event: ev.StepFinished) -> None:
        ended = self._end(event)
        if ended is not None:
            ended[1].end(end_time=_ns(event.at))

    def _on_guard_intervened(self, event: ev.GuardIntervened) -> None:
        run = self._runs.get(event.session_id)
        if run is None:
            return
        span = run.spans.get(event.span_id, run.agent)
        attributes: dict[str, Any] = {"miniagent.guard": event.guard,
                                      "miniagent.detail": self.redact.text(event.detail)}
        if event.call_id:
            attributes["gen_ai.tool.call.id"] = event.call_id
        span.add_event("miniagent.guard", self._bounded(attributes), timestamp=_ns(event.at))

    def _on_slot_waiting(self, event: ev.SlotWaiting) -> None:
        run = self._runs.get(event.session_id)
        if run is None:
            return
        span = run.spans.get(event.span_id, run.agent)  # the waiting call's span
        span.add_event("miniagent.slot_waiting", self._bounded(
            {"miniagent.waiting_for": self.redact.text(event.what),
             "miniagent.reason": event.reason}), timestamp=_ns(event.at))

    def _on_approval_requested(self, event: ev.ApprovalRequested) -> None:
        run = self._runs.get(event.session_id)
        if run is not None:
            span = run.spans.get(event.span_id, run.agent)
            span.add_event("miniagent.approval_requested", self._bounded(
                {"gen_ai.tool.call.id": [p.call_id for p in event.pending]}),
                timestamp=_ns(event.at))

    # -- model calls ----------------------------------------------------------------------

    def _on_model_started(self, event: ev.ModelStarted) -> None:
        request, model = event.request, self.model
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat", **_known(model),
            "miniagent.protocol": request.protocol}
        for name, value in request.generation_settings().items():
            attributes[f"gen_ai.request.{_OTEL_SETTING.get(name, name)}"] = value
        if model.server_address:
            attributes["server.address"] = model.server_address
            if model.server_port:
                attributes["server.port"] = model.server_port
        self._child(event, f"chat {model.name}".rstrip(), SpanKind.CLIENT, attributes)
        run = self._runs.get(event.session_id)
        span = run.spans.get(event.span_id) if run is not None else None
        if span is not None:
            self._content(span, "gen_ai.input.messages", input_messages(request.messages))
            if request.tools:
                self._content(span, "gen_ai.tool.definitions", request.tools)

    def _on_model_responded(self, event: ev.ModelResponded) -> None:
        ended = self._end(event)
        if ended is None:
            return
        run, span = ended
        response = event.response
        run.usage = run.usage + response.usage
        _set_usage(span, response.usage)
        raw = response.raw if isinstance(response.raw, dict) else {}
        if response.model:  # a FallbackModel's: the request went to this one of its models
            self._set(span, "gen_ai.request.model", response.model)
        answered = raw.get("model") if isinstance(raw.get("model"), str) else response.model
        if answered:  # the server's answer (of any length), else the model's own name
            self._set(span, "gen_ai.response.model", answered)
        if isinstance(raw.get("id"), str):
            self._set(span, "gen_ai.response.id", raw["id"])
        if response.finish_reason:
            self._set(span, "gen_ai.response.finish_reasons", [response.finish_reason])
        span.set_attribute("miniagent.parsed.kind", event.parsed.kind)
        if event.retried is not None:
            span.set_attribute("miniagent.retried", True)
        self._content(span, "gen_ai.output.messages", [output_message(event)])
        span.end(end_time=_ns(event.at))

    def _on_model_failed(self, event: ev.ModelFailed) -> None:
        ended = self._end(event)
        if ended is not None:
            span = ended[1]
            span.set_attribute("error.type", event.error_type or "_OTHER")
            self._error(span, event.error)
            span.end(end_time=_ns(event.at))

    # -- tool calls -----------------------------------------------------------------------

    def _on_tool_started(self, event: ev.ToolStarted) -> None:
        call = event.call
        self._child(event, f"execute_tool {call.name}", SpanKind.INTERNAL, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id, "gen_ai.tool.type": "function"})
        run = self._runs.get(event.session_id)
        span = run.spans.get(event.span_id) if run is not None else None
        if span is not None:
            self._content(span, "gen_ai.tool.call.arguments",
                          call.arguments if call.arguments or not call.raw_arguments
                          else call.raw_arguments)

    def _on_tool_finished(self, event: ev.ToolFinished) -> None:
        ended = self._end(event)
        if ended is None:
            return
        span, observation = ended[1], event.observation
        self._content(span, "gen_ai.tool.call.result", observation.output)
        if observation.is_error:
            span.set_attribute("error.type", "tool_error")
            span.set_status(Status(StatusCode.ERROR, "the tool returned an error"))
        span.end(end_time=_ns(event.at))


def _set_usage(span: Span, usage: TokenUsage) -> None:
    """The reported counts; none for an unknown usage, whose estimate is ours, not the
    server's (a backend would add it up with the counted tokens)."""
    if not usage.known:
        span.set_attribute("miniagent.usage.estimated_tokens", usage.estimated_tokens)
        return
    span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens or 0)
    span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens or 0)
    span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cached_tokens or 0)


def _known(model: ModelInfo) -> dict[str, str]:
    """The provider and model attributes that are known (a Temporal client knows neither)."""
    known = {"gen_ai.provider.name": model.provider, "gen_ai.request.model": model.name}
    return {name: value for name, value in known.items() if value}


def _text_message(role: str, text: str, finish_reason: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "parts": [{"type": "text", "content": text}]}
    if finish_reason is not None:
        message["finish_reason"] = finish_reason
    return message


def input_messages(wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI-style wire messages in the conventions' form: ``{"role", "parts": [...]}``."""
    out = []
    for message in wire:
        role = str(message.get("role", "user"))
        parts: list[dict[str, Any]] = []
        content = message.get("content")
        if role == "tool":
            parts.append({"type": "tool_call_response", "id": message.get("tool_call_id"),
                          "response": content})
        elif isinstance(content, str) and content:
            parts.append({"type": "text", "content": content})
        elif isinstance(content, list):  # content parts: keep their text
            parts += [{"type": "text", "content": p.get("text", "")} for p in content
                      if isinstance(p, dict)]
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            parts.append({"type": "tool_call", "id": call.get("id"),
                          "name": function.get("name"), "arguments": function.get("arguments")})
        out.append({"role": role, "parts": parts})
    return out


def output_message(event: ev.ModelResponded) -> dict[str, Any]:
    """The model's answer in the conventions' form."""
    response = event.response
    parts: list[dict[str, Any]] = []
    if response.content:
        parts.append({"type": "text", "content": response.content})
    for call in response.tool_calls:
        parts.append({"type": "tool_call", "id": call.id, "name": call.name,
                      "arguments": call.arguments or call.raw_arguments})
    return {"role": "assistant", "parts": parts,
            "finish_reason": response.finish_reason or "stop"}


def otlp_provider(url: str, *, service_name: str = "miniagent", timeout: float = 5.0,
                  max_request_bytes: int | None = None,
                  shutdown_timeout: float | None = None) -> Any:
    """A tracer provider that batches spans to an OTLP/HTTP collector at ``url``.

    ``url`` is the traces endpoint (``http://127.0.0.1:4318/v1/traces``), or a collector's
    base URL, to which ``/v1/traces`` is added. Call ``shutdown()`` on it to send what is left.
    Sending never affects a run (:mod:`miniagent.observe.otlp_spans`): a batch goes as
    requests of at most ``max_request_bytes``
    (:data:`~miniagent.observe.otlp_spans.MAX_REQUEST_BYTES`), each retried for up to
    ``timeout`` seconds; the first failure of the process is logged as one line, and
    ``shutdown()`` waits at most ``shutdown_timeout`` seconds
    (:data:`~miniagent.observe.otlp_export.SHUTDOWN_TIMEOUT`) for a collector that is down,
    and at most ``timeout`` for one that accepted the last request and does not answer.

    Raises:
        ConfigError: ``url`` is not an http(s) URL, an OpenTelemetry limit in the environment
            is not a number, or the exporter is not installed.
    """
    if _MISSING:
        raise ConfigError(_MISSING)
    attribute_limit()  # a bad OTEL_*_LIMIT is said here, not as the SDK's ValueError
    try:
        from miniagent.observe import otlp_spans
    except ImportError:
        raise ConfigError("the OTLP exporter is not installed: pip install 'miniagent[otel]'"
                          ) from None
    return otlp_spans.otlp_provider(url, service_name=service_name, timeout=timeout,
                                    max_request_bytes=max_request_bytes,
                                    shutdown_timeout=shutdown_timeout)


def _steps(run: _Run, result: RunResult) -> int:
    """The steps of the run's turn (step numbers count across a conversation's turns)."""
    first = result.steps[0].index if result.steps else run.first_step
    started = run.last_step - first + 1 if run.last_step and first else 0
    return max(len(result.steps), started)
