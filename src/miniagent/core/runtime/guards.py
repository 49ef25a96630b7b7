"""Guards that keep a run bounded and safe: steps, tokens, repetition, observation size, calls
and answers that were cut off, plain prose taken as the answer, and what a small model copied
from the worked example; what enters a session, made safe to keep; and token estimates.

These are plain checks over the session and the model's reply (the step logic imports this
module: no I/O, no clock); the run's deadline is in :mod:`miniagent.core.runtime.run`.

**What enters a session** (:func:`admit_response`, :func:`admit_parsed`, :func:`admit_call`,
:func:`admit_observation`). Two hazards travel in what models and tools hand to the step logic:
lone surrogates (``"\\ud800"`` from a JSON escape, or a file name decoded with
``surrogateescape``), which no UTF-8 store or terminal can encode, and arguments nested so deep,
or numbers so large, that recursive code further on (the loop detector, JSON encoding,
validation) fails. Both are dealt with once, before the data enters a session: surrogates become
U+FFFD, and arguments nested deeper than :data:`~miniagent._internal.jsonscan.MAX_DEPTH` are
refused as invalid, so the model gets an error observation instead of the run a crash.

**Token estimates** (:func:`with_estimate`), without a tokenizer: for sizes, and for usage a
server did not report. A server that sends no usage (llama.cpp's server when it streams, some
proxies) leaves a model call's usage unknown (:meth:`~miniagent.core.types.TokenUsage.unknown`).
The step logic keeps it unknown, never 0, and adds an estimate beside it, which the token
budget counts: a run whose server never reports usage still ends ``budget_exceeded``. The
estimate is :func:`~miniagent._internal.text.tokens` of the request's messages and tool
definitions (as JSON: the keys and quotes stand in for the chat template's own tokens) plus the
reply's content, reasoning and tool calls; it counts ASCII text at 4 characters a token and
every other character as a token of its own (CJK text is about one token a character, where
characters / 4 would count a quarter of it). A model that can count exactly sets
``estimated_tokens`` on the unknown usage it returns, and that count is kept.

**The tool choice** says whether (and which) tool the model must call on a step: ``auto`` (the
model decides), ``required`` (some tool call, no final answer), ``none`` (no tool call: answer)
or one tool's name (a call of that tool). :func:`apply_choice` puts it in the request the way
its protocol allows:

- with native tools (``native``, ``hybrid``, ``auto`` while native): the request's
  ``tool_choice`` field, which the transport sends as OpenAI's ``"auto"``, ``"required"``,
  ``"none"`` or ``{"type": "function", "function": {"name": ...}}``
  (:func:`~miniagent.core.models.openai_wire.wire_tool_choice`);
- with ReAct: the grammar, when the request carries one: ``required`` drops the Final Answer
  branch, a name leaves only that tool's Action, ``none`` only the Final Answer.

Servers and models may still disobey (no grammar, a server that ignores the field), so the
parsed reply is checked too (:func:`enforce_choice`): a reply the choice forbids becomes an
invalid one, and the model is told what the step needs. The history is not touched: the
prompt stays a prefix of the next.

``required`` and a name hold until the run's first tool call, then the choice returns to
``auto``, so the run can still end with an answer.

Example:
    >>> tokens("a" * 40), tokens("北京天气" * 10)
    (10, 40)
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Literal

from miniagent._internal import defaults
from miniagent._internal.bounds import seconds, whole
from miniagent._internal.jsonscan import MAX_DEPTH, deeper_than, incomplete, write_json
from miniagent._internal.text import tokens
from miniagent._internal.wording import counted
from miniagent.core.protocol.base import CHOICE_KEYWORDS
from miniagent.core.protocol.react import EXAMPLE_ANSWER, EXAMPLE_PLACEHOLDERS
from miniagent.core.session import storable, truncate_observation
from miniagent.core.types import (
    ModelRequest,
    ModelResponse,
    Observation,
    ParsedOutput,
    Step,
    ToolCall,
    ToolLike,
    replaced,
)


@dataclass(kw_only=True)
class Limits:
    """The bounds of one run.

    Attributes:
        max_steps: model calls allowed before the run ends with ``max_steps``.
        token_budget: total (prompt + completion) tokens allowed; ``None`` = no limit.
        timeout: wall-clock seconds for the whole run; ``None`` = no limit.
        max_observation_chars: longer tool outputs are cut, with an explicit notice.
        repeat_limit: the same tool with the same normalised arguments this many times
            gets an intervention instead of running; once more ends the run.
        max_calls_per_step: calls of one reply that are run; the rest are dropped and the
            model is told the limit.
        tool_concurrency: calls of one step that run at the same time.
        answer_after_repeat: after an intervention on a repeated call, or after two steps in
            a row whose calls gave the same results (no progress: ``calculator("17*23")``
            then ``calculator("391")``), the next step must be the Final Answer
            (``tool_choice`` ``none`` for that step): a small model that repeats a call it
            has the result of would otherwise repeat it until the run ends
            ``loop_detected`` or ``max_steps``.
        answer_after_results: after this many steps of the turn whose calls all ran and
            succeeded, the next step must be the Final Answer (``None``: no such rule). A
            small model that has its result tends to go on calling (``17 * 23`` gives 391,
            then ``391 * 23``, ...) until ``max_steps``; 1 stops it after one round of calls.
            A failed call does not count, so the model can still repair its input. An
            :class:`~miniagent.core.agent.Agent` given ``None`` takes its small-model default
            (see :class:`~miniagent.core.settings.Aids`); 0 means no such rule.
        approval_timeout: seconds a call may wait for a person; past them it is denied (the
            model is told), as soon as the session runs (on Temporal: at that moment).
            ``None``: as long as it takes.

    Raises:
        UserError: a field that cannot bound a run: ``NaN`` or ``inf``, a negative number,
            a float where a count is meant (see :mod:`miniagent._internal.bounds`). A 0 means what
            it
            says: no model call left (``max_steps``, as a sub-agent's share can be), no
            tokens, and for ``repeat_limit`` and ``max_observation_chars`` no such check.
    """

    max_steps: int = defaults.MAX_STEPS
    token_budget: int | None = None
    timeout: float | None = None
    max_observation_chars: int = defaults.MAX_OBSERVATION_CHARS
    repeat_limit: int = defaults.REPEAT_LIMIT
    max_calls_per_step: int = defaults.MAX_CALLS_PER_STEP
    tool_concurrency: int = defaults.TOOL_CONCURRENCY
    answer_after_repeat: bool = True
    answer_after_results: int | None = None
    approval_timeout: float | None = None

    def __post_init__(self) -> None:
        for label in ("max_steps", "max_observation_chars", "repeat_limit"):
            whole(label, getattr(self, label), least=0)
        for label in ("max_calls_per_step", "tool_concurrency"):
            whole(label, getattr(self, label), least=1)
        for label in ("token_budget", "answer_after_results"):
            if getattr(self, label) is not None:
                whole(label, getattr(self, label), least=0)
        for label in ("timeout", "approval_timeout"):
            if getattr(self, label) is not None:
                seconds(label, getattr(self, label))


REPEATED = "repeated: answered with an intervention"
"""The reason recorded on a repeated call that was answered instead of run."""


def repeated_last(steps: Sequence[Step]) -> bool:
    """Whether the last step holds a call answered with a repeat intervention."""
    return bool(steps) and any(record.moves and record.moves[-1].reason == REPEATED
                               for record in steps[-1].calls)


def no_progress(steps: Sequence[Step]) -> bool:
    """Whether the last two steps' calls were of the same tools and gave the same results."""
    if len(steps) < 2:
        return False
    last, before = (_results(step) for step in steps[-2:])
    return last is not None and last == before


def rounds_done(steps: Sequence[Step]) -> int:
    """How many of ``steps`` had calls that all ran and succeeded (see
    :attr:`Limits.answer_after_results`)."""
    return sum(1 for step in steps
               if step.calls and all(record.succeeded for record in step.calls))


def _results(step: Step) -> list[tuple[str, str]] | None:
    seen = [(r.call.name, r.observation.output) for r in step.calls
            if r.observation is not None and not r.observation.is_error]
    return seen if seen and len(seen) == len(step.calls) else None


def too_many_calls(sent: int, limit: int) -> str:
    """The notice appended to a step's last observation when a reply held too many calls."""
    return (f"\n[Only the first {limit} of the {sent:,} tool calls in your reply were run: "
            f"send at most {limit} per reply.]")


def cut_off(call: ToolCall, response: ModelResponse, max_tokens: int | None) -> str | None:
    """Why ``call`` must not run because the reply that carried it was cut off, or None.

    A reply that ended for length (``finish_reason: length``) may hold a call whose arguments
    look whole but are not ("amount": 15 of 1500); arguments whose JSON was never closed were
    cut off whatever the server says (llama.cpp reports ``tool_calls`` even then). Such a call
    is never run, and never repaired into one: the model is told to send it again.
    """
    if response.finish_reason == "length":
        why = f"your reply was cut off at {_limit(max_tokens)} before the call was complete"
    elif incomplete(call.raw_arguments):
        why = (f"its arguments end before their JSON is closed: the reply was cut off (by "
               f"{_limit(max_tokens)}, or the server stopped)")
    else:
        return None
    return (f"The call of '{call.name}' was not run: {why}. Send the whole call again, with "
            "shorter arguments (or fewer calls in one reply).")


def judged(parsed: ParsedOutput, response: ModelResponse, *, offered: bool,
           choice: str | None, steps: Sequence[Step], max_tokens: int | None) -> ParsedOutput:
    """The reply as the step takes it, the same whatever the protocol:

    - one that ended for length (``finish_reason: length``) with no call is no answer: its
      text may stop mid-sentence; the model is told (:func:`cut_answer`; a call it holds is
      refused by :func:`cut_off`);
    - plain prose (:attr:`~miniagent.core.types.ParsedOutput.plain_answer`) is the answer where the
      step offered no tool (``offered``) or allowed no call (``choice`` ``none``), or where the
      step before it (the last of ``steps``) was plain prose too, so the model was told the
      format once; never while a tool must be called;
    - the worked example's Final Answer, copied as it is, is no answer (:func:`copied_answer`).
    """
    if response.finish_reason == "length" and parsed.kind in ("final", "invalid"):
        return dataclasses.replace(parsed, kind="invalid", final_answer=None, plain_answer=None,
                                   error=cut_answer(max_tokens))
    if parsed.kind == "invalid" and parsed.plain_answer and _plain_allowed(
            parsed, offered, choice, steps):
        thought = None if parsed.thought == parsed.plain_answer else parsed.thought
        parsed = dataclasses.replace(parsed, kind="final", final_answer=parsed.plain_answer,
                                     thought=thought, error=None)
    copied = copied_answer(parsed.final_answer) if parsed.kind == "final" else None
    if copied is not None:
        return dataclasses.replace(parsed, kind="invalid", final_answer=None, error=copied)
    return parsed


def _plain_allowed(parsed: ParsedOutput, offered: bool, choice: str | None,
                   steps: Sequence[Step]) -> bool:
    if choice not in (None, "auto", "none"):
        return False  # a tool must be called
    if not offered or choice == "none":
        return True
    last = steps[-1] if steps else None
    return (last is not None and not last.calls and last.final_answer is None
            and last.error == parsed.error)


def cut_answer(max_tokens: int | None) -> str:
    """The format error of a reply that ended for length without a complete call: the text it
    has is no answer (it may stop mid-sentence, or mid-number)."""
    return (f"your reply was cut off at {_limit(max_tokens)}: answer shorter, or call a "
            "tool")


_PLACEHOLDER_TOKENS = "|".join(re.escape(p) for p in sorted(EXAMPLE_PLACEHOLDERS)
                               if p.startswith("<"))
# A placeholder written as a value without quotes, as the worked example shows numbers.
_UNQUOTED = re.compile(rf"[:,\[][ \t\r\n]*(?:{_PLACEHOLDER_TOKENS})")


def copied_example(call: ToolCall) -> str | None:
    """Why ``call`` must not run because its arguments hold the worked example's placeholders
    (:data:`~miniagent.core.protocol.react.EXAMPLE_PLACEHOLDERS`: ``"..."``, ``<integer>``), or
    None. A small model copies the example's Action Input (``remember {"text": "..."}`` was
    stored); the model is told to put the real values in instead."""
    found = _placeholder_in(call.arguments)
    if found is None:
        unquoted = _UNQUOTED.search(call.raw_arguments) if "<" in call.raw_arguments else None
        found = unquoted.group().lstrip(":,[ \t\r\n") if unquoted else None
    if found is None:
        return None
    return (f"The call of '{call.name}' was not run: its arguments hold the placeholder "
            f"{found} of the example, not a value. Call it again with the real values, taken "
            "from the question or from an Observation.")


def _placeholder_in(arguments: Any) -> str | None:
    """The first argument value that is one of the example's placeholders, as JSON text."""
    stack = [arguments]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if value.strip() in EXAMPLE_PLACEHOLDERS:
                return json.dumps(value.strip())
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return None


def copied_answer(answer: str | None) -> str | None:
    """The format error of a Final Answer that is the worked example's, copied as it is
    (:data:`~miniagent.core.protocol.react.EXAMPLE_ANSWER`), or None."""
    if answer is None or _plain(answer) != _plain(EXAMPLE_ANSWER):
        return None
    return ("your Final Answer is the example's placeholder text, not an answer: write the "
            "answer itself, taken from the Observations")


RESTATED_CHARS = 300
"""How much of the question :func:`restated` repeats (a pasted document is not repeated)."""


def restated(question: str, step: Step) -> str:
    """What ends ``step``'s last observation under ``restate_question``: the turn's question
    and the two ways on, once a call of the step gave a result ("" otherwise: a failed call's
    error says what to repair).

    A small model that has its results tends to go on calling tools (Qwen2.5-Coder-1.5B
    converted 27 °C to °F, then to K, then again, for "how many °C warmer is ...") until the
    repeat guard stops it, or answers the figure of the last call (20 °C when asked for
    kelvin, after the conversion gave 293.15). Shown the question after each result, it sees
    what is still missing, or that nothing is. The part still missing comes first: told "if
    the results so far answer it, give your Final Answer now", it answered a difference of two
    temperatures after fetching one. The text is the same wherever it appears, so the history
    stays a prefix of itself from step to step.
    """
    if not any(record.succeeded for record in step.calls):
        return ""
    text = " ".join(question.split())
    if len(text) > RESTATED_CHARS:
        text = text[:RESTATED_CHARS].rstrip() + " ..."
    return (f"\n[The question: {text}\nIf a part of it still needs a tool's result, call that "
            "tool; once the results answer all of it, give your Final Answer.]")


def _plain(text: str) -> str:
    return _SPACES.sub(" ", text.strip().strip("\"'`*.。").strip()).casefold()


def _limit(max_tokens: int | None) -> str:
    return (f"the max_tokens limit ({counted(max_tokens, 'token')})" if max_tokens is not None
            else "the server's token limit")


Verdict = Literal["ok", "intervene", "stop"]

_SPACES = re.compile(r"\s+")


def _normalise(value: Any) -> Any:
    """A hashable form in which near-identical arguments are equal: case, spacing, key order,
    2 vs 2.0. Arguments are bounded in depth where they enter (:func:`admit_call`)."""
    if isinstance(value, str):
        return _SPACES.sub(" ", value.strip().lower())
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, int):  # 2 == 2.0; an int too large for a float stays exact
        return float(value) if -(2**53) <= value <= 2**53 else value
    if isinstance(value, dict):
        items = [(str(k).lower(), _normalise(v)) for k, v in value.items()]
        items.sort(key=_KEY)  # by key alone: values of one key may not compare
        return ("{}", tuple(items))
    if isinstance(value, list | tuple):
        return ("[]", tuple(_normalise(v) for v in value))
    return str(value)


