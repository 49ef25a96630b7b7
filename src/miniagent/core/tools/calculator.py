"""The calculator tool: arithmetic on Python's ``ast``, with the cost of every step bounded.

A big-integer operation holds the GIL until it finishes: no deadline, Ctrl-C or other
coroutine runs meanwhile, and a thread cannot be stopped from Python. So the calculator
never starts an operation whose cost it has not bounded first. Everything it evaluates,
and why each is cheap:

=================================  ====================================================
node / function                    bound
=================================  ====================================================
number literal                     the expression is at most 1,000 characters; a float
                                   must be finite (``1e999`` is refused)
``pi``, ``e``                      floats
``+x``, ``-x``                     same size as ``x``
``a + b``, ``a - b``               at most one bit more than the larger operand
``a * b``                          refused *before* computing when
                                   ``bitlen(a) + bitlen(b) - 1`` (the smallest possible
                                   result) is over the limit
``a / b``                          a float; an int too large for a float raises
                                   ``OverflowError``
``a // b``, ``a % b``              no larger than ``a`` (ints) or a float
``a ** b``                         refused before computing when ``b * (bitlen(a) - 1)``
                                   is over the limit; a negative or float exponent
                                   gives a float
``round(x, n)``                    ``int.__round__`` builds ``10 ** |n|`` first, so
                                   ``|n|`` must be at most :data:`MAX_DIGITS`
``round(x)``, ``floor``, ``ceil``  of a float: at most 1,024 bits
``sqrt`` ``sin`` ``cos`` ``tan``   floats (an int is converted, or ``OverflowError``)
``exp`` ``log`` ``log10`` ``abs``
``sum`` ``min`` ``max``            of numbers, or of one list of them (``sum([42, 17])``:
                                   how models write a total); a sum of *n* operands is at
                                   most log2(*n*) bits more than the largest, and the
                                   expression's length bounds *n*
=================================  ====================================================

Every intermediate result is checked too: an int is at most :data:`MAX_INT_BITS` bits
(and fits the interpreter's ``str(int)`` digit limit, so it can be printed), a float is
finite. Since the operands are bounded, the smallest-result test above also bounds the
largest result of an operation it lets through to about twice the limit. Evaluation uses
an explicit stack, so nesting depth cannot raise ``RecursionError``.

Example:
    >>> calculator("2 * (3 + 4)")
    14
"""

from __future__ import annotations

import ast
import math
import operator
import sys
import warnings
from collections.abc import Callable
from typing import Any

from miniagent.core.errors import ToolError
from miniagent.core.tools.tool import tool

__all__ = ["MAX_DIGITS", "MAX_INT_BITS", "calculator"]

MAX_INT_BITS = 4096
"""The largest integer (in bits) the calculator computes or returns."""
MAX_DIGITS = MAX_INT_BITS * 30103 // 100000  # log10(2) = 0.30103: 1,233 digits
""":data:`MAX_INT_BITS` in decimal digits, as the model is told."""

_MAX_EXPRESSION_CHARS = 1000

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "log": math.log,
    "log10": math.log10,
    "exp": math.exp,
    "abs": abs,
    "round": round,
    "floor": math.floor,
    "ceil": math.ceil,
    "sum": lambda *numbers: sum(numbers),
    "min": min,
    "max": max,
}
_OF_A_LIST = frozenset({"sum", "min", "max"})
"""The functions that also take one list (or tuple) of numbers: ``sum([1, 2])``."""
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}
_ALLOWED = (
    "numbers, + - * / // % **, parentheses, "
    f"{', '.join(_FUNCTIONS)} and the constants {', '.join(_CONSTANTS)}"
)


