"""The cell half of `inspect --deep`: re-prove every exact cell against the model, re-validate every witness.

An artifact's table says, per cell, "exact with token t" or
"conservative". `inspect --deep` trusts neither the artifact nor the
distillation run that wrote it, so it asks the model again:

- every exact cell goes through the distillation's own machinery, with
  the artifact's token as the candidate: vectorised bound propagation
  with bisection (`_cell_bounds._bounds_phase`, in chunks on verify's
  worker pool), then, for the cells bounds leave open, `verify.check`
  (branch and bound whose open boxes get an exact Z3 query with the
  stable ReLUs fixed; Marabou, where installed, only hunts witnesses).
  The property is the one distillation proves (`_Problem.exact_property`:
  the closure of "the gated decision is not t" over the closed cell box
  is unreachable), so a cell passes only on a proof; a counterexample or
  a timeout makes it a `CellFailure` naming the cell, its bounds and
  the token;
- every witness pair the report's ``cells.jsonl`` claims for a
  conservative cell is re-validated: both points in the half-open cell,
  decisions that differ in numpy float64 and in onnxruntime alike
  (`_cell_problem._valid_pairs`, the distillation's check) and under the
  exact semantics (`verify.exact_outputs`: the network on rationals, the
  gate's margin read exactly). The file is read, never believed.

A conservative cell holds the conservative token, which the loader
checks and which is safe everywhere; its witness only shows that no
single token was provable there, so a cell without one (undecided or
held back by the rules at distillation) is counted, not failed.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from certfsm import LeafStatus, Refinement, ReportError
from certfsm.verify import check, exact_outputs

from ._cell_problem import _Decision, _Problem, _valid_pairs
from ._cell_workers import _BoundTask, _Outcome, _run_tasks, _work
from ._distill import _bound_tasks
from ._refine import _leaf_work, _LeafBounds, _LeafCheck, _proof_box
from ._table import EXACT, UNDECIDED, Table

LEAF_CHUNK = 1024
"""Exact leaves per bound-propagation task of `reprove_exact_leaves`."""

CELLS_FILE = "cells.jsonl"


@dataclass(frozen=True, eq=False)
class _CellTask:
    """One exact cell that bounds left open: prove `token` on it with `verify.check` within `timeout` seconds."""

    cell: int
    token: int
    timeout: float

    @property
    def label(self) -> str:
        """The cell, as a failed task's message names it."""
        return f"cell {self.cell}"


def _reprove(problem: _Problem, task) -> _Outcome:
    """A chunk of cells for bounds (the distillation's `_work`) or one cell for `verify.check` (auto, one job).

    A cell is EXACT only on `check`'s proof; otherwise UNDECIDED with the
    reason, which names the validated counterexample when there is one.
    """
    if isinstance(task, _BoundTask):
        return _work(problem, task)
    started = time.monotonic()
    result = check(
        problem.network,
        problem.exact_property(task.cell, task.token),
        engine="auto",
        timeout=task.timeout,
        jobs=1,
        seed=task.cell,
    )
    if result.is_proved:
        label = "branch and bound + z3" if "z3" in result.engine else "branch and bound"
        decision = _Decision(task.cell, EXACT, task.token, label)
    elif result.is_violated:
        x = np.asarray(result.counterexample, dtype=np.float64)
        decided = problem.outputs[int(problem.decisions(x[None])[0])]
        decision = _Decision(
            task.cell,
            UNDECIDED,
            task.token,
            result.engine,
            reason=(
                f"not re-proved: {result.engine} reaches the closure of another decision at {_point(x)}, validated "
                f"exactly, in float64 and in onnxruntime; the network decides {decided} there"
            ),
        )
    else:
        decision = _Decision(
            task.cell,
            UNDECIDED,
            task.token,
            result.engine,
            reason=f"not re-proved in {task.timeout:g} s: {result.engine}: {result.reason}",
        )
    return _Outcome("engines", [decision], [], time.monotonic() - started)


@dataclass(frozen=True)
class CellFailure:
    """A cell whose claim did not re-prove: its index, bounds, the token the artifact holds there, and why."""

    cell: int
    bounds: str
    token: str
    reason: str

    def describe(self) -> str:
        return f"cell {self.cell} ({self.bounds}), token {self.token}: {self.reason}"


def _failure(problem: _Problem, cell: int, token: int, reason: str) -> CellFailure:
    return CellFailure(cell, problem.grid.describe_cell(cell), problem.outputs[token], reason)


