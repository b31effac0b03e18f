"""Which back-end module serves an engine name: the factory behind `check`.

Every complete back-end (`_marabou`, `_z3`) implements
``check(network, prop, timeout) -> Result`` and ``is_available()``; it is
imported only when asked for, so importing `certfsm.verify` needs neither
maraboupy nor z3.
"""

from __future__ import annotations

import importlib.util

from certfsm._errors import EngineError


def engine_module(name: str):
    """The back-end module of `name` ("marabou" or "z3"); EngineError when its solver package is missing."""
    if name == "marabou":
        from . import _marabou as module
    else:
        from . import _z3 as module
    if not module.is_available():
        raise EngineError(f"{name}: its solver package cannot be imported; install it or choose engine='auto'")
    return module


def box_engine_name() -> str | None:
    """What decides the boxes bounds leave open in ``auto``: "z3" when it imports (the only engine
    whose UNSAT closes a box, see `_box_engine`), else "marabou" (witnesses only), else None."""
    for name, package in (("z3", "z3"), ("marabou", "maraboupy")):
        if importlib.util.find_spec(package) is not None:
            return name
    return None
