"""A model behind any OpenAI-compatible ``/v1/chat/completions`` endpoint.

vLLM, llama.cpp's server, SGLang, Ollama, LM Studio, OpenAI itself: one POST per step,
through miniagent's own :class:`~miniagent.core.models.http.HttpClient` (stdlib only, so that
``import miniagent`` stays fast).

Transport faults, timeouts, 429 and 5xx answers are retried with exponential backoff and
full jitter (``Retry-After`` is honoured; a 429 pauses every request of the process to the same
endpoint, see :mod:`miniagent.core.throttles`); other 4xx answers are not, and neither is a 5xx
whose
body names the request as invalid (llama-cpp-python's server answers a request it cannot
validate with 500: asking again would get the same answer). A 4xx that blames the
``tools`` field raises :class:`~miniagent.core.errors.ToolsNotSupported`, so the ``auto`` protocol
can fall back to ReAct (and remember that it did). The model itself keeps no such memory.

With ``stream=True`` the answer is streamed (server-sent events) and its text reaches the
caller's ``on_delta`` as it is written; see :mod:`miniagent.core.models.streaming` for how each
server's way of streaming is read. A stream that breaks off, or that promised tool calls and
sent none, is asked for once more without streaming; a server that refuses
``stream_options`` is asked again without it (and not sent it again).

A request with ``tools`` and no ``tool_choice`` is sent ``tool_choice: "auto"``: some servers
ignore tools without it (llama-cpp-python's ``chatml-function-calling``). A server that refuses
that field (a 4xx naming it) is asked again without it, and not sent it again.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, get_args

from miniagent._internal.jsonscan import JSONLimitError, excerpt, loads_limited, write_json
from miniagent._internal.text import tokens
from miniagent._internal.wording import counted
from miniagent.core.errors import (
    ConfigError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeout,
    ToolsNotSupported,
)
from miniagent.core.models.base import Capabilities
from miniagent.core.models.http import (
    DEFAULT_MAX_BODY_BYTES,
    END,
    BodySink,
    HttpClient,
    HttpResponse,
)
from miniagent.core.models.openai_wire import MAX_BODY_DEPTH, normalize_completion, wire_tool_choice
from miniagent.core.throttles import Admission, EndpointLimits, endpoint
from miniagent.core.types import ModelRequest, ModelResponse, ToolMode

if TYPE_CHECKING:  # streaming (SSE) loads with a model's first streamed call
    from miniagent.core.models.streaming import DeltaSink

__all__ = ["OpenAICompatibleModel"]

log = logging.getLogger("miniagent")

_RETRY_STATUSES = frozenset({408, 429})
_RETRY_AFTER_MAX = 60.0
# The patterns of error paths and of construction are kept as text: ``re`` compiles each on
# first use and caches it, instead of every ``import miniagent`` compiling them.
_DELAY_SECONDS = r"[0-9]{1,12}(?:\.[0-9]{1,12})?"
"""``Retry-After`` as delay-seconds (RFC 9110: digits; a fraction tolerated)."""
_HTTP_DATE = r"[A-Z][a-z]{2}, [0-9]{2} [A-Z][a-z]{2} [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT"
"""``Retry-After`` as an HTTP-date in the IMF-fixdate form RFC 9110 has servers send."""
GrammarField = Literal["grammar", "guided_grammar", "structured_outputs"]
"""Where a server takes a GBNF grammar; sent only when set, since other servers reject it."""

_TOOL_WORDS = ("tools", "tool_choice", "function call", "function_call", "tool call",
               "tool_call", "functions")
"""Phrases of a 4xx that blame the tools field itself (not, say, one bad tool_call_id)."""

_TOOL_CHOICE = r"(?i)tool[ _-]?choice"
"""How an error names the ``tool_choice`` field (vLLM: ``"auto" tool choice requires ...``)."""

_INVALID_REQUEST = r"(?i)invalid_request|invalid request|validation error|unprocessable"
"""Words of an error body that blame the request itself, whatever the status says."""


def _checked_base_url(base_url: str) -> str:
    """``base_url`` without surrounding whitespace or a trailing slash, if it can be POSTed to.

    Checked here, once, so that a mistyped URL is a :class:`ConfigError` at construction
    (one line in the CLI) instead of a failure inside every request.
    """
    url = base_url.strip().rstrip("/")
    if not url.isascii():
        raise ConfigError(f"base_url must be ASCII (percent-encode the path, write the host "
                          f"in its xn-- form): {url!r}")
    if any(c.isspace() or not c.isprintable() for c in url):
        raise ConfigError(f"base_url contains whitespace or control characters: {url!r}")
    from urllib.parse import urlsplit  # once per model, not with ``import miniagent``

    try:
        parts = urlsplit(url)
        port = parts.port  # parsed lazily: this is where "99999" or "http" is refused
    except ValueError as exc:  # "Invalid IPv6 URL", "Port out of range 0-65535", ...
        raise ConfigError(f"base_url is not a valid URL ({exc}): {url!r}") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise ConfigError(f"base_url must start with http:// or https://, got {url!r} "
                          "(e.g. http://127.0.0.1:8000/v1)")
    if parts.username is not None or parts.password is not None:
        raise ConfigError("base_url must not hold credentials (user:password@): they would "
                          "not be sent and the URL is recorded; pass the key with api_key "
                          "(CLI: --api-key or MINIAGENT_API_KEY)")
    if not parts.hostname:
        raise ConfigError(f"base_url has no host: {url!r}")
    if port == 0:
        raise ConfigError(f"base_url has port 0, which no server listens on: {url!r}")
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise ConfigError(f"base_url cannot have a query or fragment (the request path "
                          f"/chat/completions is appended to it): {url!r}")
    return url


def _checked_api_key(api_key: str | None) -> str | None:
    """The key without surrounding whitespace, if it can travel in an HTTP header.

    The messages never repeat the key, not even in part.
    """
    if api_key is None:
        return None
    key = api_key.strip()
    if "\r" in key or "\n" in key:
        raise ConfigError("api_key contains a line break, which would inject HTTP headers; "
                          "check how it was pasted or read from a file")
    if any(not c.isprintable() for c in key):
        raise ConfigError("api_key contains a control character; check how it was pasted "
                          "or read from a file")
    try:
        key.encode("latin-1")
    except UnicodeEncodeError:
        raise ConfigError("api_key contains characters outside Latin-1, which an HTTP header "
                          "cannot carry; check how it was pasted or read from a file") from None
    return key


def _checked_timeout(timeout: float) -> float:
    if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
        raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return float(timeout)


class OpenAICompatibleModel:
    """A chat model served over the OpenAI-compatible HTTP API.

    Args:
        base_url: The API root, ending in ``/v1``: ``http://`` or ``https://``, a host, maybe
            a port, no query (surrounding whitespace is dropped).
        model: The ``model`` field of each request.
        api_key: Sent as ``Authorization: Bearer <api_key>`` when set (surrounding
            whitespace dropped; a line break or a non-Latin-1 character is refused).
        tool_mode: ``react`` (tools described in the prompt), ``native`` (the ``tools``
            field) or ``auto`` (native, falling back to ReAct where the server refuses it).
        timeout: Seconds per attempt (positive and finite).
        max_retries: Retries after the first attempt.
        backoff_base: The first retry waits up to this many seconds, doubling each time.
        backoff_max: The longest wait between attempts (``Retry-After`` aside).
        extra_body: Fields added to every request body (e.g. ``{"top_k": 20}``).
        grammar_field: Send the ReAct grammar (GBNF) in this field: ``"grammar"`` for
            llama.cpp's server, ``"guided_grammar"`` for vLLM < 0.12,
            ``"structured_outputs"`` for newer vLLM. ``None`` (the default) sends none.
        client: A shared :class:`HttpClient`; by default the model has its own.
        max_body_bytes: The largest response body its own client reads (32 MiB by
            default); a longer one is a :class:`~miniagent.core.errors.ModelResponseError`.
            A shared ``client`` keeps its own limit.
        stream: Stream each answer (``stream: true``); text deltas reach ``on_delta``.
        stream_usage: Ask for usage in the stream (``stream_options.include_usage``); a
            server that refuses the field is asked again without it.
        limits: Requests in flight, requests and tokens per minute
            (:class:`~miniagent.core.throttles.EndpointLimits`), shared by every session and
            model object of the process that use the same ``base_url`` and ``model``. Whatever the
            limits, a 429 makes every request to that endpoint wait out its ``Retry-After``
            (or the backoff), not only the one that got it.
        aids: The aids for weak models the served model is measured to need (an
            :class:`~miniagent.Agent` turns them on unless told otherwise; see
            :func:`~miniagent.core.models.profiles.aids_for_served`); by default none, a served
            model being taken to be capable.
        response_format: The server takes ``response_format: {"type": "json_schema"}``
            (OpenAI, vLLM, llama.cpp's server): a typed answer (``output_type``) is asked that
            way on a native request; without it, with a ``final_result`` tool.

    Raises:
        ConfigError: ``base_url``, ``api_key``, ``timeout`` or ``grammar_field`` cannot work.

    Example:
        >>> model = OpenAICompatibleModel(base_url="http://127.0.0.1:8000/v1", model="qwen")
        >>> model.capabilities.native_tools is None
        True
    """

    def __init__(
        self,
        *,
        base_url: str = "http://127.0.0.1:8000/v1",
        model: str = "default",
        api_key: str | None = None,
        tool_mode: ToolMode = "auto",
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
        extra_body: dict[str, Any] | None = None,
        grammar_field: GrammarField | None = None,
        client: HttpClient | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        stream: bool = False,
        stream_usage: bool = True,
        limits: EndpointLimits | None = None,
        aids: tuple[str, ...] = (),
        response_format: bool = False,
    ) -> None:
        self.base_url = _checked_base_url(base_url)
        self.model = model
        self.api_key = _checked_api_key(api_key)
        self.tool_mode: ToolMode = tool_mode
        self.timeout = _checked_timeout(timeout)
        self.max_retries = max(0, max_retries)
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.extra_body = dict(extra_body or {})
        if grammar_field not in (None, *get_args(GrammarField)):
            raise ConfigError(f"grammar_field must be one of {get_args(GrammarField)} or None, "
                              f"got {grammar_field!r}")
        self.grammar_field = grammar_field
        self.url = f"{self.base_url}/chat/completions"
        if max_body_bytes < 1:
            raise ConfigError(f"max_body_bytes must be at least 1, got {max_body_bytes}")
        self.max_body_bytes = max_body_bytes
        self.stream = stream
        self.stream_usage = stream_usage
        self._client = client
        self._owns_client = client is None
        if limits is not None and not isinstance(limits, EndpointLimits):
            raise ConfigError(f"limits must be an EndpointLimits, e.g. EndpointLimits("
                              f"max_concurrency=4), got {type(limits).__name__} {limits!r:.80}")
        self.limits = limits if limits is not None and limits.any else None
        self.aids = tuple(aids)
        self.response_format = response_format
        self._endpoint = endpoint(self.base_url, model)
        self._auto_choice = True
        """Send ``tool_choice: "auto"`` with tools when a request sets none (False once this
        server refused the field)."""
        self._headers = {"Accept": "application/json"}
        if self.api_key:
            self._headers["Authorization"] = f"Bearer {self.api_key}"

    @property
    def capabilities(self) -> Capabilities:
        """Native tools as configured (unknown in ``auto``); a grammar with ``grammar_field``."""
        native = {"react": False, "native": True, "hybrid": True}.get(self.tool_mode)
        return Capabilities(tool_mode=self.tool_mode, native_tools=native,
                            grammar=self.grammar_field is not None, streaming=self.stream,
                            small_model=bool(self.aids), aids=self.aids,
                            response_format=self.response_format)

    async def generate(self, request: ModelRequest,
                       on_delta: DeltaSink | None = None) -> ModelResponse:
        """POST one chat completion and normalise the answer.

        With ``stream``, the answer is streamed and ``on_delta`` receives its text as it
        arrives (``("content" | "reasoning", text)``, and ``("restart", "")`` when a broken
        stream is asked for again without streaming).

        Raises:
            ToolsNotSupported: The server refused the ``tools`` field.
            ModelHTTPError: A non-retryable status, or retries ran out on one.
            ModelConnectionError: The server could not be reached, after retries.
            ModelTimeout: No answer within ``timeout``, after retries.
            ModelResponseError: A 2xx answer that is not a chat completion (or is too deep
                or too large to be read as one).
        """
        try:
            return await self._generate(request, on_delta)
        except ModelHTTPError as exc:
            if not self._refused_auto_choice(exc, request):
                raise
            log.info("%s refused tool_choice (%s); asking again without it, from now on",
                     self.url, exc.status)
            self._auto_choice = False
            return await self._generate(request, on_delta)

    async def _generate(self, request: ModelRequest, on_delta: DeltaSink | None
                        ) -> ModelResponse:
        if self.stream:
            from miniagent.core.models.streaming import StreamIncomplete  # a streaming model

            try:
                return await self._streamed(request, on_delta)
            except StreamIncomplete as exc:
                log.info("stream from %s incomplete (%s); asking again without streaming",
                         self.url, exc)
                if on_delta is not None:
                    on_delta("restart", "")
        payload = _encode(self._body(request))
        spend = self._spend(request, payload)
        response = await self._post(payload, with_tools=bool(request.tools), spend=spend)
        return spend.settled(self._completion(response))

    async def _streamed(self, request: ModelRequest, on_delta: DeltaSink | None
                        ) -> ModelResponse:
        """One streamed completion (see :mod:`miniagent.core.models.streaming`).

        Raises:
            StreamIncomplete: Streaming did not give the whole answer; ask without it.
        """
        from miniagent.core.models.streaming import StreamIncomplete

        body = self._body(request)
        body["stream"] = True
        if self.stream_usage:
            body["stream_options"] = {"include_usage": True}
        state = _StreamState(request.stop, on_delta)
        payload = _encode(body)
        spend = self._spend(request, payload)
        try:
            response = await self._post(payload, with_tools=bool(request.tools),
                                        stream=state, spend=spend)
        except ToolsNotSupported:
            raise
        except ModelHTTPError as exc:
            detail = _error_text(exc.body or "").lower()
            if not (400 <= exc.status < 500 and "stream" in detail):
                raise
            if "stream_options" in detail or "include_usage" in detail:
                self.stream_usage = False  # this server refuses the field: never again
                return await self._streamed(request, on_delta)
            self.stream = False  # it refuses streaming itself
            raise StreamIncomplete(f"the server refused streaming ({exc.status})") from None
        return spend.settled(state.response(response, self._completion))

    def _spend(self, request: ModelRequest, payload: bytes) -> _Spend:
        """What a request is counted as in ``tokens_per_minute`` before it is sent: its
        estimated prompt plus the tokens it may generate."""
        if self.limits is None or self.limits.tokens_per_minute is None:
            return _Spend(0)
        generated = request.max_tokens if request.max_tokens is not None else 0
        return _Spend(tokens(payload.decode("utf-8", "replace")) + generated)

    def _refused_auto_choice(self, exc: ModelHTTPError, request: ModelRequest) -> bool:
        """Whether ``exc`` is a 4xx naming the ``tool_choice: "auto"`` this model sent."""
        chosen = "tool_choice" in self.extra_body or "tool_choice" in request.extra_body
        sent = bool(request.tools) and request.tool_choice in (None, "auto") and not chosen
        return (sent and self._auto_choice and 400 <= exc.status < 500
                and re.search(_TOOL_CHOICE, _error_text(exc.body or "")) is not None)

    def _completion(self, response: HttpResponse) -> ModelResponse:
        """The answer of a 2xx response read whole."""
        try:
            body = loads_limited(response.body, max_depth=MAX_BODY_DEPTH)
        except JSONLimitError as exc:
            raise ModelResponseError(
                f"POST {self.url} answered {response.status} with a body past a decoding "
                f"limit ({exc}): {_excerpt(response.text())}"
            ) from None
        except ValueError:
            raise ModelResponseError(
                f"POST {self.url} answered {response.status} with a body that is not JSON: "
                f"{_excerpt(response.text())}"
            ) from None
        if isinstance(body, dict) and "choices" not in body and "error" in body:
            raise ModelResponseError(
                f"POST {self.url} answered {response.status} with an error: {_error_text(body)}"
            )
        return normalize_completion(body, depth_checked=True)  # loads_limited bounded it

    async def aclose(self) -> None:
        """Close the HTTP connections (only those of the model's own client)."""
        if self._client is not None and self._owns_client:
            await self._client.aclose()

    def _body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": request.messages,
                                **request.generation_settings()}
        if request.tools:
            body["tools"] = request.tools
            choice = request.tool_choice or "auto"
            if choice != "auto" or self._auto_choice:
                body["tool_choice"] = wire_tool_choice(choice)
        elif request.grammar and self.grammar_field:
            body.update(_grammar_body(self.grammar_field, request.grammar))
        body.update(self.extra_body)
        body.update(request.extra_body)
        return body

    async def _post(self, payload: bytes, *, with_tools: bool,
                    stream: _StreamState | None = None, spend: _Spend | None = None
                    ) -> HttpResponse:
        """POST with retries; return the first 2xx answer.

        Each attempt is let through the endpoint's shared limits first (and waits out a
        429's pause); a 429 pauses every request to the endpoint. With ``stream``, a 2xx body
        goes to it as it arrives; a transport fault or timeout after its first byte is no
        reason to retry the stream (:class:`StreamIncomplete`)."""
        if self._client is None:
            self._client = HttpClient(max_body_bytes=self.max_body_bytes)
        attempts = self.max_retries + 1
        last: ModelError | None = None
        broken = stream.broken if stream is not None else ()
        for attempt in range(1, attempts + 1):
            retry_after: float | None = None
            admission = await self._endpoint.admit(self.limits, spend.tokens if spend else 0)
            if spend is not None:
                spend.admission = admission
            try:
                response = await self._client.post_json(
                    self.url, payload, self._headers, self.timeout,
                    sink=stream.start() if stream is not None else None,
                )
            except (ModelConnectionError, ModelTimeout) as exc:
                if stream is not None and stream.started:
                    from miniagent.core.models.streaming import StreamIncomplete

                    raise StreamIncomplete(f"the stream broke off: {exc}") from None
                last = exc
            except broken as exc:  # the event stream (only a streamed call reads one)
                from miniagent.core.models.streaming import StreamIncomplete

                raise StreamIncomplete(str(exc)) from None
            else:
                if 200 <= response.status < 300:
                    return response
                admission.used(0)  # an error answer generated nothing: no tokens this minute
                last = self._http_error(response, with_tools)
                if not _retryable(response.status) or (response.status >= 500
                                                        and _blames_request(response)):
                    raise last
                retry_after = _retry_after(response)
            finally:
                admission.done()
            delay = self._delay(attempt, retry_after)
            if isinstance(last, ModelHTTPError) and last.status == 429:
                # every session sharing the endpoint backs off, not only this one
                self._endpoint.pause(delay)
            if attempt < attempts:
                await asyncio.sleep(delay)
        assert last is not None
        raise _exhausted(last, self.url, attempts)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Full jitter: uniform in [0, min(max, base * 2^(attempt-1))]; Retry-After wins."""
        if retry_after is not None:
            return retry_after
        return random.uniform(0.0, min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1)))

    def _http_error(self, response: HttpResponse, with_tools: bool) -> ModelHTTPError:
        status = response.status
        text = response.text()
        detail = _error_text(text)
        if with_tools and 400 <= status < 500 and _blames_tools(detail):
            return ToolsNotSupported(
                f"POST {self.url} refused the tools field ({status}): {detail}",
                status=status,
                body=text,
            )
        return ModelHTTPError(
            f"POST {self.url} answered {status}: {detail}{_root_hint(self.base_url, status)}",
            status=status, body=text, retry_after=_retry_after(response),
        )


class _Spend:
    """A request's tokens as reserved in ``tokens_per_minute``, corrected to its reported
    usage once it is answered."""

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens
        self.admission: Admission | None = None

    def settled(self, response: ModelResponse) -> ModelResponse:
        total = response.usage.total_tokens
        if self.admission is not None and total is not None:
            self.admission.used(total)
        return response


_VERSIONED_ROOT = r"(?i)/v[0-9]+[a-z0-9]*$"
"""A base URL path that ends in an API version: ``/v1``, ``/api/paas/v4``, ``/v1beta``."""


def _root_hint(base_url: str, status: int) -> str:
    """A 404 from a root without a version is almost always a forgotten ``/v1``: say so."""
    from urllib.parse import urlsplit  # an error path: not loaded with miniagent

    if status != 404 or re.search(_VERSIONED_ROOT, urlsplit(base_url).path):
        return ""
    return f" (did you mean {base_url}/v1?)"


def _encode(body: dict[str, Any]) -> bytes:
    """The request body as UTF-8 JSON (what ``json.dumps(body, ensure_ascii=False)`` writes)."""
    return write_json(body).encode()


class _StreamState:
    """One streamed answer: the event reader and accumulator of the current attempt."""

    _RAW_KEPT = 1 << 20  # a server that ignored stream: true answers with plain JSON

    def __init__(self, stop: list[str] | None, on_delta: DeltaSink | None) -> None:
        # loaded with the first streamed call, not with ``import miniagent``
        from miniagent.core.models.sse import SSEError, SSEReader
        from miniagent.core.models.streaming import StreamAccumulator

        self.broken: tuple[type[Exception], ...] = (SSEError,)
        """What the event reader raises on a broken stream."""
        self.stop, self.on_delta = stop, on_delta
        self.reader = SSEReader()
        self.acc = StreamAccumulator(stop=stop, on_delta=on_delta)
        self.raw = bytearray()
        self.pieces = 0

    @property
    def started(self) -> bool:
        return self.pieces > 0

    def start(self) -> BodySink:
        """A fresh sink for a new attempt (nothing of an earlier one is kept)."""
        from miniagent.core.models.sse import SSEReader  # loaded with this state
        from miniagent.core.models.streaming import StreamAccumulator

        self.reader = SSEReader()
        self.acc = StreamAccumulator(stop=self.stop, on_delta=self.on_delta)
        self.raw.clear()
        self.pieces = 0
        return self._sink

    def _sink(self, piece: bytes) -> bool | str:
        self.pieces += 1
        if not self.acc.events and len(self.raw) < self._RAW_KEPT:
            self.raw += piece
        stop = any(self.acc.feed(data) for data in self.reader.feed(piece))
        return END if stop and self.acc.done else stop

    def response(self, http: HttpResponse, decode: Callable[[HttpResponse], ModelResponse]
                 ) -> ModelResponse:
        for data in self.reader.close():
            if self.acc.feed(data):
                break
        if not self.acc.events and self.raw.lstrip()[:1] == b"{":
            return decode(HttpResponse(status=http.status, headers=http.headers,
                                       body=bytes(self.raw)))
        return normalize_completion(self.acc.body())


def _blames_tools(detail: str) -> bool:
    """Whether a 4xx names the tools field itself (not, say, one bad ``tool_call_id``)."""
    lowered = detail.lower()
    if "tool_call_id" in lowered:
        return False
    return any(word in lowered for word in _TOOL_WORDS)


def _grammar_body(field: GrammarField, grammar: str) -> dict[str, Any]:
    """llama.cpp's server: ``grammar``; vLLM before 0.12: ``guided_grammar``; newer vLLM:
    ``structured_outputs``. All take GBNF."""
    if field == "structured_outputs":
        return {"structured_outputs": {"grammar": grammar}}
    return {field: grammar}


def _retryable(status: int) -> bool:
    return status >= 500 or status in _RETRY_STATUSES


def _blames_request(response: HttpResponse) -> bool:
    """Whether an error body says the request is invalid (the start of it is enough)."""
    return re.search(_INVALID_REQUEST, response.body[:4096].decode(errors="replace")) is not None


def _retry_after(response: HttpResponse) -> float | None:
    """``Retry-After`` in seconds, or None (then the usual backoff applies).

    Only plain seconds from 0 to 60, or an HTTP-date (IMF-fixdate) from now to 60 seconds on,
    are taken: a date already past, other date forms, and anything ``float`` would read but no
    server means (``nan``, ``inf``, ``-1``, ``1e9``, ``5_0``, ``٣``), are ignored, so a server
    cannot stall the retries (and, after a 429, every session of the endpoint) until the run's
    deadline.
    """
    value = response.headers.get("retry-after", "").strip()
    if re.fullmatch(_HTTP_DATE, value):
        return _until_date(value)
    if not re.fullmatch(_DELAY_SECONDS, value):
        return None
    seconds = float(value)
    return seconds if math.isfinite(seconds) and 0.0 <= seconds <= _RETRY_AFTER_MAX else None


def _until_date(value: str) -> float | None:
    """Seconds from now until an IMF-fixdate, if it is in the next minute."""
    from email.utils import parsedate_to_datetime  # only on a 429 that gives a date

    try:
        seconds = parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError, OverflowError):  # e.g. "Feb 30"
        return None
    return seconds if 0.0 < seconds <= _RETRY_AFTER_MAX else None


def _exhausted(last: ModelError, url: str, attempts: int) -> ModelError:
    cause = str(last).removeprefix(f"POST {url} ")
    message = f"POST {url} failed after {counted(attempts, 'attempt')}: {cause}"
    if isinstance(last, ModelHTTPError):
        return type(last)(message, status=last.status, body=last.body,
                          retry_after=last.retry_after)
    return type(last)(message)


def _error_text(body: Any) -> str:
    """The server's error message, from ``{"error": {"message": ...}}`` or raw text.

    An empty message shows the whole (short) body instead, and an empty body says so: a line
    ending in "answered 500: " tells the user nothing."""
    if isinstance(body, str) and not body.strip():
        return "(empty body)"
    data = body
    if isinstance(body, str):
        try:
            data = loads_limited(body, max_depth=MAX_BODY_DEPTH)
        except ValueError:  # not JSON, or too deep to look into
            return _excerpt(body)
    if isinstance(data, dict):
        error = data.get("error", data.get("detail", data.get("message")))
        if isinstance(error, dict):
            error = error.get("message", error)
        if isinstance(error, str) and not error.strip():
            whole = body if isinstance(body, str) else excerpt(body, 300)
            return f"(empty error message) {_excerpt(whole)}"
        if error is not None:
            return _excerpt(error if isinstance(error, str) else excerpt(error, 300))
    return _excerpt(body if isinstance(body, str) else excerpt(body, 300))


def _excerpt(text: str, limit: int = 300) -> str:
    """The start of ``text`` on one line (only the start is looked at: bodies can be huge)."""
    head = " ".join(text[: limit * 4].split())
    if len(head) <= limit and len(text) <= limit * 4:
        return head
    return head[:limit] + "..."
