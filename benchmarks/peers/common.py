"""What every peer runner of ``benchmarks/task_success.py`` shares.

A runner is started with its framework's own virtual environment's python and one argument,
a job file (JSON) written by the main script: the server's base URL, the tasks (``id``,
``input``) and the limits (``max_steps``, ``max_tokens``, ``temperature``, ``timeout``). It
writes JSON lines to its standard output, nothing else (whatever the framework prints goes
to standard error):

- ``{"event": "start", "task": ID}`` before a task;
- ``{"event": "reply", "task": ID, "message": {...}, "usage": {...}, "seconds": S}`` for
  every chat completion the server answered (the framework's model calls, seen on the wire:
  every runtime's steps and tokens are counted the same way);
- ``{"event": "http_error", "task": ID, "status": N, "body": "..."}`` for a refused request;
- ``{"event": "tool", "task": ID, "name": ..., "arguments": {...}, "error": null | "..."}``
  for every tool function the framework ran;
- ``{"event": "result", "task": ID, "final_answer": ..., "status": ..., "error": ...,
  "seconds": S, "extra": {...}}`` when the task ended (``status``: ``completed``,
  ``max_steps``, ``timeout`` or ``error``).

The tools are the functions of ``miniagent/evals/builtin/tools.py`` themselves (the peer venv
has miniagent installed, editable, with its small dependencies): each is wrapped by
:func:`plain_tools` in a function with the same name, docstring and signature that records
the call. After a timeout the runner exits with :data:`EXIT_TIMEOUT` (a thread or a request
may still be running); the main script starts it again for the tasks left.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import importlib
import inspect
import json
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

EXIT_TIMEOUT = 3
"""Exit status after a task ran past its timeout."""
CONTENT_LIMIT = 4000
"""Characters of a reply's text kept in its event."""


@dataclass(kw_only=True)
class Job:
    """What the main script asks a runner to do."""

    base_url: str
    model: str
    api_key: str
    tasks: list[dict[str, str]]
    max_steps: int
    max_tokens: int
    temperature: float
    timeout: float


@dataclass(kw_only=True)
class Outcome:
    """How one task ended, as the framework reported it."""

    final_answer: str | None
    status: str = "completed"
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Events:
    """The JSON-lines channel to the main script: the original standard output, while the
    process's own file descriptor 1 (and ``sys.stdout``) now go to standard error."""

    def __init__(self) -> None:
        self._out = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        self._lock = threading.Lock()
        self.task: str | None = None

    def emit(self, event: str, **fields: Any) -> None:
        line = json.dumps({"event": event, "task": self.task, **fields}, ensure_ascii=False,
                          default=str)
        with self._lock:
            self._out.write(line + "\n")
            self._out.flush()


def load_job(path: str) -> Job:
    with open(path, encoding="utf-8") as handle:
        return Job(**json.load(handle))


def plain_tools(events: Events) -> list[Callable[..., Any]]:
    """The bundled eval's tools as plain functions (same names, docstrings, signatures) that
    record each call and let the tool's own errors (``ToolError``) propagate to the framework."""
    from miniagent.core.tools.tool import Tool
    from miniagent.evals.builtin import tools as module

    # in the module's order, which is the order miniagent's registry offers them in
    found = [item for item in vars(module).values() if isinstance(item, Tool)]
    return [_recording(item.fn, item.name, events) for item in found]


def _recording(fn: Callable[..., Any], name: str, events: Events) -> Callable[..., Any]:
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            arguments = dict(signature.bind(*args, **kwargs).arguments)
        except TypeError:
            arguments = {"_args": list(args), **kwargs}
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:
            events.emit("tool", name=name, arguments=arguments,
                        error=f"{type(exc).__name__}: {exc}")
            raise
        events.emit("tool", name=name, arguments=arguments, error=None)
        return result

    return wrapper


