"""Streamed chat completions: chunks in, one completion body out, deltas on the way.

:class:`StreamAccumulator` reads the ``data`` of each server-sent event of a
``/v1/chat/completions`` stream and builds the body a non-streamed answer would have had, so
that :func:`~miniagent.core.models.openai_wire.normalize_completion` reads both the same way.
Servers stream differently, and each difference is handled here:

- text arrives as ``delta.content`` (``null`` or missing in chunks that carry none) and a
  reasoning model's thinking as ``delta.reasoning_content`` (DeepSeek, vLLM before 0.10) or
  ``delta.reasoning`` (newer vLLM); both are passed on as they come;
- tool calls arrive as fragments keyed by ``index`` (vLLM, llama.cpp), all at once in one
  chunk (Ollama), without any ``index`` (older Ollama), or with the same ``index`` for every
  call; a new non-empty ``id`` at an index that already holds a call with another id starts a
  new call;
- a name repeated in every chunk of its call is kept once; a name streamed in pieces is joined;
- argument fragments are joined from the first chunk on (also the chunk that carries the
  name); arguments sent as an object (not a string) are encoded once;
- usage comes in a last chunk with no choices (``stream_options.include_usage``), or inside a
  chunk that has them, or not at all;
- stop words: generation is cut where one appears (a server that ignored ``stop``), and the
  text that might be the start of one is held back from the deltas until it is known not to be.

:meth:`StreamAccumulator.body` raises :class:`StreamIncomplete` for a stream that broke off
(no ``[DONE]`` and no ``finish_reason``), one that promised tool calls (``finish_reason:
tool_calls``) but sent none, and one that reported an error: the model then asks once more
without streaming.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from miniagent._internal.jsonscan import JSONLimitError, loads_limited

__all__ = ["DeltaChannel", "DeltaSink", "StreamAccumulator", "StreamIncomplete"]

DeltaChannel = Literal["content", "reasoning", "restart"]
"""What a delta carries: answer text, reasoning text, or (``restart``, no text) the notice that
what was streamed so far is void because the request is being sent again."""
DeltaSink = Callable[[DeltaChannel, str], None]
"""Receives ``(channel, text)`` for each delta of a streamed answer, as it arrives."""

_MAX_CHUNK_DEPTH = 64


class StreamIncomplete(Exception):
    """The stream cannot be trusted to hold the whole answer (the reason says why)."""


@dataclass(slots=True)
class _Call:
    """One tool call as its pieces arrive: id, name and argument text."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def add_name(self, name: str) -> None:
        if not self.name or name.startswith(self.name):
            self.name = name  # first, repeated whole, or sent cumulatively
        elif not self.name.endswith(name):
            self.name += name  # a piece of a name streamed in pieces

    def add_arguments(self, value: Any) -> None:
        if isinstance(value, str):
            self.arguments.append(value)
        elif isinstance(value, dict) and not self.arguments:
            self.arguments.append(json.dumps(value, ensure_ascii=False))

    def wire(self) -> dict[str, Any]:
        function = {"name": self.name, "arguments": "".join(self.arguments)}
        return {"id": self.id, "type": "function", "function": function}


