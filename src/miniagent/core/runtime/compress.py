"""Context compression that keeps the prefix cache: pure functions, no I/O.

A long run resends its whole history on every step. With
``Agent(compression=Compression(at=N))`` (``compress_at`` below) the step logic asks
:func:`plan` before each model call whether the history sent to the model has crossed ``N``;
when it has, the oldest rounds are replaced, once, by one summary block, and from then on
the history grows append-only again until the next crossing, so a server's prefix cache holds
between compactions::

    [question] [round 1] [round 2] ... [round 9]            # crosses compress_at
    [question] [summary of rounds 1-5] [round 6] ... [round 9] [round 10] ...   # append-only

A *round* is one assistant message with everything that follows it up to the next one (its
tool results, a format-error note); the messages before the first assistant message (the
question) are never replaced. The cut always falls between rounds, so a tool call is never
separated from its result, and the last ``keep_last`` rounds stay whole, byte for byte.

Inside the summary a tool call keeps its tool name and its arguments (cut past twice the
result's length, the cut marked), paired with its result. What is shortened is the result (cut
to ``observation_chars``, about 200 characters, with the number of characters cut) and the
thought (cut the same way). Where that leaves the history above half of ``compress_at``, the
results are cut shorter (halved, to 50 characters), then the oldest summarised rounds keep
only their calls (with the size of the result left out): the room below the threshold is what
keeps the next compaction many steps away instead of one (the summary grows with every
compaction). Or, with ``compress="model"``, the model writes the summary of the results itself
(through the driver's ``generate``, like any model call) and the calls are listed after it.

``compress_at`` is a bound, not only a trigger: where keeping the last ``keep_last`` rounds
whole would leave the history above it (rounds with huge arguments or results), fewer are
kept (the latest always), before the calls of the summary are only counted; past its
question plus twice ``compress_at`` (the ceiling) a compaction does not wait for
``keep_last`` new rounds; and a history that would stay above the ceiling (a round larger)
ends the run as ``budget_exceeded`` before the step (:func:`overflow` says why), instead of
sending ever longer prompts.

Nothing is lost: ``AgentSession.messages`` keeps every message and each compaction is recorded
in ``AgentSession.compactions`` (persisted: a resumed session sends the same compacted history);
:func:`history` builds what is sent from the two.

Sizes are estimated without a tokenizer (the step logic has none): ASCII text at 4 characters a
token, every other character a token of its own (CJK text is about one token a character;
:mod:`miniagent.core.runtime.guards`). The size is the history's (contents, tool names,
arguments), not the system prompt's or the tools'.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from miniagent._internal.wording import counted
from miniagent.core.errors import ModelError
from miniagent.core.runtime.guards import admit_response, tokens, with_estimate
from miniagent.core.runtime.recall import with_recalls
from miniagent.core.session import AgentSession
from miniagent.core.types import (
    Compaction,
    Message,
    ModelRequest,
    ModelResponse,
    TokenUsage,
    ToolCall,
)

if TYPE_CHECKING:  # run.py imports the step logic, which loads this module
    from miniagent.core.runtime.run import Compression, Unit

HEADER = "Summary of earlier steps"
MIN_RESULT_CHARS = 50
"""The shortest a summarised result is cut to (see :func:`compaction`)."""
MIN_ARGUMENT_CHARS = 100
"""The shortest a summarised call's arguments are cut to (twice the result's cut, at least)."""
LISTED_ARGUMENT_CHARS = 500
"""How much of a call's arguments the model-written summary's list of calls keeps."""
TALLIED = "calls counted per tool, their arguments and results left out"
"""What the summary of a run too long to list its calls says (see :func:`_cut_summary`)."""
CEILING = 2
"""The history sent stays under its question plus ``CEILING * compress_at``, or the run ends."""
# Patterns as text: ``re`` compiles them when an agent is configured or a history compacted,
# and caches them, instead of every ``import miniagent`` compiling them.
_ACTION_LINE = r"(?im)^[ \t>#*_\-]*(?:action|行动|动作)\b"
_THOUGHT_LABEL = r"(?i)^[ \t>#*_\-]*(?:thought|思考)[ \t*]*[:：][ \t*]*"
_SUMMARY_PROMPT = (
    "You condense the earlier steps of an AI agent's work so that the agent can continue from "
    "your summary. Keep every fact the steps found (numbers, names, results, errors) and which "
    "tool gave it; leave out reasoning that led nowhere. Write plain sentences, at most about "
    "150 words, without a preamble."
)


@dataclasses.dataclass(kw_only=True)
class Plan:
    """A compaction decided but not yet written: which messages, and the model's request."""

    start: int
    end: int
    rounds: int
    size_before: int
    cut_summary: str = ""
    """The summary with cut results (used in ``truncate`` mode, and when the model's fails)."""
    request: ModelRequest | None = None


