"""Phases 2 and 3 of `distill` as tasks, run inline or in a pool of worker processes.

A task is a chunk of cells for bound propagation (`_BoundTask`, phase 2)
or one cell for the engines (`_cell_engines._Task`, phase 3); `_work` runs either and
returns an `_Outcome`. `_run_tasks` runs them on verify's one worker pool
(inline for one job, else in `jobs` worker processes) and turns each
chunk's open cells into cell tasks as soon as the chunk is done.

Invariant: workers only compute; every outcome comes back to the calling
process, which alone writes the checkpoint and calls `progress`
(`on_outcome`). No worker starts a pool of its own.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from certfsm.verify import pool_for

from ._cell_bounds import _bounds_phase
from ._cell_engines import _decide_cell
from ._cell_problem import _Decision, _Problem


@dataclass(frozen=True, eq=False)
class _BoundTask:
    """A chunk of cells with one sampled token each, for `_bounds_phase`."""

    cells: np.ndarray
    candidates: np.ndarray

    @property
    def label(self) -> str:
        """The chunk's cells, as a failed task's message names them."""
        return _cells_label("cells", self.cells)


@dataclass(frozen=True, eq=False)
class _Outcome:
    """What one task decided, the cells it left for the engines (bound tasks only) and its seconds."""

    kind: str
    decisions: list
    left_open: list
    seconds: float


def _work(problem: _Problem, task) -> _Outcome:
    """Run one task, a `_BoundTask` (phase 2) or a `_cell_engines._Task` (phase 3), and time it."""
    started = time.monotonic()
    if isinstance(task, _BoundTask):
        decisions: list[_Decision] = []
        left_open = _bounds_phase(problem, task.cells, task.candidates, decisions.extend)
        return _Outcome("bounds", decisions, left_open, time.monotonic() - started)
    return _Outcome("engines", [_decide_cell(problem, task)], [], time.monotonic() - started)


def _cells_label(noun: str, ids: np.ndarray) -> str:
    """The first and last of a chunk's `ids` and how many: enough to find the chunk again."""
    if len(ids) == 1:
        return f"{noun[:-1]} {int(ids[0])}"
    return f"{noun} {int(ids[0])}..{int(ids[-1])} ({len(ids)})"


def _kind(task) -> str:
    return "bounds" if isinstance(task, _BoundTask) else "engines"


def _run_tasks(problem: _Problem, tasks: list, follow_up, jobs: int, on_outcome, work=None) -> None:
    """Run `tasks` and the tasks `follow_up(outcome)` returns, inline (one job) or in `jobs` worker processes.

    On `verify.pool_for`: killable (the caller stops the run, e.g. from
    `progress`, and running tasks end at once with their solver
    children), bounded, forked where the platform can (workers inherit the
    network), else spawned (the network and grid are pickled); each task
    runs `verify.check` with jobs=1, so no worker starts a pool of its own.
    Tasks run in order; inline, a task's follow-ups run next, in a pool
    they queue behind the tasks already waiting. `work(problem, task)`
    runs one task (`_work`, looked up when called, for distillation;
    `inspect --deep` brings its own for cells, as a module-level function
    so workers can pickle it).
    """
    pool = pool_for(jobs, work or _work, problem, name="distillation", spawn=True, backlog=2)
    waiting = deque(tasks)
    try:
        while waiting or not pool.idle():
            while waiting and pool.has_room():
                task = waiting.popleft()
                pool.submit(_kind(task), task)
            _, _, outcome = pool.next()
            more = follow_up(outcome)
            if pool.jobs == 1:
                waiting.extendleft(reversed(more))
            else:
                waiting.extend(more)
            on_outcome(outcome)
    finally:
        pool.close()
