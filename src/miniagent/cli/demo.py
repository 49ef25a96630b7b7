"""`miniagent demo`: the whole loop over real HTTP, with no model and no API key.

A scripted model is served by the bundled OpenAI-compatible stub server on 127.0.0.1;
everything else (HTTP client, ReAct parser, tool registry, built-in tools, guards, the live
trace) is the real thing. The script includes a wrong argument name, so the trace shows the
model being told what was wrong and repairing its call.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

QUESTION = "How many lines does notes.txt have, and what is that number times 23?"

NOTES = "miniagent demo\nplain typed Python functions\nany OpenAI-compatible server\n"


def _act(thought: str, action: str, args: dict[str, object]) -> str:
    payload = json.dumps(args, ensure_ascii=False)
    return f"Thought: {thought}\nAction: {action}\nAction Input: {payload}"


SCRIPT = [
    _act("I should count the lines of notes.txt first.", "count_file_lines",
         {"path": "notes.txt"}),
    _act("The parameter is called file_path, not path. Retry.", "count_file_lines",
         {"file_path": "notes.txt"}),
    _act("Now multiply the line count by 23.", "calculator", {"expression": "3 * 23"}),
    "Thought: I now know the final answer\n"
    "Final Answer: notes.txt has 3 lines, and 3 × 23 = 69.",
]


@contextmanager
def demo_workspace() -> Iterator[Path]:
    """A temporary folder holding notes.txt, removed afterwards (even on Ctrl-C)."""
    with tempfile.TemporaryDirectory(prefix="miniagent-demo-") as folder:
        root = Path(folder)
        (root / "notes.txt").write_text(NOTES, encoding="utf-8")
        yield root
