"""The property IR: an input box and the unsafe set over the outputs.

A property is stated as its negation, VNN-LIB style: the *unsafe* set is a
disjunction of conjunctions of linear output constraints ``A @ y <= b``.
An engine looks for an input in the box whose outputs fall in the unsafe
set: finding one (and re-evaluating it) means `violated`, proving there
is none (UNSAT) means `proved`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def _frozen(array, dtype=np.float64) -> np.ndarray:
    array = np.array(array, dtype=dtype)
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class Conjunction:
    """All of ``A @ y <= b`` (non-strict), with one label per row for reports."""

    A: np.ndarray
    b: np.ndarray
    labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        A = _frozen(self.A)
        b = _frozen(self.b).reshape(-1)
        if A.ndim != 2 or A.shape[0] != b.shape[0]:
            raise ValueError(f"constraint matrix shape {A.shape} does not match right-hand side {b.shape}")
        object.__setattr__(self, "A", A)
        object.__setattr__(self, "b", b)
        object.__setattr__(self, "labels", tuple(self.labels))

    def slack(self, outputs: np.ndarray) -> np.ndarray:
        """min over rows of (b - A y): >= 0 exactly when every row holds. Works on batches.

        A conjunction without rows is "true", so its slack is +inf.
        """
        outputs = np.asarray(outputs, dtype=np.float64)
        if self.A.shape[0] == 0:
            return np.full(outputs.shape[:-1], np.inf)
        return np.min(self.b - outputs @ self.A.T, axis=-1)


@dataclass(frozen=True, eq=False)
class Property:
    """Find x with lower <= x <= upper and outputs in some disjunct of `unsafe`.

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

    def __post_init__(self) -> None:
        lower = _frozen(self.lower).reshape(-1)
        upper = _frozen(self.upper).reshape(-1)
        if lower.shape != upper.shape:
            raise ValueError(f"{self.name}: input bounds have shapes {lower.shape} and {upper.shape}")
        if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))):
            raise ValueError(f"{self.name}: input bounds must be finite")
        if np.any(lower > upper):
            bad = int(np.argmax(lower > upper))
            raise ValueError(f"{self.name}: input {bad} has lower={lower[bad]} above upper={upper[bad]}")
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
        object.__setattr__(self, "unsafe", tuple(self.unsafe))

    @property
    def n_inputs(self) -> int:
        return int(self.lower.shape[0])

    def unsafe_slack(self, outputs: np.ndarray) -> np.ndarray:
        """max over disjuncts of the conjunction slack: >= 0 exactly when outputs are unsafe."""
        if not self.unsafe:
            return np.full(np.asarray(outputs).shape[:-1], -np.inf)
        return np.max(np.stack([c.slack(outputs) for c in self.unsafe], axis=-1), axis=-1)

    def contains_input(self, x: np.ndarray) -> bool:
        x = np.asarray(x, dtype=np.float64)
        return bool(np.all(x >= self.lower) and np.all(x <= self.upper))

    def with_box(self, lower: np.ndarray, upper: np.ndarray) -> "Property":
        """The same unsafe set over a sub-box (used by input splitting)."""
        return Property(self.name, lower, upper, self.unsafe, self.description, self.metadata)


def chosen_conjunction(index: int, n_outputs: int, rule: str, margin: float = 0.0) -> Conjunction:
    """Output constraints meaning "index `index` is chosen (ties included), by at least `margin`".

    argmax: y_i - y_j >= margin for every j != i, written -(y_i - y_j) <= -margin.
    argmin: y_j - y_i >= margin, written  (y_i - y_j) <= -margin.
    Non-strict, so a tie (margin 0) counts as "can be chosen", as DESIGN asks.
    """
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
        offset = f" {'+' if rule == 'argmax' else '-'} {margin:g}" if margin else ""
        labels.append(f"y{index} {relation} y{other}{offset}")
    return Conjunction(np.array(rows).reshape(-1, n_outputs), np.full(len(rows), -float(margin)), labels)


def check_fits(network, prop: Property, who: str = "") -> None:
    """Refuse a property whose box or unsafe set does not match the network's inputs and outputs.

    Every engine calls this first, so a mismatched query is an error that
    names the property and the fix, never a wrong answer from a solver.
    """
    from certfsm._errors import EngineError

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
