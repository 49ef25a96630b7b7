"""Tools for the durable-session tests, loaded by the real CLI with --tools.

Side effects go to files named by environment variables, so the tests can count them.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from miniagent import tool


def _log(line: str) -> None:
    with Path(os.environ["DURABLE_LOG"]).open("a", encoding="utf-8") as f:
        f.write(line + "\n")


def _started(name: str) -> None:
    _log(f"started {name}")
    Path(os.environ["DURABLE_MARKS"], name).touch()


@tool
def append_line(text: str) -> str:
    """Append a line to the log (a side effect that must happen once)."""
    _log(f"append {text}")
    return "appended"


@tool(idempotent=True)
def slow_fetch(key: str) -> str:
    """Fetch slowly; safe to repeat."""
    _started("slow_fetch")
    time.sleep(float(os.environ.get("DURABLE_SLOW", "0")))
    return f"fetched {key}"


@tool
def slow_append(text: str) -> str:
    """Append a line, then take a long time to confirm (not safe to repeat)."""
    _log(f"append {text}")
    _started("slow_append")
    time.sleep(float(os.environ.get("DURABLE_SLOW", "0")))
    return "appended slowly"


@tool(requires_approval=True)
def transfer(amount: int) -> str:
    """Move money; a person must approve."""
    _started("transfer")
    release = os.environ.get("DURABLE_RELEASE")
    deadline = time.monotonic() + 60
    while release and not Path(release).exists() and time.monotonic() < deadline:
        time.sleep(0.02)  # held until the test says so (the concurrent-resume test)
    _log(f"transfer {amount}")
    return f"transferred {amount}"
