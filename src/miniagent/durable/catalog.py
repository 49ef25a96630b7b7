"""The tools as the workflow knows them: listed by the worker, judged without running them."""

from __future__ import annotations

from collections.abc import Sequence

from miniagent.durable.contracts import ApprovalRule, ToolInfo
from miniagent.tools.registry import Tool, ToolRegistry
from miniagent.types import ToolCall


def describe_tools(registry: ToolRegistry) -> list[ToolInfo]:
    """What the workflow needs of each tool of ``registry`` (worker side)."""
    return [_info(item, registry.default_timeout) for item in registry.listed()]


def _info(item: Tool, default_timeout: float | None) -> ToolInfo:
    rule = item.requires_approval
    approval: ApprovalRule = "predicate" if callable(rule) else ("always" if rule else "never")
    return ToolInfo(name=item.name, description=item.description,
                    parameters=dict(item.parameters), idempotent=item.idempotent,
                    approval=approval,
                    timeout=item.timeout if item.timeout is not None else default_timeout)


class ToolCatalog:
    """:class:`~miniagent.runtime.loop.ToolCatalog` over listed :class:`ToolInfo` (workflow
    side). A call of an unknown tool needs no approval: the worker's registry answers it with
    an error observation and runs nothing."""

    def __init__(self, tools: Sequence[ToolInfo]) -> None:
        self._tools = {info.name: info for info in tools}

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def listed(self) -> list[ToolInfo]:
        return list(self._tools.values())

    def get(self, name: str) -> ToolInfo | None:
        return self._tools.get(name)

    def needs_approval(self, call: ToolCall) -> bool:
        info = self._tools.get(call.name)
        return info is not None and info.approval != "never"

    def is_idempotent(self, name: str) -> bool:
        info = self._tools.get(name)
        return info is not None and info.idempotent