def history(session: AgentSession) -> Sequence[Message]:
    """What the model is sent: the messages (each turn's question with what was recalled for
    it, :func:`~miniagent.core.runtime.recall.with_recalls`), with the last compaction's rounds
    replaced by its summary. The questions of later turns among those rounds stay, after the
    summary: a question is never summarised away."""
    if not session.compactions:
        return with_recalls(session)
    last = session.compactions[-1]
    return _compacted(session, last.start, last.end, last.summary)


def _compacted(session: AgentSession, start: int, end: int, summary: str) -> list[Message]:
    """The history with the messages from ``start`` to ``end`` replaced by ``summary``, then
    the questions of the turns among them (:func:`_asked`)."""
    messages = with_recalls(session)
    return [*messages[:start], Message(role="user", content=summary),
            *_asked(session, start, end), *messages[end:]]


ASKED_CHARS = 2000
"""The most characters kept of a later turn's question among summarised rounds."""


def _asked(session: AgentSession, start: int, end: int) -> list[Message]:
    """The questions of turns that began between ``start`` and ``end``, each cut to
    :data:`ASKED_CHARS`, without what was recalled for them: the same whichever turn is the
    current one, so a new turn keeps the prefix."""
    kept = []
    for turn in session.turns:
        if start <= turn.first_message < end:
            text = turn.question if len(turn.question) <= ASKED_CHARS else (
                turn.question[:ASKED_CHARS - 1] + "…")
            kept.append(Message(role="user", content=text))
    return kept


def estimate(text: str, unit: Unit) -> int:
    """The size of ``text``: characters, or estimated tokens (:func:`.estimate.tokens`)."""
    return len(text) if unit == "chars" else tokens(text)


def size(messages: Sequence[Message], unit: Unit) -> int:
    """The size of a history: its texts, tool names and arguments."""
    total = 0
    for message in messages:
        total += estimate(message.content or "", unit)
        for call in message.tool_calls:
            total += estimate(call.name, unit) + estimate(_arguments(call.arguments,
                                                                     call.raw_arguments), unit)
    return total


def round_starts(messages: Sequence[Message], start: int = 0) -> list[int]:
    """Indices of the assistant messages at or after ``start``: where rounds begin."""
    return [i for i in range(start, len(messages)) if messages[i].role == "assistant"]


def plan(session: AgentSession, config: Compression) -> Plan | None:
    """A compaction when the history sent crosses ``config.at``, more than ``keep_last``
    rounds are not yet summarised (after an earlier compaction: ``keep_last`` new rounds at
    least; past the ceiling: one) and the summary is smaller than what it replaces; else None
    (the history stays append-only)."""
    before = size(history(session), config.unit)
    if before <= config.at:
        return None
    last = session.compactions[-1] if session.compactions else None
    starts = round_starts(session.messages, last.end if last else 0)
    # after a compaction, the next waits for keep_last new rounds: the cache breaks at most
    # once every keep_last steps, even where the calls alone near the threshold; not past
    # the ceiling, where the wait would let the history grow without bound
    keep = config.keep_last
    needed = 2 * keep if last else keep + 1
    if len(starts) < needed and (before <= _ceiling(session, config) or len(starts) < 2):
        return None
    first = last.start if last else starts[0]
    best: Plan | None = None
    for kept in range(min(keep, len(starts) - 1), 0, -1):  # fewer kept while over the bound
        best = _plan_keeping(session, config, last, starts[-kept], first, before,
                             tally=kept == 1)  # counting the calls is the last resort
        if _size_with(session, best, best.cut_summary, config.unit) <= config.at:
            break
    if best is None or _size_with(session, best, best.cut_summary, config.unit) >= before:
        return None  # rounds too small to gain from a summary: it would only break the cache
    if config.mode == "model":
        best.request = summary_request(session, last, first, best.end, config)
    return best


def overflow(session: AgentSession, config: Compression) -> str | None:
    """Why the run cannot go on under ``config``, or None: the history, once compressed as
    :func:`plan` would, stays above the ceiling (the question, which is never compressed,
    plus twice ``compress_at``)."""
    ceiling = _ceiling(session, config)
    if size(history(session), config.unit) <= ceiling:
        return None  # a compaction only makes it smaller: no need to plan one here
    planned = plan(session, config)
    now = size(history(session), config.unit) if planned is None else _size_with(
        session, planned, planned.cut_summary, config.unit)
    if now <= ceiling:
        return None
    unit = "estimated tokens" if config.unit == "tokens" else "characters"
    return (f"the history would be {now:,} {unit} after compression, above its question and "
            f"twice compress_at ({ceiling:,}): a step is too large to send")


