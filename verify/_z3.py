"""The Z3 back-end: the SMT-LIB query of `_smtlib`, solved in exact rational arithmetic.

Z3 reads the very text that `smtlib_script` writes into the report
(``z3.parse_smt2_string``), rather than a second encoding built with the
Python API. So the ``.smt2`` file and this engine are literally the same
query: one encoder to trust, and a re-run of the file repeats this solve.
Parsing costs milliseconds next to solving.

Soundness rules (docs/semantics.md, "Verdicts" and "Counterexamples"):

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

import dataclasses
import functools
import math
import time
from fractions import Fraction

import numpy as np

from certfsm import EngineError, Network

from ._budget import WALL_CLOCK_GUARD
from ._property import Property, check_fits
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
_MARGINS = (1e-12, 1e-9, 1e-6)
_TIMED_OUT = "z3 timed out"
DEEPEST_SECONDS = 5.0


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


def check(network: Network, prop: Property, timeout: float, phases=None, rlimit: int | None = None) -> Result:
    """Decide `prop` on `network` with Z3 within `timeout` seconds (all solves together).

    `phases` (see `smtlib_body`) fixes the ReLUs that sound bounds proved
    stable on the box, which removes their case splits; a caller passes
    it only with phases proved over this very box. `rlimit` (Z3's
    deterministic resource count per solve) makes ``proved`` independent
    of the machine's speed; `timeout` is then a guard, and when it fires
    first ``stats["wall_clock_guard"]`` is True (`_budget`).
    """
    started = time.monotonic()
    _check_arguments(network, prop, timeout)
    try:
        z3 = _z3()
    except ImportError as error:
        raise EngineError(
            f"z3: the z3-solver package cannot be imported ({error}); pip install z3-solver or choose engine='marabou'"
        ) from None
    stats = {"relus": sum(network.hidden_sizes), "z3_version": z3.get_version_string(), "queries": 0}
    rejected = ""
    for margin in (0.0, *_MARGINS):
        remaining = timeout - (time.monotonic() - started)
        if remaining <= 0:
            if rlimit is not None:
                stats[WALL_CLOCK_GUARD] = True
            return _unknown(started, stats, exact_violation_reason(stats) or _TIMED_OUT)
        query = prop if margin == 0.0 else _shrunk(prop, margin)
        context = z3.Context()
        try:
            script = smtlib_script(network, query, phases=phases)
            solver = _solver(z3, context, remaining, rlimit, z3.parse_smt2_string(script, ctx=context))
            status, model, why = _solve(z3, solver, network.n_inputs, rlimit)
            if rlimit is not None and why == _TIMED_OUT:
                stats[WALL_CLOCK_GUARD] = True
            stats["queries"] += 1
            if status == "unsat" and margin == 0.0:
                return Result(PROVED, ENGINE, time.monotonic() - started, reason="z3: UNSAT", stats=stats)
            if status in ("unsat", "unknown"):
                why = f"{why} after {remaining:.3g} s" if why == _TIMED_OUT else why
                return _unknown(started, stats, exact_violation_reason(stats) or why)
            if margin == 0.0:
                stats["exact_model"] = [str(v) for v in model]
            ok, x, outputs, rejected = _validate(network, prop, np.array([float(v) for v in model]))
            if not ok:
                stats.setdefault("z3_points", []).append([float(v) for v in model])
                for candidate in _better_points(z3, network, query, phases, solver, model, started + timeout):
                    ok, x, outputs, why_not = _validate(network, prop, candidate)
                    if ok:
                        break
                stats["rejected"] = rejected
        except z3.Z3Exception as error:
            return _unknown(started, stats, f"z3 error: {' '.join(str(error).split())}")
        if ok:
            stats["margin"] = margin
            return Result(
                VIOLATED,
                ENGINE,
                time.monotonic() - started,
                reason="z3: SAT, counterexample re-evaluated",
                counterexample=x,
                outputs=outputs,
                stats=stats,
            )
    return _unknown(started, stats, exact_violation_reason(stats) or f"spurious counterexample from z3: {rejected}")


def exact_violation_reason(stats: dict) -> str | None:
    """The reason to give when z3 found the exact unsafe set reachable but no witness validated, else None.

    Such a property is not proved and cannot be: it is violated under the
    exact semantics, only no float point was found that re-evaluates in
    float64 and onnxruntime too, as a ``violated`` verdict requires.
    """
    model = stats.get("exact_model")
    if not model:
        return None
    point = ", ".join(f"X_{i} = {value}" for i, value in enumerate(model))
    last = f" (last candidate: {stats['rejected']})" if stats.get("rejected") else ""
    return (
        f"z3 shows the unsafe set is reachable under the exact semantics (at {point}), but no float point "
        "was found that re-evaluates as unsafe exactly, in float64 and in onnxruntime, so it is not reported "
        f"as violated{last}"
    )


def _unknown(started: float, stats: dict, reason: str) -> Result:
    return Result(UNKNOWN, ENGINE, time.monotonic() - started, reason=reason, stats=stats)


def _check_arguments(network: Network, prop: Property, timeout: float) -> None:
    if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
        raise EngineError(f"z3: timeout={timeout!r} is not a positive number of seconds; give e.g. timeout=60")
    check_fits(network, prop, "z3")


def _shrunk(prop: Property, margin: float) -> Property:
    """The same property with every unsafe row tightened; its unsafe set lies inside the original one.

    The exact right-hand side is lowered by ``margin * (1 + |b| + sum |A|)``
    (a positive float, subtracted exactly), so a model of the shrunk query
    is a model of the original.
    """
    unsafe = tuple(c.shrunk(margin * (1.0 + np.abs(c.b) + np.abs(c.A).sum(axis=1))) for c in prop.unsafe)
    return dataclasses.replace(prop, unsafe=unsafe)


def _solver(z3, context, seconds: float, rlimit: int | None, *assertions):
    """A solver with the time and resource limits set, holding `assertions` (Z3 vectors) in their order."""
    solver = z3.Solver(ctx=context)
    solver.set("timeout", max(1, int(seconds * 1000)))
    if rlimit is not None:
        solver.set("rlimit", int(rlimit))
    for vector in assertions:
        solver.add(vector)
    return solver


class ModelValues:
    """Values of a Z3 model by constant name; constants the model leaves open get their default."""

    def __init__(self, z3, model, context) -> None:
        self._z3, self._model, self._context = z3, model, context
        self._numbers: dict[str, int] | None = None

    def __call__(self, name: str) -> int:
        """The constant `name` of any sort as an int: bit vectors and integers as their number, Booleans as 0/1;
        0 when the model does not mention it. For queries whose sorts the caller does not restate (the hardware
        equivalence reads bus and register bit vectors this way)."""
        if self._numbers is None:
            z3, numbers = self._z3, {}
            for declaration in self._model.decls():
                value = self._model[declaration] if declaration.arity() == 0 else None
                if value is not None and (z3.is_bv_value(value) or z3.is_int_value(value)):
                    numbers[declaration.name()] = value.as_long()
                elif value is not None and (z3.is_true(value) or z3.is_false(value)):
                    numbers[declaration.name()] = int(z3.is_true(value))
            self._numbers = numbers
        return self._numbers.get(name, 0)

    def int(self, name: str) -> int:
        return self._model.eval(self._z3.Int(name, self._context), model_completion=True).as_long()

    def bool(self, name: str) -> bool:
        return self._z3.is_true(self._model.eval(self._z3.Bool(name, self._context), model_completion=True))


def solve_text(script: str, seconds: float, rlimit: int | None = None) -> tuple[str, ModelValues | None, str]:
    """Solve an SMT-LIB script with Z3 in a fresh context: (answer, model values or None, reason).

    The one place certfsm hands a query text to Z3 (the network engine
    above reads its models through `_solve`; table and machine proofs call
    this, and `SharedPrefix` for queries that share a long beginning).
    Answer: "sat", "unsat" or "unknown" with the reason (timeout,
    Z3's own unknown, any Z3 error). With `rlimit` (Z3's deterministic
    resource count) the answer does not depend on the machine's speed,
    and `seconds` is a guard: when it fires first the reason starts with
    `WALL_CLOCK_GUARD`.
    """
    try:
        z3 = _z3()
    except ImportError as error:
        return "unknown", None, f"z3 cannot be imported ({error}); pip install z3-solver"
    context = z3.Context()
    try:
        solver = _solver(z3, context, seconds, rlimit, z3.parse_smt2_string(script, ctx=context))
    except z3.Z3Exception as error:
        return "unknown", None, f"z3 error: {' '.join(str(error).split())}"
    return _answer(z3, solver, context, seconds, rlimit)


class SharedPrefix:
    """Queries that all begin with one long text: the prefix is parsed once, each query's own tail once each.

    Why: a hardware module's transition relation is megabytes of SMT-LIB
    that every equivalence claim repeats, and reading it is most of a
    claim's time. `solve(tail)` answers what `solve_text(prefix + tail)`
    answers: a fresh solver gets the prefix's assertions (parsed once)
    and the tail's, parsed after `declarations`, the prefix's
    declarations that tails use, restated. A restated constant is the
    prefix's own (Z3 identifies a declaration by its name and sort within
    one context); had it not been, the tail's constants would be free and
    a claim could only fail (sat), never pass wrongly.

    Each query is solved in a Z3 context of its own, the prefix's
    assertions copied into it (`translate`, a fraction of a parse), so
    that no query's time depends on the queries before it, as a query
    file re-run alone does not: Z3's heuristics follow the terms a
    context has seen, and the refined example's step claim took 17 s in
    a fresh context but 830 s after the reset and hold claims in the one
    they shared.
    """

    def __init__(self, prefix: str, declarations: str) -> None:
        self._declarations = declarations
        self._assertions = None
        self._failure = ""
        try:
            self._z3 = _z3()
        except ImportError as error:
            self._failure = f"z3 cannot be imported ({error}); pip install z3-solver"
            return
        self._context = self._z3.Context()
        try:
            self._assertions = self._z3.parse_smt2_string(prefix, ctx=self._context)
        except self._z3.Z3Exception as error:
            self._failure = f"z3 error: {' '.join(str(error).split())}"

    def solve(self, tail: str, seconds: float, rlimit: int | None = None) -> tuple[str, ModelValues | None, str]:
        """(answer, model values or None, reason) of the prefix followed by `tail`, as `solve_text` gives them."""
        if self._assertions is None:
            return "unknown", None, self._failure
        z3 = self._z3
        context = z3.Context()
        try:
            prefix = self._assertions.translate(context)
            own = z3.parse_smt2_string(self._declarations + "\n" + tail, ctx=context)
            solver = _solver(z3, context, seconds, rlimit, prefix, own)
        except z3.Z3Exception as error:
            return "unknown", None, f"z3 error: {' '.join(str(error).split())}"
        return _answer(z3, solver, context, seconds, rlimit)


def _answer(z3, solver, context, seconds: float, rlimit: int | None) -> tuple[str, ModelValues | None, str]:
    """`solver.check()` as solve_text's (answer, model values or None, reason)."""
    try:
        answer = solver.check()
    except z3.Z3Exception as error:
        return "unknown", None, f"z3 error: {' '.join(str(error).split())}"
    if answer == z3.unsat:
        return "unsat", None, ""
    if answer == z3.sat:
        return "sat", ModelValues(z3, solver.model(), context), ""
    why = solver.reason_unknown()
    if rlimit is not None and why == "timeout":
        return "unknown", None, f"{WALL_CLOCK_GUARD}: z3 reached the {seconds:g} s guard before its rlimit {rlimit}"
    if rlimit is not None and why == "canceled":
        return "unknown", None, f"z3 used up its rlimit {rlimit} (a deterministic budget)"
    return "unknown", None, f"z3 answered unknown ({why})"


