"""The pool's Ray back end: the same `WorkerPool` as `ProcessPool`, its tasks run as Ray tasks on one machine or many.

README, "On a cluster: --ray"; docs/design.md, "Engines and the worker
pool". `RayPool` takes the same work function,
context and tasks as `ProcessPool` and hands back the same
``(kind, task, answer)`` messages, so no caller knows which back end ran
its tasks; callers apply answers in their own fixed order, so nothing
depends on which worker finished first.

What crosses the network:

- The work function and the context (the network, the property, the
  grid: every task's shared heavy state) go to the cluster once per pool
  as one object (`ray.put`); each task carries only a reference to it,
  and each worker process unpickles it once and keeps it
  (`_shared_work`) for every later task of the same pool.
- A task carries its work item (an instance's paths, a chunk of cells)
  and comes back with its answer and the seconds it took.

Faults: a task whose worker process dies (killed, out of memory, its
node lost) is run again by Ray, up to `MAX_RETRIES` more times; a task
that dies on every try, an exception in the work function and a lost
cluster each raise `EngineError` from `next`, naming the task (its
`label`: an instance or a cell), so the run stops before anything is
decided from a missing answer. Exceptions of the work function are not
retried: they are answers, as on the process pool.

Only `pool_for` imports this module, and only when Ray was asked for
(`ray_workers`), so certfsm never imports Ray otherwise.
"""

from __future__ import annotations

import importlib
import logging
import socket
import time
from collections import Counter, OrderedDict
from typing import Any

import ray
import ray.exceptions

from certfsm import EngineError, UsageError

from ._pool import Work, WorkerTimes, limit_blas_threads, timed_answer

MAX_RETRIES = 3
"""Further tries of a task whose worker process died; an exception of the work function is never retried."""

HEARTBEAT_SECONDS = 2.0
"""Seconds `next` waits for an answer before it checks that the cluster's head still takes connections."""

KEPT_CONTEXTS = 4
"""Contexts a worker process keeps unpickled (one per pool it served lately; distillation makes a few pools)."""


class RayConnection:
    """certfsm's connection to Ray for the duration of a command: joined or started once, left by `close`.

    `address` is "auto" (join the local Ray this machine runs, else start
    one for this process) or a cluster's address (``HOST:PORT``, or
    ``ray://HOST:PORT`` for Ray Client). A Ray that was already
    initialised in this process (a test's, a notebook's) is used as it is
    and left running. Each context is put into the object store once per
    connection (`shared`), however many pools reuse it.
    """

    def __init__(self, address: str, preload: tuple[str, ...] = ()) -> None:
        self.address = address
        self._owned = not ray.is_initialized()
        self._shared: dict[int, tuple[Any, ray.ObjectRef]] = {}
        if self._owned:
            _check_reachable(address)
            try:
                if address == "auto":
                    ray.init(include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
                else:
                    ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
            except Exception as error:  # Ray raises ConnectionError, ValueError or its own errors here
                raise UsageError(
                    f"ray={address!r}: could not join or start Ray ({type(error).__name__}: {_first_line(error)}); "
                    "give the address of a running cluster (ray start --head prints it) or ray='auto'"
                ) from error
        self.head = _head_address()
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self._warming = [_warm_up.remote(("certfsm.verify", *preload)) for _ in range(cpus)]

    def shared(self, work: Work, context) -> ray.ObjectRef:
        """The object-store reference of ``(work, context)``, put there on first use (keyed by the objects' identity)."""
        key = id(context)
        held = self._shared.get(key)
        if held is None or held[0][0] is not work:
            held = ((work, context), ray.put((work, context)))
            self._shared[key] = held
        return held[1]

    def pool(self, jobs: int, work: Work, context, *, name: str, backlog: int = 1) -> RayPool:
        return RayPool(
            jobs, self.shared(work, context), name=name, backlog=backlog, address=self.address, head=self.head
        )

    def close(self) -> None:
        """Drop the shared objects and, when this connection started or joined Ray, disconnect."""
        self._shared.clear()
        self._warming.clear()
        if self._owned and ray.is_initialized():
            ray.shutdown()


class RayPool(WorkerTimes):
    """Runs tasks as Ray tasks, at most ``jobs * backlog`` in flight; `close` cancels them (killing their workers)."""

    def __init__(
        self, jobs: int, shared: ray.ObjectRef, *, name: str, backlog: int = 1, address: str = "", head=None
    ) -> None:
        super().__init__(jobs)
        self.name, self.capacity, self.address, self.head = name, jobs * backlog, address, head
        self._shared = [shared]  # in a list, so that Ray hands the reference itself to the task, not the object
        self._in_flight: dict[ray.ObjectRef, tuple[str, Any]] = {}
        self._busy: Counter = Counter()

    def has_room(self) -> bool:
        return len(self._in_flight) < self.capacity

    def submit(self, kind: str, task) -> None:
        remote = _run_task.options(name=f"certfsm {self.name}: the {kind} task of {task_label(task)}"[:200])
        self._in_flight[remote.remote(self._shared, task)] = (kind, task)
        self._busy[kind] += 1

    def running(self, kind: str) -> bool:
        return self._busy[kind] > 0

    def idle(self, kinds=None) -> bool:
        """No task in flight (of the given kinds)."""
        return not any(count for kind, count in self._busy.items() if kinds is None or kind in kinds)

    def next(self, seconds: float | None = None):
        """The next finished ``(kind, task, answer)``, waiting at most `seconds` (None: until one comes), else None."""
        if not self._in_flight:
            if seconds:
                time.sleep(seconds)
            return None
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            left = HEARTBEAT_SECONDS if deadline is None else min(HEARTBEAT_SECONDS, deadline - time.monotonic())
            try:
                ready, _ = ray.wait(list(self._in_flight), num_returns=1, timeout=max(left, 0.0))
            except ray.exceptions.RayError as error:
                raise self._lost(error) from error
            if ready:
                break
            if deadline is not None and time.monotonic() >= deadline:
                return None
            self._check_cluster()
        kind, task = self._in_flight.pop(ready[0])
        self._busy[kind] -= 1
        try:
            answer, wall, cpu = ray.get(ready[0])
        except ray.exceptions.RayTaskError as error:
            cause = error.cause if getattr(error, "cause", None) is not None else error
            raise EngineError(
                f"a {self.name} worker on Ray failed on the {kind} task of {task_label(task)}: "
                f"{type(cause).__name__}: {_first_line(cause)}"
            ) from error
        except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError, ray.exceptions.OutOfMemoryError) as e:
            raise EngineError(
                f"the {kind} task of {task_label(task)} ({self.name}) lost its Ray worker on each of its "
                f"{MAX_RETRIES + 1} tries ({type(e).__name__}); nothing was decided from it: free the cluster's "
                "workers (memory, nodes) and run again"
            ) from e
        except ray.exceptions.RayError as error:
            raise self._lost(error) from error
        self.count_task(kind, wall, cpu)
        return kind, task, answer

    def close(self) -> None:
        """Cancel every task in flight; a running one has its worker process killed (and its solver children)."""
        for ref in self._in_flight:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # a task that finished or a cluster that is gone: nothing left to stop
                pass
        self._in_flight.clear()
        self._busy.clear()

    def _check_cluster(self) -> None:
        """Raise EngineError when the cluster's head (its GCS) no longer takes connections.

        Ray's driver waits for a lost head without raising, then ends the
        whole process after a minute with its own exit status; checking
        between waits ends the command first, with certfsm's message and
        exit code 2 (nothing is written from unfinished tasks).
        """
        if self.head is None:
            return
        try:
            socket.create_connection(self.head, timeout=HEARTBEAT_SECONDS).close()
        except OSError as error:
            raise self._lost(error) from error

    def _lost(self, error: Exception) -> EngineError:
        return EngineError(
            f"{self.name}: lost the Ray cluster at {self.address or 'this process'} "
            f"({type(error).__name__}: {_first_line(error)}); nothing was written from the unfinished tasks, "
            "run again once the cluster is up"
        )