def _ceiling(session: AgentSession, config: Compression) -> int:
    """The largest history sent: its question (never compressed), the later questions kept
    after a summary, and twice ``compress_at``."""
    starts = round_starts(session.messages)
    question = session.messages[:starts[0] if starts else len(session.messages)]
    later = _asked(session, starts[0], len(session.messages)) if starts else []
    return size([*question, *later], config.unit) + CEILING * config.at


def _plan_keeping(session: AgentSession, config: Compression, last: Compaction | None,
                  end: int, first: int, before: int, *, tally: bool) -> Plan:
    """The compaction of the rounds from ``first`` up to ``end``, with its cut summary."""
    rounds = (last.rounds if last else 0) + len(round_starts(session.messages[:end],
                                                             last.end if last else first))
    result = Plan(start=first, end=end, rounds=rounds, size_before=before)
    result.cut_summary = _cut_summary(session, config, result, tally=tally)
    return result


def summary_request(session: AgentSession, last: Compaction | None, start: int, end: int,
                    config: Compression) -> ModelRequest:
    """The model call that writes the summary: the question, the summary so far, and the newly
    covered rounds with their results cut to five times ``observation_chars``."""
    messages = session.messages
    new_from = last.end if last else start
    head = "\n".join(m.content or "" for m in messages[:start])
    parts = [f"The user's question:\n{head.strip()}"]
    if last is not None:
        parts.append(f"The summary so far:\n{last.summary}")
    number = last.rounds + 1 if last else 1
    parts.append("The steps to summarise:\n" + _transcript(
        messages[new_from:end], number, config.observation_chars * 5))
    return ModelRequest(
        messages=[{"role": "system", "content": _SUMMARY_PROMPT},
                  {"role": "user", "content": "\n\n".join(parts)}],
        temperature=0.0, max_tokens=config.summary_tokens, protocol="summary")


def compaction(session: AgentSession, config: Compression, plan: Plan,
               reply: ModelResponse | ModelError | None, *, step: int, at: float) -> Compaction:
    """The compaction to record: the model's summary when it wrote one, else cut results."""
    messages = session.messages
    covered = messages[plan.start:plan.end]
    usage, note, mode = TokenUsage(), "", config.mode
    text = (reply.content or "").strip() if isinstance(reply, ModelResponse) else ""
    if isinstance(reply, ModelResponse):
        usage = reply.usage
    summary = plan.cut_summary
    if mode == "model":
        written = (f"{HEADER} (rounds 1-{plan.rounds}, summarised by the model):\n{text}"
                   + _calls_list(covered))
        if text and _size_with(session, plan, written, config.unit) < plan.size_before:
            summary = written
        else:
            why = (str(reply) if isinstance(reply, ModelError) else
                   "the model's summary was longer than what it replaced" if text else
                   "the model's summary was empty")
            note, mode = f"{why}; the results were cut instead", "truncate"
    after = _size_with(session, plan, summary, config.unit)
    return Compaction(step=step, at=at, start=plan.start, end=plan.end, rounds=plan.rounds,
                      summary=summary, mode=mode, unit=config.unit,
                      size_before=plan.size_before, size_after=after, usage=usage, note=note)


async def compact(session: AgentSession, config: Compression,
                  generate: Callable[[ModelRequest], Awaitable[ModelResponse]], *, step: int,
                  now: Callable[[], float]) -> Compaction | None:
    """Compact ``session`` if :func:`plan` says so, the summary written through ``generate``
    (the driver's effect) in ``model`` mode; records and returns the compaction, or None.

    A failed summary call does not fail the run: the results are cut instead (``note``).
    """
    decided = plan(session, config)
    if decided is None:
        return None
    reply: ModelResponse | ModelError | None = None
    if decided.request is not None:
        try:
            reply = with_estimate(admit_response(await generate(decided.request)),
                                  decided.request)
        except ModelError as exc:
            reply = exc
    done = compaction(session, config, decided, reply, step=step, at=now())
    session.compactions.append(done)
    session.add_usage(done.usage)
    return done