def reprove_exact_cells(
    problem: _Problem, table: Table, *, jobs: int, per_cell_timeout: float, progress=None
) -> tuple[Counter, list[CellFailure]]:
    """Re-prove each exact cell's token on the whole closed cell; (cells proved per engine, failures by cell).

    `progress(done, total, message)` after every batch of cells.
    """
    cells = np.flatnonzero(table.status == EXACT).astype(np.int64)
    tokens = table.proposal[cells]
    proved: Counter = Counter()
    failures: list[CellFailure] = []
    done = [0]

    def follow_up(outcome) -> list:
        return [_CellTask(cell, int(table.proposal[cell]), float(per_cell_timeout)) for cell in outcome.left_open]

    def on_outcome(outcome) -> None:
        for decision in outcome.decisions:
            if decision.status == EXACT and decision.token == int(table.proposal[decision.cell]):
                proved[decision.engine] += 1
                continue
            failures.append(_failure(problem, decision.cell, int(table.proposal[decision.cell]), decision.reason))
        done[0] += len(outcome.decisions)
        if progress is not None:
            progress(done[0], len(cells), "bound propagation" if outcome.kind == "bounds" else "branch and bound + z3")

    if progress is not None:
        progress(0, len(cells), "bound propagation")
    _run_tasks(problem, _bound_tasks(cells, tokens, jobs), follow_up, jobs, on_outcome, work=_reprove)
    if sum(proved.values()) + len(failures) != len(cells):
        raise AssertionError("internal error: an exact cell was neither re-proved nor failed")
    return proved, sorted(failures, key=lambda f: f.cell)


def reprove_exact_leaves(
    problem: _Problem, refinement: Refinement, *, jobs: int, per_cell_timeout: float, progress=None
) -> tuple[Counter, list[CellFailure]]:
    """Re-prove each exact leaf of a refined table on its whole closed box; (leaves proved per engine, failures).

    The refinement's own machinery (`_refine._leaf_work`): bound
    propagation with bisection on the leaves' closed boxes rounded
    outward, in chunks, then `verify.check` on the exact leaf box for what
    bounds leave open (`_refine._leaf_property`; ``per_cell_timeout`` seconds each, no work budget:
    re-proving is not bound to the distillation's). A leaf passes only on
    a proof; a failure names its cell, its place in the cell's tree, its
    exact box and the token.
    """
    exact = [
        (cell, place, box, leaf.token)
        for cell, tree in zip(refinement.cells, refinement.trees)
        for place, (leaf, box) in enumerate(zip(tree.leaves, tree.boxes))
        if leaf.status is LeafStatus.EXACT
    ]
    proved: Counter = Counter()
    failures: list[CellFailure] = []
    done = [0]

    def failure(id: int, reason: str) -> CellFailure:
        cell, place, box, token = exact[id]
        bounds = ", ".join(i.describe(name) for i, name in zip(box.intervals, problem.grid.names))
        return CellFailure(cell, f"leaf {place}: {bounds}", problem.outputs[token], reason)

    def follow_up(outcome) -> list:
        if outcome.kind != "bounds":
            return []
        return [
            _LeafCheck(id, exact[id][2], exact[id][3], float(per_cell_timeout), exact[id][0], None)
            for id, closed, _ in outcome.decisions
            if not closed
        ]

    def on_outcome(outcome) -> None:
        for answer in outcome.decisions:
            if outcome.kind == "bounds":
                proved["bounds"] += answer[1]
                continue
            id, verdict, found, engine, reason, _ = answer
            if verdict == "proved":
                proved[engine] += 1
            elif verdict == "violated" and found is not None:
                decided = problem.outputs[int(problem.decisions(found[None])[0])]
                failures.append(
                    failure(id, f"not re-proved: {reason}; at {_point(found)} the network decides {decided}")
                )
            else:
                failures.append(failure(id, f"not re-proved in {per_cell_timeout:g} s: {reason}"))
        done[0] += sum(1 for answer in outcome.decisions if outcome.kind != "bounds" or answer[1])
        if progress is not None:
            progress(done[0], len(exact), "leaves: " + ("bound propagation" if outcome.kind == "bounds" else "z3"))

    boxes = [_proof_box(box) for _, _, box, _ in exact]
    tasks = [
        _LeafBounds(
            np.arange(start, min(start + LEAF_CHUNK, len(exact))),
            np.array([lower for lower, _ in boxes[start : start + LEAF_CHUNK]], dtype=np.float64),
            np.array([upper for _, upper in boxes[start : start + LEAF_CHUNK]], dtype=np.float64),
            np.array([token for *_, token in exact[start : start + LEAF_CHUNK]], dtype=np.int64),
        )
        for start in range(0, len(exact), LEAF_CHUNK)
    ]
    _run_tasks(problem, tasks, follow_up, jobs, on_outcome, work=_leaf_work)
    if sum(proved.values()) + len(failures) != len(exact):
        raise AssertionError("internal error: an exact leaf was neither re-proved nor failed")
    return proved, sorted(failures, key=lambda f: (f.cell, f.bounds))


def _point(x) -> str:
    """The point as float64 reprs, which read back to the very floats that were checked."""
    return "(" + ", ".join(repr(float(v)) for v in np.asarray(x).reshape(-1)) + ")"


@dataclass(frozen=True)
class WitnessCheck:
    """What the report's witness pairs came to: pairs claimed and validated, conservative cells without one, and
    the failures (pairs that do not hold, records that are not this artifact's)."""

    claimed: int
    validated: int
    without_witness: int
    failures: tuple[CellFailure, ...]


