"""The inbox in headless Chromium: a waiting session is approved or denied with a click or
the keyboard, the page follows the run without a reload, hostile text stays text, and nothing
is requested from anywhere but the inbox."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from browsing import browse, new_page, serving
from ui_support import HOSTILE, PAID, act, long_waiting_session, look, pay, waiting_agent

from browser import needs_browser
from miniagent import Agent, ScriptedModel, SQLiteStore, tool
from miniagent.ui import app

pytestmark = needs_browser

PAY = act("pay", {"to": "Alice", "amount": 30})
RELEASE = threading.Event()


@tool
def check_ledger(account: str) -> str:
    """Read the ledger of an account (waits until the test lets it finish).

    Args:
        account: whose ledger
    """
    RELEASE.wait(60)
    return f"ledger of {account}: +30"


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    PAID.clear()
    RELEASE.clear()
    yield
    RELEASE.set()


def test_approve_with_a_click_and_follow_the_run_live(tmp_path: Path) -> None:
    model = ScriptedModel([PAY, act("check_ledger", {"account": "Alice"}),
                           "Thought: checked\nFinal Answer: Alice is paid, the ledger agrees"])
    agent = Agent(model=model, tools=[pay, check_ledger], store=SQLiteStore(tmp_path / "s.db"))
    sid = agent.run("Pay Alice 30 euros").session_id
    with serving(app(agent)) as base, browse(base) as opened:
        page = opened.page
        page.goto(base + "/")
        card = page.locator(f'section.waiting[data-session="{sid}"]')
        assert card.locator(".tool").inner_text() == "pay"
        assert '"Alice"' not in card.inner_text() and "Alice" in card.inner_text()
        assert "needs approval" in card.locator(".why").inner_text()  # the recorded reason
        card.get_by_role("button", name="Approve").click()
        page.wait_for_url(f"**/sessions/{sid}?done=*")
        assert "Approved call" in page.locator(".flash.ok").first.inner_text()
        page.locator("details#step-2").wait_for()  # the ledger step shows while it runs
        assert page.locator('[data-status="running"]').count() == 1
        page.evaluate("window.sameDocument = true")
        RELEASE.set()
        page.locator("pre.answer").wait_for()  # swapped in by the page's script
        assert page.locator("pre.answer").inner_text() == "Alice is paid, the ledger agrees"
        assert page.locator('[data-status="completed"]').count() == 1
        assert page.evaluate("window.sameDocument") is True  # no reload
    assert PAID == ["30 to Alice"]
    assert opened.outside_requests == [] and opened.errors == []


def test_deny_with_a_reason_typed_in_the_page(tmp_path: Path) -> None:
    agent, model, sid = waiting_agent(tmp_path / "s.db", [PAY, "Final Answer: not paid"])
    with serving(app(agent)) as base, browse(base) as opened:
        page = opened.page
        page.goto(base + "/")
        card = page.locator(f'section.waiting[data-session="{sid}"]')
        card.get_by_label("Reason").fill("Alice was paid yesterday; 已付款")
        card.get_by_role("button", name="Deny").click()
        page.locator("pre.answer").wait_for()
        assert page.locator("pre.answer").inner_text() == "not paid"
    told = model.requests[-1].messages[-1]["content"]
    assert "denied" in told and "Alice was paid yesterday; 已付款" in told and PAID == []
    assert opened.outside_requests == [] and opened.errors == []


def test_a_second_approval_from_an_old_page_is_refused(tmp_path: Path) -> None:
    agent, _, _ = waiting_agent(tmp_path / "s.db", [PAY, "Final Answer: paid"])
    with serving(app(agent)) as base, browse(base) as opened:
        page = opened.page
        page.goto(base + "/")
        # a page shown earlier that does not follow the session (its script off): stale
        other = new_page(opened.browser, base, opened, javascript=False)
        other.goto(base + "/")
        page.locator("button.approve").first.click()
        page.locator("pre.answer").wait_for()
        other.locator("button.approve").first.click()
        refusal = other.locator(".flash.bad").inner_text()
        assert "changed since the page was shown" in refusal and "nothing was changed" in refusal
    assert PAID == ["30 to Alice"]
    assert opened.outside_requests == []
    assert [e for e in opened.errors if "409 (Conflict)" not in e] == []  # the refusal's status


def test_approve_with_the_keyboard_alone(tmp_path: Path) -> None:
    agent, _, _ = waiting_agent(tmp_path / "s.db", [PAY, "Final Answer: paid by keyboard"])
    with serving(app(agent)) as base, browse(base) as opened:
        page = opened.page
        page.goto(base + "/")
        for _ in range(40):  # Tab until the Approve button has the focus
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.className") == "approve":
                break
        else:
            raise AssertionError("Approve is not reachable with Tab")
        outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
        assert outline != "none"  # the focus is visible
        page.keyboard.press("Enter")
        page.locator("pre.answer").wait_for()
        assert page.locator("pre.answer").inner_text() == "paid by keyboard"
    assert opened.outside_requests == [] and opened.errors == []


def test_hostile_text_stays_text_in_the_browser(tmp_path: Path) -> None:
    agent, _, sid = waiting_agent(
        tmp_path / "s.db", [act("pay", {"to": HOSTILE * 6, "amount": 1})],
        question="Pay " + HOSTILE)
    with serving(app(agent)) as base, browse(base) as opened:
        page = opened.page
        for path in ("/", f"/sessions/{sid}", "/sessions?q=%3Cscript"):
            page.goto(base + path)
            page.mouse.move(200, 200)
            assert page.evaluate("window.pwned") is None
            assert page.locator("main img, main script, main a[href^=javascript]").count() == 0
        page.goto(base + "/")
        card = page.locator(f'section.waiting[data-session="{sid}"]')
        assert HOSTILE in card.locator("h2").inner_text()
        card.locator("details.fold summary").click()  # the long argument, unfolded
        assert card.locator("details.fold pre").inner_text() == HOSTILE * 6
    assert opened.outside_requests == [] and opened.errors == []


def test_the_inbox_shows_a_new_waiting_session_without_reload(tmp_path: Path) -> None:
    store_path = tmp_path / "s.db"
    inbox_store = SQLiteStore(store_path)
    with serving(app(store=inbox_store)) as base, browse(base) as opened:
        page = opened.page
        page.goto(base + "/")
        assert page.locator("p.empty").count() == 1
        page.evaluate("window.sameDocument = true")
        started: list[str] = []  # by another store object, off playwright's event loop
        runner = threading.Thread(target=lambda: started.append(
            waiting_agent(store_path, [PAY])[2]))
        runner.start()
        runner.join(60)
        sid = started[0]
        page.locator(f'section.waiting[data-session="{sid}"]').wait_for()
        assert page.evaluate("window.sameDocument") is True
    assert opened.outside_requests == [] and opened.errors == []


def test_a_session_run_elsewhere_is_followed_from_its_saved_steps(tmp_path: Path) -> None:
    """A run the inbox did not start has no event stream here: its page reads the saved
    steps, and still shows each new one without a reload."""
    store_path = tmp_path / "s.db"
    model = ScriptedModel([act("check_ledger", {"account": "Bob"}), "Final Answer: +30"])
    elsewhere = Agent(model=model, tools=[check_ledger], store=SQLiteStore(store_path))
    finished: list[str] = []
    runner = threading.Thread(target=lambda: finished.append(
        elsewhere.run("Check Bob's ledger", session_id="elsewhere1").status))
    with serving(app(store=SQLiteStore(store_path))) as base, browse(base) as opened:
        runner.start()
        page = opened.page
        for _ in range(500):  # until the session exists (bounded)
            if page.goto(base + "/sessions/elsewhere1").status == 200:
                break
            page.wait_for_timeout(20)
        page.locator("details#step-1").wait_for()
        assert page.locator("pre.answer").count() == 0
        page.evaluate("window.sameDocument = true")
        RELEASE.set()
        page.locator("pre.answer").wait_for()
        assert page.locator("pre.answer").inner_text() == "+30"
        assert page.evaluate("window.sameDocument") is True
        runner.join(30)
    assert finished == ["completed"]
    assert opened.outside_requests == [] and opened.errors == []


def test_a_long_session_followed_gets_its_new_steps_added_to_those_shown(
        tmp_path: Path) -> None:
    """The page shows the last 50 of 60 steps; decided and run on elsewhere, the session's
    last step changes and a 61st comes: the page puts them in place of its own from its last
    step on, and keeps the others and its link to the earlier steps."""
    store, sid = long_waiting_session(tmp_path / "s.db", 60)
    elsewhere = Agent(model=ScriptedModel(["Final Answer: paid after 60 steps"]),
                      tools=[look, pay], store=SQLiteStore(tmp_path / "s.db"))
    with serving(app(store=store)) as base, browse(base) as opened:
        page = opened.page
        page.goto(f"{base}/sessions/{sid}")
        assert page.locator("ol.steps > li").count() == 50
        page.evaluate("window.sameDocument = true")
        runner = threading.Thread(target=lambda: (elsewhere.approve(sid),
                                                  elsewhere.resume(sid)))
        runner.start()
        runner.join(60)
        page.locator("pre.answer").wait_for()
        steps = page.locator("ol.steps > li")
        assert steps.count() == 51
        assert steps.first.get_attribute("data-step") == "10"
        assert "Final Answer" in page.locator("details#step-61").inner_text()
        assert page.locator("pre.answer").inner_text() == "paid after 60 steps"
        assert "ran" in page.locator("details#step-60 .call .tag").inner_text()
        assert page.locator('nav.paging.steps a[rel="prev"]').count() == 1
        assert page.evaluate("window.sameDocument") is True
    assert PAID == ["30 to Alice"]
    assert opened.outside_requests == [] and opened.errors == []


def test_approve_with_edited_arguments_typed_in_the_page(tmp_path: Path) -> None:
    agent, _, sid = waiting_agent(tmp_path / "s.db", [PAY, "Final Answer: paid 12"])
    with serving(app(agent)) as base, browse(base) as opened:
        page = opened.page
        page.goto(base + "/")
        card = page.locator(f'section.waiting[data-session="{sid}"]')
        card.get_by_text("Edit the arguments, then approve").click()
        field = card.get_by_label("Arguments (JSON")
        assert '"amount": 30' in field.input_value()  # the model's, to change
        field.fill('{"to": "Alice", "amount": "twelve"}')
        card.get_by_role("button", name="Approve with these arguments").click()
        error = page.locator(".flash").first
        error.wait_for()
        assert "'twelve' is not of type 'integer'" in error.inner_text()
        card = page.locator(f'section.waiting[data-session="{sid}"]')
        card.get_by_text("Edit the arguments, then approve").click()
        card.get_by_label("Arguments (JSON").fill('{"to": "Alice", "amount": 12}')
        card.get_by_role("button", name="Approve with these arguments").click()
        page.locator("pre.answer").wait_for()
        assert page.locator("pre.answer").inner_text() == "paid 12"
        assert "Edited by a person" in page.content()
    assert PAID == ["12 to Alice"]
    assert opened.outside_requests == []
    # the refusal's page comes with its status, 409, which the console reports: nothing else
    assert [e for e in opened.errors if "409 (Conflict)" not in e] == []