class StreamAccumulator:
    """Collects one streamed completion.

    Args:
        stop: Stop words; the text is cut at the first one and the stream stops there.
        on_delta: Receives each piece of text as it is known to be final.
    """

    def __init__(self, *, stop: Sequence[str] | None = None,
                 on_delta: DeltaSink | None = None) -> None:
        self.stop_words = [s for s in stop or () if s]
        self._hold = max((len(s) for s in self.stop_words), default=1) - 1
        self._firsts = frozenset(s[0] for s in self.stop_words)
        self.on_delta = on_delta
        self.text = ""
        self.reasoning = ""
        self._sent = 0
        self._calls: list[_Call] = []
        self._by_index: dict[int, _Call] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.done = False  # [DONE] seen
        self.stopped = False  # cut at a stop word
        self.error: str | None = None
        self.events = 0
        self.meta: dict[str, Any] = {}

    # -- input --------------------------------------------------------------------------

    def feed(self, data: str) -> bool:
        """Read one event's data; return True when nothing more should be read (``[DONE]``,
        a stop word or an error: the connection is then closed). Nothing after ``[DONE]`` is
        read: not appended to the answer, and a server that keeps the body open cannot hold
        the call."""
        if self.done:
            return True
        self.events += 1
        if data.strip() == "[DONE]":
            self.done = True
            return True
        try:
            chunk = loads_limited(data, max_depth=_MAX_CHUNK_DEPTH)
        except (JSONLimitError, ValueError):
            self.error = f"a stream event is not JSON: {data[:120]!r}"
            return True
        if not isinstance(chunk, dict):
            return False
        if "error" in chunk and "choices" not in chunk:
            self.error = f"the server reported an error in the stream: {str(chunk['error'])[:300]}"
            return True
        for key in ("id", "model", "created", "system_fingerprint"):
            if key in chunk and key not in self.meta:
                self.meta[key] = chunk[key]
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choices = chunk.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices else None
        if isinstance(choice, dict):
            self._choice(choice)
        return self.stopped

    def _choice(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            message = choice.get("message")
            delta = message if isinstance(message, dict) else {}
        for key in ("reasoning_content", "reasoning"):
            piece = delta.get(key)
            if isinstance(piece, str) and piece:
                self.reasoning += piece
                self._emit("reasoning", piece)
                break
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            items = [item for item in calls if isinstance(item, dict)]
            for item in items:
                self._call_delta(item, several=len(items) > 1)
        legacy = delta.get("function_call")
        if isinstance(legacy, dict) and not isinstance(calls, list):
            self._call_delta({"index": 0, "function": legacy})
        content = _text(delta.get("content"))
        if content and not self.stopped:
            self._add_text(content)
        finish = choice.get("finish_reason")
        if isinstance(finish, str) and finish:
            self.finish_reason = finish

    def _call_delta(self, item: dict[str, Any], *, several: bool = False) -> None:
        index = item.get("index")
        raw_id = item.get("id")
        call_id = raw_id if isinstance(raw_id, str) else ""
        function = item.get("function")
        if not isinstance(function, dict):
            function = item  # flat {"name", "arguments"}
        call = self._call_for(index if isinstance(index, int) else None, call_id, several)
        if call_id and not call.id:
            call.id = call_id
        name = function.get("name")
        if isinstance(name, str) and name:
            call.add_name(name)
        call.add_arguments(function.get("arguments"))

    def _call_for(self, index: int | None, call_id: str, several: bool) -> _Call:
        """The call a fragment belongs to (see the module docstring).

        Without an ``index``, a fragment continues the last call unless it brings a new id
        or comes with other calls in one chunk (then each is a whole call)."""
        if index is None:
            last = self._calls[-1] if self._calls else None
            if last is not None and not several and (not call_id or call_id == last.id):
                return last
            return self._new_call(None)
        current = self._by_index.get(index)
        if current is None or (call_id and current.id and call_id != current.id):
            return self._new_call(index)
        return current

    def _new_call(self, index: int | None) -> _Call:
        call = _Call()
        self._calls.append(call)
        if index is not None:
            self._by_index[index] = call
        return call

    def _add_text(self, piece: str) -> None:
        start = max(0, len(self.text) - self._hold)
        self.text += piece
        cut = self._stop_at(start)
        if cut is not None:
            self.text = self.text[:cut]
            self.stopped = True
            self._flush()
            return
        safe = len(self.text) - self._held_back()
        if safe > self._sent:
            self._emit("content", self.text[self._sent:safe])
            self._sent = safe

    def _stop_at(self, start: int) -> int | None:
        found = [i for s in self.stop_words if (i := self.text.find(s, start)) != -1]
        return min(found) if found else None

    def _held_back(self) -> int:
        """How many final characters could begin a stop word (only where a stop word's first
        character stands: that is rare, and this runs for every delta)."""
        text, end = self.text, len(self.text)
        for i in range(max(0, end - self._hold), end):
            if text[i] in self._firsts and any(s.startswith(text[i:]) for s in self.stop_words):
                return end - i
        return 0

    def _flush(self) -> None:
        if len(self.text) > self._sent:
            self._emit("content", self.text[self._sent:])
            self._sent = len(self.text)

    def _emit(self, channel: DeltaChannel, text: str) -> None:
        if self.on_delta is not None:
            self.on_delta(channel, text)

    # -- output -------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """Whether any event arrived (a failure after that is a broken stream)."""
        return self.events > 0

    def body(self) -> dict[str, Any]:
        """The completion as a non-streamed answer's body.

        Raises:
            StreamIncomplete: The stream broke off, reported an error, or promised tool
                calls that never came.
        """
        if self.error:
            raise StreamIncomplete(self.error)
        if not (self.done or self.finish_reason or self.stopped):
            raise StreamIncomplete("the stream ended before its last chunk")
        calls = [c.wire() for c in self._calls if c.name or c.arguments]
        if self.finish_reason in ("tool_calls", "function_call") and not calls:
            raise StreamIncomplete("the stream promised tool calls but sent none")
        self._flush()
        message: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.reasoning:
            message["reasoning_content"] = self.reasoning
        if calls:
            message["tool_calls"] = calls
        finish = "stop" if self.stopped else self.finish_reason
        body: dict[str, Any] = {
            **self.meta, "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }
        if self.usage is not None:
            body["usage"] = self.usage
        return body


def _text(value: Any) -> str:
    """Delta text: a string, or the text parts of a list; anything else (null) is none."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [p.get("text") if isinstance(p, dict) else p for p in value]
        return "".join(p for p in parts if isinstance(p, str))
    return ""
