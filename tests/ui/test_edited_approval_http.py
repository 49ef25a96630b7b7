"""The inbox's edit form: the model's arguments prefilled, checked against the tool's schema
when posted (a refusal changes nothing), the call run with the person's arguments."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_inbox_http import client, until
from ui_support import PAID, act, hidden, waiting_agent

from miniagent import SQLiteStore
from miniagent.ui import app

PAY = act("pay", {"to": "Alice", "amount": 30})


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    PAID.clear()  # what other modules' runs paid
    yield


def edit(page: str, arguments: str) -> dict[str, str]:
    """The edit form, posted with ``arguments`` in its text area."""
    return {"csrf": hidden(page, "csrf"), "version": hidden(page, "version"),
            "call_id": hidden(page, "call_id"), "decision": "approve", "arguments": arguments}


def prefilled(page: str) -> str:
    found = re.search(r'<textarea id="[^"]*" name="arguments"[^>]*>(.*?)</textarea>', page,
                      re.DOTALL)
    assert found is not None, "no arguments field"
    return html.unescape(found.group(1))


def test_the_session_page_has_an_edit_form_prefilled_with_the_models_arguments(
        tmp_path: Path) -> None:
    agent, _, sid = waiting_agent(tmp_path / "s.db", [PAY])
    with client(app(agent)) as http:
        page = http.get(f"/sessions/{sid}").text
    assert json.loads(prefilled(page)) == {"to": "Alice", "amount": 30}
    assert "Approve with these arguments" in page
    form = re.search(r'<form method="post" action="([^"]*)" class="decide edit">', page)
    assert form is not None and form.group(1).endswith(f"/sessions/{sid}/decide")


def test_a_bad_edit_is_refused_with_the_reason_and_decides_nothing(tmp_path: Path) -> None:
    agent, _, sid = waiting_agent(tmp_path / "s.db", [PAY, "Final Answer: paid"])
    before = SQLiteStore(tmp_path / "s.db").load(sid).to_dict()
    with client(app(agent)) as http:
        page = http.get(f"/sessions/{sid}").text
        wrong = http.post(f"/sessions/{sid}/decide",
                          data=edit(page, '{"to": "Alice", "amount": "thirty"}'))
        broken = http.post(f"/sessions/{sid}/decide", data=edit(page, '{"to": "Alice",'))
    assert wrong.status_code == 409
    assert html.escape("amount: 'thirty' is not of type 'integer'") in wrong.text
    assert "nothing was decided" in wrong.text
    assert broken.status_code == 409 and "the arguments are not valid JSON" in broken.text
    assert SQLiteStore(tmp_path / "s.db").load(sid).to_dict() == before
    assert PAID == []


def test_an_edited_approval_runs_with_the_persons_arguments(tmp_path: Path) -> None:
    agent, model, sid = waiting_agent(tmp_path / "s.db", [PAY, "Final Answer: Alice got 12"])
    with client(app(agent)) as http:
        page = http.get(f"/sessions/{sid}").text
        done = http.post(f"/sessions/{sid}/decide",
                         data=edit(page, '{\n  "to": "Alice",\n  "amount": 12\n}'))
        assert done.status_code == 200, done.text
        assert "with your arguments" in done.text
        until(lambda: "Alice got 12" in http.get(f"/sessions/{sid}").text, "the answer")
        shown = http.get(f"/sessions/{sid}").text
    assert PAID == ["12 to Alice"]
    (record,) = SQLiteStore(tmp_path / "s.db").load(sid).steps[0].calls
    assert (record.call.arguments, record.edited_arguments) == (
        {"to": "Alice", "amount": 30}, {"to": "Alice", "amount": 12})
    assert "Edited by a person: it ran with" in shown
    told = model.requests[-1].messages[-1]["content"]
    assert "changed arguments" in told and "paid 12 euros to Alice" in told


def test_arguments_too_large_to_post_back_get_no_edit_form(tmp_path: Path) -> None:
    agent, _, sid = waiting_agent(tmp_path / "s.db", [act("pay", {"to": "x" * 40_000,
                                                                  "amount": 1})])
    with client(app(agent)) as http:
        page = http.get(f"/sessions/{sid}").text
    assert 'name="arguments"' not in page and "too large to edit here" in page
    assert 'value="approve"' in page  # a plain approval still is
