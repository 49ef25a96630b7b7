"""JsonlTracer: every event of a run as one JSON object per line, credentials redacted.

Subscribe it to an agent (``Agent(trace="run.jsonl")`` does so, as does ``miniagent run
--trace FILE``) or pass it as one run's ``on_event``::

    tracer = JsonlTracer("run.jsonl")
    agent.run("What is 2+3?", on_event=tracer)
    tracer.close()

Each line is one :func:`~miniagent.core.trace.records.event_record`: the rendered request of each
model call (wire messages, tools, stop words, temperature, max tokens, grammar), the raw output
and what the protocol parsed from it, each tool call and its observation, guard interventions,
timings (``at`` on every record, ``elapsed`` on model calls and observations), token usage with
cached tokens, and the final status. Text is UTF-8 (``ensure_ascii=False``). Each line is
appended with one unbuffered write, so a crash loses at most the line being written, a resumed
session can trace into the same file, and tracers of several processes can share one.
``miniagent trace show FILE`` and ``miniagent trace html FILE`` read it back.

API keys, ``Authorization`` headers and other credentials never reach the file: each record
goes through a :class:`~miniagent.core.trace.redact.Redactor` first.

A text longer than :data:`FIELD_LIMIT` characters (a 20 MB reply, a tool's huge result) is
kept as its beginning and a marker, ``... [cut 19,737,896 of 20,000,000 chars]``: a line stays
readable and the file does not grow by the whole text at each of the records that repeat it
(the reply, what was parsed from it, the final answer, the next request's history).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from miniagent._internal.files import open_private
from miniagent.core.errors import ConfigError
from miniagent.core.runtime.events import Event
from miniagent.core.trace.cut import cut_strings
from miniagent.core.trace.records import event_record
from miniagent.core.trace.redact import Redactor

__all__ = ["FIELD_LIMIT", "JsonlTracer"]

FIELD_LIMIT = 256 * 1024
"""Characters a text in a record keeps; the rest is cut, the cut marked."""


class JsonlTracer:
    """An event subscriber that appends each event to ``path`` as one JSON line.

    Args:
        path: The trace file; created if missing, appended to if not.
        secrets: Values never to write (an API key, a tool's credentials), besides the
            credential-named environment variables and fields a
            :class:`~miniagent.core.trace.redact.Redactor` always removes.
        model: A name for the model, recorded on each ``run_started`` line.

    Raises:
        ConfigError: ``path`` cannot be opened for appending (one line saying why).
    """

    def __init__(self, path: str | os.PathLike[str], *, secrets: Iterable[str | None] = (),
                 model: str | None = None) -> None:
        self.path = Path(path)
        self.model = model
        self.redact = Redactor(secrets)
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = None
        self._open()  # fail now, with a clear message, rather than on the first event

    def __call__(self, event: Event) -> None:
        if event.kind == "model_delta":  # a streamed reply is written whole by model_responded
            return
        record = event_record(event)
        if self.model is not None and event.kind == "run_started":
            record["model"] = self.model
        self.write(record)

    def write(self, record: dict[str, Any]) -> None:
        """Append one record (redacted, long texts cut) as a line; reopens the file after
        :meth:`close`."""
        # a long text is redacted before its cut, so that no secret is split by it
        record = cut_strings(record, FIELD_LIMIT, self.redact.text)
        data = (self.redact.json_line(record) + "\n").encode("utf-8", "backslashreplace")
        with self._lock:
            handle = self._file or self._open()
            view = memoryview(data)
            while view:  # one write() per line where the OS allows: tracers of several
                written = handle.write(view)  # processes may append to the same file
                view = view[written or 0:]

    def close(self) -> None:
        """Close the file; a later event reopens it and appends."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def _open(self) -> IO[bytes]:
        try:
            self._file = open_private(self.path, "ab", buffering=0)
        except OSError as exc:
            raise ConfigError(f"cannot write the trace file {self.path}: "
                              f"{exc.strerror or exc}") from None
        return self._file

    def __enter__(self) -> JsonlTracer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
