"""The engines a user can name, behind one protocol and one registry, and the solver back-ends they call.

An `Engine` is what ``check(network, prop, engine=NAME)`` runs: a name,
whether it is complete (given time it answers proved or violated on every
property) or may only prove, the solver packages it needs and its
``check(network, prop, search)``. Every engine registers itself once in
`ENGINE_REGISTRY` (the engines of `_check` do so when it is imported); the
CLI's choices, the argument checks and the conformance suite all read the
registry, so a new engine joins in one place.

Every complete solver back-end (`_marabou`, `_z3`) implements
``check(network, prop, timeout) -> Result`` and ``is_available()``; it is
imported only when asked for, so importing `certfsm.verify` needs neither
maraboupy nor z3.
"""

from __future__ import annotations

import importlib.util
import platform
import sys
import types
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol

from certfsm import EngineError

if TYPE_CHECKING:
    from certfsm import Network

    from ._property import Property
    from ._result import Result


@dataclass(frozen=True)
class Search:
    """What an engine's check gets besides the network and the property: the clock, the workers, the seed."""

    started: float
    deadline: float
    jobs: int
    progress: Callable[[float, str], None] | None
    seed: int
    budget: object | None
    """A `WorkBudget` for the engines that take one (`Engine.takes_budget`), else None."""


class Engine(Protocol):
    """One engine a user can name."""

    name: str
    complete: bool
    """True when, given time, it answers proved or violated on every property; False when it may only prove."""
    solvers: tuple[str, ...]
    """The solver back-ends it calls by name ("marabou", "z3"); each must be installed to run it."""
    takes_budget: bool
    """True when a `WorkBudget` makes its proved independent of the machine's speed."""
    summary: str

    def check(self, network: Network, prop: Property, search: Search) -> Result: ...


@dataclass(frozen=True)
class FunctionEngine:
    """An `Engine` whose check is one function of (network, prop, search)."""

    name: str
    complete: bool
    solvers: tuple[str, ...]
    summary: str
    run: Callable[..., Result]
    takes_budget: bool = False

    def check(self, network: Network, prop: Property, search: Search) -> Result:
        return self.run(network, prop, search)


_REGISTRY: dict[str, Engine] = {}
ENGINE_REGISTRY = types.MappingProxyType(_REGISTRY)
"""Every registered engine by name, in registration order (the first is the default)."""


def register(engine: Engine) -> Engine:
    """Add `engine` to the registry; a second engine of the same name is a programming error."""
    if engine.name in _REGISTRY:
        raise ValueError(f"an engine named {engine.name!r} is already registered")
    _REGISTRY[engine.name] = engine
    return engine


def engine_named(name: str) -> Engine:
    """The registered engine `name`; EngineError naming the choices for any other."""
    if name not in _REGISTRY:
        raise EngineError(f"engine={name!r} is not one of {', '.join(_REGISTRY)}; give e.g. engine='auto'")
    return _REGISTRY[name]


def engine_module(name: str):
    """The back-end module of `name` ("marabou" or "z3"); EngineError when its solver package is missing."""
    if name == "marabou":
        from . import _marabou as module
    else:
        from . import _z3 as module
    if not module.is_available():
        raise EngineError(missing_solver(name, f"engine={name!r}", "engine='auto'"))
    return module


def missing_solver(name: str, asked: str, instead: str) -> str:
    """The one-line message for a solver that cannot be imported: which Python this is, and the fix.

    `asked` names what the user gave (``--engine marabou`` or
    ``engine='marabou'``), `instead` what to give instead.
    """
    version = platform.python_version()
    if name == "marabou":
        return (
            f"{asked} needs maraboupy, which cannot be imported on this Python ({version}, {sys.platform} "
            f"{platform.machine()}): maraboupy 2.0 publishes wheels only for CPython 3.8-3.11 on x86-64 Linux "
            f"(and 3.11 on Intel macOS); give {instead} (bounds and Z3) or run certfsm on Python 3.11"
        )
    return f"{asked} needs z3-solver, which cannot be imported on this Python ({version}); pip install z3-solver"


def solver_package(name: str) -> str:
    """The Python package an engine needs ("maraboupy" for marabou, "z3" for z3)."""
    return {"marabou": "maraboupy", "z3": "z3"}[name]


def engines_needed(engine: str) -> tuple[str, ...]:
    """The solver back-ends a registered engine calls by name (auto and bounds need none; unknown names none)."""
    return _REGISTRY[engine].solvers if engine in _REGISTRY else ()


def is_installed(name: str) -> bool:
    return importlib.util.find_spec(solver_package(name)) is not None


def box_engine_name() -> str | None:
    """What decides the boxes bounds leave open in ``auto``: "z3" when it imports (the only engine
    whose UNSAT closes a box, see `_box_engine`), else "marabou" (witnesses only), else None."""
    for name, package in (("z3", "z3"), ("marabou", "maraboupy")):
        if importlib.util.find_spec(package) is not None:
            return name
    return None
