"""Tools for the Temporal tests, served by a real `miniagent worker` process (--tools).

Side effects go to a file named by DURABLE_LOG (with each call's idempotency key and attempt),
and a mark file appears in DURABLE_MARKS when a slow tool starts, so a test can kill its worker
at that moment.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from miniagent import tool, tool_context


def _log(line: str) -> None:
    context = tool_context()
    with Path(os.environ["DURABLE_LOG"]).open("a", encoding="utf-8") as f:
        f.write(f"{line} key={context.idempotency_key} attempt={context.attempt}\n")


def _started(name: str) -> None:
    _log(f"started {name}")
    Path(os.environ["DURABLE_MARKS"], name).touch()
    time.sleep(float(os.environ.get("DURABLE_SLOW", "0")))


@tool(idempotent=True)
def slow_fetch(key: str) -> str:
    """Fetch slowly; safe to repeat."""
    _started("slow_fetch")
    return f"fetched {key}"


@tool
def slow_append(text: str) -> str:
    """Append a line, slowly (not safe to repeat)."""
    _started("slow_append")
    _log(f"append {text}")
    return "appended"


@tool(requires_approval=True)
def transfer(amount: int) -> str:
    """Move money; a person must approve."""
    _log(f"transfer {amount}")
    return f"transferred {amount}"