def _solve(z3, solver, n_inputs: int, rlimit: int | None = None) -> tuple[str, list[Fraction] | None, str]:
    """("sat", exact input values, "") | ("unsat", None, "") | ("unknown", None, why)."""
    answer = solver.check()
    if answer == z3.unsat:
        return "unsat", None, ""
    if answer != z3.sat:
        why = solver.reason_unknown()
        if why == "timeout":
            return "unknown", None, _TIMED_OUT
        if why == "canceled":  # Z3's answer when its rlimit is spent (or, without one, a timeout)
            return "unknown", None, f"z3 used up its rlimit {rlimit}" if rlimit is not None else _TIMED_OUT
        return "unknown", None, f"z3: unknown ({why})"
    point, why = _model_inputs(z3, solver.model(), solver.ctx, n_inputs)
    return ("sat", point, "") if point is not None else ("unknown", None, why)


def _model_inputs(z3, model, context, n_inputs: int) -> tuple[list[Fraction] | None, str]:
    """The exact values of X_0 .. X_{n-1} in `model`, or (None, why) when one is not a rational."""
    point = []
    for i in range(n_inputs):
        value = model.eval(z3.Real(input_name(i), context), model_completion=True)
        if not z3.is_rational_value(value):
            return None, f"z3: model value of {input_name(i)} is not a rational ({value})"
        point.append(Fraction(value.numerator_as_long(), value.denominator_as_long()))
    return point, ""


