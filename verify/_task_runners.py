"""Where the tasks of `_check`'s branch and bound run: inline, or in forked worker processes.

A task is a tuple whose first item names its kind; `run_task` returns:

- ``("search", boxes, seconds, depth_limit, attack, engine_unstable)``:
  the `_split.Outcome` of a stretch of branch and bound on `boxes`
  (`attack`: try the attack points of `_split` too; boxes with at most
  `engine_unstable` unstable ReLUs go to the box engine at once);
- ``("attack", seed, seconds, region)``: ``(candidate or None, seconds
  taken)`` of a falsification run, on the whole box (`region` None) or
  aimed at open boxes (a `_falsify.Region`);
- ``("engine", box, seconds)``: the `Result` of `_box_engine.decide_box`
  on the one-box `box`, restricted to the disjuncts still open on it
  (proved only by an exact Z3 UNSAT).

A runner (`InlineRunner`, `PoolRunner`) takes tasks with `submit` and
hands back ``(kind, task, answer)`` messages with `next`. Workers only
compute: every answer comes back to the calling process, which alone
decides. `PoolRunner.close` terminates the workers, and the solver
children they forked die with them (`_isolation`).
"""

from __future__ import annotations

import multiprocessing
import queue
import signal
import time
from collections import Counter

from certfsm._errors import EngineError

from . import _falsify, _split
from ._box_engine import decide_box

_WORKER: tuple = ()


def runner_for(jobs, network, prop, objectives, complete):
    """Forked workers when there are several jobs and the platform can fork, else inline."""
    if jobs > 1 and "fork" in multiprocessing.get_all_start_methods():
        return PoolRunner(jobs, network, prop, objectives, complete)
    return InlineRunner(network, prop, objectives, complete)


def run_task(task, context: tuple = ()):
    """Body of one task, in a worker process (context from `_init_worker`) or inline (context given)."""
    network, prop, objectives, complete = context or _WORKER
    if task[0] == "search":
        _, boxes, seconds, depth_limit, attack, engine_unstable = task
        return _split.search(
            network, prop, objectives, boxes, time.monotonic() + seconds,
            engine_depth=depth_limit, attack=attack, engine_unstable=engine_unstable,
        )
    if task[0] == "attack":
        _, seed, seconds, region = task
        begun = time.monotonic()
        return _falsify.falsify(network, prop, seconds, seed, region), time.monotonic() - begun
    _, box, seconds = task
    still_open = tuple(conjunction for k, conjunction in enumerate(prop.unsafe) if box.open[0, k])
    return decide_box(network, prop.restricted(box.lower[0], box.upper[0], still_open), box.hidden[0], seconds)


def _timed_task(task):
    """`run_task` in a worker, with the seconds it took there (what `PoolRunner.busy_seconds` adds up)."""
    begun, cpu = time.monotonic(), time.process_time()
    answer = run_task(task)
    return answer, time.monotonic() - begun, time.process_time() - cpu


def _init_worker(network, prop, objectives, complete) -> None:
    global _WORKER
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _WORKER = (network, prop, objectives, complete)
    _split.limit_blas_threads()


class InlineRunner:
    """Runs each task at once in this process (jobs=1)."""

    jobs = 1

    def __init__(self, network, prop, objectives, complete) -> None:
        self._context = (network, prop, objectives, complete)
        self._done: list = []

    def has_room(self) -> bool:
        return not self._done

    def submit(self, task) -> None:
        self._done.append((task[0], task, run_task(task, self._context)))

    def idle(self, kinds=None) -> bool:
        """Nothing waiting to be absorbed (tasks finish as they are submitted)."""
        return not self._done

    def running(self, kind: str) -> bool:
        return False

    def next(self, seconds: float):
        return self._done.pop() if self._done else None

    def close(self) -> None:
        self._done.clear()


class PoolRunner:
    """Runs tasks in `jobs` forked worker processes; `close` terminates them (and their solver children)."""

    def __init__(self, jobs, network, prop, objectives, complete) -> None:
        context = multiprocessing.get_context("fork")
        self.started = time.monotonic()
        self._pool = context.Pool(jobs, initializer=_init_worker, initargs=(network, prop, objectives, complete))
        self.jobs = jobs
        self.busy_seconds = 0.0
        self.cpu_seconds = 0.0
        self.task_seconds: Counter = Counter()
        self._busy: Counter = Counter()
        self._done: queue.Queue = queue.Queue()

    def has_room(self) -> bool:
        return sum(self._busy.values()) < self.jobs

    def submit(self, task) -> None:
        self._busy[task[0]] += 1
        self._pool.apply_async(
            _timed_task,
            (task,),
            callback=lambda answer, task=task: self._done.put((task[0], task, answer)),
            error_callback=lambda error, task=task: self._done.put(("error", task, error)),
        )

    def running(self, kind: str) -> bool:
        return self._busy[kind] > 0

    def idle(self, kinds=None) -> bool:
        """No task running (of the given kinds, e.g. ("search", "engine"))."""
        return not any(count for kind, count in self._busy.items() if kinds is None or kind in kinds)

    def next(self, seconds: float):
        try:
            message = self._done.get(timeout=max(seconds, 0.0))
        except queue.Empty:
            return None
        self._busy[message[1][0]] -= 1
        if message[0] == "error":
            error = message[2]
            raise EngineError(
                f"a branch-and-bound worker failed on a {message[1][0]} task: {type(error).__name__}: {error}"
            )
        kind, task, (answer, seconds, cpu_seconds) = message
        self.busy_seconds += seconds
        self.cpu_seconds += cpu_seconds
        self.task_seconds[kind] += seconds
        return kind, task, answer

    def idle_share(self) -> float:
        """Share of the workers' time since the pool started that no task ran (hand-out gaps, waiting)."""
        capacity = self.jobs * (time.monotonic() - self.started)
        return max(0.0, 1.0 - self.busy_seconds / capacity) if capacity > 0 else 0.0

    def close(self) -> None:
        self._pool.terminate()
        self._pool.join()
