"""The first things a new user meets on the command line (issue 36): the commands listed with
the everyday ones first, and a mistyped option value answered in the CLI's own words."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner


def listed_commands() -> list[str]:
    """The command names of ``miniagent --help``, in the order it prints them."""
    from miniagent.cli import app

    text = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "80"}).stdout
    section = text.split("Commands:\n", 1)[1]
    return re.findall(r"^  (\S+)", section, flags=re.MULTILINE)


def test_help_lists_the_everyday_commands_first() -> None:
    names = listed_commands()
    assert names[:3] == ["run", "chat", "sessions"], names
    assert names.index("model") < names.index("eval") < names.index("ui") < names.index("worker")
    assert names.index("worker") < names.index("mcp-serve")
    assert sorted(names) == sorted(set(names)) and len(names) == 13, names


def test_help_says_each_command_in_a_whole_sentence() -> None:
    """Click cuts a command's summary at 45 characters with "..."; each ends its sentence."""
    from miniagent.cli import app

    text = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "80"}).stdout
    summaries = re.split(r"\n  (?=\S)", text.split("Commands:\n", 1)[1].strip())
    assert len(summaries) == 13
    for summary in summaries:
        assert "..." not in summary and summary.rstrip().endswith("."), summary
    assert "Talk with an agent: each line is the next turn of one conversation" in " ".join(
        text.split())


@pytest.mark.parametrize(("args", "option", "allowed"), [
    (["run", "hi", "--mode", "foo"], "--mode", "react, native, hybrid, auto"),
    (["chat", "--mode", "foo"], "--mode", "react, native, hybrid, auto"),
    (["run", "hi", "--aids", "foo"], "--aids", "auto, on, off"),
    (["run", "hi", "--compress", "foo"], "--compress", "truncate, model"),
    (["sessions", "resume", "x", "--mode", "foo"], "--mode", "react, native, hybrid, auto"),
])
def test_a_value_out_of_a_choice_names_the_option_and_the_choices(
        args: list[str], option: str, allowed: str) -> None:
    from miniagent.cli import app

    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 2
    assert f"Invalid value for '{option}': 'foo' is not one of: {allowed}." in result.output
    assert "Value error" not in result.output


@pytest.mark.parametrize(("args", "said"), [
    (["run", "hi", "--max-steps", "abc"], "Invalid value for '--max-steps': 'abc' is not a whole number."),  # noqa: E501
    (["run", "hi", "--timeout", "soon"], "Invalid value for '--timeout': 'soon' is not a number."),
])
def test_a_number_option_says_what_it_wanted(args: list[str], said: str) -> None:
    from miniagent.cli import app

    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 2 and said in result.output, result.output
    assert "Input should be" not in result.output
