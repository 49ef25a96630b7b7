"""Approval and denial of dangerous calls, interrupted calls, resume, cancel (in one process)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from miniagent import Agent, Limits, ScriptedModel, SQLiteStore, tool
from miniagent.core.errors import DecisionError, SessionBusy, SessionError
from miniagent.core.session import AgentSession
from miniagent.core.store.base import random_id
from miniagent.core.types import (
    CallRecord,
    Decision,
    Message,
    Observation,
    PendingApproval,
    RunResult,
    Step,
    ToolCall,
)

RAN: list[str] = []


@tool(requires_approval=True)
def delete_file(name: str) -> str:
    """Delete a file."""
    RAN.append(f"delete {name}")
    return f"deleted {name}"


@tool(requires_approval=lambda args: args["amount"] > 100)
def pay(amount: int) -> str:
    """Pay an amount."""
    RAN.append(f"pay {amount}")
    return f"paid {amount}"


@tool
def lookup(key: str) -> str:
    """Look something up."""
    RAN.append(f"lookup {key}")
    return f"value of {key}"


@tool(idempotent=True)
def fetch(key: str) -> str:
    """Fetch something (safe to repeat)."""
    RAN.append(f"fetch {key}")
    return f"fetched {key}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def act(name: str, args: dict[str, Any]) -> str:
    return f"Thought: go\nAction: {name}\nAction Input: {json.dumps(args)}"


def agent(outputs: list[Any], store: SQLiteStore, **options: Any) -> Agent:
    return Agent(model=ScriptedModel(outputs, tool_mode=options.pop("mode", "react")),
                 tools=[delete_file, pay, lookup, fetch], store=store, **options)


def test_approval_stops_the_run_and_resume_runs_the_call(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    first = agent([act("delete_file", {"name": "a.txt"})], store).run("clean up")
    assert first.status == "awaiting_approval" and RAN == []
    (pending,) = first.pending_approvals
    assert (pending.tool, pending.arguments) == ("delete_file", {"name": "a.txt"})

    other_process_store = SQLiteStore(tmp_path / "s.db")
    agent([], other_process_store).approve(first.session_id, pending.call_id, "looks fine")
    later = agent(["Final Answer: deleted"], SQLiteStore(tmp_path / "s.db"))
    result = later.resume(first.session_id)
    assert (result.status, result.final_answer) == ("completed", "deleted")
    assert RAN == ["delete a.txt"]
    sent = later.model.requests[0].messages  # type: ignore[attr-defined]
    assert sent[-1] == {"role": "user", "content": "Observation: deleted a.txt"}


def test_denial_is_fed_back_to_the_model_with_the_reason(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    first = agent([act("delete_file", {"name": "db.sqlite"})], store).run("clean up")
    Agent(model=ScriptedModel([]), store=store).deny(first.session_id, reason="that is prod")
    later = agent(["Final Answer: I did not delete it."], store)
    result = later.resume(first.session_id)
    assert result.status == "completed" and RAN == []
    observation = result.steps[0].observations[0]
    assert observation.is_error and "denied" in observation.output
    assert "that is prod" in observation.output
    prompt = later.model.requests[0].messages[-1]["content"]  # type: ignore[attr-defined]
    assert "denied" in prompt and "that is prod" in prompt


def test_predicate_decides_per_call(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    small = agent([act("pay", {"amount": 20}), "Final Answer: paid"], store).run("pay 20")
    assert small.status == "completed" and RAN == ["pay 20"]
    big = agent([act("pay", {"amount": 500})], store).run("pay 500")
    assert big.status == "awaiting_approval" and RAN == ["pay 20"]


def test_parallel_calls_run_the_safe_one_now_and_the_approved_one_later(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    both = {"content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "lookup", "arguments": '{"key": "k"}'}},
        {"id": "c2", "type": "function",
         "function": {"name": "delete_file", "arguments": '{"name": "old"}'}},
    ]}
    first = agent([both], store, mode="native").run("q")
    assert first.status == "awaiting_approval" and RAN == ["lookup k"]
    assert [p.call_id for p in first.pending_approvals] == ["c2"]
    store.update(first.session_id, lambda s: None)  # a no-op change keeps the session intact
    agent([], store).approve(first.session_id)
    later = agent([{"content": "done"}], store, mode="native")
    result = later.resume(first.session_id)
    assert result.status == "completed" and RAN == ["lookup k", "delete old"]
    tail = later.model.requests[0].messages[-2:]  # type: ignore[attr-defined]
    assert [(m["tool_call_id"], m["content"]) for m in tail] == [
        ("c1", "value of k"), ("c2", "deleted old")]


def test_inline_approver_decides_without_stopping(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    asked: list[str] = []

    def approver(pending: Any) -> bool:
        asked.append(pending.tool)
        return True

    result = agent([act("delete_file", {"name": "x"}), "Final Answer: ok"], store,
                   approver=approver).run("q")
    assert (result.status, asked, RAN) == ("completed", ["delete_file"], ["delete x"])


def test_wrong_decisions_are_clear_errors(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    first = agent([act("delete_file", {"name": "x"})], store).run("q")
    control = agent([], store)
    with pytest.raises(DecisionError, match="no call 'nope' awaiting approval"):
        control.approve(first.session_id, "nope")
    done = agent(["Final Answer: hi"], store).run("q2")
    with pytest.raises(DecisionError, match="not awaiting approval"):
        control.approve(done.session_id)


def test_cancel_ends_a_waiting_session(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    first = agent([act("delete_file", {"name": "x"})], store).run("q")
    control = agent([], store)
    control.cancel(first.session_id, "not today")
    result = agent(["Final Answer: never asked"], store).resume(first.session_id)
    assert (result.status, result.reason) == ("cancelled", "not today") and RAN == []


def interrupted_session(store: SQLiteStore, tool_name: str) -> str:
    """A session saved as a crash leaves it: one call started, never completed."""
    session = AgentSession.start("q", id=random_id(), at=time.time())
    call = ToolCall(id="c9", name=tool_name, arguments={"key": "k"}, raw_arguments="")
    session.messages.append(
        Message(role="assistant", content=act(tool_name, {"key": "k"}), tool_calls=[call]))
    session.steps.append(Step(index=1, calls=[CallRecord(call=call, state="started")]))
    session.phase = "tools"
    store.save(session)
    return session.id


def test_interrupted_idempotent_call_is_rerun(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    session_id = interrupted_session(store, "fetch")
    result = agent(["Final Answer: ok"], store).resume(session_id)
    assert result.status == "completed" and RAN == ["fetch k"]


def test_interrupted_unsafe_call_asks_a_person(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    session_id = interrupted_session(store, "lookup")
    result = agent([], store).resume(session_id)
    assert result.status == "awaiting_approval" and RAN == []
    (pending,) = result.pending_approvals
    assert pending.call_id == "c9" and "never completed" in pending.reason
    agent([], store).deny(session_id)
    final = agent(["Final Answer: unknown"], store).resume(session_id)
    assert final.status == "completed" and RAN == []
    assert "interrupted" in final.steps[0].observations[0].output


def test_interrupted_policy_rerun(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    session_id = interrupted_session(store, "lookup")
    result = agent(["Final Answer: ok"], store, on_interrupted="rerun").resume(session_id)
    assert result.status == "completed" and RAN == ["lookup k"]


def test_completed_calls_are_never_rerun_on_resume(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    script = [act("lookup", {"key": "a"}), act("delete_file", {"name": "b"})]
    first = agent(script, store).run("q")
    assert first.status == "awaiting_approval" and RAN == ["lookup a"]
    agent([], store).approve(first.session_id)
    agent(["Final Answer: ok"], store).resume(first.session_id)
    assert RAN == ["lookup a", "delete b"]
    again = agent(["Final Answer: should not be asked"], store).resume(first.session_id)
    assert again.status == "completed" and RAN == ["lookup a", "delete b"]


def test_crash_after_the_last_call_but_before_the_step_checkpoint(tmp_path: Path) -> None:
    """All calls completed on disk, their observations not yet in the history: resume adds
    them and never runs the call again."""
    store = SQLiteStore(tmp_path / "s.db")
    session = AgentSession.start("q", id=random_id(), at=time.time())
    call = ToolCall(id="c7", name="lookup", arguments={"key": "k"}, raw_arguments="")
    session.messages.append(
        Message(role="assistant", content=act("lookup", {"key": "k"}), tool_calls=[call]))
    done = Observation(call_id="c7", tool_name="lookup", output="value of k")
    session.steps.append(Step(index=1, calls=[
        CallRecord(call=call, state="completed", observation=done)]))
    session.phase = "tools"
    store.save(session)
    later = agent(["Final Answer: k"], store)
    result = later.resume(session.id)
    assert result.status == "completed" and RAN == []
    sent = later.model.requests[0].messages  # type: ignore[attr-defined]
    assert sent[-1] == {"role": "user", "content": "Observation: value of k"}


def test_bare_value_input_is_judged_after_coercion(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    bare = "Thought: pay\nAction: pay\nAction Input: 5000"
    result = agent([bare], store).run("pay")
    assert result.status == "awaiting_approval" and RAN == []
    assert result.pending_approvals[0].tool == "pay"


def test_invalid_arguments_of_an_approval_tool_get_the_error_not_a_person(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    result = agent([act("delete_file", {"path": "x"}), "Final Answer: no"], store).run("q")
    assert result.status == "completed" and RAN == []
    assert "Missing required argument(s): name" in result.steps[0].observations[0].output


def test_a_decision_made_elsewhere_at_the_prompt_is_taken_and_wins(tmp_path: Path) -> None:
    """Another process denies while this one waits at its prompt (holding the lease): the
    denial is recorded, and this run goes on with it, over the answer given here."""
    path = tmp_path / "s.db"
    outcome: list[str] = []

    def approver(pending: Any) -> bool:
        try:
            Agent(model=ScriptedModel([]), store=SQLiteStore(path)).deny(
                session_ids[0], reason="not today")
        except SessionError as exc:
            outcome.append(type(exc).__name__)
        return True

    session_ids: list[str] = []
    runner = agent([act("delete_file", {"name": "x"})], SQLiteStore(path))
    first = runner.run("q")
    session_ids.append(first.session_id)
    resumed = agent(["Final Answer: ok"], SQLiteStore(path), approver=approver)
    result = resumed.resume(first.session_id)
    assert outcome == []
    assert result.status == "completed" and RAN == []
    (record,) = SQLiteStore(path).load(first.session_id).steps[0].calls
    assert record.observation is not None and record.observation.is_error
    assert "A person denied this call" in record.observation.output
    assert "Reason: not today." in record.observation.output


async def test_the_prompt_looks_for_decisions_off_the_event_loop() -> None:
    """While a person is asked, the store is read for decisions made elsewhere (a read that
    may wait out a busy database) without holding up the event loop."""
    from miniagent.core.runtime.inprocess import ask_or_take

    loop = asyncio.get_running_loop()
    looked, loop_free = threading.Event(), list[bool]()

    class Door:
        def accept_decisions(self, session_id: str, owner: str, accept: bool = True) -> int:
            return 0

        def decisions_arrived(self, session_id: str, owner: str) -> int:
            turned = threading.Event()  # set only if the loop runs meanwhile
            loop.call_soon_threadsafe(turned.set)
            loop_free.append(turned.wait(10))
            looked.set()
            return 0

        def load(self, session_id: str) -> AgentSession:
            raise AssertionError("no decision arrived")

    def approver(_pending: Any) -> bool:
        return looked.wait(30)

    pending = [PendingApproval(call_id="c1", tool="pay", arguments={"amount": 500})]
    answers = await ask_or_take(approver, pending, Door(), "s1", "me")
    assert answers == {"c1": Decision(approved=True)}
    assert loop_free and all(loop_free)


def test_a_decision_cannot_overwrite_a_running_session(tmp_path: Path) -> None:
    """Away from its approval prompt, a running session takes no decision from elsewhere."""
    path = tmp_path / "s.db"
    outcome: list[str] = []

    @tool
    def decide_myself() -> str:
        """Try to decide this very session from another store."""
        try:
            Agent(model=ScriptedModel([]), store=SQLiteStore(path)).approve(session_ids[0])
        except SessionError as exc:
            outcome.append(type(exc).__name__)
        return "tried"

    session_ids = [random_id()]
    runner = Agent(model=ScriptedModel([act("decide_myself", {}), "Final Answer: ok"]),
                   tools=[decide_myself], store=SQLiteStore(path))
    result = runner.run("q", session_id=session_ids[0])
    assert outcome == ["SessionBusy"]
    assert result.status == "completed"


def test_deciding_twice_says_every_call_was_decided(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    first = agent([act("delete_file", {"name": "x"})], store).run("q")
    control = agent([], store)
    control.approve(first.session_id)
    with pytest.raises(DecisionError, match=r"has no call awaiting approval \(decided: .* "
                                            r"approved\); resume it"):
        control.deny(first.session_id)


def test_a_result_that_comes_after_the_run_was_cancelled_is_recorded(tmp_path: Path) -> None:
    """Cancelled while a sync tool blocks on its thread: the tool still finishes, its result
    is written to the call's record (a resume meanwhile is refused), and the resume goes on
    from it: the tool ran once, and the answer uses its result."""
    path, session_id = tmp_path / "s.db", random_id()
    started, release, paid = threading.Event(), threading.Event(), []

    @tool
    def slow_pay(amount: int) -> str:
        """Pay slowly."""
        started.set()
        release.wait(30)
        paid.append(amount)
        return f"paid {amount} (receipt r-1)"

    def answer(request: Any) -> str:
        return f"Final Answer: done, {request.messages[-1]['content']}"

    async def cancelled_run() -> None:
        runner = Agent(model=ScriptedModel([act("slow_pay", {"amount": 5})]),
                       tools=[slow_pay], store=SQLiteStore(path))
        task = asyncio.ensure_future(runner.arun("pay 5", session_id=session_id))
        await asyncio.to_thread(started.wait, 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled_run())  # its event loop is gone; the tool still runs
    later = Agent(model=ScriptedModel([answer]), tools=[slow_pay], store=SQLiteStore(path))
    with pytest.raises(SessionBusy):  # the call is still in flight: not run a second time
        later.resume(session_id)
    release.set()
    result = _resumed_once_free(later, session_id)
    assert paid == [5]
    assert result.status == "completed"
    assert result.final_answer == "done, Observation: paid 5 (receipt r-1)"


def _resumed_once_free(agent: Agent, session_id: str) -> RunResult:
    """``agent.resume(session_id)`` as soon as the late result is saved and the lease given
    back (bounded: 30 s)."""
    for _ in range(600):
        try:
            return agent.resume(session_id)
        except SessionBusy:
            time.sleep(0.05)
    pytest.fail("the late result was never saved: the session stayed busy")


class _LastSaveGate(SQLiteStore):
    """A store that calls ``at_last_save(before)`` around the save of a run that timed out
    (``before`` True: ahead of the write, False: after it)."""

    def __init__(self, path: Path, at_last_save: Any) -> None:
        super().__init__(path)
        self.at_last_save = at_last_save

    def save(self, session: AgentSession, *, owner: str | None = None) -> None:
        last = session.status == "timeout"
        if last:
            self.at_last_save(True)
        super().save(session, owner=owner)
        if last:
            self.at_last_save(False)


@pytest.mark.parametrize("release_at", ["before the last save", "after the last save",
                                        "after the run returned"])
def test_a_result_that_comes_at_the_deadline_is_kept(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     release_at: str) -> None:
    """A run hits its deadline while a sync tool blocks; the tool returns just before the
    run's last save, just after it, or once the run has returned: its result is recorded
    either way (the last save does not write the call back to ``started``), and a resume
    goes on from it: the tool ran once, and the answer uses its result."""
    from miniagent.core.runtime.inprocess import Arrival

    path, session_id = tmp_path / "s.db", random_id()
    started, release, handed_over, paid = (threading.Event(), threading.Event(),
                                           threading.Event(), [])
    finish = Arrival.finish

    def finish_and_tell(self: Arrival, outcome: Any) -> None:
        finish(self, outcome)
        handed_over.set()  # the tool's thread has given its result to the driver

    monkeypatch.setattr(Arrival, "finish", finish_and_tell)

    @tool
    def slow_pay(amount: int) -> str:
        """Pay slowly."""
        started.set()
        release.wait(30)
        paid.append(amount)
        return f"paid {amount} (receipt r-2)"

    def at_last_save(before: bool) -> None:
        if release_at == ("before the last save" if before else "after the last save"):
            release.set()
            assert handed_over.wait(30)

    runner = Agent(model=ScriptedModel([act("slow_pay", {"amount": 7})]), tools=[slow_pay],
                   store=_LastSaveGate(path, at_last_save), limits=Limits(timeout=0.3))
    first = runner.run("pay 7", session_id=session_id)
    assert first.status == "timeout" and started.is_set()
    release.set()

    def answer(request: Any) -> str:
        return f"Final Answer: done, {request.messages[-1]['content']}"

    later = Agent(model=ScriptedModel([answer]), tools=[slow_pay], store=SQLiteStore(path))
    result = _resumed_once_free(later, session_id)
    assert paid == [7]
    assert result.status == "completed"
    assert result.final_answer == "done, Observation: paid 7 (receipt r-2)"
