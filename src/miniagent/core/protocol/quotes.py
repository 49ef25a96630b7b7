"""Quoted answers: after a tool result, a small model's Final Answer is a span of a result.

A model of a few hundred million parameters calls the right tool, reads ``Sydney: 16 °C,
windy, humidity 50%`` and then answers ``I should call Sydney.`` or ``16.5``: it copies far
better than it writes. With ``Aids(quote_answers=True)`` (on for a small model) every ReAct
request of a turn that has a tool result narrows the grammar's Final Answer to a quote: it
starts at any word of one of the latest results and goes on for as long as the model likes,
so the model still chooses what to say (``50``, ``humidity 50%``, the whole result), never a
figure no tool gave. Only the answer branch changes: where the step may still act, it may act
again instead (after ``answer_after_results`` rounds, on for a small model, it must answer,
so with a quote); a backend without a grammar is not affected.

What a quote cannot say: a yes or a no, a comparison, a converted unit, two results combined.
A question that needs one gets the closest quote (``London: 14 °C, rain``), which is why this
is an aid for small models, whose own words are worse, and off for others.

Units are words (runs of letters and digits), single other characters (punctuation, ``%``,
``°``) and, in Chinese and Japanese text, single characters, so ``18`` can be quoted out of
``18°C,`` and ``16`` out of ``「16」度``. A quote starts at a word and ends after any unit;
whitespace inside it becomes one space, so an answer stays on one line (no ``Action:`` line
can appear in it). At most :data:`RESULTS` results and the first :data:`WORDS` units of each
are read (the scan stops there): the grammar stays small and its cost bounded.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

from miniagent.core.types import ModelRequest, Step

__all__ = ["RESULTS", "WORDS", "constrain", "quote_rules", "results"]

RESULTS = 3
"""How many of the turn's latest tool results a Final Answer may quote."""

WORDS = 200
"""How many units of each result a quote may use (from the start of the result)."""

# patterns as text: ``re`` compiles them on first use (not with ``import miniagent``)
_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\uff60"
_UNIT = rf"([{_CJK}]|[^\W_{_CJK}]+|[^\s{_CJK}])(\s*)"
_WORD = r"[^\W_]"  # a unit a quote may start with: a letter, a digit, a CJK character
_FINAL = r"(?m)^final ::= .*$"


def results(steps: Sequence[Step]) -> list[str]:
    """The outputs of the turn's tool calls that ran and succeeded, latest first (at most
    :data:`RESULTS`); an error, a denial or a repeat intervention is never quoted."""
    found: list[str] = []
    for step in reversed(steps):
        for record in reversed(step.calls):
            seen = record.observation
            if seen is None or not record.succeeded or not seen.output.strip():
                continue
            found.append(seen.output)
            if len(found) == RESULTS:
                return found
    return found


def quote_rules(texts: Sequence[str]) -> tuple[list[str], list[str]]:
    """GBNF rules of the quotes of ``texts``: (rule lines, the rules a quote may start with).

    Example:
        >>> lines, starts = quote_rules(["18 °C, sunny"])
        >>> starts  # 18, C, sunny: not the degree sign or the comma
        ['quote-0-0', 'quote-0-2', 'quote-0-4']
        >>> lines[0]
        'quote-0-0 ::= "18" (" " quote-0-1)?'
    """
    from miniagent.core.protocol.grammar import gbnf_literal  # loads with the grammars

    lines: list[str] = []
    starts: list[str] = []
    for t, text in enumerate(texts):
        units = [(m[1], m[2]) for m in itertools.islice(re.finditer(_UNIT, text), WORDS)]
        for i, (unit, space) in enumerate(units):
            name = f"quote-{t}-{i}"
            follow = ""
            if i + 1 < len(units):
                joint = gbnf_literal(" ") + " " if space else ""
                follow = f" ({joint}quote-{t}-{i + 1})?"
            lines.append(f"{name} ::= {gbnf_literal(unit)}{follow}")
            if re.match(_WORD, unit):
                starts.append(name)
    return lines, starts


def constrain(request: ModelRequest, texts: Sequence[str]) -> ModelRequest:
    """``request`` whose grammar admits, as a Final Answer, only a quote of ``texts``; as it
    was when it has no grammar, no Final Answer branch, or nothing to quote."""
    grammar = request.grammar
    if not grammar or not texts or re.search(_FINAL, grammar) is None:
        return request
    lines, starts = quote_rules(texts)
    if not starts:
        return request
    final = 'final ::= "Final Answer: " (' + " | ".join(starts) + ")"
    request.grammar = re.sub(_FINAL, lambda _: final, grammar, count=1) + "\n".join(lines) + "\n"
    return request
