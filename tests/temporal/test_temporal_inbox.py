"""The browser inbox on Temporal: the same pages show a workflow's waiting call; approving
it sends the workflow's update, and the worker goes on to the answer; a stale page and a CSRF-
less post change nothing."""

from __future__ import annotations

import re

import httpx2 as httpx
import pytest
from temporal_helpers import Processes, address, wait_status
from temporalio.testing import WorkflowEnvironment

from miniagent import Agent
from miniagent.temporal import TemporalAgent, TemporalSessions
from miniagent.ui import app

pytestmark = pytest.mark.asyncio(loop_scope="session")

BASE = "http://127.0.0.1:8321"


def field(page: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', page)
    assert found is not None, name
    return found.group(1)


async def test_approve_a_workflows_call_in_the_inbox(
        dev_env: WorkflowEnvironment, procs: Processes, task_queue: str) -> None:
    procs.worker(task_queue)
    sessions = TemporalSessions(dev_env.client, task_queue)
    session_id = await sessions.start("transfer money")
    await wait_status(sessions, session_id, "awaiting_approval")
    inbox = app(temporal=sessions)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=inbox), base_url=BASE,
                                 headers={"Origin": BASE}) as http:
        page = (await http.get("/")).text
        assert session_id in page and "transfer" in page and "100" in page
        listed = (await http.get("/sessions", params={"status": "awaiting_approval"})).text
        assert f'href="/sessions/{session_id}"' in listed
        form = {name: field(page, name) for name in ("csrf", "version", "call_id")}
        forged = await http.post(f"/sessions/{session_id}/decide",
                                 data={**form, "csrf": "", "decision": "approve"})
        assert forged.status_code == 403
        done = await http.post(f"/sessions/{session_id}/decide",
                               data={**form, "decision": "approve"}, follow_redirects=True)
        assert done.status_code == 200 and "goes on in the cluster" in done.text
        result = await sessions.result(session_id)
        again = await http.post(f"/sessions/{session_id}/decide",
                                data={**form, "decision": "approve"})
        shown = (await http.get(f"/sessions/{session_id}")).text
    assert (result.status, result.final_answer) == ("completed", "done")
    assert [line.split(" key=")[0] for line in procs.log_lines()] == ["transfer 100"]
    assert again.status_code == 409 and "nothing was changed" in again.text
    assert 'data-status="completed"' in shown and "transferred 100" in shown


async def test_the_inbox_connects_by_address(
        dev_env: WorkflowEnvironment, procs: Processes, task_queue: str) -> None:
    """``app(temporal="HOST:PORT")`` (what ``miniagent ui --temporal`` serves) connects on its
    first request; a session's page offers Cancel, not Resume (the workers run it)."""
    procs.worker(task_queue)
    sessions = TemporalSessions(dev_env.client, task_queue)
    session_id = await sessions.start("transfer money")
    await wait_status(sessions, session_id, "awaiting_approval")
    inbox = app(temporal=address(dev_env), task_queue=task_queue)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=inbox),
                                 base_url=BASE) as http:
        assert session_id in (await http.get("/")).text
        page = (await http.get(f"/sessions/{session_id}")).text
    assert "Cancel the session" in page and "Resume" not in page and "Ask" not in page
    await sessions.cancel(session_id, "done testing")


async def test_approve_all_decides_the_calls_the_page_showed(
        dev_env: WorkflowEnvironment, procs: Processes, task_queue: str) -> None:
    """Approving every call sends one update per call the page showed (by id), so a call that
    began to wait after the page's version was checked is never decided unseen."""
    procs.worker(task_queue)
    sessions = TemporalSessions(dev_env.client, task_queue)
    session_id = await sessions.start("transfer money")
    await wait_status(sessions, session_id, "awaiting_approval")
    waiting = [p.call_id for p in (await sessions.session(session_id)).pending_approvals()]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app(temporal=sessions)),
                                 base_url=BASE, headers={"Origin": BASE}) as http:
        page = (await http.get(f"/sessions/{session_id}")).text
        form = {"csrf": field(page, "csrf"), "version": field(page, "version"), "call_id": "",
                "decision": "approve"}
        done = await http.post(f"/sessions/{session_id}/decide", data=form,
                               follow_redirects=True)
    assert done.status_code == 200 and f"Approved {', '.join(waiting)}" in done.text
    result = await sessions.result(session_id)
    assert (result.status, result.final_answer) == ("completed", "done")


async def test_the_inbox_of_a_temporal_agent_shows_its_clusters_sessions(
        dev_env: WorkflowEnvironment, procs: Processes, task_queue: str) -> None:
    """``app(TemporalAgent(...))``: the wrapper's cluster holds the sessions shown, and a
    decided session goes on with the workers of its task queue."""
    procs.worker(task_queue)
    agent = TemporalAgent(Agent(), dev_env.client, task_queue=task_queue)
    session_id = await agent.sessions.start("transfer money")
    await wait_status(agent.sessions, session_id, "awaiting_approval")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app(agent)),
                                 base_url=BASE) as http:
        page = (await http.get(f"/sessions/{session_id}")).text
    assert "transfer" in page and f"the workers of Temporal task queue {task_queue}" in page
    await agent.acancel(session_id, "done testing")


async def test_fork_a_workflows_session_in_the_inbox(
        dev_env: WorkflowEnvironment, procs: Processes, task_queue: str) -> None:
    """The Fork form starts the fork's workflow, whose page is shown next; it waits for its
    own decision, the parent's call stays undecided."""
    procs.worker(task_queue)
    sessions = TemporalSessions(dev_env.client, task_queue)
    parent = await sessions.start("transfer money")
    await wait_status(sessions, parent, "awaiting_approval")
    inbox = app(temporal=sessions)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=inbox), base_url=BASE,
                                 headers={"Origin": BASE}) as http:
        page = (await http.get(f"/sessions/{parent}")).text
        form = {name: field(page, name) for name in ("csrf", "version")}
        done = await http.post(f"/sessions/{parent}/fork", data={**form, "at_step": "1"},
                               follow_redirects=True)
    assert done.status_code == 200, done.text
    assert f"Forked session {parent} at step 1: this is the new session (running)" in done.text
    child = re.search(r'<span class="id">(\w+)</span>', done.text)
    assert child is not None and child.group(1) != parent
    view = await wait_status(sessions, child.group(1), "awaiting_approval")
    assert [p.tool for p in view.pending] == ["transfer"]
    assert (await sessions.view(parent)).status == "awaiting_approval"
    assert procs.log_lines() == []  # nothing ran: both wait for a person
    for session_id in (parent, child.group(1)):
        await sessions.cancel(session_id)
