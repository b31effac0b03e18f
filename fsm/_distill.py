"""Certified distillation: decide every grid cell as EXACT (one token proved everywhere) or CONSERVATIVE.

Semantics (docs/semantics.md, "Certified distillation"). The gated
decision at x is ``gated_decide(scores, rule, margin, conservative)``
(margin 0 when the spec has no gate). A cell is EXACT with token t only
when the decision is proved to be t on the whole closed cell box
(proving over the closure is sound for the half-open cell); the table
then holds t. Every other cell is CONSERVATIVE and holds the
conservative token c: with a witness (two inputs of the half-open cell
whose decisions differ, in numpy float64 and in onnxruntime alike), or,
when neither a proof nor a witness was found in the budget, "undecided"
with the reason (safe, since it holds c, but counted apart). The table
never holds a token that was not proved. What exactly is proved for a
cell, and the unsafe sets the engines get, are in `_cell_problem`.

Work, cheapest first, one module a phase:

1. sampling (`_cell_sampling`): every cell's centre, corners and random
   points, vectorised; a cell whose samples disagree gets its witness at
   once when its best pair re-validates in onnxruntime.
2. bound propagation (`_cell_bounds`) over all remaining cells at once,
   grouped by their sampled token, bisecting what a whole cell cannot
   close; EXACT when the closed boxes cover the cell exactly.
3. `verify.check` per remaining cell (`_cell_engines`): proved -> EXACT;
   violated -> CONSERVATIVE with a validated witness; unknown ->
   undecided. Cells whose samples disagreed but whose pair did not
   re-validate only look for a witness.

Reproducible (docs/semantics.md, "Reproducible verdicts"): which cells
are EXACT, with which token and engine, depends only on the spec, the
model, the seed and the work counts, never on the clock: phase 1 and 2
count samples, splits and open boxes, and phase 3 gives each cell a
`verify.WorkBudget` (`CELL_BUDGET`: boxes, Z3 queries, Z3's resource
count). The budget is the only limit by default: every cell ends once
its boxes or its Z3 queries (each under Z3's resource count) are spent,
on a quiet or a loaded machine alike, so a default run never stops for
the clock. `per_cell_timeout`, when given, is an extra guard against a
runaway cell: when it fires before the budget is spent, the verdict
would depend on the machine, so `distill` stops with an EngineError
naming the cell and the checkpoint to resume from, instead of writing a
different table. (What time still decides is only which conservative
cells carry a witness and which a reason, both holding the conservative
token, and the words of `progress`.)

Phases 2 and 3 run as tasks (chunks of cells, single cells) on verify's
one worker pool (`verify.pool_for`): `jobs` worker processes, or inline
for one job (`_cell_workers`); a chunk's open cells become cell tasks as
soon as the chunk is done. Only this process writes the checkpoint and
calls `progress` (`_distill_progress`: phase, hard cells left, exact
share so far, an estimate of the time left).

Resume (`_checkpoint`): each decided cell is appended to a JSON-lines
file as soon as its batch is done; a rerun keeps only the conservative
cells whose witness still re-validates and decides every other cell
again: the checkpoint saves searches, never proofs.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from certfsm import MAX_CELLS, EngineError, LeafStatus, Network, Refinement, SpecError, frozen_array
from certfsm.verify import WorkBudget, single_threaded_blas

from ._cell_engines import _Task
from ._cell_problem import ENGINES, _Decision, _Problem, _problem
from ._cell_sampling import _sampling_phase
from ._cell_workers import _BoundTask, _Outcome, _run_tasks
from ._checkpoint import _Checkpoint, _fingerprints, _trusted_part
from ._distill_progress import PHASES, _Tally
from ._refine import refine
from ._table import CONSERVATIVE, EXACT, UNDECIDED, Table, allowed_masks


CELL_BUDGET = WorkBudget(boxes=20_000, engine_queries=8, z3_rlimit=20_000_000)
"""Phase 3's work per cell: about 10 s for an ACAS Xu cell on this project's 2-core machine (branch and bound
bounds a few thousand boxes a second; 20 M of Z3's resource count is about 2 s)."""
UNGUARDED_SECONDS = 7 * 24 * 3600.0
"""What `verify.check` gets as its timeout when `per_cell_timeout` is None: `check` needs a finite number, and
`CELL_BUDGET` ends every cell long before (a random 2x32 controller's hardest cells take minutes on 2 cores)."""

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True, eq=False)
class Distillation:
    """The certified table and how each cell got its status.

    Invariants: `table` is complete (no UNDECIDED status: an undecided
    cell is CONSERVATIVE and listed in `reasons`); every EXACT cell's
    token was proved on the whole cell; every CONSERVATIVE cell holds the
    conservative token and has either a witness pair (two inputs of the
    cell with different gated decisions in float64 and onnxruntime) or a
    reason, or is in `held_back`: the network's decision was proved for
    the whole cell but is a token the legality rules forbid there (or an
    illegal token), so the table holds the conservative token instead and
    the cell counts as conservative; `held_back` maps such cells to the
    network's token. `engine_of_cell` holds one of `ENGINES` per cell
    (read-only).
    """

    table: Table
    engine_of_cell: np.ndarray
    witnesses: dict[int, tuple[np.ndarray, np.ndarray]]
    reasons: dict[int, str]
    held_back: dict[int, int]
    stats: dict
    seconds: float
    refinement: Refinement | None = None
    """The box trees of the refined cells (only with the spec's ``refine``; `_refine`); their flat entries stay
    conservative."""
    leaf_records: tuple[dict, ...] = ()
    leaf_proofs: dict = field(default_factory=dict)
    """Per exact leaf of `refinement` decided in this run, (cell, leaf) -> (property proved, recorded proof), as
    `proofs` holds them for cells."""
    """One record per leaf of `refinement`: cell, leaf, exact box, status, token, engine, witness or reason."""
    proofs: dict = field(default_factory=dict)
    """Per EXACT cell decided in this run (not resumed from a checkpoint): (property proved, recorded proof), for
    the report's proof certificate (`_Decision.proof`)."""


