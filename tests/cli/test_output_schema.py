"""``miniagent run --output-schema FILE.json`` (typed results, issue 35): the answer is a JSON
value that fits the schema, printed as JSON (under ``output`` with ``--json``)."""

from __future__ import annotations

import json
from pathlib import Path

from test_cli import cli

from miniagent.testing.stub_server import StubServer

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"},
                                           "celsius": {"type": "integer"}},
          "required": ["city", "celsius"]}


def test_the_object_is_printed_and_json_gives_it_under_output(tmp_path: Path) -> None:
    (tmp_path / "weather.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    answers = ['Thought: known\nFinal Answer: {"city": "Oslo"}',  # repaired once
               'Thought: known\nFinal Answer: {"city": "Oslo", "celsius": 4}',
               'Thought: known\nFinal Answer: {"city": "Rome", "celsius": 19}']
    with StubServer(answers).run_in_thread() as stub:
        plain = cli("run", "Weather in Oslo?", "--output-schema", "weather.json", "--mode",
                    "react", "--base-url", stub.base_url, "--model", "m", cwd=tmp_path)
        as_json = cli("run", "Weather in Rome?", "--output-schema", "weather.json", "--json",
                      "--mode", "react", "--base-url", stub.base_url, "--model", "m",
                      cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert json.loads(plain.stdout.strip().splitlines()[-1]) == {"city": "Oslo", "celsius": 4}
    assert "celsius" in stub.requests[0]["messages"][0]["content"]  # the prompt has the schema
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["output"] == {"city": "Rome", "celsius": 19}


def test_a_file_that_is_no_schema_is_refused_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text('{"type": 12}', encoding="utf-8")
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    for name in ("bad.json", "broken.json", "missing.json"):
        out = cli("run", "hi", "--output-schema", name, "--base-url", "http://127.0.0.1:9/v1",
                  "--model", "m", cwd=tmp_path)
        assert out.returncode == 2, (name, out.stdout, out.stderr)
        assert "--output-schema" in out.stderr and name in out.stderr


def test_a_schema_too_costly_to_check_is_refused_with_the_limit(tmp_path: Path) -> None:
    deep: dict[str, object] = {"type": "string"}
    for _ in range(400):
        deep = {"type": "object", "properties": {"a": deep}}
    (tmp_path / "deep.json").write_text(json.dumps(deep), encoding="utf-8")
    out = cli("run", "hi", "--output-schema", "deep.json", "--base-url", "http://127.0.0.1:9/v1",
              "--model", "m", cwd=tmp_path)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "nests deeper than 64 levels" in out.stderr and "Traceback" not in out.stderr
