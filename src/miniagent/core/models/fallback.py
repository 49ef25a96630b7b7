"""FallbackModel: several models in order of preference; a request one cannot answer goes on to
the next.

::

    model = FallbackModel([OpenAICompatibleModel(base_url=primary, model="qwen"),
                           OpenAICompatibleModel(base_url=backup, model="qwen")])

A request goes to the *current* model: the first at the start, then the one that answered
last, so that a server's prefix cache keeps hitting. When it fails after its own retries (it
could not be reached, timed out, answered 5xx, or 429 past its ``Retry-After`` budget: see
:func:`falls_through`), the request goes on to the next model: those that have not failed, in
the order given, then those that failed, the one that failed longest ago first. A failed model is
asked again only after the others failed; when every one failed for the same request, the
last error is raised (its class and status kept), its message naming each failure, and the next
request starts with the last model tried (the one the step was rendered for). A request a
server refuses as invalid (400, 422, or a 5xx whose body says so) is raised as it is: another
server would refuse it too.

The step is rendered for the model that answers. Each model's ``capabilities`` say how it takes
a request; the fallback's are the current model's, with ``streaming`` when any model streams
(deltas go only to those that do, and a failed attempt's are taken back with a ``restart``
delta) and ``tool_mode="auto"`` when the models differ in how they take tools, so that an
:class:`~miniagent.Agent` picks the ``auto`` protocol, which renders either way. When the next
model takes requests of another shape (another ``tool_mode`` or ``native_tools``), the fallback
makes it the current one and raises :class:`~miniagent.core.errors.ModelSwitched` before sending
anything: the step logic renders the same turn again (the ``auto`` protocol for the new model's
``native_tools``: ReAct for a model without native tools) and asks again, so it goes to that
model. Models of the same shape take the request as it was rendered, in the same call.

The answer carries the name of the model that gave it (:attr:`ModelResponse.model
<miniagent.core.types.ModelResponse.model>`), which the step records (:attr:`Step.model
<miniagent.core.types.Step.model>`) and traces, spans, metrics and the CLI show. Names are those
given (a mapping), else each model's ``model`` name (its file name for the embedded model, its
class name for others), numbered where two are the same.

The current model belongs to the fallback object, so it is shared by every session that uses it
(in a Temporal worker: every workflow it serves).
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from miniagent.core.errors import (
    ConfigError,
    ModelError,
    ModelHTTPError,
    ModelSwitched,
    ToolsNotSupported,
)
from miniagent.core.models.base import Capabilities, Model
from miniagent.core.types import ModelRequest, ModelResponse

if TYPE_CHECKING:
    from miniagent.core.models.streaming import DeltaChannel, DeltaSink

__all__ = ["FallbackModel", "falls_through"]

log = logging.getLogger("miniagent")

REFUSED_AS_INVALID = frozenset({400, 422})
"""Statuses of a request the server refuses as invalid: no other server is asked."""
_INVALID_REQUEST = r"(?i)invalid_request|invalid request|validation error|unprocessable"
"""Words of a 5xx body that blame the request (llama-cpp-python answers 500 to one it cannot
validate)."""


def falls_through(error: ModelError) -> bool:
    """Whether a request that failed with ``error`` goes on to the next model (the default rule).

    Everything a model raises after its retries does, but a request the server refused as invalid:
    a 400 or 422, a refusal of the ``tools`` field (which the ``auto`` protocol answers by
    rendering ReAct), or a 5xx whose body says the request is invalid. A 401, 403 or 404 does: the
    model cannot be used as configured (a wrong key, a wrong URL), another one may.

    Example:
        >>> falls_through(ModelHTTPError("POST ... answered 503", status=503))
        True
        >>> falls_through(ModelHTTPError("POST ... answered 422", status=422))
        False
    """
    if isinstance(error, ModelSwitched | ToolsNotSupported):
        return False
    if isinstance(error, ModelHTTPError):
        if error.status in REFUSED_AS_INVALID:
            return False
        return not (error.status >= 500 and re.search(_INVALID_REQUEST, error.body[:4096]))
    return True


class FallbackModel:
    """Several models in order of preference (see the module's docstring).

    Args:
        models: The models, first the preferred one: a sequence, or a mapping from the name
            each is recorded by to the model.
        fall_through: Whether a request that failed with an error goes on to the next model
            (default :func:`falls_through`).

    Raises:
        ConfigError: No model, something that is not a model, or two models of one name.

    Example:
        >>> from miniagent import ScriptedModel, ModelConnectionError
        >>> model = FallbackModel({"main": ScriptedModel([ModelConnectionError("refused")]),
        ...                        "backup": ScriptedModel(["Final Answer: 4"])})
        >>> import asyncio
        >>> asyncio.run(model.generate(ModelRequest(messages=[]))).model
        'backup'
    """

    def __init__(self, models: Sequence[Model] | Mapping[str, Model], *,
                 fall_through: Callable[[ModelError], bool] = falls_through) -> None:
        if isinstance(models, Mapping):
            names, members = [str(name) for name in models], list(models.values())
        else:
            members = list(models)
            names = _numbered([_name(model) for model in members])
        if not members:
            raise ConfigError("FallbackModel needs at least one model")
        for model in members:
            if not isinstance(model, Model):
                raise ConfigError(f"FallbackModel takes models (with generate and capabilities),"
                                  f" got {type(model).__name__} {model!r:.80}")
        if len(set(names)) != len(names) or not all(names):
            raise ConfigError(f"FallbackModel needs one non-empty name per model, got {names}")
        self.models: tuple[Model, ...] = tuple(members)
        self.names: tuple[str, ...] = tuple(names)
        self.fall_through = fall_through
        self.current = 0
        """The index of the model the next request goes to."""
        self._failed_at: dict[int, int] = {}
        """The models that failed since they last answered, with the order of their failure."""
        self._failures = itertools.count()
        self._round: list[tuple[int, ModelError]] = []
        """The failures of the request under way (it may cross a ModelSwitched)."""

    def __repr__(self) -> str:
        return f"FallbackModel({list(self.names)!r}, current={self.names[self.current]!r})"

    @property
    def current_name(self) -> str:
        """The name of the model the next request goes to."""
        return self.names[self.current]

    @property
    def capabilities(self) -> Capabilities:
        """The current model's, streaming when any model streams, and ``tool_mode="auto"``
        when the models differ in how they take tools."""
        every = [model.capabilities for model in self.models]
        caps = every[self.current]
        same = len({_shape(c) for c in every}) == 1
        return replace(caps, tool_mode=caps.tool_mode if same else "auto",
                       streaming=any(c.streaming for c in every))

    async def generate(self, request: ModelRequest,
                       on_delta: DeltaSink | None = None) -> ModelResponse:
        """The current model's answer, or the next one's after it failed (see the module).

        Raises:
            ModelSwitched: The next model takes requests of another shape: render the turn
                for it and ask again (it goes to that model).
            ModelError: A request refused as invalid; or every model failed (the last error's
                class and status, a message naming each failure).
        """
        relay = _Relay(on_delta)
        while True:
            index = self.current
            try:
                response = await self._ask(self.models[index], request, relay)
            except ModelError as exc:
                if not self.fall_through(exc):
                    self._answered(index)  # it is up: it judged the request
                    raise
                following = self._failed(index, exc)
                relay.restart()
                if _shape(self.models[following].capabilities) != _shape(
                        self.models[index].capabilities):
                    raise self._switched(following, exc) from exc
                continue
            self._answered(index)
            return replace(response, model=self.names[index])

    async def aclose(self) -> None:
        """Close every model."""
        for model in self.models:
            await model.aclose()

    async def _ask(self, model: Model, request: ModelRequest, relay: _Relay) -> ModelResponse:
        if relay.sink is not None and model.capabilities.streaming:
            return await model.generate(request, on_delta=relay)  # type: ignore[call-arg]
        return await model.generate(request)

    def _answered(self, index: int) -> None:
        self._failed_at.pop(index, None)
        self._round.clear()

    def _failed(self, index: int, error: ModelError) -> int:
        """Record the failure; the model to ask next (made the current one), or raise when
        every model failed for this request."""
        self._failed_at[index] = next(self._failures)
        self._round.append((index, error))
        tried = {i for i, _ in self._round}
        left = [i for i in self._order() if i not in tried]
        if not left:
            failures, self._round = self._round, []
            raise _all_failed([(self.names[i], e) for i, e in failures]) from error
        self.current = left[0]
        log.warning("model %s failed (%s); going on with %s", self.names[index],
                    _short(error), self.names[self.current])
        return self.current

    def _order(self) -> list[int]:
        """The models that have not failed, in the order given, then the failed ones, the one
        that failed longest ago first."""
        fine = [i for i in range(len(self.models)) if i not in self._failed_at]
        return fine + sorted(self._failed_at, key=self._failed_at.__getitem__)

    def _switched(self, index: int, cause: ModelError) -> ModelSwitched:
        caps = self.models[index].capabilities
        return ModelSwitched(
            f"model {self.names[self._round[-1][0]]} failed ({_short(cause)}); going on with "
            f"{self.names[index]}, which takes requests of another shape "
            f"(tool_mode {caps.tool_mode}, native_tools {caps.native_tools})",
            model=self.names[index], tool_mode=caps.tool_mode, native_tools=caps.native_tools)


class _Relay:
    """The caller's delta sink, told to ``restart`` when an attempt that sent deltas failed."""

    def __init__(self, sink: DeltaSink | None) -> None:
        self.sink = sink
        self.sent = False

    def __call__(self, channel: DeltaChannel, text: str) -> None:
        if self.sink is not None:
            self.sent = channel != "restart"  # a model's own restart took its deltas back
            self.sink(channel, text)

    def restart(self) -> None:
        if self.sink is not None and self.sent:
            self.sink("restart", "")
            self.sent = False


def _shape(caps: Capabilities) -> tuple[str, bool | None]:
    """What decides how a step is rendered for a model (a grammar it ignores, streaming
    is per call)."""
    return caps.tool_mode, caps.native_tools


def _name(model: object) -> str:
    name = getattr(model, "model", None)
    if isinstance(name, str) and name:
        return name
    path = getattr(model, "model_path", None)
    if isinstance(path, str | Path):
        return Path(path).name
    return type(model).__name__


def _numbered(names: list[str]) -> list[str]:
    """``names`` with the second and later of a name numbered (``qwen``, ``qwen#2``)."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return out


def _short(error: BaseException, limit: int = 200) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= limit else text[:limit] + "..."


def _all_failed(failures: list[tuple[str, ModelError]]) -> ModelError:
    """The last failure's class and status, with a message naming each model's failure."""
    last = failures[-1][1]
    message = "every model failed: " + "; ".join(f"{name}: {_short(error)}"
                                                  for name, error in failures)
    if isinstance(last, ModelHTTPError):
        return type(last)(message, status=last.status, body=last.body,
                          retry_after=last.retry_after)
    try:
        return type(last)(message)
    except TypeError:  # a subclass with another constructor
        return ModelError(message)
