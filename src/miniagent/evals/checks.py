"""Answer checks: is a final answer right for a task's ``expected``?

Every check first normalises both sides the same way (Unicode NFKC, so full-width digits and
letters count as ASCII ones; case folded; runs of white space made one space; trailing
sentence punctuation such as ``.`` or ``。`` removed):

- ``exact``: the normalised answer equals the normalised expected answer.
- ``number``: some number written in the answer (``1,234.5``, ``-3``, ``2e3``) is within
  ``tolerance`` of the expected number (default: 1e-6 of its size). An answer that writes no
  figure at all is read for English number words from zero to ninety-nine (``eight legs``,
  ``twenty-one``): a right answer in words is right, and figures, where there are any, decide.
- ``regex``: the pattern (Python syntax) is found in the raw answer (``re.search``).
- ``contains``: the expected text (or one of a list) appears in the answer.
- ``one_of``: the answer equals one of the listed answers.
- ``python:NAME``: ``NAME(answer, expected)`` from the tools file returns true; ``expected``
  is the task's ``expected`` object as a dict.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any

from miniagent.evals.tasks import Expected

Checker = Callable[[str, dict[str, Any]], Any]

_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+")
_UNITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
          "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
          "eighteen", "nineteen")
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
         "eighty": 80, "ninety": 90}
_WORD_NUMBER = re.compile(
    rf"\b(?:({'|'.join(_TENS)})(?:[- ]({'|'.join(_UNITS[1:10])}))?|({'|'.join(_UNITS)}))\b")
_TRAILING = " \t.。!！?？,，;；:：\"'”’"


def normalize(text: str) -> str:
    """The comparable form of an answer (see the module docstring)."""
    folded = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    return folded.rstrip(_TRAILING).lstrip(" \"'“‘")


def numbers_in(text: str) -> list[float]:
    """Every number written in ``text`` in figures, in order; where there is none, every
    English number word from zero to ninety-nine.

    Example:
        >>> numbers_in("A spider has eight legs."), numbers_in("Twenty-one, or 22")
        ([8.0], [22.0])
    """
    plain = unicodedata.normalize("NFKC", text)
    found = []
    for match in _NUMBER.findall(plain):
        try:
            found.append(float(match.replace(",", "")))
        except ValueError:
            continue
    return found or _number_words(plain.casefold())


def _number_words(text: str) -> list[float]:
    """The English number words in ``text`` (casefolded): ``eight``, ``twenty-one``."""
    found = []
    for tens, unit, alone in _WORD_NUMBER.findall(text):
        if alone:
            found.append(float(_UNITS.index(alone)))
        else:
            found.append(float(_TENS[tens] + (_UNITS.index(unit) if unit else 0)))
    return found


def check_answer(answer: str | None, expected: Expected,
                 checkers: Mapping[str, Checker] | None = None) -> tuple[bool, str | None]:
    """Whether ``answer`` is right, and a note when the check itself could not be made.

    A missing answer (the run ended without one) is wrong. A ``python:`` checker that raises
    makes the answer wrong, with the error as the note.
    """
    if answer is None:
        return False, None
    check = expected.check
    if check.startswith("python:"):
        return _custom(check.removeprefix("python:"), answer, expected, checkers or {})
    wanted = expected.answer
    if check == "number":
        return _number(answer, wanted, expected.tolerance)
    if check == "regex":
        try:
            return re.search(str(wanted), answer) is not None, None
        except re.error as exc:
            return False, f"bad regex {wanted!r}: {exc}"
    options = [normalize(str(w)) for w in (wanted if isinstance(wanted, list) else [wanted])]
    if check == "contains":
        return any(option in normalize(answer) for option in options), None
    return normalize(answer) in options, None  # exact, one_of


def _number(answer: str, wanted: object, tolerance: float | None) -> tuple[bool, str | None]:
    try:
        target = float(wanted)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int past any float
        return False, f"expected answer {wanted!r} is not a number"
    slack = tolerance if tolerance is not None else 1e-6 * max(1.0, abs(target))
    return any(math.isclose(value, target, rel_tol=0.0, abs_tol=slack)
               for value in numbers_in(answer)), None


def _custom(name: str, answer: str, expected: Expected,
            checkers: Mapping[str, Checker]) -> tuple[bool, str | None]:
    checker = checkers.get(name)
    if checker is None:
        return False, f"no checker function {name!r} in the tools file"
    try:
        return bool(checker(answer, expected.model_dump())), None
    except Exception as exc:  # the user's code: anything may come out
        return False, f"checker {name!r} failed: {type(exc).__name__}: {exc}"
