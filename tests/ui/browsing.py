"""The inbox served on 127.0.0.1 by uvicorn in a thread, and opened in headless Chromium with
the launch options of the report tests (Debian's /usr/bin/chromium; never ``playwright
install``). Every request for anything but the server is refused and recorded; script
errors, console errors and policy violations are recorded too."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn

from browser import CHROMIUM, LAUNCH_ARGS


@contextmanager
def serving(asgi: Any) -> Iterator[str]:
    """Serve ``asgi`` on a free loopback port in a thread; yields its base URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    server = uvicorn.Server(uvicorn.Config(asgi, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        for _ in range(1000):  # bounded: until it serves
            if server.started:
                break
            thread.join(0.01)
        assert server.started, "the inbox did not start"
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        listener.close()


@dataclass
class Browsing:
    page: Any
    """The playwright ``Page``."""
    browser: Any = None
    outside_requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@contextmanager
def browse(base: str, *, width: int = 1280, height: int = 900) -> Iterator[Browsing]:
    """A page of headless Chromium that may reach ``base`` only (its CSP in force)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS, headless=True)
        try:
            opened = Browsing(page=None)
            opened.page = new_page(browser, base, opened, width=width, height=height)
            opened.browser = browser
            yield opened
        finally:
            browser.close()


def new_page(browser: Any, base: str, opened: Browsing, *, width: int = 1280, height: int = 900,
             javascript: bool = True) -> Any:
    """A page in a context of its own (its own cookie) that may reach ``base`` only; what it
    tries besides, and its errors, are recorded in ``opened``."""
    context = browser.new_context(viewport={"width": width, "height": height},
                                  java_script_enabled=javascript)

    def route(route: Any) -> None:
        url = route.request.url
        if url == base or url.startswith(base + "/"):
            route.continue_()
        else:
            opened.outside_requests.append(url)
            route.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("pageerror", lambda exc: opened.errors.append(str(exc)))
    page.on("console", lambda msg: opened.errors.append(msg.text)
            if msg.type == "error" else None)
    page.set_default_timeout(20_000)  # a bound on waiting, not a timing assert
    return page
