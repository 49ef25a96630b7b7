"""``miniagent ui`` as a process of its own, for the tests that drive it over real HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx


@dataclass
class Inbox:
    """A running ``miniagent ui``: its URL, the one-time login link and token it printed."""

    url: str
    link: str
    token: str | None

    @contextmanager
    def client(self, **options: Any) -> Iterator[httpx.Client]:
        """An HTTP client logged in through the one-time link, as a person's browser is."""
        with httpx.Client(base_url=self.url, **options) as http:
            opened = http.get(self.link)
            assert opened.status_code == 303 and "miniagent_ui" in opened.headers["set-cookie"]
            yield http


@contextmanager
def served(*args: str, env: dict[str, str] | None = None) -> Iterator[Inbox]:
    """Run ``miniagent ui --port 0 ARGS``; yields what it printed; stops it on exit."""
    command = [sys.executable, "-c", "from miniagent.cli import main; main()", "ui",
               "--port", "0", *args]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, **(env or {})})
    try:
        assert process.stdout is not None
        first = process.stdout.readline()  # blocks until it listens (or exits)
        if not first.startswith("miniagent inbox on "):
            process.wait(timeout=30)
            raise AssertionError(f"miniagent ui did not start: {first}{process.stderr.read()}")
        link, typed = process.stdout.readline().split(), process.stdout.readline().split()
        assert link[:2] == ["log", "in:"], link
        token = typed[-1] if typed[:4] == ["or", "type", "this", "token"] else None
        yield Inbox(url=first.split()[3], link=link[2], token=token)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def write_tools(folder: Path) -> Path:
    """A tools file with one tool that needs approval and leaves a file when it runs."""
    path = folder / "pay_tools.py"
    path.write_text(f'''
from pathlib import Path

from miniagent import tool


@tool(requires_approval=True)
def pay(to: str, amount: int) -> str:
    """Pay someone.

    Args:
        to: who is paid
        amount: how much, in euros
    """
    with open({str(folder / "paid.txt")!r}, "a", encoding="utf-8") as out:
        out.write(f"{{amount}} to {{to}}\\n")
    return f"paid {{amount}} euros to {{to}}"
''', encoding="utf-8")
    return path
