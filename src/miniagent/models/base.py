"""The Model interface: one async method, ``generate``.

Every backend (HTTP server, embedded llama.cpp, scripted replay) implements it. A model
receives wire-format messages already rendered by a protocol and returns a normalised
:class:`~miniagent.types.ModelResponse`; it raises only
:class:`~miniagent.errors.ModelError` subclasses.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from miniagent.types import ModelRequest, ModelResponse, ToolMode


@runtime_checkable
class Model(Protocol):
    """What the loop needs from a model backend."""

    tool_mode: ToolMode
    """``react`` (text + stop words), ``native`` (``tools`` field) or ``auto``."""

    async def generate(self, request: ModelRequest) -> ModelResponse:
        """Run one chat completion."""
        ...

    def supports_native_tools(self) -> bool | None:
        """What is known about native tool support: True, False, or None (not yet known)."""
        ...

    async def aclose(self) -> None:
        """Release connections or other resources."""
        ...
