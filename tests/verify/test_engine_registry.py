"""The engine registry is the one list of engines: the CLI, the argument checks and the suites read it."""

from __future__ import annotations

import pytest

from certfsm import EngineError
from certfsm.cli import ENGINE_HELP
from certfsm.verify import ENGINES, check, engines_needed
from certfsm.verify._engines import ENGINE_REGISTRY, FunctionEngine, register
from certfsm.verify._engines import engine_named


def test_the_cli_offers_exactly_the_registered_engines_default_first():
    assert ENGINE_HELP.split(" | ") == list(ENGINE_REGISTRY) == list(ENGINES)
    assert ENGINES[0] == "auto"


def test_each_engine_declares_what_it_needs_and_a_summary():
    for name, engine in ENGINE_REGISTRY.items():
        assert engine.name == name and engine.summary
        assert set(engine.solvers) <= {"marabou", "z3"}
        assert engines_needed(name) == engine.solvers
    assert not ENGINE_REGISTRY["bounds"].complete and ENGINE_REGISTRY["auto"].complete


def test_a_second_engine_of_a_registered_name_is_refused_and_the_registry_is_read_only():
    with pytest.raises(ValueError, match="'auto' is already registered"):
        register(FunctionEngine("auto", True, (), "a copy", lambda network, prop, search: None))
    with pytest.raises(TypeError):
        ENGINE_REGISTRY["magic"] = ENGINE_REGISTRY["auto"]  # type: ignore[index]


def test_an_unknown_engine_is_one_line_naming_every_choice_before_any_work():
    with pytest.raises(EngineError, match=r"^engine='magic' is not one of auto, marabou, z3, both, bounds; give "):
        check(None, None, engine="magic")  # the name is checked before the network or the property is read
    with pytest.raises(EngineError, match="engine='magic'"):
        engine_named("magic")
