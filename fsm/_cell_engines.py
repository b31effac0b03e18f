"""Phase 3 of `distill`: decide one cell that sampling and bounds left open, with the engines.

`verify.check(..., engine="auto", jobs=1, budget=...)` on the cell's
`exact_property` (falsification, bounds, branch and bound, exact Z3 per
box), within the task's `verify.WorkBudget`, so that whether the cell is
EXACT does not depend on the machine's speed (the seconds are a guard
only; when it fires the decision says so and `distill` stops):
proved -> EXACT; violated -> a witness from the counterexample and a cell
sample, or from a short falsification of robust versions of both
decisions (`_find_witness`, margins widened by `ROBUST_STEPS`, within
`WITNESS_SECONDS`) -> CONSERVATIVE; unknown -> undecided with the reason.
A cell whose samples disagreed but whose pair did not re-validate only
looks for a witness (mode "witness").

Invariant: EXACT only from a proof of `verify.check`; CONSERVATIVE with
a witness only when both points lie in the half-open cell and decide
differently in float64 and onnxruntime alike; everything else undecided.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from certfsm import gated_decide
from certfsm.verify import WALL_CLOCK_GUARD, Property, WorkBudget, check, falsify

from ._cell_problem import _Decision, _Problem
from ._table import CONSERVATIVE, EXACT, UNDECIDED

WITNESS_SECONDS = 2.0
ROBUST_STEPS = (1e-6, 1e-4, 1e-2)


@dataclass(frozen=True, eq=False)
class _Task:
    """One cell for the engines: prove `candidate` (mode "prove") or only find a witness (mode "witness")."""

    cell: int
    mode: str
    candidate: int
    hints: np.ndarray
    timeout: float
    seed: int
    budget: WorkBudget | None = None

    @property
    def label(self) -> str:
        """The cell, as a failed task's message names it."""
        return f"cell {self.cell}"


def _engine_label(engine: str) -> str:
    if "marabou" in engine:
        return "marabou"
    if "z3" in engine:
        return "z3"
    return "check"


def _decide_cell(problem: _Problem, task: _Task) -> _Decision:
    """Decide one cell with `verify.check` and, when the cell is not exact, look for a validated witness."""
    label, queries, hints = "falsify", 0, task.hints
    if task.mode == "prove":
        prop = problem.exact_property(task.cell, task.candidate)
        result = check(
            problem.network,
            prop,
            engine="auto",
            timeout=task.timeout,
            jobs=1,
            seed=task.seed,
            budget=task.budget,
        )
        label, queries = _engine_label(result.engine), int(result.stats.get("engine_queries", 0))
        if result.stats.get(WALL_CLOCK_GUARD):
            return _Decision(
                task.cell,
                UNDECIDED,
                problem.conservative,
                "undecided",
                reason=result.reason,
                marabou_queries=queries,
                wall_clock_guard=True,
            )
        if result.is_proved:
            proof = None if result.proof is None or not problem.records_proofs else (prop, result.proof)
            return _Decision(task.cell, EXACT, task.candidate, label, marabou_queries=queries, proof=proof)
        if not result.is_violated:
            return _Decision(
                task.cell,
                UNDECIDED,
                problem.conservative,
                "undecided",
                reason=f"undecided: {result.engine}: {result.reason}",
                marabou_queries=queries,
            )
        hints = np.concatenate([hints, result.counterexample[None]])
    budget = min(WITNESS_SECONDS, task.timeout / 2)
    pair = _find_witness(problem, task.cell, task.candidate, hints, budget, task.seed)
    if pair is None:
        why = (
            "the closure of another decision is reached but no pair of points with different decisions "
            "validated in float64 and onnxruntime"
            if task.mode == "prove"
            else "samples disagree in float64 but no pair validated in onnxruntime"
        )
        return _Decision(
            task.cell, UNDECIDED, problem.conservative, "undecided", reason=f"undecided: {why}", marabou_queries=queries
        )
    return _Decision(task.cell, CONSERVATIVE, problem.conservative, label, pair, marabou_queries=queries)


def _find_witness(problem: _Problem, cell: int, token: int, hints: np.ndarray, budget: float, seed: int):
    """Two points of the cell, one deciding `token` and one deciding otherwise, in float64 and onnxruntime alike.

    Tries the hints first (most robust first), then falsification of the
    robust versions of "decision is token" and "decision is not token"
    (margins widened by a growing delta) inside the half-open cell.
    """
    lower, upper = problem.witness_box(cell)
    points = np.asarray(hints, dtype=np.float64).reshape(-1, problem.grid.n_inputs)
    points = points[np.all(np.isfinite(points), axis=1)]
    points = points[problem.grid.cell_of(points) == cell] if len(points) else points
    same = different = None
    if len(points):
        scores = problem.network.evaluate(points)
        decided = gated_decide(scores, problem.rule, problem.margin, problem.conservative)
        agree = problem.onnx_decisions(points) == decided
        order = np.argsort(-problem.robustness(scores))
        same = next((points[i] for i in order if agree[i] and decided[i] == token), None)
        different = next((points[i] for i in order if agree[i] and decided[i] != token), None)
    if same is not None and different is not None:
        return same, different
    scale = 1.0 + float(np.max(np.abs(problem.network.evaluate((lower + upper) / 2.0))))
    deadline = time.monotonic() + budget
    for step, delta in enumerate(ROBUST_STEPS):
        for wanted in ("same", "different"):
            if (same if wanted == "same" else different) is not None:
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            unsafe = problem.wins(token, delta * scale) if wanted == "same" else problem.loses(token, delta * scale)
            prop = Property(f"cell {cell} witness", lower, upper, unsafe)
            x = falsify(problem.network, prop, remaining / (2 * (len(ROBUST_STEPS) - step)), seed + 7919 * step)
            if x is None or problem.grid.cell_of(x) != cell:
                continue
            exact = int(problem.decisions(x[None])[0])
            if int(problem.onnx_decisions(x[None])[0]) != exact or (exact == token) != (wanted == "same"):
                continue
            if wanted == "same":
                same = x
            else:
                different = x
        if same is not None and different is not None:
            return same, different
    return None