# The docstring is the description the model reads: plain text, no reST markup. Its sample
# expression stays: SmolLM2-135M needs it to call the tool at all (Qwen2.5-Coder-1.5B once sent
# the sample itself for a figure it had not read yet). No effects: a
# call a crash interrupted may run again. Every step's cost is bounded (above): it runs inline,
# on the event loop, with no worker thread to hand it to.
@tool(idempotent=True, inline=True)
def calculator(expression: str) -> int | float:
    """Evaluate an arithmetic expression, such as (2 + 3) * sqrt(16) / 2.

    Supports numbers, + - * / // % **, parentheses, the functions sqrt, sin, cos, tan,
    log, log10, exp, abs, round, floor, ceil, sum, min, max and the constants pi and e.

    Args:
        expression: the arithmetic expression to evaluate.
    """
    text = expression.strip()
    if not text:
        raise ToolError("The expression is empty. Example: calculator('2 * (3 + 4)').")
    if len(text) > _MAX_EXPRESSION_CHARS:
        raise ToolError(f"The expression is too long (max {_MAX_EXPRESSION_CHARS} characters).")
    try:
        with warnings.catch_warnings():  # "1_000x" warns before failing; the model gets the error
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ToolError(f"Cannot parse {text!r} as arithmetic. Allowed: {_ALLOWED}.") from exc
    try:
        return _evaluate(tree.body)
    except ZeroDivisionError as exc:
        raise ToolError(f"Division by zero in {text!r}.") from exc
    except OverflowError as exc:
        raise ToolError(
            f"The result of {text!r} is too large ({exc}); floats go up to about 1.8e308."
        ) from exc
    except (ValueError, TypeError) as exc:
        raise ToolError(f"Cannot evaluate {text!r}: {exc}.") from exc


# -- evaluation ------------------------------------------------------------------------


def _evaluate(root: ast.expr) -> Any:
    """Evaluate bottom-up with an explicit stack: depth costs memory, not C stack."""
    values: list[Any] = []
    todo: list[tuple[ast.expr, bool]] = [(root, False)]
    while todo:
        node, operands_done = todo.pop()
        if operands_done:
            count = _arity(node)
            operands = values[len(values) - count :]
            del values[len(values) - count :]
            values.append(_checked(_apply(node, operands)))
            continue
        operands_of = _operands(node)
        if operands_of is None:
            values.append(_checked(_leaf(node)))
        else:
            todo.append((node, True))
            todo.extend((child, False) for child in reversed(operands_of))
    return values[-1]


def _operands(node: ast.expr) -> list[ast.expr] | None:
    """The sub-expressions ``node`` needs, ``None`` for a leaf; refuses what is not allowed."""
    if isinstance(node, ast.Constant | ast.Name):
        return None
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return [node.left, node.right]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return [node.operand]
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            what = node.func.id if isinstance(node.func, ast.Name) else _describe(node.func)
            raise ToolError(
                f"Unknown function {what!r}. Allowed functions: {', '.join(_FUNCTIONS)}."
            )
        if node.keywords:
            raise ToolError(f"{node.func.id}() takes positional arguments only.")
        return _arguments(node)
    raise ToolError(f"{_describe(node)} is not allowed in the calculator. Allowed: {_ALLOWED}.")


def _arity(node: ast.expr) -> int:
    if isinstance(node, ast.BinOp):
        return 2
    if isinstance(node, ast.UnaryOp):
        return 1
    assert isinstance(node, ast.Call)
    return len(_arguments(node))


def _arguments(node: ast.Call) -> list[ast.expr]:
    """A call's arguments; those of ``sum``, ``min`` or ``max`` given one list, its items."""
    args = node.args
    if (isinstance(node.func, ast.Name) and node.func.id in _OF_A_LIST and len(args) == 1
            and isinstance(args[0], ast.List | ast.Tuple)):
        return list(args[0].elts)
    return list(args)


