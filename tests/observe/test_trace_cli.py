"""`miniagent run --trace/--otlp` and `miniagent trace show|html`, run as real subprocesses."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import miniagent
from miniagent.testing.stub_server import StubServer

HOSTILE = "</script><img src=x onerror=alert(1)> \x1b]0;pwned\x07 \u202eevil"

TOOLS = f'''
from miniagent import tool

@tool
def weather(city: str) -> str:
    """Current weather of a city.

    Args:
        city: the city name
    """
    return "12°C，多云 " + {HOSTILE!r}
'''

SCRIPT = [
    'Thought: 查天气\nAction: weather\nAction Input: {"city": "北京"}',
    f"Thought: {HOSTILE}\nFinal Answer: 12°C，多云",
]


def cli(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIAGENT_", "OPENAI_"))
           or k == "MINIAGENT_STORE"}
    env["PYTHONPATH"] = str(Path(miniagent.__file__).parents[1])
    env["COLUMNS"] = "120"
    return subprocess.run([sys.executable, "-m", "miniagent", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=timeout)


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A trace of a real CLI run against the stub server, with a real-looking API key."""
    folder = tmp_path_factory.mktemp("traced")
    (folder / "tools.py").write_text(TOOLS, encoding="utf-8")
    key = "sk-proj-" + secrets.token_hex(24)
    with StubServer(SCRIPT).run_in_thread() as stub:
        done = cli("run", "北京天气怎么样？", "--base-url", stub.base_url, "--model", "m",
                   "--api-key", key, "--mode", "react", "--tools", "tools.py",
                   "--trace", "run.jsonl", "--json", "--store", str(folder / "s.db"),
                   cwd=folder)
        assert stub.request_headers[0]["authorization"] == f"Bearer {key}"
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "completed"
    return folder / "run.jsonl", key


def test_run_trace_has_every_step_and_no_key(traced: tuple[Path, str]) -> None:
    path, key = traced
    text = path.read_text(encoding="utf-8")
    assert key not in text and "Bearer" not in text
    kinds = [json.loads(line)["kind"] for line in text.splitlines()]
    assert kinds.count("model_started") == 2 and kinds[-1] == "run_finished"
    assert json.loads(text.splitlines()[0])["model"] == "m"


def test_show_prints_steps_with_control_characters_escaped(traced: tuple[Path, str]) -> None:
    path, _ = traced
    done = cli("trace", "show", str(path), cwd=path.parent)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Question: 北京天气怎么样？" in out
    assert "── step 1" in out and "── step 2" in out
    assert 'Action: weather {"city": "北京"}' in out
    assert "Observation (" in out and "12°C，多云" in out
    assert "Final Answer: 12°C，多云" in out
    assert "completed · 2 steps" in out
    assert "\x1b" not in out and "\u202e" not in out
    assert "\\x1b]0;pwned\\x07" in out and "\\u202e" in out
    full = cli("trace", "show", str(path), "--full", cwd=path.parent).stdout
    assert "prompt · system:" in full and "raw output: Thought: 查天气" in full


def test_html_report_escapes_hostile_text(traced: tuple[Path, str], tmp_path: Path) -> None:
    path, _ = traced
    out = tmp_path / "report.html"
    done = cli("trace", "html", str(path), "-o", str(out), cwd=path.parent)
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stdout and "1 run, 2 steps" in done.stdout
    page = out.read_text(encoding="utf-8")
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert page.count("</script>") == 1  # the report's own script only
    assert "北京天气怎么样？" in page


def test_bad_trace_files_are_one_line_errors(tmp_path: Path) -> None:
    missing = cli("trace", "show", str(tmp_path / "nope.jsonl"), cwd=tmp_path)
    assert missing.returncode != 0 and "cannot read the trace" in missing.stderr
    assert "Traceback" not in missing.stderr and len(missing.stderr.strip().splitlines()) == 1
    junk = tmp_path / "junk.jsonl"
    junk.write_text("not json\n[1, 2]\n" + "[" * 100_000 + "\n", encoding="utf-8")
    for command in (("show",), ("html", "-o", str(tmp_path / "x.html"))):
        done = cli("trace", *command, str(junk), cwd=tmp_path)
        assert done.returncode != 0 and "holds no trace record" in done.stderr
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "x.html").exists()


