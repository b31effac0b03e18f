"""Phases 2 and 3 of `distill` as tasks, run inline or in a pool of worker processes.

A task is a chunk of cells for bound propagation (`_BoundTask`, phase 2)
or one cell for the engines (`_cell_engines._Task`, phase 3); `_work` runs either and
returns an `_Outcome`. `_run_tasks` runs them inline for one job, else in
`jobs` worker processes, and turns each chunk's open cells into cell
tasks as soon as the chunk is done.

Invariant: workers only compute; every outcome comes back to the calling
process, which alone writes the checkpoint and calls `progress`
(`on_outcome`). No worker starts a pool of its own.
"""

from __future__ import annotations

import multiprocessing
import signal
import time
from dataclasses import dataclass

import numpy as np

from certfsm.verify import limit_blas_threads

from ._cell_bounds import _bounds_phase
from ._cell_engines import _decide_cell
from ._cell_problem import _Decision, _Problem


@dataclass(frozen=True, eq=False)
class _BoundTask:
    """A chunk of cells with one sampled token each, for `_bounds_phase`."""

    cells: np.ndarray
    candidates: np.ndarray


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


_WORKER: tuple = ()


def _init_worker(problem: _Problem) -> None:
    global _WORKER
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _WORKER = (problem,)
    limit_blas_threads()


def _work_in_worker(task) -> _Outcome:
    return _work(_WORKER[0], task)


def _run_tasks(problem: _Problem, tasks: list, follow_up, jobs: int, on_outcome) -> None:
    """Run `tasks` and the tasks `follow_up(outcome)` returns, inline (one job) or in `jobs` worker processes.

    A `multiprocessing.Pool` rather than a ProcessPoolExecutor, because
    `terminate` ends running tasks at once (with the solver children
    they fork) when the caller stops the run, e.g. from `progress`.
    Workers are forked where the platform can (they inherit the network),
    else spawned (the network and grid are pickled); each runs
    `verify.check` with jobs=1, so no worker starts a pool of its own.
    """
    if jobs <= 1:
        queue = list(reversed(tasks))
        while queue:
            outcome = _work(problem, queue.pop())
            queue.extend(reversed(follow_up(outcome)))
            on_outcome(outcome)
        return
    import queue as queues

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    pool = multiprocessing.get_context(method).Pool(jobs, initializer=_init_worker, initargs=(problem,))
    done: queues.Queue = queues.Queue()
    running = 0

    def submit(task) -> None:
        nonlocal running
        running += 1
        pool.apply_async(_work_in_worker, (task,), callback=lambda outcome: done.put(("ok", outcome)),
                         error_callback=lambda error: done.put(("error", error)))

    try:
        for task in tasks:
            submit(task)
        while running:
            kind, answer = done.get()
            running -= 1
            if kind == "error":
                raise answer
            for task in follow_up(answer):
                submit(task)
            on_outcome(answer)
    finally:
        pool.terminate()
        pool.join()
