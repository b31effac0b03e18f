"""A VNN-COMP instance list checked instance by instance on the worker pool, each row recorded as it finishes.

`run_batch` reads the list (`_instances`), opens the results file
(`_results_file`: what is already there is kept and skipped, which is the
resume), hands every other instance to the pool as an `InstanceTask` and
records each `InstanceOutcome` as it comes back: the witness file of a
``sat`` first, then the row. Tasks, the shared `BatchSettings` and the
outcomes are plain picklable values, and nothing depends on which worker
finishes first: each row names its instance, a witness file's name is
made from the instance's key, and the summary reads the rows in the
list's order.

Each instance is checked exactly as `certfsm vnnlib` checks it
(`verify_vnnlib`, then `vnncomp_result` for its words and witness), with
one job: the pool's workers are the parallelism, and no worker starts a
pool of its own (`_pool`). The check runs in a forked child of the worker
(`_isolation.run_in_child`), so that a crash of a native solver becomes
an ``error`` row and an instance that overruns its timeout by more than
`KILL_GRACE_SECONDS` is killed and recorded as ``timeout``: one instance
never takes the batch down or holds it up.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os
import re
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from certfsm import CertfsmError, write_atomically

from ._instances import Instance, read_instances
from ._isolation import run_in_child
from ._pool import WorkerPool, pool_for, single_threaded_blas
from ._result import UNKNOWN
from ._results_file import VERDICTS, ResultRow, ResultsFile
from ._run import verify_vnnlib, vnncomp_result

KILL_GRACE_SECONDS = 10.0
"""Seconds an instance may run past its timeout (solvers stop at their next check) before its process is killed."""

WITNESS_SUFFIX = ".counterexample"

_LAZY_IMPORTS = ("onnxruntime", "z3", "threadpoolctl")


@dataclass(frozen=True)
class BatchSettings:
    """What every instance of a batch shares: the engine and the cap on the list's timeouts (None: no cap)."""

    engine: str = "auto"
    timeout_cap: float | None = None

    def timeout(self, instance: Instance) -> float:
        return instance.timeout if self.timeout_cap is None else min(instance.timeout, self.timeout_cap)


@dataclass(frozen=True)
class InstanceTask:
    """One instance as a work item: its key, its files (absolute) and its timeout after the cap."""

    onnx: str
    vnnlib: str
    onnx_path: str
    vnnlib_path: str
    timeout: float

    @property
    def label(self) -> str:
        """The instance, as a failed task's message names it."""
        return f"instance {self.onnx} {self.vnnlib}"


@dataclass(frozen=True)
class InstanceOutcome:
    """What a worker found: the VNN-COMP answer (or ``error``), the result-file text of a sat, why, how long."""

    onnx: str
    vnnlib: str
    verdict: str
    seconds: float
    timeout: float
    result_text: str = ""
    reason: str = ""


def check_instance(settings: BatchSettings, task: InstanceTask) -> InstanceOutcome:
    """The pool's work: `task` checked in a forked child, killed `KILL_GRACE_SECONDS` past its timeout."""
    _import_solvers_once()
    started = time.monotonic()
    patience = task.timeout + KILL_GRACE_SECONDS
    child = run_in_child(lambda: _check_here(settings, task), patience)
    seconds = time.monotonic() - started
    if child.timed_out:
        verdict, text, reason = "timeout", "", f"no answer {KILL_GRACE_SECONDS:g} s past the timeout; killed"
    elif child.failure:
        verdict, text, reason = "error", "", f"the check's process failed ({child.failure})"
    else:
        verdict, text, reason = child.value
    return InstanceOutcome(task.onnx, task.vnnlib, verdict, seconds, task.timeout, text, reason)


@functools.cache
def _import_solvers_once() -> None:
    """Import what a check imports lazily (ONNX, onnxruntime, the solvers) into the worker, once.

    The child of each instance is forked from the worker and inherits
    these modules; without this every child imports them anew, which took
    0.5-0.8 s an instance against 0.05 s for a small instance's check
    (measured on the soundness-repro instances).
    """
    import certfsm

    from . import _marabou

    certfsm.load_onnx  # the core's ONNX loader, with the onnx modules it reads models with
    _marabou.is_available()  # maraboupy, imported the way the Marabou engine imports it
    for name in _LAZY_IMPORTS:
        try:
            importlib.import_module(name)
        except ImportError:  # an engine that is not installed is reported by the check itself
            pass


def _check_here(settings: BatchSettings, task: InstanceTask) -> tuple[str, str, str]:
    """(answer, result text, reason) of one instance, as `certfsm vnnlib --jobs 1` finds them; errors become rows."""
    try:
        with single_threaded_blas():
            run = verify_vnnlib(task.onnx_path, task.vnnlib_path, engine=settings.engine, timeout=task.timeout, jobs=1)
    except CertfsmError as error:
        return "error", "", str(error)
    except Exception as error:  # a bug must cost its instance, not the batch; the reason names it
        return "error", "", f"internal error {type(error).__name__}: {error}"
    answer, text = vnncomp_result(run)
    reasons = [f"{p.name}: {r.reason}" for p, r in zip(run.properties, run.results) if r.verdict == UNKNOWN]
    return answer, text if answer == "sat" else "", "; ".join(reasons)


@dataclass(frozen=True)
class BatchSummary:
    """The results of the list's instances, read in the list's order.

    `counts` per verdict; `seconds` the per-instance times (so their sum is
    what one job would have taken); `wrong` the rows whose sat/unsat
    contradicts the list's known answer, with that answer; `scored` how
    many rows had a known answer to compare with; `missing` the instances
    without a row (a run that was stopped).
    """

    counts: dict[str, int]
    seconds: list[float]
    wrong: list[tuple[ResultRow, str]]
    scored: int
    missing: list[Instance]

    @property
    def total_seconds(self) -> float:
        return sum(self.seconds)

    @property
    def median_seconds(self) -> float:
        return statistics.median(self.seconds) if self.seconds else 0.0


