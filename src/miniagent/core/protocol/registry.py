"""Protocols by name, so that an agent's protocol can travel: :func:`register_protocol`.

An agent spec (:class:`~miniagent.core.runtime.run.AgentSpec`) names its protocol and the options
that rebuild it (:class:`ProtocolRef`); a driver that runs the agent somewhere else (a Temporal
worker) builds the protocol from that name with :func:`build_protocol`. The built-in ones
(``react``, ``native``, ``hybrid``, ``auto``) are registered here; a custom protocol is
registered by its author, in every process that runs the agent::

    register_protocol("xml", XmlProtocol)       # XmlProtocol(**options) builds one

A protocol that has options says what they are with ``options()``; one without that method is
built with none. A name that no process registered is refused when the run starts, naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from miniagent.core.errors import UserError
from miniagent.core.protocol.auto import AutoProtocol
from miniagent.core.protocol.base import ActionProtocol
from miniagent.core.protocol.native import NativeProtocol
from miniagent.core.protocol.react import ReactProtocol

__all__ = ["ProtocolRef", "build_protocol", "default_protocol", "protocol_ref",
           "register_protocol"]

Factory = Callable[..., ActionProtocol]


def _hybrid(**options: Any) -> ActionProtocol:
    """A :class:`~miniagent.core.protocol.hybrid.HybridProtocol`: its module loads with the first
    (only ``tool_mode="hybrid"`` uses it)."""
    from miniagent.core.protocol.hybrid import HybridProtocol

    return HybridProtocol(**options)


_FACTORIES: dict[str, Factory] = {
    "react": ReactProtocol, "native": NativeProtocol, "hybrid": _hybrid, "auto": AutoProtocol,
}


@dataclass(kw_only=True)
class ProtocolRef:
    """A protocol by name, with the options that rebuild it (plain JSON values)."""

    name: str | None = None
    """``None``: the protocol the model is configured for (its ``tool_mode``)."""
    options: dict[str, Any] = field(default_factory=dict)


def register_protocol(name: str, factory: Factory) -> None:
    """Make ``name`` buildable here: ``factory(**options)`` returns a new protocol.

    Raises:
        UserError: ``name`` is taken by another factory.
    """
    known = _FACTORIES.setdefault(name, factory)
    if known is _hybrid and name == "hybrid":
        from miniagent.core.protocol.hybrid import HybridProtocol

        known = HybridProtocol  # the built-in, served by _hybrid
    if known is not factory:
        raise UserError(f"a protocol named {name!r} is registered already ({known!r})")


def protocol_ref(protocol: ActionProtocol) -> ProtocolRef:
    """How ``protocol`` travels: its name and its ``options()``, if it has that method."""
    options = getattr(protocol, "options", None)
    return ProtocolRef(name=protocol.name, options=dict(options()) if callable(options) else {})


def default_protocol(tool_mode: str, *, native_tools: bool | None = None, grammar: bool = True,
                     max_tokens: int | None = None, example: bool = False) -> ActionProtocol:
    """The protocol a transport was configured for (its ``tool_mode``): react, native, hybrid,
    or auto; a ReAct grammar bounds its free strings for turns of ``max_tokens``, and
    ``example`` shows a worked example in the ReAct prompt."""
    if tool_mode == "react":
        return ReactProtocol(grammar=grammar, max_tokens=max_tokens, example=example)
    if tool_mode == "hybrid":
        return _hybrid()
    if tool_mode == "native":
        return NativeProtocol()
    return AutoProtocol(native_tools=native_tools, grammar=grammar, max_tokens=max_tokens,
                        example=example)


def build_protocol(ref: ProtocolRef, *, tool_mode: str = "auto",
                   native_tools: bool | None = None) -> ActionProtocol:
    """A new protocol for ``ref``; a name ``None`` builds the one for ``tool_mode`` (the
    model's), with ``ref.options`` ``grammar`` and ``max_tokens``.

    Raises:
        UserError: no protocol of that name is registered in this process, or its factory
            refuses the options.
    """
    if ref.name is None:
        options = {k: v for k, v in ref.options.items()
                   if k in ("grammar", "max_tokens", "example")}
        return default_protocol(tool_mode, native_tools=native_tools, **options)
    name = ref.name
    factory = _FACTORIES.get(name)
    if factory is None:
        known = ", ".join(sorted(_FACTORIES))
        raise UserError(f"the protocol {name!r} is not registered in this process (known: "
                        f"{known}); call miniagent.register_protocol({name!r}, factory) in "
                        "every process that runs the agent, Temporal workers included")
    try:
        return factory(**ref.options)
    except TypeError as exc:
        raise UserError(f"the protocol {name!r} cannot be built with options "
                        f"{sorted(ref.options)}: {exc}") from None