def distill(
    spec,
    network: Network,
    *,
    jobs: int | None = None,
    per_cell_timeout: float | None = None,
    checkpoint=None,
    progress: Progress | None = None,
    seed: int = 0,
    budget: WorkBudget = CELL_BUDGET,
    restart_other_checkpoint: bool = False,
) -> Distillation:
    """Decide every cell of the spec's grid (see the module docstring) and return the certified table.

    `jobs` worker processes for phases 2 and 3 (default: the number of
    CPUs); `budget` the work `verify.check` may spend on one cell, the
    only limit unless `per_cell_timeout` sets a wall-clock guard around it
    (see the module docstring: when it fires, EngineError, and the
    checkpoint keeps what was decided before);
    `checkpoint` a JSON-lines file to resume from and append to (one of
    another spec, model or grid is refused, or started afresh with
    `restart_other_checkpoint`);
    `progress(done_cells, total_cells, message)` after every batch, the
    message as `_distill_progress` writes it (an exception raised there
    stops the run; the checkpoint keeps what was decided); `seed` fixes
    the samples and the falsifiers.

    Stats: counts by status and by engine (`ENGINES`), exact share by
    count and by volume, bounds shares, Marabou queries, seconds per phase
    (wall clock for sampling and for phases 2-3 together, worker seconds
    for each of 2 and 3), cells per second, the budget. Raises SpecError
    for bad arguments, a network that does not fit the spec or a
    checkpoint that belongs to another spec, model or grid; ReportError
    when the checkpoint cannot be written; EngineError when the guard
    fires.
    """
    started = time.monotonic()
    if per_cell_timeout is not None and not (
        isinstance(per_cell_timeout, (int, float))
        and not isinstance(per_cell_timeout, bool)
        and math.isfinite(per_cell_timeout)
        and per_cell_timeout > 0
    ):
        raise SpecError(
            f"per_cell_timeout={per_cell_timeout!r} is not a positive number of seconds; give e.g. "
            "per_cell_timeout=600, or None to let the work budget alone end each cell"
        )
    guard = UNGUARDED_SECONDS if per_cell_timeout is None else float(per_cell_timeout)
    if not isinstance(budget, WorkBudget):
        raise SpecError(f"budget={budget!r} is not a certfsm.verify.WorkBudget; give e.g. budget=WorkBudget()")
    if jobs is not None and not (isinstance(jobs, int) and not isinstance(jobs, bool) and jobs >= 1):
        raise SpecError(f"jobs={jobs!r} is not a positive number of worker processes; give e.g. jobs=2 or None")
    jobs = jobs or os.cpu_count() or 1
    problem = _problem(spec, network)
    total = problem.grid.n_cells
    if total > MAX_CELLS:
        raise SpecError(
            f"{spec.path}: the grid has {total:,} cells ({' x '.join(map(str, problem.grid.shape))}); "
            f"a table holds at most {MAX_CELLS:,}; give fewer bins or edges"
        )
    store = None
    if checkpoint is not None:
        store = _Checkpoint(checkpoint, _fingerprints(spec, problem), problem, restart_other=restart_other_checkpoint)
    recorded = store.load() if store is not None else {}
    decided = _trusted_part(problem, recorded)
    resumed = len(decided)
    reproved = sum(d.status == EXACT for d in recorded.values())
    seconds: dict[str, float] = {"bounds_in_workers": 0.0, "engines_in_workers": 0.0}
    engine_tasks = [0]
    tally = _Tally(total, jobs)
    tally.count(list(decided.values()), EXACT)

    def on_batch(batch: list[_Decision]) -> None:
        for item in batch:
            if item.cell in decided:
                raise AssertionError(f"internal error: cell {item.cell} was decided twice; refusing to go on")
            if item.wall_clock_guard:
                raise EngineError(_guard_fired(item.cell, guard, budget, store, len(decided)))
        if store is not None:
            store.append(batch)
        for item in batch:
            decided[item.cell] = item
        tally.count(batch, EXACT)
        if progress is not None:
            progress(len(decided), total, tally.message())

    with single_threaded_blas():
        clock = time.monotonic()
        todo = np.array(sorted(set(range(total)) - set(decided)), dtype=np.int64)
        sampled = _sampling_phase(problem, todo, seed, on_batch)
        seconds["sampling"] = time.monotonic() - clock
        clock = time.monotonic()
        unanimous = sampled["candidate"] >= 0
        position = {cell: k for k, cell in enumerate(todo.tolist())}
        tasks: list = _bound_tasks(todo[unanimous], sampled["candidate"][unanimous], jobs)
        for k in np.flatnonzero(~unanimous):
            cell = int(todo[k])
            if cell not in decided:
                hints = np.array([sampled["hint"][k], sampled["other"][k]])
                candidate = int(problem.decisions(hints[:1])[0])
                tasks.append(_Task(cell, "witness", candidate, hints, guard, seed + cell))
        tally.chunks = sum(isinstance(task, _BoundTask) for task in tasks)
        tally.hard = len(tasks) - tally.chunks
        tally.phase = PHASES[1] if tally.chunks else PHASES[2]

        def follow_up(outcome: _Outcome) -> list:
            return [
                _Task(
                    cell,
                    "prove",
                    int(sampled["candidate"][position[cell]]),
                    sampled["hint"][position[cell]][None],
                    guard,
                    seed + cell,
                    budget,
                )
                for cell in outcome.left_open
            ]

        def on_outcome(outcome: _Outcome) -> None:
            seconds[f"{outcome.kind}_in_workers"] += outcome.seconds
            engine_tasks[0] += outcome.kind == "engines"
            if outcome.kind == "bounds":
                tally.bounded(outcome.seconds, len(outcome.left_open))
            else:
                tally.engine_done(outcome.seconds)
            on_batch(outcome.decisions)

        _run_tasks(problem, tasks, follow_up, jobs, on_outcome)
        seconds["bounds_and_engines"] = time.monotonic() - clock
    flat = _result(
        spec,
        problem,
        decided,
        resumed,
        reproved,
        engine_tasks[0],
        seconds,
        time.monotonic() - started,
        jobs,
        per_cell_timeout,
        seed,
        budget,
    )
    if spec.refine is None:
        return flat
    with single_threaded_blas():
        return _refined(spec, problem, flat, jobs, seed, budget, guard, progress, started)


