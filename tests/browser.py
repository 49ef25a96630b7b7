"""Open a local HTML file in headless Chromium (Debian's package) and hand the page to a test.

Reused by every test of an HTML report::

    from browser import open_page

    def test_report_renders(tmp_path):
        path = write_report(tmp_path)
        with open_page(path) as opened:
            assert opened.page.locator("h1").inner_text() == "..."
        assert opened.outside_requests == []

The browser is ``/usr/bin/chromium`` (``scripts/deps/chromium.sh`` installs it), driven by the
``playwright`` package; ``playwright install`` is never needed. Every request the page makes
for anything but the file itself is refused and recorded in ``outside_requests``; script
errors and console errors are recorded too. A test module that needs the browser marks itself
with ``pytestmark = needs_browser`` so it is skipped, saying why, where there is none.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def browser_missing() -> str | None:
    """Why no browser test can run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[test]')"
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        return f"{CHROMIUM} is missing (bash scripts/deps/chromium.sh)"
    return None


needs_browser = pytest.mark.skipif(browser_missing() is not None,
                                   reason=str(browser_missing()))

SCREENSHOTS = Path(__file__).resolve().parent.parent / "docs" / "images" / "generated"
"""Where the tests write the pictures the documentation shows (not kept in git: they show times
and random ids, so every run would change them; ``scripts/docs/screenshots.py`` stands in for
a missing one when the site is built)."""


def screenshot_path(name: str) -> Path:
    """The path of the documentation's picture ``name`` (its folder made if needed)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS / name


@dataclass
class OpenedPage:
    """A page showing the file, and what it tried to do besides."""

    page: Any
    """The playwright ``Page``."""
    outside_requests: list[str] = field(default_factory=list)
    """URLs the page asked for other than the file itself (all were refused)."""
    errors: list[str] = field(default_factory=list)
    """Uncaught script errors and console errors."""


@contextmanager
def open_page(path: Path, *, width: int = 1200, height: int = 900,
              bypass_csp: bool = True) -> Iterator[OpenedPage]:
    """Open ``path`` (a local HTML file) in headless Chromium; the browser closes on exit.

    With ``bypass_csp`` (the default) the page's Content-Security-Policy is ignored, so an
    external asset shows up in ``outside_requests`` instead of being blocked unseen.
    """
    from playwright.sync_api import sync_playwright

    url = path.resolve().as_uri()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": width, "height": height},
                                          bypass_csp=bypass_csp)
            page = context.new_page()
            opened = OpenedPage(page=page)

            def route(route: Any) -> None:
                request_url = route.request.url
                if request_url == url or request_url.startswith(("data:", "about:")):
                    route.continue_()
                else:
                    opened.outside_requests.append(request_url)
                    route.abort()

            context.route("**/*", route)
            page.on("pageerror", lambda exc: opened.errors.append(str(exc)))
            page.on("console", lambda msg: opened.errors.append(msg.text)
                    if msg.type == "error" else None)
            page.goto(url, wait_until="load")
            yield opened
        finally:
            browser.close()
