"""The Z3 back-end: the SMT-LIB query of `_smtlib`, solved in exact rational arithmetic.

Z3 reads the very text that `smtlib_script` writes into the report
(``z3.parse_smt2_string``), rather than a second encoding built with the
Python API. So the ``.smt2`` file and this engine are literally the same
query: one encoder to trust, and a re-run of the file repeats this solve.
Parsing costs milliseconds next to solving.

Soundness rules (see DESIGN.md, "Verdicts"):

- ``proved`` only from Z3's ``unsat`` on that query. Weights, biases and
  bounds are the exact values of the stored floats and Z3 computes with
  rationals, so nothing is rounded on the way to that answer.
- ``sat`` gives an exact rational input; it is rounded to the nearest
  float64 (which stays in the box, whose bounds are floats) and counts as
  ``violated`` only when `_validate.validate_counterexample` accepts it
  (numpy float64 and onnxruntime). A solver model usually sits on the
  boundary of the unsafe set, where float round-off can miss; the query is
  then solved again with the unsafe set shrunk by a small margin, whose
  models lie inside it. A sat answer that never validates is ``unknown``
  ("spurious counterexample").
- A timeout, Z3's own ``unknown`` or any Z3 error is ``unknown`` with the
  reason.

z3 is imported lazily, so importing `certfsm.verify` never needs it.
"""

from __future__ import annotations

import functools
import math
import time
from fractions import Fraction

import numpy as np

from certfsm._errors import EngineError
from certfsm._network import Network

from ._property import Conjunction, Property, check_fits
from ._result import PROVED, UNKNOWN, VIOLATED, Result
from ._smtlib import input_name, smtlib_script

ENGINE = "z3"
COMPLETE = True
SUPPORTS = (
    "feed-forward ReLU networks, an input box and a disjunction of conjunctions of "
    "non-strict linear output constraints, in exact rational arithmetic; practical up to "
    "about 16 ReLUs with float32 weights (their exact rationals grow large in the simplex) "
    "and about 25 with short dyadic weights; ACAS Xu (300 ReLUs) is out of reach"
)

# Relative margins by which the unsafe set is shrunk when a model does not
# validate: row i becomes A_i y <= b_i - margin * (1 + |b_i| + sum |A_i|).
_MARGINS = (1e-9, 1e-6)


def is_available() -> bool:
    """True when the z3-solver package imports."""
    try:
        _z3()
    except ImportError:
        return False
    return True


@functools.cache
def _z3():
    import z3

    return z3


def check(network: Network, prop: Property, timeout: float) -> Result:
    """Decide `prop` on `network` with Z3 within `timeout` seconds (all solves together)."""
    started = time.monotonic()
    _check_arguments(network, prop, timeout)
    try:
        z3 = _z3()
    except ImportError as error:
        raise EngineError(f"z3: the z3-solver package cannot be imported ({error}); "
                          "pip install z3-solver or choose engine='marabou'") from None
    stats = {"relus": sum(network.hidden_sizes), "z3_version": z3.get_version_string(), "queries": 0}
    rejected = ""
    for margin in (0.0, *_MARGINS):
        remaining = timeout - (time.monotonic() - started)
        if remaining <= 0:
            return _unknown(started, stats, f"spurious counterexample ({rejected}); no time left to look deeper"
                            if rejected else "z3 timed out")
        query = prop if margin == 0.0 else _shrunk(prop, margin)
        status, point, why = _solve(z3, smtlib_script(network, query), network.n_inputs, remaining)
        stats["queries"] += 1
        if status == "unsat" and margin == 0.0:
            return Result(PROVED, ENGINE, time.monotonic() - started, reason="z3: UNSAT", stats=stats)
        if status == "unsat":
            return _unknown(started, stats, f"spurious counterexample: z3 finds unsafe points only within a "
                                            f"relative margin {margin:g} of the unsafe set's boundary ({rejected})")
        if status == "unknown":
            prefix = f"spurious counterexample ({rejected}); then " if rejected else ""
            return _unknown(started, stats, f"{prefix}{why}")
        ok, x, outputs, rejected = _validate(network, prop, point)
        if ok:
            stats["margin"] = margin
            return Result(VIOLATED, ENGINE, time.monotonic() - started,
                          reason="z3: SAT, counterexample re-evaluated", counterexample=x, outputs=outputs,
                          stats=stats)
        stats.setdefault("z3_points", []).append(point.tolist())
    return _unknown(started, stats, f"spurious counterexample from z3: {rejected}")


def _unknown(started: float, stats: dict, reason: str) -> Result:
    return Result(UNKNOWN, ENGINE, time.monotonic() - started, reason=reason, stats=stats)


def _check_arguments(network: Network, prop: Property, timeout: float) -> None:
    if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
        raise EngineError(f"z3: timeout={timeout!r} is not a positive number of seconds; give e.g. timeout=60")
    check_fits(network, prop, "z3")


def _shrunk(prop: Property, margin: float) -> Property:
    """The same property with every unsafe row tightened; its unsafe set lies inside the original one.

    Rounding b - delta to float64 is monotone, so the new bound never
    exceeds the old: a model of the shrunk query is a model of the original.
    """
    unsafe = tuple(
        Conjunction(c.A, c.b - margin * (1.0 + np.abs(c.b) + np.abs(c.A).sum(axis=1)), c.labels) for c in prop.unsafe
    )
    return Property(prop.name, prop.lower, prop.upper, unsafe, prop.description, prop.metadata)


def _solve(z3, script: str, n_inputs: int, seconds: float) -> tuple[str, np.ndarray | None, str]:
    """("sat", x, "") | ("unsat", None, "") | ("unknown", None, why), in a fresh context."""
    context = z3.Context()
    try:
        solver = z3.Solver(ctx=context)
        solver.set("timeout", max(1, int(seconds * 1000)))
        solver.add(z3.parse_smt2_string(script, ctx=context))
        answer = solver.check()
        if answer == z3.unsat:
            return "unsat", None, ""
        if answer != z3.sat:
            why = solver.reason_unknown()
            timed_out = why in ("timeout", "canceled")
            return "unknown", None, f"z3 timed out after {seconds:.3g} s" if timed_out else f"z3: unknown ({why})"
        model = solver.model()
        point = []
        for i in range(n_inputs):
            value = model.eval(z3.Real(input_name(i), context), model_completion=True)
            if not z3.is_rational_value(value):
                return "unknown", None, f"z3: model value of {input_name(i)} is not a rational ({value})"
            point.append(float(Fraction(value.numerator_as_long(), value.denominator_as_long())))
        return "sat", np.array(point), ""
    except z3.Z3Exception as error:
        return "unknown", None, f"z3 error: {' '.join(str(error).split())}"


def _validate(network: Network, prop: Property, x: np.ndarray) -> tuple[bool, np.ndarray, np.ndarray, str]:
    """(ok, checked point, its float64 outputs, why not) by `_validate` (float64 and onnxruntime)."""
    from ._validate import validate_counterexample

    validation = validate_counterexample(network, prop, x)
    return validation.ok, validation.x, validation.outputs, validation.reason
