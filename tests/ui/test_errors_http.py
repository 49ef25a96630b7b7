"""A damaged store or a failing request gives a clear page under the inbox's headers (its
Content-Security-Policy too), never a bare "Internal Server Error" nor a traceback."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from starlette.testclient import TestClient
from ui_support import LOCAL

from miniagent import SQLiteStore
from miniagent.core.session import AgentSession
from miniagent.ui import app
from miniagent.ui.guard import CSP

BASE = "http://127.0.0.1:8765"


def test_a_damaged_store_gives_a_clear_page_under_the_csp(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    store.save(AgentSession.start("what is 2+2?", id="a", at=1.0))
    inbox = app(store=store)
    with TestClient(inbox, client=LOCAL, base_url=BASE, raise_server_exceptions=False) as http:
        assert http.get("/sessions").status_code == 200
        damage = sqlite3.connect(tmp_path / "s.db")  # another program breaks the file
        damage.execute("DROP TABLE sessions")
        damage.commit()
        damage.close()
        for url in ("/", "/sessions", "/sessions/a", "/part"):
            page = http.get(url)
            assert page.status_code == 500, url
            assert page.headers["content-security-policy"] == CSP, url
            assert page.headers["x-content-type-options"] == "nosniff"
            assert page.headers["content-type"].startswith("text/html")
            assert f"session store {tmp_path / 's.db'} cannot be read" in page.text, url
            assert "Traceback" not in page.text


def test_an_unreachable_temporal_gives_a_clear_page() -> None:
    with TestClient(app(temporal="127.0.0.1:1"), client=LOCAL, base_url=BASE,
                    raise_server_exceptions=False) as http:
        pages = [http.get(url) for url in ("/", "/sessions", "/sessions/s1")]
    for page in pages:
        assert page.status_code == 500
        assert page.headers["content-security-policy"] == CSP
        assert "cannot reach Temporal at 127.0.0.1:1" in page.text
