"""The question distillation asks of one grid cell, and the form of its answer.

Every phase of `distill`, the checkpoint and the driver share these, so
they live apart from all of them: nothing here depends on how a cell is
decided.

`_Problem` fixes what "the decision" is: the spec's rule, margin m and
conservative token c in `gated_decide`, on the network's float64 IR (and
the same in onnxruntime, the model as deployed). `exact_property` turns
"the decision is t on this cell" into a `Property` for the engines. With
p the scores turned so that larger is better, what is proved is:

- "decision is t != c": p_t - p_j > m for every j != t (strict, which
  also settles the tie rule). The engines get the closure of the
  negation as the unsafe set: OR over j != t of p_t - p_j <= m.
- "decision is c": no k != c wins, i.e. for every k != c some j has
  p_k - p_j < m. Unsafe set: OR over k != c of `chosen_conjunction(k,
  margin=m)` (non-strict, so ties are covered; an over-approximation for
  margin 0, hence sound).

Invariant: an unsafe set is always a closure (an over-approximation) of
"the decision is not t", so UNSAT over the closed cell box proves t on
the half-open cell.

`_Decision` is how one cell was decided, its `engine` one of `ENGINES`;
`_valid_pairs` says when two points are a witness that a cell is not
EXACT (both in the half-open cell, different decisions, in float64 and
in onnxruntime alike).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from certfsm import Network, SpecError, gated_decide, preference
from certfsm.verify import Conjunction, Property, chosen_conjunction

from ._grid import Grid

ENGINES = ("sampling", "bounds", "check", "falsify", "marabou", "z3", "undecided")
"""What decided a cell: phase-1 samples, phase-2 bounds (with vectorised splitting), `verify.check` without
a complete engine (bounds, branch and bound, falsification), the witness search alone, a complete engine
inside `verify.check`, or nothing (undecided, conservative without witness)."""


CERTIFIED_CELLS_AT_MOST = 20_000
"""Tables of at most this many cells get a proof certificate of their exact cells (about 1.6 KB per exact cell,
7.7 MB for the example's 4 933); a larger table keeps no proofs, so that neither memory nor the report grows with
it (a 279 936-cell table would write hundreds of MB), and its report says so."""


@dataclass(frozen=True, eq=False)
class _Problem:
    """Everything a worker needs to decide a cell; picklable (the IR and the grid are plain numpy)."""

    network: Network
    grid: Grid
    rule: str
    margin: float
    conservative: int
    outputs: tuple[str, ...]
    margin_low: Fraction = Fraction(0)
    margin_high: Fraction = Fraction(0)
    """The gate's exact margin bounds (`ControllerSpec.gate_bounds`); `margin` is the float64 nearest them,
    which the numeric searches use. Every claim reads the bound that is sound for it."""
    records_proofs: bool = True
    """Whether exact cells keep their proofs for the report's certificate (`CERTIFIED_CELLS_AT_MOST`)."""

    @property
    def n_outputs(self) -> int:
        return len(self.outputs)

    def decisions(self, x: np.ndarray) -> np.ndarray:
        """Gated decisions of rows x in numpy float64."""
        return gated_decide(self.network.evaluate(x), self.rule, self.margin, self.conservative)

    def onnx_decisions(self, x: np.ndarray) -> np.ndarray:
        """Gated decisions of rows x in onnxruntime (the model as deployed, float32)."""
        from certfsm import run_onnxruntime

        scores = np.asarray(run_onnxruntime(self.network, np.atleast_2d(x)), dtype=np.float64)
        return gated_decide(scores, self.rule, self.margin, self.conservative)

    def robustness(self, scores: np.ndarray) -> np.ndarray:
        """How far each row's scores are from a change of gated decision (a heuristic for choosing witnesses)."""
        p = preference(scores, self.rule)
        diff = p[:, :, None] - p[:, None, :]
        n = self.n_outputs
        diff[:, np.arange(n), np.arange(n)] = np.inf
        win = diff.min(axis=2) - self.margin
        chosen = gated_decide(scores, self.rule, self.margin, self.conservative)
        others = np.delete(win, self.conservative, axis=1)
        return np.where(chosen != self.conservative, win[np.arange(len(p)), chosen], -others.max(axis=1))

    def witness_box(self, cell: int) -> tuple[np.ndarray, np.ndarray]:
        """The closed box of the float64 points that lie in the half-open cell (`Grid.float_cell_bounds`)."""
        return self.grid.float_cell_bounds(cell)

    def _difference_row(self, a: int, b: int) -> np.ndarray:
        """Row r with r @ y = p_a - p_b."""
        row = np.zeros(self.n_outputs)
        sign = 1.0 if self.rule == "argmax" else -1.0
        row[a], row[b] = sign, -sign
        return row

    def loses(self, token: int, delta: float) -> tuple[Conjunction, ...]:
        """The decision is not `token`, by `delta` to spare (delta 0: the closure of "not token").

        Stated with the margin bound that makes the set larger (the upper
        one where `token` must pass the gate, the lower one where another
        token must), so that refuting it proves `token` for the true margin.
        """
        spare = Fraction(float(delta))
        if token != self.conservative:
            bound, witness = self.margin_high - spare, self.margin_low - spare
            return tuple(
                Conjunction(
                    self._difference_row(token, j)[None],
                    [float(bound)],
                    (f"p{token} - p{j} <= {float(bound):g}",),
                    (bound,),
                    (),
                    (witness,),
                )
                for j in range(self.n_outputs)
                if j != token
            )
        return tuple(
            chosen_conjunction(k, self.n_outputs, self.rule, self.margin_low + spare, self.margin_high + spare)
            for k in range(self.n_outputs)
            if k != self.conservative
        )

    def wins(self, token: int, delta: float) -> tuple[Conjunction, ...]:
        """The decision is `token` with `delta` to spare (c: c beats every other score by delta)."""
        spare = Fraction(float(delta))
        margin = self.margin_high + spare if token != self.conservative else spare
        return (chosen_conjunction(token, self.n_outputs, self.rule, margin),)

    def decision_property(self, name: str, lower: tuple, upper: tuple, token: int, where: str = "") -> Property:
        """Unsafe set: the closure of "the decision is not `token`" over the closed box [lower, upper] (exact
        rationals), named `name`; `where` says what the box is, for the description."""
        return Property(
            name,
            [float(v) for v in lower],
            [float(v) for v in upper],
            self.loses(token, 0.0),
            f"the gated decision is {self.outputs[token]}" + (f" everywhere in {where}" if where else ""),
            exact_lower=lower,
            exact_upper=upper,
        )

    def envelope_property(self, token: int) -> Property:
        """`decision_property` over the whole envelope (cells are its sub-boxes)."""
        return self.decision_property(f"decision is {self.outputs[token]}", *self.grid.exact_envelope(), token)

    def exact_property(self, cell: int, token: int) -> Property:
        """`decision_property` over the closed cell box, edges read exactly."""
        lower, upper = self.grid.exact_cell_bounds(cell)
        name = f"cell {cell}: decision is {self.outputs[token]}"
        return self.decision_property(name, lower, upper, token, self.grid.describe_cell(cell))


def _problem(spec, network: Network) -> _Problem:
    grid = Grid.from_spec(spec)
    if network.n_inputs != spec.n_inputs or network.n_outputs != spec.n_outputs:
        raise SpecError(
            f"{spec.path}: the spec has {spec.n_inputs} inputs and {spec.n_outputs} outputs but the "
            f"network {network.source_path or '(in memory)'} has {network.n_inputs} and "
            f"{network.n_outputs}; give the network the spec names"
        )
    low, high = spec.gate_bounds or (Fraction(0), Fraction(0))
    margin = 0.0 if spec.margin is None else float(spec.margin)
    records = grid.n_cells <= CERTIFIED_CELLS_AT_MOST
    return _Problem(
        network, grid, spec.decision, margin, spec.conservative_index, tuple(spec.outputs), low, high, records
    )


@dataclass(frozen=True, eq=False)
class _Decision:
    """How one cell was decided: status EXACT, CONSERVATIVE or UNDECIDED (conservative without witness)."""

    cell: int
    status: int
    token: int
    engine: str
    witness: tuple[np.ndarray, np.ndarray] | None = None
    reason: str = ""
    marabou_queries: int = 0
    wall_clock_guard: bool = False
    """The per-cell wall-clock guard ended the check before its work budget: the run must stop (`distill`)."""
    proof: tuple | None = None
    """For an EXACT cell: (the property proved, its recorded proof: `verify`'s closures and cuts), from which the
    cell's entry of the report's proof certificate is written; None where no proof was recorded."""


def _valid_pairs(problem: _Problem, cells: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Per row: both points finite and in the half-open cell, their float64 decisions different, and
    onnxruntime giving the same two decisions. Vectorised over pairs (one onnxruntime call)."""
    points = np.concatenate([first, second]).astype(np.float64)
    ok = np.all(np.isfinite(points), axis=1)
    points = np.where(ok[:, None], points, problem.grid.lower)
    ok &= problem.grid.cell_of(points) == np.concatenate([cells, cells])
    exact = problem.decisions(points)
    count = len(cells)
    ok = ok[:count] & ok[count:] & (exact[:count] != exact[count:])
    if ok.any():
        rows = np.concatenate([np.flatnonzero(ok), count + np.flatnonzero(ok)])
        deployed = np.zeros_like(exact)
        deployed[rows] = problem.onnx_decisions(points[rows])
        ok &= (deployed[:count] == exact[:count]) & (deployed[count:] == exact[count:])
    return ok
