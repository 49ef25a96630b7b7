"""Mistakes in the command line or the environment: one line on stderr, exit 2 or 1."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner, Result

from miniagent.cli import app


def invoke(*args: str, **env: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "120", **env})


def one_line(result: Result, code: int) -> str:
    """The stderr line of a failed command, checked to be one line with ``code``."""
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("base_url", "says"),
    [("127.0.0.1:8000/v1", "http:// or https://"), ("ftp://127.0.0.1/v1", "http:// or https://"),
     ("http://127.0.0.1:99999/v1", "port"), ("http://[::1/v1", "IPv6")],
)
def test_a_bad_base_url_is_one_line(base_url: str, says: str) -> None:
    line = one_line(invoke("run", "hi", "--base-url", base_url), 2)
    assert line.startswith("miniagent: base_url") and says.lower() in line.lower()


@pytest.mark.parametrize("api_key", ["sk-abc\r\nX-Injected: 1", "sk-ключ"])
def test_a_bad_api_key_is_one_line(api_key: str) -> None:
    result = invoke("run", "hi", "--base-url", "http://127.0.0.1:1/v1", "--api-key", api_key)
    assert "api_key" in one_line(result, 2)
    env_result = invoke("run", "hi", "--base-url", "http://127.0.0.1:1/v1",
                        MINIAGENT_API_KEY=api_key)
    assert "api_key" in one_line(env_result, 2)
