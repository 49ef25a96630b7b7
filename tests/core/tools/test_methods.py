"""``@tool`` on methods: the receiver is never offered to the model; ``obj.method`` is bound."""

from __future__ import annotations

import json
from typing import Any

import pytest

from miniagent import Agent, ScriptedModel
from miniagent.core.errors import ToolDefinitionError
from miniagent.core.tools.tool import Tool, tool
from miniagent.core.tools.toolbox import ToolRegistry
from miniagent.core.types import ToolCall
from tool_calls import execute


class Account:
    """A bank account whose methods are tools."""

    fee = 1

    def __init__(self, balance: int) -> None:
        self.balance = balance

    @tool
    def deposit(self, amount: int) -> int:
        """Add money to the account.

        Args:
            amount: how much to add.
        """
        self.balance += amount
        return self.balance

    @tool(name="withdraw_money", requires_approval=True)
    async def withdraw(self, amount: int, /) -> int:
        """Take money out."""
        self.balance -= amount
        return self.balance

    @tool
    @classmethod
    def fees(cls, amount: int) -> int:
        """The fee for a transfer."""
        return cls.fee * amount

    @tool
    @staticmethod
    def convert(amount: int, rate: float = 2.0) -> float:
        """Convert an amount."""
        return amount * rate

    @staticmethod
    @tool
    def double(x: int) -> int:
        """Double x (a static method whose tool was made first)."""
        return 2 * x


def greet(cls: str) -> str:
    """A module-level function whose parameter happens to be called cls."""
    return f"class {cls}"


async def _run(target: Tool, arguments: dict[str, Any]) -> tuple[bool, str]:
    observation = await execute(ToolRegistry([target]),
        ToolCall(id="c1", name=target.name, arguments=arguments))
    return observation.is_error, observation.output


def test_the_receiver_is_not_in_the_schema() -> None:
    for made in (Account.deposit, Account(0).deposit):
        assert made.parameters["properties"] == {
            "amount": {"type": "integer", "description": "how much to add."}}
        assert made.parameters["required"] == ["amount"]
        assert made.description == "Add money to the account."


async def test_a_tool_read_from_an_instance_runs_on_that_instance() -> None:
    mine, yours = Account(10), Account(100)
    assert isinstance(mine.deposit, Tool) and mine.deposit.receiver is None
    assert await _run(mine.deposit, {"amount": 5}) == (False, "15")
    assert await _run(yours.deposit, {"amount": 1}) == (False, "101")
    assert (mine.balance, yours.balance) == (15, 101)


def test_it_stays_a_method_for_python_callers() -> None:
    account = Account(10)
    assert account.deposit(5) == 15
    assert Account.deposit(account, 5) == 20


def test_a_tool_taken_from_the_class_is_refused_with_the_fix() -> None:
    assert Account.deposit.receiver == "self"
    with pytest.raises(ToolDefinitionError, match=r"'deposit'.*'self'.*obj\.deposit"):
        ToolRegistry([Account.deposit])


async def test_options_and_positional_only_parameters_survive_binding() -> None:
    account = Account(10)
    bound = account.withdraw
    assert (bound.name, bound.is_async, bound.requires_approval) == ("withdraw_money", True, True)
    assert bound.parameters["properties"] == {"amount": {"type": "integer"}}
    assert await _run(bound, {"amount": 3}) == (False, "7")
    assert account.balance == 7


async def test_a_classmethod_tool_is_bound_to_the_class() -> None:
    for made in (Account.fees, Account(0).fees):
        assert list(made.parameters["properties"]) == ["amount"]
        assert await _run(made, {"amount": 4}) == (False, "4")
    assert Account.fees(5) == 5


async def test_static_methods_keep_their_first_parameter() -> None:
    for made in (Account.convert, Account(0).convert):
        assert list(made.parameters["properties"]) == ["amount", "rate"]
        assert await _run(made, {"amount": 3}) == (False, "6.0")
    assert list(Account.double.parameters["properties"]) == ["x"]
    assert await _run(Account.double, {"x": 4}) == (False, "8")


def test_a_cls_parameter_outside_a_class_is_an_argument() -> None:
    assert tool(greet).parameters["required"] == ["cls"]


def test_an_agent_runs_a_bound_method_tool() -> None:
    account = Account(10)
    action = "Thought: pay in\nAction: deposit\nAction Input: " + json.dumps({"amount": 7})
    model = ScriptedModel([action, "Final Answer: done"])
    result = Agent(model=model, tools=[account.deposit]).run("Deposit 7.")
    assert (result.status, result.final_answer) == ("completed", "done")
    assert account.balance == 17
    assert result.steps[0].calls[0].observation is not None
    assert result.steps[0].calls[0].observation.output == "17"