def summarize(instances: list[Instance], rows: list[ResultRow]) -> BatchSummary:
    by_key = {row.key: row for row in rows}
    ordered = [(instance, by_key.get(instance.key)) for instance in instances]
    done = [(instance, row) for instance, row in ordered if row is not None]
    counts = {verdict: sum(row.verdict == verdict for _, row in done) for verdict in VERDICTS}
    known = [(instance, row) for instance, row in done if instance.expected is not None]
    wrong = [
        (row, instance.expected)
        for instance, row in known
        if row.verdict in ("sat", "unsat") and row.verdict != instance.expected
    ]
    missing = [instance for instance, row in ordered if row is None]
    return BatchSummary(counts, [row.seconds for _, row in done], wrong, len(known), missing)


@dataclass(frozen=True)
class BatchRun:
    """A finished batch: its summary over the whole list, and what this run did (rows it added, wall time)."""

    summary: BatchSummary
    added: list[ResultRow]
    skipped: int
    wall_seconds: float
    jobs: int
    witnesses: Path
    warnings: list[str] = field(default_factory=list)


MakePool = Callable[..., WorkerPool]


def run_batch(
    instances_csv: str | os.PathLike,
    out: str | os.PathLike,
    *,
    witnesses: str | os.PathLike | None = None,
    engine: str = "auto",
    jobs: int = 1,
    timeout_cap: float | None = None,
    in_list_order: bool = False,
    on_start: Callable[[int, int], None] | None = None,
    on_row: Callable[[ResultRow, int, int], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
    make_pool: MakePool = pool_for,
) -> BatchRun:
    """Check every instance of `instances_csv` that `out` does not hold yet; append a row to `out` as each finishes.

    `witnesses` is the folder of the sat instances' result files (default:
    beside `out`, named after its stem with ``.witnesses``). Callbacks:
    `on_start(total, skipped)` hears, before any instance runs, how many
    will run and how many `out` already holds; `on_row(row, done, total)`
    hears of each row once it is on disk; `on_warning` of a dropped
    incomplete line. With `in_list_order` the results file is rewritten
    at the end with its rows in the list's order. `make_pool` makes the
    worker pool (`pool_for`'s signature; any `WorkerPool`). Bad input (the
    list, the results file) raises before any instance runs and leaves
    `out` unchanged.
    """
    started = time.monotonic()
    instances = read_instances(instances_csv)
    out = Path(out)
    witness_folder = Path(witnesses) if witnesses is not None else out.with_name(out.stem + ".witnesses")
    settings = BatchSettings(engine, timeout_cap)
    warnings: list[str] = []

    def warn(message: str) -> None:
        warnings.append(message)
        if on_warning is not None:
            on_warning(message)

    added: list[ResultRow] = []
    with ResultsFile(out, warn=warn) as results:
        held = results.keys
        todo = [instance for instance in instances if instance.key not in held]
        total = len(todo)
        jobs = max(1, min(jobs, total))
        if on_start is not None:
            on_start(total, len(instances) - total)
        if todo:
            pool = make_pool(jobs, check_instance, settings, name="vnnlib-batch")
            try:
                waiting = list(reversed(todo))
                while waiting or not pool.idle():
                    while waiting and pool.has_room():
                        pool.submit("instance", _task(settings, waiting.pop()))
                    answer = pool.next()
                    if answer is None:
                        continue
                    row = _record(answer[2], out.parent, witness_folder)
                    results.append(row)
                    added.append(row)
                    if on_row is not None:
                        on_row(row, len(added), total)
            finally:
                pool.close()
        if in_list_order:
            results.rewrite_in_order([instance.key for instance in instances])
        summary = summarize(instances, results.rows)
    return BatchRun(summary, added, len(instances) - total, time.monotonic() - started, jobs, witness_folder, warnings)


def _task(settings: BatchSettings, instance: Instance) -> InstanceTask:
    return InstanceTask(
        instance.onnx,
        instance.vnnlib,
        str(instance.onnx_path.resolve()),
        str(instance.vnnlib_path.resolve()),
        settings.timeout(instance),
    )


def _record(outcome: InstanceOutcome, results_folder: Path, witness_folder: Path) -> ResultRow:
    """The row of `outcome`, its witness file written first (atomically) so that no row names a missing file."""
    witness = ""
    if outcome.verdict == "sat":
        path = witness_folder / witness_name(outcome.onnx, outcome.vnnlib)
        write_atomically(
            path,
            (outcome.result_text.rstrip("\n") + "\n").encode(),
            what="witness",
            fix="choose a writable --witnesses folder",
            make_parents=True,
        )
        witness = os.path.relpath(path, results_folder)
    return ResultRow(
        outcome.onnx, outcome.vnnlib, outcome.verdict, outcome.seconds, outcome.timeout, witness, outcome.reason
    )


def witness_name(onnx: str, vnnlib: str) -> str:
    """The witness file's name for an instance: both stems for people, a hash of the key to keep names apart."""
    digest = hashlib.sha256(f"{onnx}\0{vnnlib}".encode()).hexdigest()[:10]
    stems = "_".join(re.sub(r"[^\w.-]+", "-", Path(part).stem) for part in (onnx, vnnlib))
    return f"{stems[:100]}_{digest}{WITNESS_SUFFIX}"