def revalidate_witnesses(problem: _Problem, table: Table, folder) -> WitnessCheck:
    """Re-validate every witness pair of ``folder/cells.jsonl`` against the model; the records must match the table.

    Raises ReportError when the file is missing or not the JSON lines
    certfsm distill writes (bad input, not a failed proof).
    """
    path = Path(folder) / CELLS_FILE
    records = _read_records(path, table.n_cells)
    failures: list[CellFailure] = []
    cells, first, second = [], [], []
    without = 0
    for cell, record in enumerate(records):
        token = int(table.proposal[cell])
        status = "exact" if table.status[cell] == EXACT else "conservative"
        if record.get("status") != status or record.get("token") != problem.outputs[token]:
            failures.append(
                _failure(
                    problem,
                    cell,
                    token,
                    f"{path} line {cell + 1} says {record.get('status')} "
                    f"{record.get('token')}, but the artifact holds {status} "
                    f"{problem.outputs[token]}: the report is not this artifact's",
                )
            )
            continue
        if status == "exact":
            continue
        pair = record.get("witness")
        if pair is None:
            without += 1
            continue
        try:
            a, b = (np.asarray(x, dtype=np.float64).reshape(problem.grid.n_inputs) for x in pair)
        except (TypeError, ValueError):
            failures.append(
                _failure(
                    problem,
                    cell,
                    token,
                    f"{path} line {cell + 1}: the witness is not two points of {problem.grid.n_inputs} numbers",
                )
            )
            continue
        cells.append(cell)
        first.append(a)
        second.append(b)
    if cells:
        index = np.array(cells, dtype=np.int64)
        valid = _valid_pairs(problem, index, np.array(first), np.array(second))
        for k, cell in enumerate(cells):
            reason = (
                _exact_problem(problem, first[k], second[k])
                if valid[k]
                else (
                    "the witness pair does not hold: both points must lie in the half-open cell and decide differently "
                    "in float64 and in onnxruntime alike"
                )
            )
            if reason:
                failures.append(_failure(problem, cell, int(table.proposal[cell]), f"{path} line {cell + 1}: {reason}"))
    failed = {f.cell for f in failures}
    return WitnessCheck(
        len(cells), sum(cell not in failed for cell in cells), without, tuple(sorted(failures, key=lambda f: f.cell))
    )


def _exact_problem(problem: _Problem, a: np.ndarray, b: np.ndarray) -> str:
    """Why the pair fails under the exact semantics ("" when it holds): exact decisions differ and equal float64's."""
    exact = [
        exact_decision(
            exact_outputs(problem.network, x),
            problem.rule,
            (problem.margin_low, problem.margin_high),
            problem.conservative,
        )
        for x in (a, b)
    ]
    floats = problem.decisions(np.array([a, b]))
    if None in exact:
        return (
            "a point's exact winning margin lies between the bounds of the gate's irrational margin, so its "
            "decision is not known exactly"
        )
    if exact[0] == exact[1]:
        return f"both points decide {problem.outputs[exact[0]]} in exact arithmetic, so they witness nothing"
    if list(floats) != exact:
        return (
            f"the exact decisions ({problem.outputs[exact[0]]}, {problem.outputs[exact[1]]}) differ from float64's "
            f"({problem.outputs[floats[0]]}, {problem.outputs[floats[1]]})"
        )
    return ""


def exact_decision(outputs, rule: str, margin, conservative: int) -> int | None:
    """`gated_decide` on exact rational scores: the chosen index (ties to the lowest) if it wins by >= margin.

    `margin` is exact, or a pair (lower, upper) of exact bounds of an
    irrational margin; a win between the two bounds is not known to pass
    or fail the gate, and gives None.
    """
    low, high = (Fraction(margin), Fraction(margin)) if not isinstance(margin, tuple) else margin
    scores = [Fraction(v) for v in outputs]
    if rule == "argmin":
        scores = [-v for v in scores]
    chosen = max(range(len(scores)), key=lambda k: (scores[k], -k))
    runner_up = max(v for k, v in enumerate(scores) if k != chosen)
    win = scores[chosen] - runner_up
    if win >= high:
        return chosen
    return conservative if win < low else None


def _read_records(path: Path, n_cells: int) -> list[dict]:
    fix = "give the folder certfsm distill wrote with report= for this artifact"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise ReportError(f"{path}: cannot read the report's cell records ({error.strerror or error}); {fix}") from None
    if len(lines) != n_cells:
        raise ReportError(f"{path}: {len(lines)} cell records, but the artifact has {n_cells} cells; {fix}")
    records = []
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ReportError(f"{path}: line {number} is not JSON ({error.msg}); {fix}") from None
        if not isinstance(record, dict) or record.get("cell") != number - 1:
            raise ReportError(f"{path}: line {number} is not the record of cell {number - 1}; {fix}")
        records.append(record)
    return records