def _refined(spec, problem: _Problem, flat: Distillation, jobs, seed, budget, guard, progress, started) -> Distillation:
    """`flat` with its cells that are not exact refined (`_refine`), the stats saying what refinement did."""
    table, total = flat.table, flat.table.n_cells
    open_cells = [int(c) for c in np.flatnonzero(table.status != EXACT)]

    def tell(message: str) -> None:
        if progress is not None:
            progress(total, total, message)

    result = refine(
        problem,
        spec,
        spec.refine,
        open_cells,
        dict(flat.witnesses),
        jobs=jobs,
        seed=seed,
        work=budget,
        guard=guard,
        exact_before=float(flat.stats["exact_volume_share"]),
        progress=tell,
    )
    lower, upper = table.grid.all_cell_bounds()
    volume = np.prod(upper - lower, axis=1)
    volume = volume / volume.sum()
    exact = table.status == EXACT
    before = {name: float(volume[exact & (table.proposal == t)].sum()) for t, name in enumerate(problem.outputs)}
    after = {name: before[name] + result.stats["exact_volume_by_token"][name] for name in problem.outputs}
    stats = dict(flat.stats)
    elapsed = time.monotonic() - started
    stats["refinement"] = {
        **result.stats,
        "exact_volume_share_before": float(sum(before.values())),
        "exact_volume_by_token_before": before,
        "exact_volume_share": float(sum(after.values())),
        "exact_volume_by_token": after,
    }
    stats["seconds"] = {**stats["seconds"], "refinement": result.stats["seconds"], "total": round(elapsed, 3)}
    return replace(
        flat,
        stats=stats,
        seconds=elapsed,
        refinement=result.refinement,
        leaf_records=result.records,
        leaf_proofs=result.proofs,
    )


