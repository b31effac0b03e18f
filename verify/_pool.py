"""The one worker pool: where `check`'s branch and bound and `fsm.distill`'s cell tasks run.

A pool runs ``work(context, task)`` for each task it is given, inline
(`InlinePool`, one job) or in `jobs` worker processes (`ProcessPool`);
`pool_for` picks. `work` is a module-level function and `context` what
every task shares (the network, the property, the grid): forked workers
inherit both, spawned ones get them pickled once. Every task is submitted
with its kind (a short name such as "search" or "bounds") and comes back
as a ``(kind, task, answer)`` message from `next`.

Invariants, which both callers rely on:

- Workers only compute: every answer comes back to the calling process,
  which alone decides, writes checkpoints and reports progress. No worker
  starts a pool of its own.
- Bounded: `has_room` is False once ``jobs * backlog`` tasks are in
  flight, so the caller hands out work as answers come back and never
  queues more than it can take back.
- Killable: a `multiprocessing.Pool` rather than a ProcessPoolExecutor,
  because `close` (`Pool.terminate`) ends running tasks at once, and the
  solver children they forked die with them (`_isolation`); workers
  ignore SIGINT so that only the calling process handles Ctrl-C.
- numpy's BLAS runs one thread in every worker (`limit_blas_threads`):
  these are many small products, and on a shared two-core machine
  OpenBLAS's own threads made them 10-25x slower (measured).

`WorkerPool` writes that interface down, and every caller takes a pool
of this shape, so none of them depends on which back end runs its tasks:
inside `ray_workers` (``certfsm ... --ray``), `pool_for` hands out
`_ray_pool.RayPool`s instead, the same tasks run as Ray tasks on one
machine or a cluster. Tasks, contexts and answers are plain picklable
values, and no caller may depend on the order in which answers come back.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import multiprocessing
import os
import queue
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol

from certfsm import EngineError, UsageError

Work = Callable[[Any, Any], Any]


class WorkerPool(Protocol):
    """What every back-end of the pool offers (`InlinePool`, `ProcessPool`; a distributed one later).

    ``work(context, task)`` runs for each submitted task somewhere; its
    answer comes back from `next` as ``(kind, task, answer)``, in whatever
    order the tasks finish. A failed task raises EngineError from `next`.
    """

    jobs: int

    def has_room(self) -> bool:
        """Whether one more task may be submitted now (False once the bounded backlog is full)."""
        ...

    def submit(self, kind: str, task: Any) -> None:
        """Start ``work(context, task)``; `kind` tags it for `running`, `idle` and the answer."""
        ...

    def running(self, kind: str) -> bool:
        """Whether a task of `kind` is in flight."""
        ...

    def idle(self, kinds: Iterable[str] | None = None) -> bool:
        """Whether no task (of the given kinds) is in flight or waiting to be taken back."""
        ...

    def next(self, seconds: float | None = None) -> tuple[str, Any, Any] | None:
        """The next finished ``(kind, task, answer)``, waiting at most `seconds` (None: until one comes)."""
        ...

    def close(self) -> None:
        """Stop every task still running, at once; the pool is unusable afterwards."""
        ...


_WORKER: tuple = ()

_RAY: list = []
"""The Ray connection `ray_workers` holds open in this process (at most one), else empty: local pools."""

RAY_EXTRA_FIX = 'install it with pip install "certfsm[ray]"'


@contextlib.contextmanager
def ray_workers(address: str | None, *, preload: tuple[str, ...] = ()):
    """Inside, every pool `pool_for` makes runs its tasks on Ray at `address` (None: local pools, as outside).

    `address` is "auto" (the local Ray, started for this process when none
    runs) or a cluster's address. Ray is joined on entry, so that a wrong
    address or a missing Ray costs no solver time, and left on exit (a Ray
    this block started is stopped). Worker processes never enter it: the
    choice lives in the calling process only, so no worker starts a pool
    of its own on Ray either. Without Ray installed this raises UsageError
    naming the fix. `preload` names modules every Ray worker imports as
    soon as Ray is joined (the work functions' own, e.g. "certfsm.fsm"),
    so that fresh worker processes are warm by the time tasks come.
    """
    if address is None:
        yield
        return
    if _RAY:
        raise UsageError(f"ray={address!r}: certfsm is already running its pools on Ray here; leave one ray= out")
    _send_saved_ray_token()
    try:
        from ._ray_pool import RayConnection
    except ImportError as error:
        raise UsageError(
            f"ray={address!r} runs the workers on Ray, which is not installed here ({error}); {RAY_EXTRA_FIX}"
        ) from None
    connection = RayConnection(address, preload)
    _RAY.append(connection)
    try:
        yield
    finally:
        _RAY.clear()
        connection.close()


def _send_saved_ray_token() -> None:
    """Join a cluster with the token ``ray start`` saved on this machine, as its head does, unless told otherwise.

    A head started by ``ray start`` turns token authentication on when a
    token is saved (``~/.ray/auth_token``), but a driver joining by address
    sends it only with ``RAY_AUTH_MODE=token`` and is refused otherwise
    (Ray 2.60, measured). Ray reads the setting when it is imported, so
    this runs before `_ray_pool` imports it; an explicit ``RAY_AUTH_MODE``
    is left as it is.
    """
    if "RAY_AUTH_MODE" not in os.environ and (Path.home() / ".ray" / "auth_token").is_file():
        os.environ["RAY_AUTH_MODE"] = "token"


def pool_for(jobs: int, work: Work, context, *, name: str, spawn: bool = False, backlog: int = 1) -> WorkerPool:
    """Ray tasks inside `ray_workers`; else worker processes when `jobs` > 1 and the platform can fork (or, with
    `spawn`, spawn), else inline.

    `name` says whose workers they are in the error a failed task raises.
    On Ray, `jobs` bounds the tasks in flight (with `backlog`) as it
    bounds the worker processes here; one job is a Ray task too, so that
    `jobs` alone sets the parallelism on either back end.
    """
    if _RAY:
        return _RAY[0].pool(jobs, work, context, name=name, backlog=backlog)
    methods = multiprocessing.get_all_start_methods()
    method = "fork" if "fork" in methods else "spawn" if spawn else None
    if jobs > 1 and method is not None:
        return ProcessPool(jobs, work, context, name=name, method=method, backlog=backlog)
    return InlinePool(work, context)


class InlinePool:
    """Runs each task at once in this process (one job)."""

    jobs = 1

    def __init__(self, work: Work, context) -> None:
        self._work, self._context = work, context
        self._done: list = []

    def has_room(self) -> bool:
        return not self._done

    def submit(self, kind: str, task) -> None:
        self._done.append((kind, task, self._work(self._context, task)))

    def running(self, kind: str) -> bool:
        return False

    def idle(self, kinds=None) -> bool:
        """Nothing waiting to be taken back (tasks finish as they are submitted)."""
        return not self._done

    def next(self, seconds: float | None = None):
        return self._done.pop() if self._done else None

    def close(self) -> None:
        self._done.clear()


class WorkerTimes:
    """What a pool of worker processes counts of its tasks' time (`check` reports it), on either back end."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.started = time.monotonic()
        self.busy_seconds = 0.0
        self.cpu_seconds = 0.0
        self.task_seconds: Counter = Counter()

    def count_task(self, kind: str, seconds: float, cpu_seconds: float) -> None:
        self.busy_seconds += seconds
        self.cpu_seconds += cpu_seconds
        self.task_seconds[kind] += seconds

    def idle_share(self) -> float:
        """Share of the workers' time since the pool started that no task ran (hand-out gaps, waiting)."""
        capacity = self.jobs * (time.monotonic() - self.started)
        return max(0.0, 1.0 - self.busy_seconds / capacity) if capacity > 0 else 0.0


class ProcessPool(WorkerTimes):
    """Runs tasks in `jobs` worker processes; `close` terminates them (and their solver children)."""

    def __init__(self, jobs: int, work: Work, context, *, name: str, method: str = "fork", backlog: int = 1) -> None:
        super().__init__(jobs)
        self._pool = multiprocessing.get_context(method).Pool(jobs, initializer=_init_worker, initargs=(work, context))
        self.name, self.capacity = name, jobs * backlog
        self._busy: Counter = Counter()
        self._done: queue.Queue = queue.Queue()

    def has_room(self) -> bool:
        return sum(self._busy.values()) < self.capacity

    def submit(self, kind: str, task) -> None:
        self._busy[kind] += 1
        self._pool.apply_async(
            _timed_task,
            (task,),
            callback=lambda answer, kind=kind, task=task: self._done.put((kind, task, answer, None)),
            error_callback=lambda error, kind=kind, task=task: self._done.put((kind, task, None, error)),
        )

    def running(self, kind: str) -> bool:
        return self._busy[kind] > 0

    def idle(self, kinds=None) -> bool:
        """No task running (of the given kinds, e.g. ("search", "engine"))."""
        return not any(count for kind, count in self._busy.items() if kinds is None or kind in kinds)

    def next(self, seconds: float | None = None):
        """The next ``(kind, task, answer)``, waiting at most `seconds` (None: until one comes), else None."""
        try:
            kind, task, timed, error = self._done.get(timeout=None if seconds is None else max(seconds, 0.0))
        except queue.Empty:
            return None
        self._busy[kind] -= 1
        if error is not None:
            raise EngineError(
                f"a {self.name} worker failed on a {kind} task: {type(error).__name__}: {error}"
            ) from error
        answer, seconds, cpu_seconds = timed
        self.count_task(kind, seconds, cpu_seconds)
        return kind, task, answer

    def close(self) -> None:
        self._pool.terminate()
        self._pool.join()


def _init_worker(work: Work, context) -> None:
    global _WORKER
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _WORKER = (work, context)
    limit_blas_threads()


def _timed_task(task):
    return timed_answer(*_WORKER, task)


def timed_answer(work: Work, context, task) -> tuple[Any, float, float]:
    """A worker's answer to `task`, with the wall and CPU seconds it took there (what `busy_seconds` adds up)."""
    begun, cpu = time.monotonic(), time.process_time()
    answer = work(context, task)
    return answer, time.monotonic() - begun, time.process_time() - cpu


@contextlib.contextmanager
def single_threaded_blas():
    """Limit numpy's BLAS to one thread for the duration of the block."""
    restore = limit_blas_threads()
    try:
        yield
    finally:
        restore()


def limit_blas_threads() -> Callable[[], None]:
    """Set numpy's BLAS to one thread now; return the function that restores the previous setting.

    Uses threadpoolctl when it is installed, else the thread-count call of
    the OpenBLAS library numpy loaded; with neither it changes nothing.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        functions = _openblas_thread_functions()
        if functions is None:
            return lambda: None
        set_threads, get_threads = functions
        previous = get_threads()
        set_threads(1)
        return lambda: set_threads(previous)
    return threadpool_limits(limits=1, user_api="blas").restore_original_limits


@functools.cache
def _openblas_thread_functions():
    """(set, get) of the OpenBLAS that numpy loaded (Linux, via /proc/self/maps), or None."""
    try:
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line})
    except OSError:
        return None
    for path in paths:
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in (("", ""), ("scipy_", "64_"), ("", "64_")):
            setter = getattr(library, f"{prefix}openblas_set_num_threads{suffix}", None)
            getter = getattr(library, f"{prefix}openblas_get_num_threads{suffix}", None)
            if setter is not None and getter is not None:
                setter.argtypes, setter.restype = [ctypes.c_int], None
                getter.argtypes, getter.restype = [], ctypes.c_int
                return setter, getter
    return None
