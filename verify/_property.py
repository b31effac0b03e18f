"""The property IR: an input box and the unsafe set over the outputs.

A property is stated as its negation, VNN-LIB style: the *unsafe* set is a
disjunction of conjunctions of linear output constraints ``A @ y <= b``.
An engine looks for an input in the box whose outputs fall in the unsafe
set: finding one (and re-evaluating it) means `violated`, proving there
is none (UNSAT) means `proved`.

Constants are exact. A row's right-hand side is a rational (`exact_b`;
a VNN-LIB ``0.1`` is 1/10, not the float64 next to it) and a row may be
strict (``A y < b``); the box's bounds are rationals too (`exact_lower`,
`exact_upper`). The float arrays are what numeric engines use: `b` and
the box rounded to nearest for searching, and, for proofs, `b_sound`
(rounded up) and `lower`/`upper` (rounded outward), so that refuting the
rounded rows over the rounded box refutes the exact ones. Only the Z3
encoding and the exact witness check (`is_unsafe_exactly`,
`contains_exactly`) read the rationals. Built from floats, the exact
values are those floats and nothing changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from certfsm import float_at_least, float_at_most, frozen_array


@dataclass(frozen=True, eq=False)
class Conjunction:
    """All of ``A @ y <= b`` (``<`` on strict rows), with one label per row for reports.

    `A` holds exact coefficients (every float is a rational; a parser
    scales a row whose coefficients no float64 holds). `exact_b` is the
    exact right-hand side (default: the floats of `b`), `strict` marks
    the rows that are strict (default: none). `b` becomes the nearest
    float64 of `exact_b`, `b_sound` the smallest float64 >= it.

    `witness_b` (default: `exact_b`) is what a counterexample must meet,
    row by row, to count: no more than `exact_b`. The two differ where a
    constant is known only between two rationals (the probability gate's
    irrational margin): the unsafe set is stated with the side that makes
    it larger, so a refutation holds for the true constant, and a witness
    must fall in the smaller set, so it is unsafe for the true constant too.
    """

    A: np.ndarray
    b: np.ndarray
    labels: tuple[str, ...] = ()
    exact_b: tuple = ()
    strict: tuple = ()
    witness_b: tuple = ()

    def __post_init__(self) -> None:
        A = frozen_array(self.A, np.float64)
        b = frozen_array(self.b, np.float64).reshape(-1)
        if A.ndim != 2 or A.shape[0] != b.shape[0]:
            raise ValueError(f"constraint matrix shape {A.shape} does not match right-hand side {b.shape}")
        exact_b = tuple(Fraction(v) for v in self.exact_b) or tuple(Fraction(float(v)) for v in b)
        strict = tuple(bool(v) for v in self.strict) or (False,) * b.shape[0]
        if len(exact_b) != b.shape[0] or len(strict) != b.shape[0]:
            raise ValueError(
                f"{b.shape[0]} rows but {len(exact_b)} exact right-hand sides and {len(strict)} strictness flags"
            )
        object.__setattr__(self, "A", A)
        object.__setattr__(self, "b", frozen_array([float(v) for v in exact_b], np.float64))
        object.__setattr__(self, "b_sound", frozen_array([float_at_least(v) for v in exact_b], np.float64))
        witness_b = tuple(Fraction(v) for v in self.witness_b) or exact_b
        if len(witness_b) != len(exact_b) or any(w > e for w, e in zip(witness_b, exact_b)):
            raise ValueError("witness_b must give one right-hand side per row, none above exact_b")
        object.__setattr__(self, "exact_b", exact_b)
        object.__setattr__(self, "witness_b", witness_b)
        object.__setattr__(self, "strict", strict)
        object.__setattr__(self, "labels", tuple(self.labels))

    def closes_at_zero(self) -> np.ndarray:
        """Rows refuted by a sound lower bound of ``A y - b_sound`` that is >= 0 (not only > 0).

        A strict row ``A y < b`` fails where ``A y - b >= 0``; a row whose
        `b_sound` lies above the exact b fails even at ``A y = b_sound``.
        """
        return np.array(
            [s or Fraction(float(u)) != e for s, u, e in zip(self.strict, self.b_sound, self.exact_b)], dtype=bool
        )

    def holds_exactly(self, outputs: list[Fraction]) -> bool:
        """Every row holds at these exact outputs against `witness_b`, strict rows strictly.

        docs/semantics.md, "Strict atoms".
        """
        for row, bound, strict in zip(self.A, self.witness_b, self.strict):
            value = sum((Fraction(float(a)) * y for a, y in zip(row, outputs) if a), Fraction(0))
            if value > bound or (strict and value == bound):
                return False
        return True

    def shrunk(self, delta) -> "Conjunction":
        """Every right-hand side lowered by ``delta[i]`` (exactly), so the new set lies inside this one."""
        deltas = [Fraction(float(d)) for d in np.broadcast_to(delta, self.b.shape)]
        exact_b = tuple(b - d for b, d in zip(self.exact_b, deltas))
        witness_b = tuple(b - d for b, d in zip(self.witness_b, deltas))
        return Conjunction(self.A, [float(v) for v in exact_b], self.labels, exact_b, self.strict, witness_b)

    def slack(self, outputs: np.ndarray) -> np.ndarray:
        """min over rows of (b - A y), in float64 with the nearest b: a search heuristic. Works on batches.

        >= 0 when every non-strict row holds in float64 (a strict row needs
        > 0, which `is_unsafe` checks). A conjunction without rows is
        "true", so its slack is +inf.
        """
        outputs = np.asarray(outputs, dtype=np.float64)
        if self.A.shape[0] == 0:
            return np.full(outputs.shape[:-1], np.inf)
        return np.min(self.b - outputs @ self.A.T, axis=-1)

    def is_unsafe(self, outputs: np.ndarray) -> np.ndarray:
        """Every row holds in float64 at these outputs (strict rows strictly); works on batches."""
        outputs = np.asarray(outputs, dtype=np.float64)
        if self.A.shape[0] == 0:
            return np.ones(outputs.shape[:-1], dtype=bool)
        margin = self.b - outputs @ self.A.T
        return np.all(np.where(np.array(self.strict), margin > 0.0, margin >= 0.0), axis=-1)


@dataclass(frozen=True, eq=False)
class Property:
    """Find x in the box and outputs in some disjunct of `unsafe`.

    The box is ``exact_lower <= x <= exact_upper`` (rationals; default:
    the floats given). `lower`/`upper` become that box rounded outward, so
    every bound computed over them covers the exact box; `inner_lower`/
    `inner_upper` are the float64 points inside the exact box (rounded
    inward), where a float64 witness must lie.

    Invariant: lower <= upper elementwise, all finite; every conjunction has
    one column per network output. An empty `unsafe` is the empty set, so
    the property holds trivially (an engine still has to say UNSAT).
    """

    name: str
    lower: np.ndarray
    upper: np.ndarray
    unsafe: tuple[Conjunction, ...]
    description: str = ""
    metadata: dict = field(default_factory=dict)
    exact_lower: tuple = ()
    exact_upper: tuple = ()
    open_lower: tuple = ()
    open_upper: tuple = ()

    def __post_init__(self) -> None:
        lower = frozen_array(self.lower, np.float64).reshape(-1)
        upper = frozen_array(self.upper, np.float64).reshape(-1)
        if lower.shape != upper.shape:
            raise ValueError(f"{self.name}: input bounds have shapes {lower.shape} and {upper.shape}")
        if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))):
            raise ValueError(f"{self.name}: input bounds must be finite")
        exact_lower = tuple(Fraction(v) for v in self.exact_lower) or tuple(Fraction(float(v)) for v in lower)
        exact_upper = tuple(Fraction(v) for v in self.exact_upper) or tuple(Fraction(float(v)) for v in upper)
        if not len(exact_lower) == len(exact_upper) == lower.shape[0]:
            raise ValueError(f"{self.name}: exact input bounds do not give one pair per input")
        for index, (low, high) in enumerate(zip(exact_lower, exact_upper)):
            if low > high:
                raise ValueError(f"{self.name}: input {index} has lower={float(low)} above upper={float(high)}")
        open_lower = tuple(bool(v) for v in self.open_lower) or (False,) * len(exact_lower)
        open_upper = tuple(bool(v) for v in self.open_upper) or (False,) * len(exact_upper)
        if not len(open_lower) == len(open_upper) == len(exact_lower):
            raise ValueError(f"{self.name}: open-bound flags do not give one pair per input")
        object.__setattr__(self, "exact_lower", exact_lower)
        object.__setattr__(self, "exact_upper", exact_upper)
        object.__setattr__(self, "open_lower", open_lower)
        object.__setattr__(self, "open_upper", open_upper)
        object.__setattr__(self, "lower", frozen_array([float_at_most(v) for v in exact_lower], np.float64))
        object.__setattr__(self, "upper", frozen_array([float_at_least(v) for v in exact_upper], np.float64))
        object.__setattr__(
            self,
            "inner_lower",
            frozen_array([_inward(v, is_open, +1) for v, is_open in zip(exact_lower, open_lower)], np.float64),
        )
        object.__setattr__(
            self,
            "inner_upper",
            frozen_array([_inward(v, is_open, -1) for v, is_open in zip(exact_upper, open_upper)], np.float64),
        )
        object.__setattr__(self, "unsafe", tuple(self.unsafe))

    @property
    def n_inputs(self) -> int:
        return int(self.lower.shape[0])

    def unsafe_slack(self, outputs: np.ndarray) -> np.ndarray:
        """max over disjuncts of the conjunction slack: >= 0 exactly when outputs are unsafe."""
        if not self.unsafe:
            return np.full(np.asarray(outputs).shape[:-1], -np.inf)
        return np.max(np.stack([c.slack(outputs) for c in self.unsafe], axis=-1), axis=-1)

    def is_unsafe(self, outputs: np.ndarray) -> np.ndarray:
        """Some disjunct holds in float64 at these outputs (strict rows strictly); works on batches."""
        outputs = np.asarray(outputs, dtype=np.float64)
        if not self.unsafe:
            return np.zeros(outputs.shape[:-1], dtype=bool)
        return np.any(np.stack([c.is_unsafe(outputs) for c in self.unsafe], axis=-1), axis=-1)

    def is_unsafe_exactly(self, outputs: list[Fraction]) -> bool:
        """Some disjunct holds at these exact outputs, strict rows strictly."""
        return any(conjunction.holds_exactly(outputs) for conjunction in self.unsafe)

    def contains_input(self, x: np.ndarray) -> bool:
        x = np.asarray(x, dtype=np.float64)
        return bool(np.all(x >= self.lower) and np.all(x <= self.upper))

    def contains_exactly(self, x: np.ndarray) -> bool:
        """The float point `x` lies in the exact box."""
        values = [Fraction(float(v)) for v in np.asarray(x, dtype=np.float64).reshape(-1)]
        return len(values) == self.n_inputs and all(
            (low < v if open_low else low <= v) and (v < high if open_high else v <= high)
            for v, low, high, open_low, open_high in zip(
                values, self.exact_lower, self.exact_upper, self.open_lower, self.open_upper
            )
        )

    def restricted(self, lower: np.ndarray, upper: np.ndarray, unsafe: tuple | None = None) -> "Property":
        """The property on the part of the exact box inside [lower, upper] (a sub-box of a split).

        The exact bounds are intersected, so a sub-box query never grows
        beyond the exact box, even where the float box was rounded outward.
        `unsafe` replaces the disjuncts (those still open on the sub-box).
        """
        exact_lower = tuple(max(e, Fraction(float(v))) for e, v in zip(self.exact_lower, lower))
        exact_upper = tuple(min(e, Fraction(float(v))) for e, v in zip(self.exact_upper, upper))
        exact_upper = tuple(max(low, high) for low, high in zip(exact_lower, exact_upper))
        open_lower = tuple(o and e == low for o, e, low in zip(self.open_lower, self.exact_lower, exact_lower))
        open_upper = tuple(o and e == high for o, e, high in zip(self.open_upper, self.exact_upper, exact_upper))
        return Property(
            self.name,
            lower,
            upper,
            self.unsafe if unsafe is None else unsafe,
            self.description,
            self.metadata,
            exact_lower,
            exact_upper,
            open_lower,
            open_upper,
        )


def _inward(bound: Fraction, is_open: bool, direction: int) -> float:
    """The float64 nearest `bound` on the inside of the box (direction +1: a lower bound, -1: an upper one)."""
    value = float_at_least(bound) if direction > 0 else float_at_most(bound)
    if is_open and Fraction(value) == bound:
        value = float(np.nextafter(value, direction * np.inf))
    return value


def chosen_conjunction(index: int, n_outputs: int, rule: str, margin=0.0, witness_margin=None) -> Conjunction:
    """Output constraints meaning "index `index` is chosen (ties included), by at least `margin`".

    argmax: y_i - y_j >= margin for every j != i, written -(y_i - y_j) <= -margin.
    argmin: y_j - y_i >= margin, written  (y_i - y_j) <= -margin.
    Non-strict, so a tie (margin 0) counts as "can be chosen"
    (docs/semantics.md, "Decision rule").
    `margin` is exact (a Fraction, or a float read as the rational it is);
    `witness_margin` (>= margin, default margin) is what a witness must clear.
    """
    exact = Fraction(margin)
    witness = exact if witness_margin is None else Fraction(witness_margin)
    if rule not in ("argmax", "argmin"):
        raise ValueError(f"decision rule {rule!r} is not argmax or argmin")
    sign = -1.0 if rule == "argmax" else 1.0
    rows, labels = [], []
    for other in range(n_outputs):
        if other == index:
            continue
        row = np.zeros(n_outputs)
        row[index], row[other] = sign, -sign
        rows.append(row)
        relation = ">=" if rule == "argmax" else "<="
        offset = f" {'+' if rule == 'argmax' else '-'} {float(exact):g}" if exact else ""
        labels.append(f"y{index} {relation} y{other}{offset}")
    count = len(rows)
    return Conjunction(
        np.array(rows).reshape(-1, n_outputs),
        np.full(count, -float(exact)),
        labels,
        (-exact,) * count,
        (),
        (-witness,) * count,
    )


def check_fits(network, prop: Property, who: str = "") -> None:
    """Refuse a property whose box or unsafe set does not match the network's inputs and outputs.

    Every engine calls this first, so a mismatched query is an error that
    names the property and the fix, never a wrong answer from a solver.
    """
    from certfsm import EngineError

    prefix = f"{who}: " if who else ""
    if prop.n_inputs != network.n_inputs:
        raise EngineError(
            f"{prefix}property {prop.name!r} bounds {prop.n_inputs} inputs but the network "
            f"takes {network.n_inputs}; give one [lower, upper] pair per network input"
        )
    for index, conjunction in enumerate(prop.unsafe):
        if conjunction.A.shape[1] != network.n_outputs:
            raise EngineError(
                f"{prefix}property {prop.name!r} unsafe[{index}] constrains {conjunction.A.shape[1]} "
                f"outputs but the network has {network.n_outputs}; give one column per network output"
            )
