"""The inbox as a person sees it at 1280 and 390 px wide: the screenshots the docs' inbox page
shows (written into docs/images/generated/, see ``browser.SCREENSHOTS``), and nothing wider
than the screen on a phone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from browsing import browse, serving
from ui_support import act, pay

from browser import needs_browser, screenshot_path
from miniagent import Agent, ScriptedModel, SQLiteStore, tool
from miniagent.core.types import ToolMode
from miniagent.ui import app

pytestmark = needs_browser

@tool(requires_approval=True)
def delete_files(pattern: str, folder: str) -> str:
    """Delete the files of a folder that match a pattern.

    Args:
        pattern: a glob pattern
        folder: where
    """
    return f"deleted {pattern} in {folder}"


@tool(requires_approval=True)
def send_email(to: str, subject: str, body: str) -> str:
    """Send an email.

    Args:
        to: the address
        subject: the subject line
        body: the text
    """
    return "sent"


def call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}


def sessions(store: SQLiteStore) -> str:
    """Three sessions waiting for a person, and one that ended; returns one waiting id."""
    both = {"content": "先清理再通知", "tool_calls": [
        call("c1", "delete_files", {"pattern": "*.tmp", "folder": "/srv/报表/2026"}),
        call("c2", "send_email", {"to": "ops@example.com", "subject": "清理完成",
                                  "body": "临时文件已删除。"})]}
    long_body = "Dear customer,\n\n" + "Your invoice INV-2026-0042 is attached. " * 12
    runs: list[tuple[str, list[Any], ToolMode]] = [
        ("Pay Alice 30 euros for the team lunch", [act("pay", {"to": "Alice", "amount": 30})],
         "react"),
        ("清理 /srv/报表/2026 里的临时文件，然后通知运维", [both], "native"),
        ("Send the December invoice to the customer",
         [act("send_email", {"to": "billing@customer.example", "subject": "Invoice December",
                             "body": long_body})], "react"),
    ]
    waiting = ""
    for question, script, mode in runs:
        agent = Agent(model=ScriptedModel(script, tool_mode=mode),
                      tools=[pay, delete_files, send_email], store=store)
        waiting = agent.run(question).session_id
    Agent(model=ScriptedModel(["Final Answer: 4"]), store=store).run("What is 2 + 2?")
    return waiting


def test_screenshots_at_desktop_and_phone_widths(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    sid = sessions(store)
    where = "sessions in ~/.local/share/miniagent/sessions.db"
    with serving(app(store=store, where=where)) as base:
        with browse(base, width=1280, height=900) as opened:
            opened.page.goto(base + "/")
            assert opened.page.locator("section.waiting").count() == 3
            opened.page.screenshot(path=str(screenshot_path("inbox.png")), full_page=True)
            opened.page.goto(f"{base}/sessions/{sid}")
            opened.page.screenshot(path=str(screenshot_path("inbox-session.png")), full_page=True)
            opened.page.goto(base + "/sessions")
            assert opened.page.locator("table.sessions tbody tr").count() == 4
        assert opened.outside_requests == [] and opened.errors == []
        with browse(base, width=390, height=844) as phone:
            phone.page.goto(base + "/")
            phone.page.screenshot(path=str(screenshot_path("inbox-mobile.png")), full_page=True)
            for path in ("/", "/sessions", f"/sessions/{sid}"):
                phone.page.goto(base + path)
                assert phone.page.evaluate("document.documentElement.scrollWidth") <= 390, path
        assert phone.outside_requests == [] and phone.errors == []
