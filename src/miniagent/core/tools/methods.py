"""Tools defined on classes: which parameter is the receiver, and binding a tool to it.

``@tool`` may decorate a method in a class body. The receiver (``self``, or ``cls`` of a
classmethod) is never an argument the model gives: it is left out of the schema, and the
:class:`~miniagent.core.tools.tool.Tool` is a descriptor, so ``obj.method`` is the tool bound to
``obj`` (and ``Cls.method`` of a classmethod the tool bound to ``Cls``), the way Python binds a
plain method. A tool taken from the class itself (``Cls.method`` of an instance method) still
needs its receiver; a registry refuses it with an error that says so.

Which first parameter is a receiver:

- the function under ``@classmethod``: its first parameter, whatever its name;
- the function under ``@staticmethod``: none;
- a plain function defined in a class body (its ``__qualname__`` is ``Cls.name``): its first
  positional parameter when it is named ``self`` or ``cls`` (a static method's ``x`` stays an
  argument; a module-level function's ``cls`` parameter too).

Example:
    >>> from miniagent import tool
    >>> class Shop:
    ...     def __init__(self, stock: int) -> None:
    ...         self.stock = stock
    ...     @tool
    ...     def buy(self, n: int) -> int:
    ...         '''Buy n items.'''
    ...         self.stock -= n
    ...         return self.stock
    >>> shop = Shop(10)
    >>> list(shop.buy.parameters["properties"]), shop.buy(3)
    (['n'], 7)
"""

from __future__ import annotations

import copy
import inspect
import types
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from miniagent.core.tools.tool import Tool

__all__ = ["MethodShape", "bind_tool", "method_shape"]

_RECEIVER_NAMES = ("self", "cls")
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


@dataclass(frozen=True)
class MethodShape:
    """How a callable given to ``@tool`` relates to a class.

    Attributes:
        function: what the arguments are passed to (the function under a ``classmethod`` or
            ``staticmethod``; else the callable itself).
        receiver: the name of the first parameter the model never gives, or ``None``.
        binds_class: the receiver is the owner class (a classmethod), not an instance.
    """

    function: Any
    receiver: str | None = None
    binds_class: bool = False


def method_shape(fn: Any, signature: inspect.Signature | None = None) -> MethodShape:
    """Unwrap ``classmethod``/``staticmethod`` and find the receiver of ``fn``, if any.

    Args:
        fn: what ``@tool`` was given.
        signature: ``fn``'s signature when the caller has it (read here otherwise).
    """
    if isinstance(fn, staticmethod):
        return MethodShape(function=fn.__func__)
    if isinstance(fn, classmethod):
        first = _first_positional(fn.__func__)
        return MethodShape(function=fn.__func__, receiver=first, binds_class=first is not None)
    if not (inspect.isfunction(fn) and _defined_in_class_body(fn)):
        return MethodShape(function=fn)
    first = _first_positional(fn, signature)
    return MethodShape(function=fn, receiver=first if first in _RECEIVER_NAMES else None)


def bind_tool(target: Tool, receiver: object) -> Tool:
    """A copy of ``target`` whose function is bound to ``receiver`` (an instance or class).

    Args:
        target: a tool whose ``receiver`` is not ``None``.
        receiver: the object passed as its first parameter.
    """
    bound = copy.copy(target)
    bound.fn = types.MethodType(target.fn, receiver)
    bound.receiver = None
    return bound


def _defined_in_class_body(fn: Any) -> bool:
    parts = getattr(fn, "__qualname__", "").split(".")
    return len(parts) >= 2 and parts[-2] != "<locals>"


def _first_positional(fn: Any, signature: inspect.Signature | None = None) -> str | None:
    try:
        params = list((signature or inspect.signature(fn)).parameters.values())
    except (TypeError, ValueError):
        return None
    return params[0].name if params and params[0].kind in _POSITIONAL else None