def _head_address() -> tuple[str, int] | None:
    """(host, port) of the cluster's GCS, which `RayPool` checks between waits; None where Ray does not say
    (Ray Client, ``ray://``: there the client's own connection fails instead)."""
    try:
        host, _, port = ray.get_runtime_context().gcs_address.rpartition(":")
        return host.strip("[]"), int(port)
    except Exception:
        return None


def _check_reachable(address: str) -> None:
    """Refuse a ``HOST:PORT`` that takes no connection, at once: Ray itself retries such an address for a minute."""
    if address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=HEARTBEAT_SECONDS).close()
    except (OSError, ValueError) as error:
        raise UsageError(
            f"ray={address!r}: no Ray cluster answers there ({type(error).__name__}: {_first_line(error)}); give "
            "HOST:PORT of a running head (ray start --head prints it) or ray='auto'"
        ) from None


def task_label(task) -> str:
    """What a task is about, for messages and worker names: its own `label` where it has one, else its type."""
    label = getattr(task, "label", None)
    return label if isinstance(label, str) else type(task).__name__


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else "no message"


_CONTEXTS: OrderedDict[str, tuple[Work, Any]] = OrderedDict()
"""In each worker process: the ``(work, context)`` of the pools it served lately, unpickled once each."""


def _shared_work(shared: ray.ObjectRef) -> tuple[Work, Any]:
    key = shared.hex()
    if key not in _CONTEXTS:
        if not _CONTEXTS:
            limit_blas_threads()  # as `ProcessPool`'s workers: many small products, one thread each
        _CONTEXTS[key] = ray.get(shared)
        while len(_CONTEXTS) > KEPT_CONTEXTS:
            _CONTEXTS.popitem(last=False)
    _CONTEXTS.move_to_end(key)
    return _CONTEXTS[key]


@ray.remote(num_cpus=1)
def _warm_up(modules: tuple[str, ...]) -> None:
    """Import `modules` into a worker process while the command reads its input.

    A Ray worker is a fresh interpreter, where a forked local worker
    inherits the caller's modules: importing certfsm's verifier and
    distiller there took about a second per worker on the shared two-core
    machine, most of Ray's overhead on the example's distillation
    (docs/benchmarks.md, "Ray against the process pool"). Started when
    the connection opens, one per CPU of the cluster, it overlaps with
    the command's own start; Ray then reuses the warm processes.
    """
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:  # an optional engine that is not installed: the task that needs it says so
            pass
    limit_blas_threads()


@ray.remote(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False)
def _run_task(shared: list, task):
    """A worker's answer to `task` and its seconds, as `ProcessPool`'s workers give them (`timed_answer`)."""
    work, context = _shared_work(shared[0])
    return timed_answer(work, context, task)