_KEY = itemgetter(0)


def action_key(call: ToolCall) -> tuple[str, Any]:
    """A key equal for calls of the same tool with the same normalised arguments."""
    args = call.arguments if call.arguments else call.raw_arguments.strip()
    return call.name, _normalise(args)


_EARLIER_CHARS = 500


def earlier_result(steps: Sequence[Step], call: ToolCall) -> str | None:
    """The output of the last successful run of the same action, if there was one."""
    key = action_key(call)
    for step in reversed(steps):
        for record in step.calls:
            seen = record.observation
            if seen is not None and not seen.is_error and action_key(record.call) == key:
                return seen.output
    return None


class LoopDetector:
    """Counts repeated actions across a run.

    The ``limit``-th identical action gets an intervention (the tool does not run and
    the model is told to answer from what it knows); any identical action after the
    intervention ends the run with ``loop_detected``.
    """

    def __init__(self, limit: int = defaults.REPEAT_LIMIT) -> None:
        self.limit = limit
        self._seen: Counter[tuple[str, Any]] = Counter()

    @classmethod
    def replaying(cls, steps: list[Step], limit: int) -> LoopDetector:
        """A detector that has seen these steps' calls (a resumed run keeps its counts)."""
        detector = cls(limit)
        for step in steps:
            for call in step.tool_calls:
                detector.check(call)
        return detector

    def check(self, call: ToolCall) -> Verdict:
        key = action_key(call)
        self._seen[key] += 1
        count = self._seen[key]
        if self.limit <= 0 or count < self.limit:
            return "ok"
        return "intervene" if count == self.limit else "stop"

    @staticmethod
    def intervention(call: ToolCall, count: int, earlier: str | None = None) -> str:
        """What a repeated call is answered with; ``earlier`` is the result it already had."""
        text = (
            f"You have called '{call.name}' with the same arguments {count} times; the result "
            "will not change. Do not repeat it. Use the observations you already have and "
            "give your Final Answer, or try a different tool or different arguments."
        )
        if earlier is not None:
            text += f" Its result was: {truncate_observation(earlier, _EARLIER_CHARS)}"
        return text


