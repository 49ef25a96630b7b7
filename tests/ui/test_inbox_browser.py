"""The inbox in headless Chromium: a waiting session is approved or denied with a click or
the keyboard, the page follows the run without a reload, hostile text stays text, and nothing
is requested from anywhere but the inbox."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from browsing import browse, serving
from ui_support import HOSTILE, PAID, act, pay, waiting_agent

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
        other = page.context.new_page()
        other.goto(base + "/")  # a second tab shows the same call
        page.locator("button.approve").first.click()
        page.locator("pre.answer").wait_for()
        other.locator("button.approve").first.click()
        refusal = other.locator(".flash.bad").inner_text()
        assert "changed since the page was shown" in refusal and "nothing was changed" in refusal
    assert PAID == ["30 to Alice"]
    assert opened.outside_requests == [] and opened.errors == []


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