def _guard_fired(cell: int, guard: float, budget: WorkBudget, store, decided: int) -> str:
    """The one line when the wall-clock guard ends a cell: which cell, why it stops, what is kept, how to go on."""
    kept = (
        f"the {decided:,} cells decided so far are kept in the checkpoint {store.path} (running the same "
        "distill again resumes from it)"
        if store is not None
        else "nothing was kept (give checkpoint= to keep the cells decided)"
    )
    return (
        f"cell {cell}: the wall-clock guard of {guard:g} s per cell fired before the work budget "
        f"({budget.boxes} boxes, {budget.engine_queries} z3 queries, z3 rlimit {budget.z3_rlimit}) was spent, "
        f"so this cell's verdict would depend on the machine's speed; no artifact was written; {kept}; "
        "give a larger per_cell_timeout= or leave it out (the work budget alone then ends each cell), or re-run "
        "on a less loaded machine"
    )


def _bound_tasks(cells: np.ndarray, candidates: np.ndarray, jobs: int) -> list[_BoundTask]:
    """Chunks of cells for bound propagation: large enough to vectorise, small enough to share out."""
    if not len(cells):
        return []
    size = int(np.clip(-(-len(cells) // (4 * jobs)), 32, 1024))
    return [
        _BoundTask(cells[start : start + size], candidates[start : start + size])
        for start in range(0, len(cells), size)
    ]


def _result(
    spec,
    problem: _Problem,
    decided: dict[int, _Decision],
    resumed: int,
    reproved: int,
    engine_tasks: int,
    seconds: dict,
    elapsed: float,
    jobs: int,
    per_cell_timeout: float | None,
    seed: int,
    budget: WorkBudget,
) -> Distillation:
    grid, total = problem.grid, problem.grid.n_cells
    missing = set(range(total)) - set(decided)
    if missing:
        raise AssertionError(f"internal error: {len(missing)} cells were never decided (first: {min(missing)})")
    cells = np.arange(total)
    ordered = [decided[c] for c in cells]
    status = np.array([d.status if d.status != UNDECIDED else CONSERVATIVE for d in ordered], dtype=np.int8)
    proposal = np.array([d.token if d.status == EXACT else problem.conservative for d in ordered], dtype=np.int64)
    held = (status == EXACT) & ~allowed_masks(spec, grid)[cells, proposal]
    held_back = {int(c): int(proposal[c]) for c in np.flatnonzero(held)}
    status[held], proposal[held] = CONSERVATIVE, problem.conservative
    table = Table.undecided(spec, grid).with_decisions(cells, proposal, status)
    engines = frozen_array([d.engine for d in ordered])
    witnesses = {
        d.cell: tuple(frozen_array(x, np.float64) for x in d.witness) for d in ordered if d.witness is not None
    }
    reasons = {d.cell: d.reason for d in ordered if d.status == UNDECIDED}
    lower, upper = grid.all_cell_bounds()
    volume = np.prod(upper - lower, axis=1)
    volume = volume / volume.sum()
    exact = status == EXACT
    by_engine = Counter(engines.tolist())
    without_marabou = sum(by_engine[e] for e in ("sampling", "bounds", "check", "falsify"))
    stats = {
        "cells": total,
        "exact": int(exact.sum()),
        "conservative_with_witness": len(witnesses),
        "undecided": len(reasons),
        "exact_share": float(exact.mean()),
        "exact_volume_share": float(volume[exact].sum()),
        "by_engine": {e: by_engine[e] for e in ENGINES if by_engine[e]},
        "exact_by_token": {
            problem.outputs[t]: int(np.count_nonzero(exact & (proposal == t))) for t in range(problem.n_outputs)
        },
        "bounds_share": by_engine["bounds"] / total,
        "bounds_share_of_exact": (
            int(np.count_nonzero(exact & (engines == "bounds"))) / int(exact.sum()) if exact.any() else 0.0
        ),
        "decided_without_marabou_share": without_marabou / total,
        "marabou_queries": sum(d.marabou_queries for d in ordered),
        "engine_tasks": engine_tasks,
        "held_back_by_rules": len(held_back),
        "held_back_by_token": {problem.outputs[t]: n for t, n in sorted(Counter(held_back.values()).items())},
        "resumed_cells": resumed,
        "reproved_checkpoint_cells": reproved,
        "seconds": {**{k: round(v, 3) for k, v in seconds.items()}, "total": round(elapsed, 3)},
        "cells_per_second": (total - resumed) / elapsed if elapsed > 0 else float("inf"),
        "jobs": jobs,
        "per_cell_timeout": per_cell_timeout,
        "work_budget": budget.to_json(),
        "seed": seed,
    }
    proofs = {d.cell: d.proof for d in ordered if d.proof is not None and status[d.cell] == EXACT}
    return Distillation(table, engines, witnesses, reasons, held_back, stats, elapsed, proofs=proofs)


def sampled_cross_check(
    distillation: Distillation,
    spec,
    network: Network,
    n: int = 100_000,
    seed: int = 0,
    *,
    check_onnxruntime: bool = False,
) -> dict:
    """`n` uniform random inputs over the envelope: on EXACT cells the table must equal the gated decision.

    Returns counts: samples, on_exact, mismatches (float64; must be 0),
    on_conservative and how many of those the network also decides as
    the conservative token, and the first few mismatching cells. With
    `check_onnxruntime` the exact-cell samples are also decided by
    onnxruntime (float32), reported as onnxruntime_mismatches.
    """
    problem = _problem(spec, network)
    table = distillation.table
    if table.grid != problem.grid:
        raise SpecError(
            f"the distillation's grid (shape {table.grid.shape}) is not the grid of spec {spec.name!r} "
            f"(shape {problem.grid.shape}); cross-check against the spec it was distilled from"
        )
    rng = np.random.default_rng(seed)
    x = rng.uniform(*problem.grid.float_envelope, size=(n, problem.grid.n_inputs))
    cells = problem.grid.cell_of(x)
    decisions = problem.decisions(x)
    on_exact = table.status[cells] == EXACT
    wrong = on_exact & (table.proposal[cells] != decisions)
    conservative = ~on_exact
    report = {
        "samples": n,
        "seed": seed,
        "on_exact": int(on_exact.sum()),
        "mismatches": int(wrong.sum()),
        "mismatch_cells": sorted({int(c) for c in cells[wrong]})[:10],
        "on_conservative": int(conservative.sum()),
        "conservative_agreements": int(np.count_nonzero(conservative & (decisions == problem.conservative))),
    }
    expected = table.proposal[cells]
    refinement = distillation.refinement
    if refinement is not None:  # a point of a refined cell is checked against its leaf when the leaf is exact
        for k in np.flatnonzero(np.isin(cells, refinement.cells)):
            tree = refinement.tree_of(int(cells[k]))
            leaf = tree.leaves[tree.leaf_index([float(v) for v in x[k]])]
            if leaf.status is LeafStatus.EXACT:
                on_exact[k], expected[k] = True, leaf.token
        wrong = on_exact & (expected != decisions)
        report["on_exact_leaves"] = int(np.count_nonzero(on_exact & np.isin(cells, refinement.cells)))
        report["mismatches"] = int(wrong.sum())
        report["mismatch_cells"] = sorted({int(c) for c in cells[wrong]})[:10]
    if check_onnxruntime:
        exact_points = np.flatnonzero(on_exact)
        deployed = problem.onnx_decisions(x[exact_points]) if exact_points.size else np.zeros(0, dtype=np.int64)
        report["onnxruntime_mismatches"] = int(np.count_nonzero(deployed != expected[exact_points]))
    return report