def _cut_summary(session: AgentSession, config: Compression, plan: Plan, *,
                 tally: bool = True) -> str:
    """The summarised rounds with their results cut to ``observation_chars``; shorter where the
    history would stay above half the threshold (the room below it is what keeps the next
    compaction many steps away): results halved down to :data:`MIN_RESULT_CHARS`, then the
    oldest rounds (half of them, three quarters, ...) reduced to their calls alone; where even
    that leaves it above the threshold, the calls are only counted per tool, if ``tally``
    (so that the summary of a long run stays bounded)."""
    covered = session.messages[plan.start:plan.end]
    cut, brief = config.observation_chars, 0
    while True:
        summary = (f"{HEADER} (rounds 1-{plan.rounds}; each result cut to about {cut} "
                   "characters; later steps follow in full):\n"
                   + _transcript(covered, 1, cut, brief))
        after = _size_with(session, plan, summary, config.unit)
        if after <= config.at // 2 or (brief >= plan.rounds and (after <= config.at
                                                                 or not tally)):
            return summary
        if cut > MIN_RESULT_CHARS:
            cut = max(MIN_RESULT_CHARS, cut // 2)
        elif brief < plan.rounds:
            brief = plan.rounds if plan.rounds - brief <= 1 else (brief + plan.rounds + 1) // 2
        else:
            return f"{HEADER} (rounds 1-{plan.rounds}; {TALLIED}):\n{_tally(covered)}"


def _tally(messages: Sequence[Message]) -> str:
    """How many calls each tool had in ``messages``, most called first."""
    counts = Counter(c.name for m in messages if m.role == "assistant" for c in m.tool_calls)
    return ", ".join(f"{name} x{n}" for name, n in counts.most_common()) or "no tool calls"


def _size_with(session: AgentSession, plan: Plan, summary: str, unit: Unit) -> int:
    return size(_compacted(session, plan.start, plan.end, summary), unit)


def _transcript(messages: Sequence[Message], number: int, cut: int, brief: int = 0) -> str:
    """One entry per round: the thought, each call whole with its result cut, notes; the
    first ``brief`` rounds only as their calls, with the size of each result left out."""
    lines: list[str] = []
    results = {m.tool_call_id: m.content or "" for m in messages if m.role == "tool"}
    first = number
    for message in messages:
        short = number - first <= brief  # this round (number - 1) is one of the brief ones
        if message.role == "assistant":
            short = number - first < brief
            thought = _thought(message)
            if short:
                lines.append(f"[{number}]")
            else:
                lines.append(f"[{number}] " + (_short(thought, max(cut, 60)) if thought
                                                else "(no thought)"))
            number += 1
            for call in message.tool_calls:
                lines.append(_call_line(call, results.get(call.id), None if short else cut))
        elif message.role != "tool" and not short:
            lines.append("    Note: " + _short(message.content or "", max(cut, 60)))
    return "\n".join(lines)


def _call_line(call: ToolCall, result: str | None, cut: int | None) -> str:
    """``Action: name {arguments}`` (cut past twice the result's cut), then its result cut, or
    only the result's size."""
    shown = _clip(_arguments(call.arguments, call.raw_arguments),
                  max(MIN_ARGUMENT_CHARS, 2 * (cut or MIN_RESULT_CHARS)))
    action = f"    Action: {call.name} {shown}"
    if result is None:
        return f"{action}\n    Result: (none)"
    if cut is None:
        return f"{action} (result of {counted(len(result), 'character')} left out)"
    return f"{action}\n    Result: {_short(result, cut)}"


def _calls_list(messages: Sequence[Message]) -> str:
    calls = [f"- {c.name} {_clip(_arguments(c.arguments, c.raw_arguments), LISTED_ARGUMENT_CHARS)}"
             for m in messages if m.role == "assistant" for c in m.tool_calls]
    return "\nTool calls in those rounds:\n" + "\n".join(calls) if calls else ""


def _thought(message: Message) -> str:
    """The assistant's text before its first Action line, without a Thought label."""
    text = message.content or ""
    if message.tool_calls:
        m = re.search(_ACTION_LINE, text)
        if m is not None:
            text = text[:m.start()]
    return re.sub(_THOUGHT_LABEL, "", text.strip(), count=1).strip()


def _arguments(arguments: object, raw: str) -> str:
    if arguments or not raw:
        return json.dumps(arguments, ensure_ascii=False, separators=(", ", ": "))
    return raw


def _clip(text: str, limit: int) -> str:
    """``text`` as it is, cut to ``limit`` characters with the number cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters cut]"


def _short(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with the number cut."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return f"{flat[:limit]}... [{len(flat) - limit} more characters cut]"