# -- what enters a session -------------------------------------------------------------------------

def admit_response(reply: ModelResponse) -> ModelResponse:
    """A model reply with storable text in every field: content, reasoning, finish reason and
    what a trace keeps of the server's body (its top level without ``choices``, which the
    other fields already hold); its calls are admitted once parsed (:func:`admit_parsed`)."""
    changes: dict[str, Any] = {}
    if not _storable_texts(reply.content, reply.reasoning_content, reply.finish_reason):
        for name in ("content", "reasoning_content", "finish_reason"):
            value = getattr(reply, name)
            if isinstance(value, str) and storable(value) is not value:
                changes[name] = storable(value)
    raw = reply.raw
    if isinstance(raw, dict):
        meta = dict(raw)  # copied and cut in C: no loop over the keys
        meta.pop("choices", None)
        if not _storable_value(meta):
            changes["raw"] = {**_storable_copy(meta), "choices": raw.get("choices")}
    return replaced(reply, **changes) if changes else reply


def admit_call(call: ToolCall) -> ToolCall:
    """The call itself when it is fine; otherwise a cleaned copy."""
    too_deep = deeper_than(call.arguments, MAX_DEPTH)
    if not too_deep and _storable_value([call.name, call.raw_arguments, call.id,
                                         call.arguments]):
        return call  # the common case, in one check
    name, raw, call_id = storable(call.name), storable(call.raw_arguments), storable(call.id)
    arguments, error = call.arguments, call.arguments_error
    if too_deep:
        arguments, error = {}, f"the arguments are nested deeper than {MAX_DEPTH} levels"
        raw = raw[:200] + ("..." if len(raw) > 200 else "")
    elif not _storable_value(arguments):
        arguments = _storable_copy(arguments)
    return replaced(call, id=call_id, name=name, raw_arguments=raw, arguments=arguments,
                    arguments_error=error)


