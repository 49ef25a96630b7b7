"""Parser for text ReAct output, built for what models really write.

:func:`parse_react` turns one model completion into a
:class:`~miniagent.core.types.ParsedOutput`. It never raises. The approach:

1. Leading ``<think>...</think>`` blocks are removed (their content may become the
   thought).
2. Labels (``Thought``, ``Action``, ``Action Input``, ``Observation``,
   ``Final Answer``, and Chinese equivalents) are found at line starts, tolerating
   ``**bold**``, bullets, any case and full-width colons. Only when no Action or
   Final Answer label starts a line are labels in the middle of a line accepted.
3. Whichever of the first ``Action`` and the first ``Final Answer`` comes first
   decides the kind. ``Action: None`` (or ``N/A``, or no name) followed by a Final
   Answer is a final answer.
4. The action input is cut out with a string-aware bracket scanner (see
   :mod:`miniagent._internal.jsonscan`), so braces or the word ``Observation:``
   inside JSON strings do not confuse it, then decoded by
   :func:`~miniagent._internal.jsonscan.decode_arguments`.
5. Everything after the action's input, from the next label on (a hallucinated
   ``Observation``, a second ``Action``, a fake ``Final Answer``), is ignored and
   left out of :attr:`ParsedOutput.text`. Only the first action counts.

Forms other frameworks' prompts produce are read too: numbered labels (``Thought 1:``,
``Action Input 2:``); ``Answer:`` at a line start as the final answer (LlamaIndex); ``Action:``
followed at once by a JSON blob that names the tool (``{"action": ..., "action_input": ...}``
of LangChain's structured chat, where ``"action": "Final Answer"`` is the answer, or
``{"name": ..., "arguments": ...}``), fenced or not, and such a blob alone; a description in
parentheses after the tool name (``Action: add (adds two numbers)``) when an Action Input line
follows; an input wrapped in a call of the same tool (``Action Input: add({...})``). A
``Final Answer`` stops before a later line-start ``Action``. What cannot be read safely (a
blob naming no tool or cut off, an input wrapped in another tool's call, an Action and a Final
Answer on one line) is a format error or an arguments error, never a guess.

JSON blobs that name a tool (:func:`read_blob`), as other frameworks' prompts make models write
them: LangChain's structured chat asks for ``{"action": "<tool>", "action_input": {...}}``
(with ``"action": "Final Answer"`` for the answer), OpenAI-style text prompts and smolagents
for ``{"name": "<tool>", "arguments": {...}}`` (Llama 3 writes ``"parameters"``; smolagents
ends with its ``final_answer`` tool), a few for ``{"tool": ..., "tool_input": ...}``. The
parser finds the blob; :func:`read_blob` decides what it means: one call, a final answer, or
an error. A blob is never guessed into a call: one cut off or naming no tool is an error the
model is shown.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

from miniagent._internal.jsonscan import (
    MAX_DEPTH,
    decode_arguments,
    loads_limited,
    scan_end,
    strip_fences,
)
from miniagent.core.types import ParsedOutput, ToolCall

__all__ = ["NO_ACTION_ERROR", "NO_ACTION_NAMES", "parse_react"]

NO_ACTION_NAMES = frozenset({"", "none", "n/a", "na", "null", "nil", "no action", "nothing", "无"})
"""Tool names that mean "no tool": with a Final Answer after them, the output is final."""
NO_ACTION_ERROR = "no 'Action:' or 'Final Answer:' found"
"""The error of a reply with neither (plain prose, or labels that make no step)."""

_WORDS = (
    r"(?P<input>action[ \t_-]*input|input|行动输入|动作输入)"
    r"|(?P<action>action|行动|动作)"
    r"|(?P<final>final[ \t_-]*answer|answer|最终答案|最终回答)"
    r"|(?P<observation>observation|观察)"
    r"|(?P<thought>thoughts?|thinking|思考|想法)"
)
# After the colon, a closing bold marker (``**Action:** calc``, ``__Action:__ calc``) sits
# right against it and is not followed by a name character; ``Action: __init__`` and
# ``Action:__init__`` keep their underscores for the tool name.
_COLON = r"(?:\*\*|__)?[ \t]*[:：](?:(?:\*\*|__)(?![\w]))?[ \t]*"
# Labels at the start of a line, after optional bullets / quote marks / bold markers, and
# numbered as ReAct few-shot prompts number them (``Thought 1:``, ``Action Input 2:``).
_LINE_LABEL = re.compile(rf"^[ \t>#*_\-]*(?:{_WORDS})(?:[ \t]*\d{{1,3}})?{_COLON}",
                         re.IGNORECASE | re.MULTILINE)
# The patterns of rarer shapes are kept as text: ``re`` compiles them (and caches them) the
# first time a reply needs them, instead of every ``import miniagent`` compiling them.
# Fallback: labels anywhere, when a model writes "... Action: calc" on one line.
_ANY_LABEL = (
    r"(?i)(?:(?<![A-Za-z0-9_])(?:\*\*|__)?(?P<input>action[ \t_-]*input)"
    r"|(?<![A-Za-z0-9_])(?:\*\*|__)?(?P<action>action)"
    r"|(?<![A-Za-z0-9_])(?:\*\*|__)?(?P<final>final[ \t_-]*answer)"
    r"|(?<![A-Za-z0-9_])(?:\*\*|__)?(?P<observation>observation)"
    r"|(?P<zh_input>行动输入)|(?P<zh_action>行动)|(?P<zh_final>最终答案))" + _COLON
)
_OBSERVATION_ANYWHERE = (
    r"(?i)(?<![A-Za-z0-9_])(?:\*\*|__)?observation(?:\*\*|__)?[ \t]*[:：]|观察[:：]"
)
_ZH_KINDS = {"zh_input": "input", "zh_action": "action", "zh_final": "final"}
_FINAL_IN_NAME = r"(?i)\bfinal[ \t-]*answer\b"
# After a closed object, ``, "body": ...`` on the same line: the model closed it too early.
_MORE_MEMBERS = re.compile(r"[ \t]*,[ \t]*[\"']?[^\s\"',:{}\[\]]*[\"']?[ \t]*:")
_THINK_OPEN = "<think>"
_THINK_CLOSE = "</think>"

# The plain shapes most replies take, read without the label search (see :func:`_fast`). A
# tool name starting with a letter cannot open a blob, a bold marker or a wrapper; a label
# followed by ``*`` or ``_`` may close bold (``Thought:** x``), so it takes the full path.
_FAST_THOUGHT = r"[ \t\n]*(?:Thought:(?![*_])[ \t]*(?P<thought>[^\n]*)\n)?"
_FAST_ACTION = re.compile(
    _FAST_THOUGHT + r"Action:[ \t]*(?P<name>[A-Za-z][A-Za-z0-9_-]*)[ \t\r]*\n"
    r"Action Input:[ \t]*(?=\{)"
)
_FAST_FINAL = re.compile(_FAST_THOUGHT + r"Final Answer:(?![*_])[ \t]*")
_JSON_SPACE = " \t\r\n"


class _Label(NamedTuple):
    """One label found in the text: its kind, where it starts and where its value starts."""

    kind: str
    start: int
    end: int


def parse_react(text: str) -> ParsedOutput:
    """Parse one ReAct completion; never raises.

    Args:
        text: The model's output (already cut at a stop word, or not).

    Returns:
        A :class:`ParsedOutput` of kind ``action`` (exactly one tool call, the first
        one written), ``final`` (``final_answer`` set) or ``invalid`` (``error``
        says what was missing). ``text`` is what to keep in the history: the output
        without ``<think>`` blocks, cut before anything the model wrote after its
        action (hallucinated observations), outer whitespace stripped.

    Example:
        >>> out = parse_react('Thought: add\\nAction: calc\\nAction Input: {"expr": "1+1"}')
        >>> out.kind, out.tool_calls[0].name, out.tool_calls[0].arguments
        ('action', 'calc', {'expr': '1+1'})
    """
    try:
        return _parse(text if isinstance(text, str) else str(text))
    except Exception as exc:  # a last line of defence: the loop must not crash on output
        return ParsedOutput(
            kind="invalid",
            error=f"output could not be parsed ({type(exc).__name__})",
            text=str(text).strip(),
        )


def _parse(raw: str) -> ParsedOutput:
    fast = _fast(raw)
    return fast if fast is not None else _parse_full(raw)


def _fast(text: str) -> ParsedOutput | None:
    """The plain shapes, ``Thought: ...`` (optional, one line) then ``Action: name`` and
    ``Action Input: {json}`` with nothing after the object, or ``Final Answer: ...`` with no
    ``Action`` line after it; ``None`` for anything else, which :func:`_parse_full` reads.

    What it returns is exactly what :func:`_parse_full` returns for the same text (a property
    test compares them): it only skips the label search, the bracket scan and the checks that
    cannot apply to these shapes.
    """
    if _THINK_CLOSE in text:
        return None
    m = _FAST_ACTION.match(text)
    if m is not None:
        return _fast_action(text, m)
    m = _FAST_FINAL.match(text)
    return _fast_final(text, m) if m is not None else None


def _fast_action(text: str, m: re.Match[str]) -> ParsedOutput | None:
    name = m.group("name")
    if is_final_name(name) or name.lower() in NO_ACTION_NAMES:
        return None
    # One JSON object and JSON whitespace to the end: the bracket scan would end it exactly
    # where the decoder does, and no label or ``Observation`` can follow it.
    raw = text[m.end() :].rstrip(_JSON_SPACE)
    try:
        arguments = loads_limited(raw, max_depth=MAX_DEPTH)
    except ValueError:
        return None
    if not isinstance(arguments, dict):
        return None
    call = ToolCall(id="", name=name, arguments=arguments, raw_arguments=raw)
    return ParsedOutput(kind="action", thought=_fast_thought(m), tool_calls=[call],
                        text=text.strip())


def _fast_final(text: str, m: re.Match[str]) -> ParsedOutput | None:
    start = m.end()
    if "\n" in text[start:] and any(
        lb.kind in ("action", "input")
        for lb in map(_to_label, _LINE_LABEL.finditer(text, start))
    ):
        return None  # the answer stops before a line-start Action
    answer = text[start:].strip()
    if answer.endswith("**") and answer.count("**") == 1:
        answer = answer[:-2].rstrip()
    if not answer:
        return None
    return ParsedOutput(kind="final", thought=_fast_thought(m), final_answer=answer,
                        text=text.strip())


def _fast_thought(m: re.Match[str]) -> str | None:
    thought = m.group("thought")
    return (thought.strip() or None) if thought is not None else None


def _parse_full(raw: str) -> ParsedOutput:
    body, think = _strip_think(raw)
    if not body.strip():
        return ParsedOutput(
            kind="invalid",
            thought=think,
            error="empty output: no 'Action:' or 'Final Answer:' found",
            text="",
        )
    labels = _find_labels(body)
    action = _first(labels, "action")
    final = _first(labels, "final")
    if action is not None and (final is None or action.start < final.start):
        return _parse_action(body, labels, action, think)
    if final is not None:
        return _final(body, labels, final, think)
    if action is None and '"action"' in body:
        bare = _bare_blob(body, labels, think)
        if bare is not None:
            return bare
    return _invalid(body, labels, think)


def _bare_blob(body: str, labels: list[_Label], think: str | None) -> ParsedOutput | None:
    """A reply that is only a JSON blob ``{"action": ..., "action_input": ...}`` (LangChain's
    JSON agents write no label), fenced or not; other JSON (an answer's data) is not taken."""
    start = _skip_fence(body, _skip_ws(body, 0))
    if not body.startswith("{", start):
        return None
    raw, end = _read_value(body, labels, start, len(body))
    value = decode_arguments(raw)[0]
    if not isinstance(value, dict) or not isinstance(value.get("action"), str):
        return None
    origin = _Label(kind="action", start=start, end=start)
    return _parse_blob(body, labels, origin, think, raw, end)


def _strip_think(text: str) -> tuple[str, str | None]:
    """Remove reasoning blocks; return the rest and the joined reasoning, if any.

    Only blocks at the start count (``<think>`` later in the text may be part of a
    tool argument). A ``</think>`` with no ``<think>`` before it closes a block the
    chat template opened in the prompt: everything before it is reasoning. An
    unclosed leading ``<think>`` loses only its tag; the rest may hold the labels.
    """
    thoughts: list[str] = []
    close = text.find(_THINK_CLOSE)
    opening = text.find(_THINK_OPEN)
    if close != -1 and (opening == -1 or close < opening):
        thoughts.append(text[:close])
        text = text[close + len(_THINK_CLOSE) :]
    while text.lstrip().startswith(_THINK_OPEN):
        start = text.index(_THINK_OPEN) + len(_THINK_OPEN)
        end = text.find(_THINK_CLOSE, start)
        if end == -1:
            text = text[start:]
            break
        thoughts.append(text[start:end])
        text = text[end + len(_THINK_CLOSE) :]
    joined = "\n".join(t.strip() for t in thoughts if t.strip())
    return text, joined or None


def _find_labels(body: str) -> list[_Label]:
    """All labels in order; mid-line ones only if no Action/Final starts a line."""
    labels = [_to_label(m) for m in _LINE_LABEL.finditer(body)]
    if any(lb.kind in ("action", "final") for lb in labels) or not _may_hold_inline(body):
        return labels
    by_colon = {lb.end: lb for lb in labels}
    for m in re.finditer(_ANY_LABEL, body):
        label = _to_label(m)
        by_colon.setdefault(label.end, label)
    return sorted(by_colon.values(), key=lambda lb: lb.start)


def _may_hold_inline(body: str) -> bool:
    """Cheap pre-check before the slower mid-line label search."""
    lowered = body.lower()
    return "action" in lowered or "final" in lowered or "行动" in body or "最终" in body


def _to_label(m: re.Match[str]) -> _Label:
    # The kind groups are the only named groups, so ``lastgroup`` names the kind.
    group = m.lastgroup or "thought"
    return _Label(kind=_ZH_KINDS.get(group, group), start=m.start(), end=m.end())


def _first(labels: list[_Label], kind: str, after: int = -1) -> _Label | None:
    return next((lb for lb in labels if lb.kind == kind and lb.start > after), None)


def _next_start(labels: list[_Label], pos: int, default: int) -> int:
    """Start of the first label at or after ``pos``, else ``default``."""
    return next((lb.start for lb in labels if lb.start >= pos), default)


def _parse_action(
    body: str, labels: list[_Label], action: _Label, think: str | None
) -> ParsedOutput:
    blob = _blob(body, labels, action)
    if blob is not None:
        return _parse_blob(body, labels, action, think, *blob)
    name, raw_args, end = _read_action(body, labels, action)
    thought = _thought(body, labels, action.start, think)
    if is_final_name(name):  # "Action: Final Answer" with the answer as its input
        return _final_action(raw_args, thought, body[: _cut(body, labels, end)].strip())
    if " " in name and re.search(_FINAL_IN_NAME, name):  # "Action: search Final Answer:"
        return ParsedOutput(kind="invalid", thought=thought, text=body[: _cut(body, labels, end)]
                            .strip(), error="'Action:' and 'Final Answer:' on one line: write "
                            "either an action or a final answer")
    if name.lower() in NO_ACTION_NAMES:
        final = _first(labels, "final", after=action.start)
        if final is not None:
            return _final(body, labels, final, think)
        what = "Action without a tool name" if not name else f"'Action: {name}' means no tool"
        return ParsedOutput(
            kind="invalid",
            thought=thought,
            error=f"{what}, and no 'Final Answer:' follows",
            text=body[: _cut(body, labels, end)].strip(),
        )
    raw_args, mismatch = unwrap(raw_args, name)
    arguments, error = decode_arguments(raw_args) if mismatch is None else (None, mismatch)
    call = ToolCall(
        id="",  # the step logic assigns ids from its driver, so a replay gives the same
        name=name,
        arguments=arguments if arguments is not None else {},
        raw_arguments=raw_args,
        arguments_error=error,
    )
    return ParsedOutput(
        kind="action",
        thought=thought,
        tool_calls=[call],
        text=body[: _cut(body, labels, end)].strip(),
    )


def _final_action(raw: str, thought: str | None, text: str) -> ParsedOutput:
    """``Action: Final Answer`` with the answer as its input (a JSON string loses its quotes)."""
    answer = strip_fences(raw)
    if answer.startswith('"'):
        try:
            decoded = loads_limited(answer, max_depth=MAX_DEPTH)
        except ValueError:
            decoded = None
        answer = decoded if isinstance(decoded, str) else answer
    if not answer.strip():
        return ParsedOutput(kind="invalid", thought=thought, text=text,
                            error="'Action: Final Answer' without the answer as its input")
    return ParsedOutput(kind="final", thought=thought, final_answer=answer.strip(), text=text)


def _blob(body: str, labels: list[_Label], action: _Label) -> tuple[str, int] | None:
    """``Action:`` then a JSON object at once (fenced or not, on its line or the next):
    the object names the tool. Returns its raw text and where it ends."""
    p = _skip_fence(body, _skip_ws(body, action.end))
    if not body.startswith(("{", "[{"), p):
        return None
    return _read_value(body, labels, p, _next_start(labels, p, len(body)))


def _parse_blob(body: str, labels: list[_Label], action: _Label, think: str | None,
                raw: str, end: int) -> ParsedOutput:
    """A JSON blob naming the tool (see :func:`read_blob`)."""
    call, answer, error = read_blob(raw, NO_ACTION_NAMES)
    thought = _thought(body, labels, action.start, think)
    text = body[: _cut(body, labels, end)].strip()
    if call is not None:
        return ParsedOutput(kind="action", thought=thought, tool_calls=[call], text=text)
    if answer is not None:
        return ParsedOutput(kind="final", thought=thought, final_answer=answer, text=text)
    return ParsedOutput(kind="invalid", thought=thought, text=text, error=error)


def _read_action(body: str, labels: list[_Label], action: _Label) -> tuple[str, str, int]:
    """Return the tool name, the raw input text and where the action ends."""
    line_end = min(_line_end(body, action.end), _next_start(labels, action.end, len(body)))
    name_text = body[action.end : line_end]
    brace, paren = name_text.find("{"), name_text.find("(")
    if paren != -1 and (brace == -1 or paren < brace):
        if not _input_follows(labels, action):
            return _inline_call(body, labels, action.end, paren)
        # ``Action: add (adds two numbers)``: a description; the Action Input has the arguments
        name_text, brace = name_text[:paren], -1
    if brace != -1:
        name = _clean_name(name_text[:brace])
        raw, end = _read_value(
            body, labels, action.end + brace, _next_start(labels, line_end, len(body))
        )
        return name, raw, end
    name = _clean_name(name_text)
    if not name:
        name, line_end = _name_on_next_line(body, labels, line_end)
    nxt = next((lb for lb in labels if lb.start > action.start), None)
    if nxt is None or nxt.kind != "input":
        return name, "", line_end
    region_end = _next_start(labels, nxt.end, len(body))
    raw, end = _read_value(body, labels, nxt.end, region_end)
    return name, raw, end


def _input_follows(labels: list[_Label], action: _Label) -> bool:
    nxt = next((lb for lb in labels if lb.start > action.start), None)
    return nxt is not None and nxt.kind == "input"


def _inline_call(body: str, labels: list[_Label], start: int, paren: int) -> tuple[str, str, int]:
    """``Action: calc({"x": 1})`` or ``Action: search("Paris")``."""
    line_end = _line_end(body, start)
    name = _clean_name(body[start : start + paren])
    open_at = start + paren
    brace = body.find("{", open_at, line_end)
    if brace != -1 and not body[open_at + 1 : brace].strip():
        raw, end = _read_value(body, labels, brace, _next_start(labels, line_end, len(body)))
        close = _skip_ws(body, end)
        return name, raw, close + 1 if body.startswith(")", close) else end
    close = body.rfind(")", open_at, line_end)
    if close == -1:
        return name, strip_fences(body[open_at + 1 : line_end]), line_end
    return name, strip_fences(body[open_at + 1 : close]), close + 1


def _name_on_next_line(body: str, labels: list[_Label], line_end: int) -> tuple[str, int]:
    """``**Action:**`` alone on its line, the name on the next one."""
    start = _skip_ws(body, line_end)
    if start >= len(body) or any(lb.start <= start < lb.end for lb in labels):
        return "", line_end
    if _next_start(labels, line_end, len(body)) <= start:
        return "", line_end
    end = _line_end(body, start)
    return _clean_name(body[start:end]), end


def _read_value(body: str, labels: list[_Label], start: int, region_end: int) -> tuple[str, int]:
    """Extract the raw action input beginning at ``start``; return it and its end."""
    p = _skip_fence(body, _skip_ws(body, start))
    if p < len(body) and body[p] in "{[\"'":
        value_end = scan_end(body, p)
        if value_end is not None and _MORE_MEMBERS.match(body, value_end):
            # kept whole, so decoding says what is wrong; the members after it are not dropped
            line_end = min(_line_end(body, value_end), max(region_end, value_end))
            return body[p:line_end].rstrip(), line_end
        if value_end is not None:
            end = after = _skip_ws(body, value_end)
            if body.startswith("```", after):
                end = after + 3
            elif body.startswith("`", after):
                end = after + 1
            else:
                end = value_end
            return body[p:value_end], end
    region_end = max(region_end, p)
    return strip_fences(body[start:region_end]), len(body[:region_end].rstrip())


def _skip_fence(body: str, p: int) -> int:
    """Skip an opening fence (```` ```json ```` line, ```` ``` ```` or a backtick) at ``p``."""
    if body.startswith("```", p):
        line_end = _line_end(body, p)
        tag = body[p + 3 : line_end].strip()
        if tag.isalnum() or not tag:
            return _skip_ws(body, line_end)
        p += 3
        if body[p : p + 4].lower() == "json" and not body[p + 4 : p + 5].isalnum():
            p += 4
        return _skip_ws(body, p)
    if body.startswith("`", p):
        return p + 1
    return p


def _clean_name(text: str) -> str:
    """``` `calc` ```, ``"calc"``, ``calc.``, ``[calc]``, ``**calc**``, ``calc()`` -> ``calc``.

    Only quoting, emphasis and punctuation around the name go: underscores and dashes are
    part of it (``__init__``, ``_private``, ``my-tool``).
    """
    name = text.strip().strip("`'\"*[]<>").strip()
    name = name.rstrip(".。:：,;，!?！？(").strip().strip("`'\"*").strip()
    if name.endswith("()"):
        name = name[:-2]
    return name


def _final(body: str, labels: list[_Label], final: _Label, think: str | None) -> ParsedOutput:
    # a line-start Action after the answer is not part of it: the answer stops before it
    stop = next((lb.start for lb in labels
                 if lb.start > final.start and lb.kind in ("action", "input")), len(body))
    body = body[:stop]
    answer = body[final.end :].strip()
    if answer.endswith("**") and answer.count("**") == 1:
        answer = answer[:-2].rstrip()
    thought = _thought(body, labels, final.start, think)
    if not answer:
        return ParsedOutput(
            kind="invalid", thought=thought, error="'Final Answer:' is empty", text=body.strip()
        )
    return ParsedOutput(kind="final", thought=thought, final_answer=answer, text=body.strip())


def _invalid(body: str, labels: list[_Label], think: str | None) -> ParsedOutput:
    """No action and no answer. Prose with no label but a leading ``Thought:`` is a plain
    answer (:attr:`~miniagent.core.types.ParsedOutput.plain_answer`): the step logic decides when
    to take it."""
    obs = _first(labels, "observation")
    text = body[: obs.start] if obs is not None else body
    plain = None
    if _first(labels, "input") is not None:
        error = "'Action Input:' without an 'Action:' line naming the tool"
    else:
        error = NO_ACTION_ERROR
        lead = labels[0] if labels and labels[0].kind == "thought" else None
        if all(lb.kind == "observation" or lb is lead for lb in labels):
            plain = (text[lead.end:] if lead is not None else text).strip() or None
    return ParsedOutput(
        kind="invalid",
        thought=_thought(body, labels, len(body), think),
        error=error,
        text=text.strip(),
        plain_answer=plain,
    )


def _thought(body: str, labels: list[_Label], before: int, think: str | None) -> str | None:
    """The Thought label's text, else the ``<think>`` content, else leading prose."""
    label = _first(labels, "thought")
    if label is not None and label.start < before:
        end = _next_start(labels, label.end, len(body))
        return body[label.end : end].strip() or think
    if think:
        return think
    first = labels[0].start if labels else len(body)
    lead = body[: min(first, before)].strip().strip("*#").strip()
    return lead or None


def _cut(body: str, labels: list[_Label], end: int) -> int:
    """Where the kept text ends: the first label or ``Observation`` after ``end``."""
    cut = _next_start(labels, end, len(body))
    m = re.compile(_OBSERVATION_ANYWHERE).search(body, end, cut)  # compiled once, cached
    return m.start() if m is not None else cut


def _line_end(body: str, pos: int) -> int:
    end = body.find("\n", pos)
    return len(body) if end == -1 else end


def _skip_ws(body: str, pos: int) -> int:
    n = len(body)
    while pos < n and body[pos] in " \t\r\n":
        pos += 1
    return pos


# -- JSON blobs that name a tool ---------------------------------------------------------

_FINAL_NAMES = frozenset({"final answer", "finalanswer"})
# (name key, argument keys), tried in order
_BLOB_KEYS = (("action", ("action_input", "input", "arguments")),
              ("name", ("arguments", "parameters", "args")),
              ("tool", ("tool_input", "input", "arguments")))
# A pattern as text: ``re`` compiles it (and caches it) when an input first ends with ")".
_WRAPPER = r"(?s)([A-Za-z_][\w.\-]*)[ \t]*\((.*)\)"


def is_final_name(name: str) -> bool:
    """``Final Answer``, ``final_answer``, ``FinalAnswer``: the name of no tool but the end."""
    return name.lower().replace("_", " ") in _FINAL_NAMES


def read_blob(raw: str, no_tool: frozenset[str]) -> tuple[ToolCall | None, str | None, str]:
    """``(call, final answer, error)`` of a blob's raw text; exactly one is set (``error`` is
    "" otherwise). Names in ``no_tool`` (``none``, ``n/a``) name no tool. Of a list of blobs,
    the first counts, as only the first action does."""
    complete = scan_end(raw, 0) == len(raw)  # a truncated blob is not repaired into a call
    named = _named(_decode(raw)) if complete else None
    if named is None or named[0].lower() in no_tool:
        what = "names no tool" if complete else "is not complete"
        return None, None, (f"the JSON object after 'Action:' {what}: write "
                            '{"action": "<tool name>", "action_input": {...}}, or the Action and '
                            "Action Input lines")
    name, given = named
    if is_final_name(name):
        if isinstance(given, dict) and len(given) == 1:  # smolagents' final_answer(answer=...)
            given = next(iter(given.values()))
        answer = (given if isinstance(given, str) else _json_text(given)).strip()
        return None, answer or None, "" if answer else "'Final Answer' is empty"
    if isinstance(given, str):
        raw_args = given
        arguments, error = decode_arguments(given)
    else:
        raw_args = "" if given is None else _json_text(given)
        arguments, error = (given if isinstance(given, dict) else None), None
    call = ToolCall(id="", name=name, arguments=arguments if arguments is not None else {},
                    raw_arguments=raw_args, arguments_error=error)
    return call, None, ""


def unwrap(raw: str, name: str) -> tuple[str, str | None]:
    """``Action Input: calc({"x": 1})``: the JSON inside the call of the named tool, and None;
    a wrapper naming another tool gives an error instead (which was meant is unknown)."""
    m = re.fullmatch(_WRAPPER, raw.strip()) if raw.endswith(")") else None
    if m is None:
        return raw, None
    inner = m.group(2).strip()
    if inner and inner[0] not in "{\"'":
        return raw, None  # positional Python-style arguments: left to the tool's validation
    if m.group(1).lower() != name.lower():
        return raw, (f"'Action Input' calls {m.group(1)}(...) but the Action is '{name}': "
                     "write the arguments as one JSON object")
    return inner, None


def _decode(raw: str) -> Any:
    if raw.startswith("["):
        try:
            items = loads_limited(raw, max_depth=MAX_DEPTH)
        except ValueError:
            return None
        return items[0] if isinstance(items, list) and items else None
    return decode_arguments(raw)[0]


def _named(value: Any) -> tuple[str, Any] | None:
    """The tool name and the arguments of a blob, if it names a tool."""
    if not isinstance(value, dict):
        return None
    for name_key, argument_keys in _BLOB_KEYS:
        name = value.get(name_key)
        if isinstance(name, str) and name.strip():
            return name.strip(), next((value[k] for k in argument_keys if k in value), None)
    return None


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
