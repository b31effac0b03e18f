"""Which back-end module serves an engine name: the factory behind `check`.

Every complete back-end (`_marabou`, `_z3`) implements
``check(network, prop, timeout) -> Result`` and ``is_available()``; it is
imported only when asked for, so importing `certfsm.verify` needs neither
maraboupy nor z3.
"""

from __future__ import annotations

import importlib.util
import platform
import sys

from certfsm import EngineError


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
        return (f"{asked} needs maraboupy, which cannot be imported on this Python ({version}, {sys.platform} "
                f"{platform.machine()}): maraboupy 2.0 publishes wheels only for CPython 3.8-3.11 on x86-64 Linux "
                f"(and 3.11 on Intel macOS); give {instead} (bounds and Z3) or run certfsm on Python 3.11")
    return f"{asked} needs z3-solver, which cannot be imported on this Python ({version}); pip install z3-solver"


def solver_package(name: str) -> str:
    """The Python package an engine needs ("maraboupy" for marabou, "z3" for z3)."""
    return {"marabou": "maraboupy", "z3": "z3"}[name]


def engines_needed(engine: str) -> tuple[str, ...]:
    """The solver back-ends an engine choice calls by name (auto and bounds need none)."""
    return {"marabou": ("marabou",), "z3": ("z3",), "both": ("marabou", "z3")}.get(engine, ())


def is_installed(name: str) -> bool:
    return importlib.util.find_spec(solver_package(name)) is not None


def box_engine_name() -> str | None:
    """What decides the boxes bounds leave open in ``auto``: "z3" when it imports (the only engine
    whose UNSAT closes a box, see `_box_engine`), else "marabou" (witnesses only), else None."""
    for name, package in (("z3", "z3"), ("marabou", "maraboupy")):
        if importlib.util.find_spec(package) is not None:
            return name
    return None
