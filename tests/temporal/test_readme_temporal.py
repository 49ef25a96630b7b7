"""The docs' Temporal example, run as written against a real dev server and the stub model
(the replies of its shell 2), with the payments.py of its shell 3."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from temporal_helpers import address
from temporalio.testing import WorkflowEnvironment

from docs_pages import page_text
from miniagent.testing.stub_server import StubServer


def section() -> str:
    return page_text("docs/temporal.md")


def test_the_python_example_runs_as_written(dev_env: WorkflowEnvironment, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    part = section()
    (code,) = re.findall(r"```python\n(.*?)```", part, re.DOTALL)
    tools = re.search(r"cat > payments.py <<'PY'\n(.*?)\nPY\n", part, re.DOTALL)
    replies = re.findall(r"--reply '(.*?)'", part)
    assert tools is not None and len(replies) == 2
    (tmp_path / "payments.py").write_text(tools.group(1), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "payments", raising=False)
    with StubServer([r.replace("\\n", "\n") for r in replies]).run_in_thread() as stub:
        exec(code.replace("http://127.0.0.1:8000/v1", stub.base_url)
                 .replace("127.0.0.1:7233", address(dev_env)), {"__name__": "readme"})
    printed = capsys.readouterr().out.splitlines()
    assert printed == ["awaiting_approval pay", "completed Alice has her 150 EUR."]


def test_the_queries_and_handlers_it_names_are_the_workflows() -> None:
    from temporalio.workflow import _Definition

    from miniagent.temporal import SessionWorkflow

    part = section()
    registered = _Definition.must_from_class(SessionWorkflow)
    named = re.search(r"queries are (.*?)\)", part, re.DOTALL)
    assert named is not None
    assert set(re.findall(r"`(\w+)`", named.group(1))) == set(registered.queries)
    assert set(registered.updates) == {"decide"} and "`decide` update" in part
    assert set(registered.signals) == {"decide_signal", "slot_waiting"}
    assert "`decide_signal`" in part and "`slot_waiting` signal" in part
