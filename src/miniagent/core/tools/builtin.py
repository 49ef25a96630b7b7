"""Safe built-in tools, opt-in: a calculator, workspace-confined file tools, the time.

Nothing here evaluates code or touches a file outside the workspace root given to
:func:`workspace_tools`, and every tool's cost is bounded before it starts (see
:mod:`miniagent.core.tools.calculator` and :mod:`miniagent.core.tools.workspace`). Bad input raises
:class:`~miniagent.core.errors.ToolError`, so the model sees a plain explanation of what to do
instead.

Example:
    >>> from miniagent.core.tools.toolbox import ToolRegistry
    >>> registry = ToolRegistry(builtin_tools(root="."))
    >>> calculator("2 * (3 + 4)")
    14
"""

from __future__ import annotations

from datetime import datetime
from datetime import timezone as dt_timezone
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from miniagent.core.errors import ToolError
from miniagent.core.tools.calculator import calculator
from miniagent.core.tools.tool import Tool, tool
from miniagent.core.tools.workspace import workspace_tools

__all__ = ["builtin_tools", "calculator", "current_time", "workspace_tools"]

# -- time ----------------------------------------------------------------------------


@tool(idempotent=True)  # no effects: a call a crash interrupted may run again
def current_time(timezone: str = "UTC") -> str:
    """The current date and time in ISO 8601, e.g. 2024-05-01T14:03:00+02:00.

    Args:
        timezone: an IANA time zone name such as 'UTC', 'Europe/Paris' or 'Asia/Tokyo'.
    """
    name = timezone.strip() or "UTC"
    if name.upper() in ("UTC", "Z", "GMT"):
        return datetime.now(dt_timezone.utc).isoformat(timespec="seconds")
    try:
        zone = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ToolError(
            f"Unknown time zone {timezone!r}. Use an IANA name such as 'UTC', "
            "'Europe/Paris' or 'America/New_York'."
        ) from exc
    return datetime.now(zone).isoformat(timespec="seconds")


def builtin_tools(root: str | Path = ".") -> list[Tool]:
    """All built-in tools: calculator, the workspace file tools for ``root``, current_time.

    Args:
        root: the workspace directory for the file tools.
    """
    return [calculator, *workspace_tools(root), current_time]
