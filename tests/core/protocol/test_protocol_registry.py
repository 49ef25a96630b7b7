"""Protocols by name: what an agent spec carries, and how a driver elsewhere rebuilds it."""

from __future__ import annotations

import pytest

from miniagent import Agent, ModelSettings, ScriptedModel, register_protocol
from miniagent.core.errors import UserError
from miniagent.core.protocol.auto import AutoProtocol
from miniagent.core.protocol.native import NativeProtocol
from miniagent.core.protocol.react import ReactProtocol
from miniagent.core.protocol.registry import ProtocolRef, build_protocol, protocol_ref


def test_built_in_protocols_travel_with_their_options() -> None:
    react = ReactProtocol(grammar=False, max_tokens=256)
    ref = protocol_ref(react)
    assert (ref.name, ref.options) == ("react", {"grammar": False, "max_tokens": 256,
                                                 "example": False})
    rebuilt = build_protocol(ref)
    assert isinstance(rebuilt, ReactProtocol) and rebuilt.options() == react.options()
    auto = AutoProtocol(native_tools=None, max_tokens=64)
    auto.native_tools = False  # what it learnt since is not part of what travels
    assert build_protocol(protocol_ref(auto)).options()["native_tools"] is None
    assert isinstance(build_protocol(ProtocolRef(name="native")), NativeProtocol)


def test_no_name_means_the_models_own_family() -> None:
    ref = ProtocolRef(options={"grammar": False, "max_tokens": 100})
    built = build_protocol(ref, tool_mode="react")
    assert isinstance(built, ReactProtocol) and built.grammar is False
    assert isinstance(build_protocol(ref, tool_mode="native"), NativeProtocol)


def test_an_unknown_name_is_refused_naming_it() -> None:
    with pytest.raises(UserError, match="the protocol 'yaml' is not registered in this process"):
        build_protocol(ProtocolRef(name="yaml"))


def test_a_name_is_registered_once() -> None:
    class Mine(ReactProtocol):
        name = "mine-once"

    register_protocol("mine-once", Mine)
    register_protocol("mine-once", Mine)  # the same again is fine
    with pytest.raises(UserError, match="registered already"):
        register_protocol("mine-once", NativeProtocol)
    assert isinstance(build_protocol(ProtocolRef(name="mine-once")), Mine)


def test_the_agent_spec_names_its_protocol() -> None:
    agent = Agent(model=ScriptedModel([], tool_mode="react"),
                  model_settings=ModelSettings(max_tokens=300, grammar=False))
    assert (agent.spec.protocol.name, agent.spec.protocol.options) == (
        "react", {"grammar": False, "max_tokens": 300, "example": False})
    explicit = Agent(model=ScriptedModel([], tool_mode="react"), protocol=NativeProtocol())
    assert explicit.spec.protocol.name == "native"