def _better_points(z3, network, prop, phases, solver, model, deadline):
    """Float points to try when the model itself does not validate, best bets first.

    First the deepest point of the unsafe set (z3's optimiser maximises
    the slack of the best disjunct, within `DEEPEST_SECONDS`), rounded to
    float32 and to float64: where the set has an interior, rounding it
    stays inside. Then a float point found by fixing one input at a time
    (`_float_point`), which also finds float points on a tie.
    """
    seconds = min(DEEPEST_SECONDS, deadline - time.monotonic())
    if seconds > 0.05:
        deepest = _deepest_model(z3, network, prop, phases, seconds)
        if deepest is not None:
            yield np.array([float(np.float32(float(v))) for v in deepest])
            yield np.array([float(v) for v in deepest])
    fixed = _float_point(z3, solver, model, prop, deadline)
    if fixed is not None:
        yield fixed


def _deepest_model(z3, network, prop, phases, seconds: float) -> list[Fraction] | None:
    """The input of the unsafe set with the largest slack (max over disjuncts of min over rows), or None."""
    context = z3.Context()
    optimiser = z3.Optimize(ctx=context)
    optimiser.set("timeout", max(1, int(seconds * 1000)))
    optimiser.add(z3.parse_smt2_string(smtlib_script(network, prop, phases=phases), ctx=context))
    depth = z3.Real("certfsm_depth", context)
    outputs = [z3.Real(f"Y_{j}", context) for j in range(network.n_outputs)]
    disjuncts = []
    for conjunction in prop.unsafe:
        rows = [
            depth
            <= z3.RealVal(str(bound), context)
            - z3.Sum([z3.RealVal(str(Fraction(float(a))), context) * y for a, y in zip(row, outputs) if a])
            for row, bound in zip(conjunction.A, conjunction.exact_b)
        ]
        disjuncts.append(z3.And(rows) if rows else z3.BoolVal(True, context))
    if not disjuncts:
        return None
    optimiser.add(z3.Or(disjuncts), depth <= 1)
    optimiser.maximize(depth)
    if optimiser.check() != z3.sat:
        return None
    return _model_inputs(z3, optimiser.model(), context, network.n_inputs)[0]