def record_http(events: Events) -> None:
    """Record every chat completion on the wire, whichever client the framework built: the
    transports of ``httpx2`` (the OpenAI SDK's) and ``httpx`` are wrapped in this process."""
    for name in ("httpx2", "httpx"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        _wrap_sync(module.HTTPTransport, events)
        _wrap_async(module.AsyncHTTPTransport, events)


def _wrap_sync(transport: Any, events: Events) -> None:
    send = transport.handle_request

    def handle_request(self: Any, request: Any) -> Any:
        started = time.perf_counter()
        response = send(self, request)
        if str(request.url.path).endswith("/chat/completions"):
            response.read()
            _emit_reply(events, response, time.perf_counter() - started)
        return response

    transport.handle_request = handle_request


def _wrap_async(transport: Any, events: Events) -> None:
    send = transport.handle_async_request

    async def handle_async_request(self: Any, request: Any) -> Any:
        started = time.perf_counter()
        response = await send(self, request)
        if str(request.url.path).endswith("/chat/completions"):
            await response.aread()
            _emit_reply(events, response, time.perf_counter() - started)
        return response

    transport.handle_async_request = handle_async_request


def _emit_reply(events: Events, response: Any, seconds: float) -> None:
    body = response.content.decode("utf-8", errors="replace")
    if response.status_code != 200:
        events.emit("http_error", status=response.status_code, body=body[:500])
        return
    try:
        data = json.loads(body)
        message = dict(data["choices"][0]["message"])
    except (ValueError, KeyError, IndexError, TypeError):
        events.emit("http_error", status=response.status_code, body=body[:500])
        return
    if isinstance(message.get("content"), str):
        message["content"] = message["content"][:CONTENT_LIMIT]
    events.emit("reply", message=message, usage=data.get("usage"),
                finish_reason=data["choices"][0].get("finish_reason"),
                seconds=round(seconds, 3))


Runner = Callable[[Job, dict[str, str], list[Callable[..., Any]]], Any]
"""Runs one task: returns an :class:`Outcome`, or an awaitable of one (async frameworks)."""


def main(run_task: Runner) -> None:
    """Run the job's tasks one by one, each bounded by the job's timeout."""
    events = Events()
    job = load_job(sys.argv[1])
    record_http(events)
    tools = plain_tools(events)
    for task in job.tasks:
        events.task = task["id"]
        events.emit("start")
        started = time.perf_counter()
        outcome, timed_out = _bounded(run_task, job, task, tools)
        events.emit("result", final_answer=outcome.final_answer, status=outcome.status,
                    error=outcome.error, seconds=round(time.perf_counter() - started, 3),
                    extra=outcome.extra)
        if timed_out:
            os._exit(EXIT_TIMEOUT)  # a worker thread or request may still run: start afresh


def _bounded(run_task: Runner, job: Job, task: dict[str, str],
             tools: list[Callable[..., Any]]) -> tuple[Outcome, bool]:
    """The task's outcome within ``job.timeout`` seconds. A sync framework runs in a worker
    thread (it cannot be cancelled); an async one on the runner's one event loop, kept for
    all its tasks (clients that a framework caches stay bound to a live loop)."""
    if inspect.iscoroutinefunction(run_task):
        future = asyncio.run_coroutine_threadsafe(_guarded(run_task(job, task, tools)),
                                                  _loop())
        try:
            return future.result(job.timeout), False
        except concurrent.futures.TimeoutError:
            future.cancel()
            return _timed_out(job), True
    box: dict[str, Outcome] = {}

    def work() -> None:
        box["outcome"] = _failed(run_task, job, task, tools)

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(job.timeout)
    if worker.is_alive():
        return _timed_out(job), True
    return box["outcome"], False


def _failed(run_task: Runner, job: Job, task: dict[str, str],
            tools: list[Callable[..., Any]]) -> Outcome:
    try:
        outcome: Outcome = run_task(job, task, tools)
        return outcome
    except BaseException as exc:
        return _error(exc)


async def _guarded(work: Awaitable[Outcome]) -> Outcome:
    try:
        return await work
    except Exception as exc:
        return _error(exc)


def _error(exc: BaseException) -> Outcome:
    return Outcome(final_answer=None, status="error",
                   error=f"{type(exc).__name__}: {exc}"[:2000])


def _timed_out(job: Job) -> Outcome:
    return Outcome(final_answer=None, status="timeout",
                   error=f"no answer within {job.timeout:g} s")


@functools.cache
def _loop() -> asyncio.AbstractEventLoop:
    """The event loop of the async runners, in a daemon thread."""
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    return loop
