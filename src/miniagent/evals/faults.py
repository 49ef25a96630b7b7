"""Tool fault injection: a seeded wrapper around a run's tools.

``ToolFaults(rate=0.2, latency=0.5, seed=7).wrap(registry, run_key)`` returns a copy of the
registry whose tools, once a call's arguments have validated, first sleep ``latency`` seconds
and then, with probability ``rate``, fail the way a flaky service does (the model reads
"Service unavailable ..." as an error observation) instead of running. Whether the n-th call
of a run fails depends only on ``(seed, run_key, n)``, so an eval rerun with the same seed
injects the same faults into the same calls, whatever the concurrency.

The returned :class:`FaultLog` counts what was injected, apart from the errors the run met
(which also include the model's own mistakes).
"""

from __future__ import annotations

import asyncio
import copy
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from miniagent.core.errors import ToolError
from miniagent.core.tools.tool import Tool
from miniagent.core.tools.toolbox import ToolRegistry

FAULT_MESSAGE = ("Service unavailable (503): {tool} did not answer this time. "
                 "The service is flaky; calling it again may work.")


@dataclass(kw_only=True)
class FaultLog:
    """What was injected into one run's tool calls."""

    calls: int = 0
    failures: int = 0
    delayed_seconds: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {"tool_calls_seen": self.calls, "tool_failures": self.failures,
                "tool_delay_s": round(self.delayed_seconds, 3)}


@dataclass(kw_only=True, frozen=True)
class ToolFaults:
    """Seeded tool faults: a failure rate and a fixed added latency."""

    rate: float = 0.0
    latency: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"the tool failure rate must be within 0..1, got {self.rate}")
        if self.latency < 0:
            raise ValueError(f"the tool latency must not be negative, got {self.latency}")

    @property
    def active(self) -> bool:
        return self.rate > 0 or self.latency > 0

    def wrap(self, registry: ToolRegistry, run_key: str) -> tuple[ToolRegistry, FaultLog]:
        """A registry like ``registry`` whose calls get this run's faults, and their log."""
        log = FaultLog()
        if not self.active:
            return registry, log
        decide = self._decider(run_key, log)
        wrapped = ToolRegistry([_faulty(t, decide, self.latency) for t in registry],
                               default_timeout=registry.default_timeout)
        return wrapped, log

    def _decider(self, run_key: str, log: FaultLog) -> Callable[[], bool]:
        def fails() -> bool:
            with log._lock:
                log.calls += 1
                n = log.calls
                failed = random.Random(f"{self.seed}|{run_key}|{n}").random() < self.rate
                log.failures += failed
                log.delayed_seconds += self.latency
            return failed
        return fails


def _faulty(original: Tool, fails: Callable[[], bool], latency: float) -> Tool:
    """A copy of ``original`` whose function is preceded by the injected latency and fault."""
    fn = original.fn
    faulty = copy.copy(original)
    if original.is_async:
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            if latency:
                await asyncio.sleep(latency)
            if fails():
                raise ToolError(FAULT_MESSAGE.format(tool=original.name))
            return await fn(*args, **kwargs)
        faulty.fn = run_async
    else:
        def run_sync(*args: Any, **kwargs: Any) -> Any:  # runs in a worker thread
            if latency:
                time.sleep(latency)
            if fails():
                raise ToolError(FAULT_MESSAGE.format(tool=original.name))
            return fn(*args, **kwargs)
        faulty.fn = run_sync
    return faulty