def admit_parsed(output: ParsedOutput) -> ParsedOutput:
    """What a protocol made of a reply, every text and call made safe to keep (a parser may
    decode escapes such as ``\\ud800`` into bad text)."""
    if not _storable_texts(output.text, output.thought, output.final_answer, output.error,
                           output.reasoning, output.plain_answer):
        output.text = storable(output.text)
        for name in ("thought", "final_answer", "error", "reasoning", "plain_answer"):
            value = getattr(output, name)
            if value is not None:
                setattr(output, name, storable(value))
    output.tool_calls = [admit_call(call) for call in output.tool_calls]
    return output


def admit_observation(result: Observation) -> Observation:
    """A tool's observation with storable text."""
    output = storable(result.output)
    return result if output is result.output else replaced(result, output=output)


def _storable_texts(*texts: str | None) -> bool:
    """Whether every text given (None counts as none) encodes as UTF-8, checked as one text;
    False too for a value that is not text, which is then left to :func:`storable`."""
    try:
        "".join(filter(None, texts)).encode("utf-8")
    except (UnicodeEncodeError, TypeError):
        return False
    return True


def _storable_copy(value: Any) -> Any:
    """A JSON-like value with every string made storable (through one JSON round trip)."""
    return json.loads(storable(json.dumps(value, ensure_ascii=False, default=repr)))