def _float_point(z3, solver, model: list[Fraction], prop: Property, deadline: float) -> np.ndarray | None:
    """A float point of the query's solution set near `model`, found by fixing one input at a time.

    A model usually lies where the unsafe set is thinnest (on its boundary,
    or on a tie that is the whole set), where rounding each coordinate
    independently leaves the set. Fixing X_0 to a float near its model
    value and asking z3 again keeps the rest of the point consistent, and
    so on for each input: float32 values first (onnxruntime evaluates the
    model in float32), then the neighbouring float64 values. The result is
    an exact solution (z3 said sat with every input fixed) or None.
    """
    values = list(model)
    solver.push()
    try:
        for i, value in enumerate(values):
            variable = z3.Real(input_name(i), solver.ctx)
            for candidate in _float_candidates(value, prop.inner_lower[i], prop.inner_upper[i]):
                if time.monotonic() >= deadline:
                    return None
                solver.push()
                solver.add(variable == z3.RealVal(str(Fraction(candidate)), solver.ctx))
                status, again, _ = _solve(z3, solver, len(values))
                if status == "sat":
                    values = again
                    break
                solver.pop()
            else:
                return None
        return np.array([float(v) for v in values])
    finally:
        solver.pop()


def _float_candidates(value: Fraction, lowest: float, highest: float) -> list[float]:
    """Floats near `value` inside [lowest, highest]: the float32 neighbours, then the float64 ones."""
    nearest = float(value)
    single = float(np.float32(nearest))
    singles = [
        single,
        float(np.nextafter(np.float32(single), np.float32(np.inf))),
        float(np.nextafter(np.float32(single), np.float32(-np.inf))),
    ]
    doubles = [nearest, float(np.nextafter(nearest, np.inf)), float(np.nextafter(nearest, -np.inf))]
    ordered = sorted(singles, key=lambda c: abs(Fraction(c) - value)) + sorted(
        doubles, key=lambda c: abs(Fraction(c) - value)
    )
    return list(dict.fromkeys(c for c in ordered if lowest <= c <= highest))


def _validate(network: Network, prop: Property, x: np.ndarray) -> tuple[bool, np.ndarray, np.ndarray, str]:
    """(ok, checked point, its float64 outputs, why not) by `_validate` (float64 and onnxruntime)."""
    from ._validate import validate_counterexample

    validation = validate_counterexample(network, prop, x)
    return validation.ok, validation.x, validation.outputs, validation.reason