def test_a_cut_trace_is_shown_with_what_it_has(traced: tuple[Path, str], tmp_path: Path) -> None:
    path, _ = traced
    lines = path.read_text(encoding="utf-8").splitlines()
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join([*lines[:5], lines[5][:20]]) + "\n", encoding="utf-8")
    done = cli("trace", "show", str(cut), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "── step 1" in done.stdout
    assert "(the trace ends before the run finished)" in done.stdout
    assert "skipped 1 line, not trace records: 6" in done.stdout


def test_run_otlp_exports_to_a_receiver(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from otlp_receiver import otlp_receiver

    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    with otlp_receiver() as receiver, StubServer(SCRIPT).run_in_thread() as stub:
        done = cli("run", "北京天气怎么样？", "--base-url", stub.base_url, "--model", "m",
                   "--mode", "react", "--tools", "tools.py", "--otlp", receiver.url,
                   "--otlp-content", "--json", "--store", str(tmp_path / "s.db"),
                   cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    session = json.loads(done.stdout)["session_id"]
    assert sorted(s.name for s in receiver.spans) == [
        "chat m", "chat m", "execute_tool weather", "invoke_agent miniagent", "step 1",
        "step 2"]
    chat = receiver.named("chat")[0]
    assert chat.attributes["gen_ai.conversation.id"] == session
    assert "北京天气怎么样？" in chat.attributes["gen_ai.input.messages"]



@pytest.mark.timeout(120)
def test_a_collector_that_is_down_is_one_line_and_the_run_completes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    with socket.socket() as probe:  # a port nothing listens on once it is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")  # a batch per step: several failures
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    script = [SCRIPT[0]] * 3 + [SCRIPT[1]]
    with StubServer(script, latency=0.1).run_in_thread() as stub:
        done = cli("run", "北京天气怎么样？", "--base-url", stub.base_url, "--model", "m",
                   "--mode", "react", "--tools", "tools.py", "--otlp",
                   f"http://127.0.0.1:{port}", "--otlp-content", "--json",
                   "--store", str(tmp_path / "s.db"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "completed"
    line, = done.stderr.splitlines()
    assert line.startswith(f"miniagent: OpenTelemetry spans could not be sent to the "
                           f"collector at http://127.0.0.1:{port}/v1/traces (")
    assert "Connection refused" in line and "later failures to send are not reported" in line

APPROVAL_TOOLS = '''
from miniagent import tool

@tool(requires_approval=True)
def pay(to: str, amount: int) -> str:
    """Pay someone.

    Args:
        to: who
        amount: how much
    """
    return f"paid {amount} to {to}"
'''


def test_a_resumed_session_traces_into_the_same_file(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(APPROVAL_TOOLS, encoding="utf-8")
    store = str(tmp_path / "s.db")
    script = ['Thought: pay\nAction: pay\nAction Input: {"to": "Alice", "amount": 5}',
              "Thought: done\nFinal Answer: paid"]
    with StubServer(script).run_in_thread() as stub:
        first = cli("run", "Pay Alice 5", "--base-url", stub.base_url, "--model", "m",
                    "--mode", "react", "--tools", "tools.py", "--detach", "--json",
                    "--store", store, "--trace", "t.jsonl", cwd=tmp_path)
        session = json.loads(first.stdout)["session_id"]
        assert json.loads(first.stdout)["status"] == "awaiting_approval", first.stderr
        approve = cli("sessions", "approve", session, "--store", store, cwd=tmp_path)
        assert approve.returncode == 0, approve.stderr
        second = cli("sessions", "resume", session, "--store", store, "--json",
                     "--trace", "t.jsonl", cwd=tmp_path)
        assert json.loads(second.stdout)["status"] == "completed", second.stderr
    shown = cli("trace", "show", "t.jsonl", cwd=tmp_path).stdout
    first_run, second_run = shown.split("Run 2 of 2")
    assert "Waiting for approval: pay" in first_run and "awaiting_approval" in first_run
    assert "── step 1 (resumed: the model call was in an earlier run)" in second_run
    assert "Action: pay" in second_run and "Observation (" in second_run
    assert "paid 5 to Alice" in second_run and "Final Answer: paid" in second_run
    assert "completed · 2 steps" in second_run


def test_hostile_record_kinds_are_skipped_not_called(traced: tuple[Path, str],
                                                     tmp_path: Path) -> None:
    path, _ = traced
    lines = path.read_text(encoding="utf-8").splitlines()
    session = json.loads(lines[0])["session_id"]
    hostile = [json.dumps({"v": 1, "kind": kind, "session_id": session, "step": 1})
               for kind in ("current", "run_of", "models", "_init__", "add", "_step_started")]
    bad = tmp_path / "kinds.jsonl"
    bad.write_text("\n".join([lines[0], *hostile, *lines[1:]]) + "\n", encoding="utf-8")
    done = cli("trace", "show", str(bad), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "── step 1" in done.stdout
    assert "skipped 6 lines, not trace records: 2, 3, 4, 5, 6, 7" in done.stdout
    html = cli("trace", "html", "-o", str(tmp_path / "k.html"), str(bad), cwd=tmp_path)
    assert html.returncode == 0 and "Traceback" not in html.stderr, html.stderr
    only = tmp_path / "only.jsonl"
    only.write_text("\n".join(hostile) + "\n", encoding="utf-8")
    for command in (("show",), ("html", "-o", str(tmp_path / "y.html"))):
        done = cli("trace", *command, str(only), cwd=tmp_path)
        assert done.returncode != 0 and "holds no trace record" in done.stderr
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


ECHO_TOOLS = '''
import os
from miniagent import tool

@tool(requires_approval=True)
def echo(word: str) -> str:
    """Echo the configured value.

    Args:
        word: anything
    """
    return "value " + os.environ["ECHO_VALUE"]
'''


def test_mcp_header_values_stay_out_of_the_trace(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    token = "tok" + secrets.token_hex(12)
    monkeypatch.setenv("ECHO_VALUE", token)  # a name the env redaction does not know
    (tmp_path / "tools.py").write_text(ECHO_TOOLS, encoding="utf-8")
    store = str(tmp_path / "s.db")
    call = 'Thought: echo\nAction: echo\nAction Input: {"word": "x"}'
    header = ("--mcp-header", f"X-Tenant: Bearer {token}")
    with StubServer([call, "Thought: done\nFinal Answer: ok"]).run_in_thread() as stub:
        first = cli("run", "Echo", "--base-url", stub.base_url, "--model", "m", *header,
                    "--mode", "react", "--tools", "tools.py", "--detach", "--json",
                    "--store", store, "--trace", "t.jsonl", cwd=tmp_path)
        session = json.loads(first.stdout)["session_id"]
        assert cli("sessions", "approve", session, "--store", store,
                   cwd=tmp_path).returncode == 0
        second = cli("sessions", "resume", session, "--store", store, "--json", *header,
                     "--trace", "t.jsonl", cwd=tmp_path)
        assert json.loads(second.stdout)["status"] == "completed", second.stderr
    trace = (tmp_path / "t.jsonl").read_text(encoding="utf-8")
    assert "value [REDACTED]" in trace and token not in trace