def _storable_value(value: Any) -> bool:
    """Whether every string (keys too) in a JSON-like value encodes as UTF-8.

    The value is written by the C JSON encoder (keeping every character) and encoded as one
    text: UTF-8 refuses any surrogate, paired or lone, so it encodes exactly when each of its
    strings does. A value the encoder cannot write (a type JSON has no form for, nesting past
    the interpreter's limit) is walked instead."""
    try:
        text = write_json(value)
    except (TypeError, ValueError, RecursionError):
        return _walked_storable(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _walked_storable(value: Any) -> bool:
    """:func:`_storable_value` by a walk: the strings are gathered and encoded as one (one
    encoder call instead of one per string)."""
    strings: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            strings.append(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    try:
        "".join(strings).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# -- token estimates -------------------------------------------------------------------------------

def with_estimate(response: ModelResponse, request: ModelRequest) -> ModelResponse:
    """``response``, its unknown usage given an estimate (a copy); as it is otherwise."""
    usage = response.usage
    if usage.known or usage.estimated_tokens:
        return response
    estimated = dataclasses.replace(usage, estimated_tokens=_call_tokens(request, response))
    return dataclasses.replace(response, usage=estimated)


def _call_tokens(request: ModelRequest, response: ModelResponse) -> int:
    sent = json.dumps([request.messages, request.tools or []], ensure_ascii=False, default=str)
    received = [response.content or "", response.reasoning_content or ""]
    for call in response.tool_calls:
        received += [call.name, call.raw_arguments or json.dumps(call.arguments,
                                                                 ensure_ascii=False)]
    return tokens(sent) + sum(tokens(text) for text in received)


# -- the tool choice -------------------------------------------------------------------------------

def check_choice(choice: str | None, names: Sequence[str] | None = None) -> str | None:
    """``choice`` if it can be used with tools ``names`` (None: not known yet).

    Raises:
        ValueError: Not a string, empty, or the name of no tool among ``names``.
    """
    if choice is None:
        return None
    if not isinstance(choice, str) or not choice.strip():
        raise ValueError(f"tool_choice must be auto, required, none or a tool's name, "
                         f"got {choice!r}")
    choice = choice.strip()
    if names is not None and choice not in CHOICE_KEYWORDS and choice not in names:
        listed = ", ".join(names) or "none"
        raise ValueError(f"tool_choice names the tool {choice!r}, which is not among the "
                         f"run's tools ({listed})")
    return choice


def choice_for_step(choice: str | None, steps: Sequence[Step]) -> str | None:
    """The choice for the next step after ``steps``: ``required`` and a name become ``auto``
    once one of them has called a tool."""
    if choice is None or choice in ("auto", "none") or not any(s.calls for s in steps):
        return choice
    return "auto"


def apply_choice(request: ModelRequest, choice: str | None,
                 tools: Sequence[ToolLike]) -> ModelRequest:
    """``request`` with ``choice`` applied: the native field, or a narrower ReAct grammar."""
    if choice is None:
        return request
    if request.tools:
        request.tool_choice = choice
    elif request.grammar is not None and choice != "auto":
        named = choice not in CHOICE_KEYWORDS
        allowed = [t for t in tools if t.name == choice] if named else tools
        if choice == "none":
            allowed = []
        if allowed or choice == "none":  # else no grammar is left: the check below tells
            from miniagent.core.protocol.grammar import react_grammar  # loads with the first one

            request.grammar = react_grammar(allowed, final=choice == "none",
                                            max_tokens=request.max_tokens)
    return request


def enforce_choice(parsed: ParsedOutput, choice: str | None) -> ParsedOutput:
    """``parsed``, or an invalid reply when it does what ``choice`` forbids."""
    if choice is None or choice == "auto" or parsed.kind == "invalid":
        return parsed
    error = None
    if choice == "none" and parsed.kind == "action":
        error = "no tool may be called on this step: answer with what you know"
    elif choice != "none" and parsed.kind == "final":
        which = "a tool" if choice == "required" else f"the tool '{choice}'"
        error = f"this step must call {which} before any final answer"
    elif choice not in CHOICE_KEYWORDS and parsed.kind == "action":
        others = sorted({c.name for c in parsed.tool_calls if c.name != choice})
        if others:
            error = f"this step must call the tool '{choice}', not {', '.join(others)}"
    if error is None:
        return parsed
    return dataclasses.replace(parsed, kind="invalid", error=error, tool_calls=[],
                               final_answer=None)