def _leaf(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ToolError(f"Only numbers are allowed, not {node.value!r}. Allowed: {_ALLOWED}.")
        return node.value
    assert isinstance(node, ast.Name)
    if node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    raise ToolError(f"Unknown name {node.id!r}. Allowed: {_ALLOWED}.")


def _apply(node: ast.expr, operands: list[Any]) -> Any:
    """One operation, after checking its cost from the operands' sizes."""
    if isinstance(node, ast.BinOp):
        left, right = operands
        if isinstance(node.op, ast.Mult):
            _refuse_if_over("The product", _product_bits(left, right))
        elif isinstance(node.op, ast.Pow):
            _refuse_if_over("The power", _power_bits(left, right))
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](operands[0])
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    if node.func.id == "round" and len(operands) == 2:
        _check_round_digits(operands[1])
    return _FUNCTIONS[node.func.id](*operands)


# -- cost bounds -----------------------------------------------------------------------


def _product_bits(left: Any, right: Any) -> int:
    """The fewest bits ``left * right`` can have (0: a float, or no bound needed)."""
    if not (_is_int(left) and _is_int(right)) or not (left and right):
        return 0
    return abs(left).bit_length() + abs(right).bit_length() - 1


def _power_bits(base: Any, exponent: Any) -> int:
    """The fewest bits ``base ** exponent`` can have (0: a float, or no bound needed)."""
    if not (_is_int(base) and _is_int(exponent)) or exponent <= 0 or abs(base) <= 1:
        return 0
    return (abs(base).bit_length() - 1) * exponent + 1


def _check_round_digits(digits: Any) -> None:
    if not _is_int(digits):
        raise ToolError("round(x, n) needs a whole number of digits n.")
    if abs(digits) > MAX_DIGITS:
        raise ToolError(
            f"round(x, n) with n = {_amount(digits)} is too large to compute: rounding "
            f"builds 10 ** |n|; |n| may be at most {MAX_DIGITS:,} "
            f"(the calculator's {_limit_text()})."
        )


def _refuse_if_over(what: str, at_least_bits: int) -> None:
    if at_least_bits > MAX_INT_BITS:
        raise ToolError(
            f"{what} is too large to compute: the result would have at least "
            f"{_amount(_digits(at_least_bits))} digits; the calculator's {_limit_text()}."
        )


def _checked(value: Any) -> Any:
    """Refuse a result the calculator cannot return: complex, infinite, too many digits."""
    if isinstance(value, complex):
        raise ToolError("The result is not a real number (e.g. a fractional power of a negative).")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError(
            "The result is not a finite number (floats go up to about 1.8e308; "
            "inf - inf is undefined)."
        )
    if _is_int(value):
        bits = abs(value).bit_length()
        if bits > MAX_INT_BITS:
            raise ToolError(
                f"The result is too large: it has about {_amount(_digits(bits))} digits; "
                f"the calculator's {_limit_text()}."
            )
        printable = _str_digit_limit()
        if printable and _digits(bits) > printable:  # str(value) would raise ValueError
            raise ToolError(
                f"The result is too large to print: about {_digits(bits):,} digits; "
                f"this Python prints integers of up to {printable:,} digits."
            )
    return value


def _str_digit_limit() -> int:
    """The interpreter's ``str(int)`` digit limit (Python 3.11+), or 0 for none."""
    get = getattr(sys, "get_int_max_str_digits", None)
    return int(get()) if get is not None else 0


def _digits(bits: int) -> int:
    """About how many decimal digits a ``bits``-bit integer has (exact arithmetic)."""
    return bits * 30103 // 100000 + 1


def _amount(number: int) -> str:
    """A count for a message; enormous ones are not printed in full."""
    return f"{number:,}" if abs(number) < 10**18 else "more than 10**18"


def _limit_text() -> str:
    return f"limit is about {MAX_DIGITS:,} digits ({MAX_INT_BITS} bits)"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _describe(node: ast.AST) -> str:
    names = {
        ast.Attribute: "Attribute access",
        ast.Subscript: "Indexing",
        ast.Lambda: "A lambda",
        ast.Compare: "A comparison",
        ast.BoolOp: "A boolean operator",
    }
    return names.get(type(node), f"The syntax {type(node).__name__!r}")
