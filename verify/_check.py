"""The one entry point: `check(network, prop, engine=..., timeout=...) -> Result`.

Engines:

- ``auto`` (default): falsification on the box's seed points, sound bounds
  on the whole box, then branch and bound over the input box (`_split`)
  spread over `jobs` worker processes, interleaved with falsification
  runs aimed at the open boxes (a fifth of the workers' time times the
  share of the box still open, see `_submit_next`). A box that
  bounds cannot close after `ENGINE_DEPTH` splits, or whose unstable
  ReLUs are few enough for an exact query to be cheap
  (`_engine_unstable`), goes to the box engine (`_box_engine`): on
  mid-sized networks first ReLU splitting with linear programs whose
  bounds are recomputed exactly (`_lp`), then an exact Z3 query on the
  box with the stable ReLUs fixed, Marabou only to find witnesses, its
  UNSAT counting only when Z3 confirms it. Proved only
  when every box of a partition of the input box is closed by sound
  bounds or by an exact UNSAT; engine ``"bounds"`` or ``"bounds+z3"``.
- ``bounds``: the same search without the box engine (proved or
  unknown; violated only through a validated counterexample).
- ``z3``: falsification first (a validated counterexample is a fact),
  then Z3 alone on the whole box, exactly.
- ``marabou``: the same with Marabou; since maraboupy 2.0 answers UNSAT
  wrongly on small queries, its UNSAT is ``proved`` only when an exact Z3
  query on the same box agrees (engine ``marabou+z3``); otherwise the
  answer is ``unknown``, labelled "Marabou alone, not cross-checked"
  (``stats["cross_checked"]`` is False).
- ``both``: Marabou and Z3, each on the whole query (after
  falsification); a proof stands only when both prove, a validated counterexample only when the other did not
  prove; a proved/violated disagreement is ``unknown`` and is reported.

Every ``violated`` verdict comes from `validate_counterexample` (exact,
float64 and onnxruntime); every ``proved`` from sound bounds or an exact
UNSAT (Z3; Marabou's UNSAT only with Z3's agreement); anything else is
``unknown`` with the reason. The overall timeout is strict: the
workers are terminated (their solver children die with them) and the
answer is ``unknown`` ("timeout after N s, K boxes open").

A search starts in this process and moves to `jobs` worker processes
once it has run `INLINE_SECONDS` with enough open boxes to share (most
ACAS Xu instances finish before that, and on them forking and shipping
boxes cost more than they save; until then the second core idles, so
the hand-over comes after half a second: a long proof idles it for only
that long, and the pool costs the 1-s instances no measurable CPU).
Workers are forked (cheap, and they inherit the network); numpy runs
single-threaded in them and in this process while checking (see
`_pool.single_threaded_blas`). Each worker runs stretches of branch and
bound on boxes handed out by this process, a falsification run, or one
box-engine query (whose solvers run in killable children); `_pool` runs
the tasks (`_check_tasks`), this module decides what to run next and
what the answers mean.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from certfsm import EngineError, Network

from . import _box_engine, _falsify, _pool, _split, _z3
from ._engines import (
    ENGINE_REGISTRY,
    Engine,
    FunctionEngine,
    Search,
    box_engine_name,
    engine_module,
    engine_named,
    is_installed,
    missing_solver,
    register,
)
from ._property import Property, check_fits
from ._result import PROVED, UNKNOWN, VIOLATED, Result
from ._budget import WALL_CLOCK_GUARD, WorkBudget
from ._check_tasks import run_task
from ._validate import validate_counterexample

COMPLETE = True
FALSIFY_SECONDS = 0.3
SMALL_FALSIFY_SECONDS = 0.05
"""The falsification before one solver on a small network (`_box_engine.Z3_FIRST_NETWORK` ReLUs or fewer), where
the solver itself answers in milliseconds and finds the witness too: 0.3 s of falsification there only delayed every
unsat answer (the engine conformance and soundness suites spent about 30 s of CPU on it)."""
MAX_ATTACK_SECONDS = 2.0
ATTACK_SHARE = 0.2
ATTACK_DELAY_SECONDS = 2.0
ATTACK_FLOOR = 0.1
FIRST_ATTACK_SECONDS = 0.5
ATTACK_BOXES = 64
ENGINE_DEPTH = 30
MARABOU_ALONE = "Marabou alone, not cross-checked"
BOUNDS_ONLY_DEPTH = 60
LP_UNSTABLE = 40
"""Boxes with at most this many unstable ReLUs go to the LP engine at once where it applies (`_engine_unstable`).
Measured on cersyve: lane_keep_finetune_con (68 ReLUs) timed out at 100 s with 12 and 24, took 5 s with 40;
point_mass_finetune_con (80 ReLUs) 2 s with 12, 8 s with 24, 34 s with 40. Sending boxes by depth instead (after
4 splits) made point_mass take 77 s instead of 0.16 s."""
ENGINE_BOX_SECONDS = 10.0
ENGINE_GRACE_SECONDS = 4.0
ENGINE_GRACE_SHARE = 0.25
MIN_ENGINE_SECONDS = 0.5
TASK_BOXES = 256
SLICE_SECONDS = (0.25, 2.0)
SHORT_SLICE_SECONDS = 0.05
INLINE_SECONDS = 0.5
POOL_MIN_BOXES_PER_JOB = 4

Progress = Callable[[float, str], None]


def check(
    network: Network,
    prop: Property,
    engine: str = "auto",
    timeout: float = 60.0,
    jobs: int | None = None,
    progress: Progress | None = None,
    seed: int = 0,
    budget: WorkBudget | None = None,
) -> Result:
    """Decide whether some input of `prop`'s box drives `network` into the unsafe set.

    `jobs` worker processes (default: the number of CPUs) share the
    branch and bound; `progress(done_fraction, message)` is called as the
    closed fraction of the box grows; `seed` fixes the falsifier. The
    `Result` names the property (``prop.name``).

    `budget` (a `WorkBudget`, engines ``auto`` and ``bounds``) makes
    ``proved`` independent of the machine's speed and load: the property
    is proved exactly when branch and bound closes the box within the
    budget's boxes and Z3 queries (each limited by Z3's resource count,
    not seconds); a spent budget is ``unknown``. `timeout` is then only a
    guard: when it fires first, ``stats["wall_clock_guard"]`` is True.
    """
    return replace(_check(network, prop, engine, timeout, jobs, progress, seed, budget), property=prop.name)


def _check(
    network: Network,
    prop: Property,
    engine: str,
    timeout: float,
    jobs: int | None,
    progress: Progress | None,
    seed: int,
    budget: WorkBudget | None,
) -> Result:
    started = time.monotonic()
    chosen = _check_arguments(network, prop, engine, timeout, jobs)
    if budget is not None and (not chosen.takes_budget or not isinstance(budget, WorkBudget)):
        budgeted = " or ".join(repr(e.name) for e in ENGINE_REGISTRY.values() if e.takes_budget)
        raise EngineError(
            f"budget={budget!r} with engine={engine!r}: a work budget is a WorkBudget, for engine "
            f"{budgeted}; give budget=None or engine='auto'"
        )
    search = Search(started, started + timeout, jobs or os.cpu_count() or 1, progress, seed, budget)
    with _pool.single_threaded_blas():
        return chosen.check(network, prop, search)


def _check_arguments(network: Network, prop: Property, engine: str, timeout: float, jobs) -> Engine:
    chosen = engine_named(engine)
    if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
        raise EngineError(f"timeout={timeout!r} is not a positive number of seconds; give e.g. timeout=60")
    if jobs is not None and not (isinstance(jobs, int) and jobs >= 1):
        raise EngineError(f"jobs={jobs!r} is not a positive number of worker processes; give e.g. jobs=2 or None")
    for name in chosen.solvers:
        if not is_installed(name):
            raise EngineError(missing_solver(name, f"engine={engine!r}", "engine='auto'"))
    check_fits(network, prop)
    return chosen


def _falsify_step(network: Network, prop: Property, budget: float, seed: int, started: float) -> Result | None:
    """A validated counterexample found by falsification within `budget` seconds, else None."""
    candidate = _falsify.falsify(network, prop, budget, seed)
    if candidate is None:
        return None
    validation = validate_counterexample(network, prop, candidate)
    if not validation.ok:
        return None
    return Result(
        VIOLATED,
        "falsify",
        time.monotonic() - started,
        reason="falsification found a counterexample (unsafe exactly, in float64 and in onnxruntime)",
        counterexample=validation.x,
        outputs=validation.outputs,
        stats={"falsify_seconds": time.monotonic() - started},
    )


def _single_engine(
    name: str, network: Network, prop: Property, deadline: float, started: float, confirm: bool = True
) -> Result:
    """`name` alone on the whole box; a Marabou UNSAT is confirmed by Z3 unless `confirm` is False (`both`
    runs Z3 on its own and needs the two answers apart)."""
    module = engine_module(name)
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return Result(UNKNOWN, name, time.monotonic() - started, reason=f"timeout after {deadline - started:.1f} s")
    result = module.check(network, prop, remaining)
    if name == "marabou" and result.verdict == PROVED and confirm:
        return _confirmed_marabou_proof(network, prop, result, deadline, started)
    return Result(
        result.verdict,
        name,
        time.monotonic() - started,
        result.reason,
        result.counterexample,
        result.outputs,
        result.stats,
    )


def _confirmed_marabou_proof(network, prop, result: Result, deadline: float, started: float) -> Result:
    """Marabou's UNSAT, asked for by name: proved only when Z3 agrees exactly, else unknown, labelled.

    An UNSAT from Marabou alone is not a proof (docs/semantics.md,
    "Verdicts": maraboupy 2.0 answers UNSAT wrongly on small queries).
    So the answer is ``unknown`` with the label "Marabou alone, not cross-checked"
    unless an exact Z3 query on the same box agrees in the time left.
    """
    stats = {**result.stats, "cross_checked": False}
    remaining = deadline - time.monotonic()
    confirmation = _z3.check(network, prop, remaining) if remaining > 0.1 else None
    if confirmation is not None and confirmation.verdict == PROVED:
        stats["cross_checked"] = True
        return Result(
            PROVED,
            "marabou+z3",
            time.monotonic() - started,
            reason=f"{result.reason}, confirmed by z3 (exact)",
            stats=stats,
        )
    if confirmation is not None and confirmation.verdict == VIOLATED:
        stats["marabou_wrong_unsat"] = True
        return Result(
            VIOLATED,
            "marabou+z3",
            time.monotonic() - started,
            reason=f"Marabou answered UNSAT wrongly; z3 found a counterexample ({confirmation.reason})",
            counterexample=confirmation.counterexample,
            outputs=confirmation.outputs,
            stats=stats,
        )
    why = confirmation.reason if confirmation is not None else "no time left"
    return Result(
        UNKNOWN,
        "marabou",
        time.monotonic() - started,
        stats=stats,
        reason=f"{MARABOU_ALONE}: {result.reason}; an UNSAT from Marabou alone is not a proof and z3 "
        f"could not confirm it ({why})",
    )


@dataclass(eq=False)
class _Search:
    """The state of one branch and bound: open boxes, boxes for the complete engine, what was closed."""

    network: Network
    prop: Property
    objectives: _split.Objectives
    open: list = field(default_factory=list)
    for_engine: list = field(default_factory=list)
    closed: _split.Closed = field(default_factory=_split.Closed)
    stats: dict = field(default_factory=dict)
    closures: list = field(default_factory=list)

    def open_count(self) -> int:
        return sum(len(b) for b in self.open) + sum(len(b) for b in self.for_engine)

    def take_boxes(self, limit: int) -> _split.Boxes:
        boxes = self.open.pop()
        if len(boxes) > limit:
            self.open.append(boxes.take(slice(0, len(boxes) - limit)))
            boxes = boxes.take(slice(len(boxes) - limit, None))
        return boxes


def _branch_and_bound(network, prop, engine, deadline, jobs, progress, seed, started, budget=None) -> Result:
    objectives = _split.Objectives.of(prop, network.n_outputs)
    boxes, rooted = _split.root(network, prop, objectives)
    stats = {
        "boxes": 1,
        "max_depth": 0,
        "closed_by_bounds": 0,
        "closed_by_engine": 0,
        "engine_queries": 0,
        "jobs": jobs,
    }
    if not len(boxes):
        return Result(
            PROVED,
            "bounds",
            time.monotonic() - started,
            reason="bounds refute the unsafe set on the whole box",
            stats=stats,
            proof=tuple(rooted.closures),
        )
    complete = box_engine_name() if engine == "auto" else None
    search = _Search(network, prop, objectives, [boxes], stats=stats, closures=list(rooted.closures))
    stats.update(falsify_seconds=0.0, attacks=0, seed=seed, workers=1)
    context = (network, prop, objectives, complete)
    runners = [_pool.InlinePool(run_task, context)]

    def widen():
        """Move to `jobs` worker processes once the search is long and wide enough to share."""
        if jobs > 1 and len(runners) == 1 and time.monotonic() - started >= INLINE_SECONDS:
            if search.open_count() >= POOL_MIN_BOXES_PER_JOB * jobs:
                runners.append(_pool.pool_for(jobs, run_task, context, name="branch-and-bound"))
                stats["workers"] = runners[-1].jobs
        return runners[-1]

    try:
        return _drive(search, widen, complete, deadline, progress, started, budget)
    finally:
        if len(runners) > 1 and hasattr(runners[-1], "idle_share"):
            stats["worker_idle_share"] = round(runners[-1].idle_share(), 3)
            stats["pool_seconds"] = round(time.monotonic() - runners[-1].started, 3)
            stats["worker_cpu_seconds"] = round(runners[-1].cpu_seconds, 3)
            stats["worker_task_seconds"] = {k: round(v, 3) for k, v in runners[-1].task_seconds.items()}
        for runner in runners:
            runner.close()


def _drive(search: _Search, current_runner, complete, deadline, progress, started, budget=None) -> Result:
    """Hand out tasks until every box is closed, a violation is validated or time is up.

    `current_runner()` says where tasks run; it may switch from inline to
    worker processes between tasks (never with a task in flight inline).
    Proved only when no box is open, none waits for the complete engine and
    none was left undecided: the closed boxes then partition the input box.
    """
    stats = search.stats
    depth_limit = ENGINE_DEPTH if complete else BOUNDS_ONLY_DEPTH
    engine_unstable = _engine_unstable(search.network, complete)
    unresolved: list[str] = []
    while True:
        runner = current_runner()
        if time.monotonic() >= deadline:
            return _timeout(search, started, deadline, complete, unresolved, budget)
        if budget is not None and _budget_spent(search, budget):
            return _spent(search, started, complete, budget)
        while runner.has_room() and _submit_next(
            search, runner, complete, (depth_limit, engine_unstable), deadline, started, unresolved, budget
        ):
            pass
        if runner.idle(("search", "engine")):
            if search.open or search.for_engine:
                return _timeout(search, started, deadline, complete, unresolved, budget)
            break
        message = runner.next(deadline - time.monotonic())
        if message is None:
            continue
        kind, task, answer = message
        if kind == "search":
            verdict = _absorb_search(search, answer, started)
        elif kind == "attack":
            verdict = _absorb_attack(search, answer, started)
        else:
            verdict = _absorb_engine(search, task[1], answer, complete, unresolved, started)
        if verdict is not None:
            return verdict
        if progress is not None:
            progress(float(search.closed.fraction()), f"{search.open_count()} boxes open")
    seconds = time.monotonic() - started
    if unresolved:
        return Result(UNKNOWN, _name(stats, complete), seconds, reason=unresolved[0], stats=stats)
    if not search.closed.is_everything():
        raise EngineError(
            f"internal error: the closed boxes cover {search.closed.fraction()} of the input box, not all of it; "
            "refusing to call it proved (please report this)"
        )
    if progress is not None:
        progress(1.0, "every box closed")
    return Result(
        PROVED,
        _name(stats, complete),
        seconds,
        reason=f"every box of a partition of the input box is closed ({stats['boxes']} boxes bounded)",
        stats=stats,
        proof=tuple(search.closures),
    )


def _engine_unstable(network: Network, complete: str | None) -> int:
    """Boxes with at most this many unstable ReLUs go to the box engine at once (-1: none do).

    The box engine's own thresholds (`_box_engine.Z3_FIRST_UNSTABLE`,
    `Z3_FIRST_NETWORK`), so a box is sent early only where that engine
    asks Z3 first. Only where Z3 can close them: on small networks (a near miss or a tie
    that no bound can separate is decided exactly in a fraction of a
    second, where splitting would go on to the depth limit), and on any
    network a box with no unstable ReLU left (a linear program). Where the
    box engine splits ReLUs with linear programs (`_box_engine.uses_lp`),
    boxes with at most `LP_UNSTABLE`: a margin thin along a surface keeps
    input splitting from ever closing the boxes along it, while each of
    them is one short ReLU search.
    """
    if complete != "z3":
        return -1
    if _box_engine.uses_lp(network):
        return LP_UNSTABLE
    small = sum(network.hidden_sizes) <= _box_engine.Z3_FIRST_NETWORK
    return _box_engine.Z3_FIRST_UNSTABLE if small else min(0, _box_engine.Z3_FIRST_UNSTABLE)


def _submit_next(search: _Search, runner, complete, limits, deadline, started, unresolved, budget=None) -> bool:
    """Give the runner one task; False if there is none.

    Order: a falsification run when one is due, then boxes for the
    complete engine, then the most recent open boxes. A search stretch is
    short when few boxes are left to hand out, so that idle workers soon
    get work again.

    Falsification effort follows the evidence. The first run, on the whole
    box, comes after `FIRST_ATTACK_SECONDS` of search (the seed points were
    tried before the search; most proofs are done before then, and an
    attack run inline would cost them 0.3 s). After `ATTACK_DELAY_SECONDS` the runs get
    `ATTACK_SHARE` of the workers' time times the share of the input box
    still open (at least `ATTACK_FLOOR`), in runs of doubling length, each
    with a new seed, aimed at the open boxes (`_attack_region`): where the
    bounds have closed a part, no attack goes; once most of the box is
    proved, attacks almost stop. Measured on ACAS Xu 4_2 x property 2
    (unsat): a fixed share of the time, not scaled by the open share,
    spent 44 s of 82 on 24 attacks; on the 25 + 32 ACAS Xu and RL
    development instances every counterexample was found by the first,
    whole-box run.
    """
    now = time.monotonic()
    remaining = deadline - now
    stats = search.stats
    depth_limit, engine_unstable = limits
    if (search.open or search.for_engine) and not runner.running("attack"):
        allowance = attack_allowance(float(search.closed.fraction()), now - started, runner.jobs)
        attack_seconds = min(FALSIFY_SECONDS * 2 ** stats["attacks"], MAX_ATTACK_SECONDS, remaining)
        if stats["falsify_seconds"] + attack_seconds <= allowance:
            region = _attack_region(search) if stats["attacks"] else None
            runner.submit("attack", ("attack", stats["seed"] + 1 + stats["attacks"], attack_seconds, region))
            stats["attacks"] += 1
            stats["falsify_seconds"] += attack_seconds
            return True
    if search.for_engine and not complete:
        parked = search.for_engine.pop()
        unresolved.append(f"bounds cannot close {len(parked)} boxes after {depth_limit} splits")
        return True
    engine_seconds = min(ENGINE_BOX_SECONDS, remaining - min(ENGINE_GRACE_SECONDS, ENGINE_GRACE_SHARE * remaining))
    rlimit = None
    if budget is not None:  # the rlimit decides; the seconds are only the guard
        engine_seconds, rlimit = remaining, budget.z3_rlimit
    if search.for_engine and engine_seconds >= MIN_ENGINE_SECONDS:
        last = search.for_engine.pop()
        if len(last) > 1:
            search.for_engine.append(last.take(slice(0, len(last) - 1)))
        search.stats["engine_queries"] += 1
        runner.submit("engine", ("engine", last.take(slice(len(last) - 1, None)), engine_seconds, rlimit))
        return True
    if search.open:
        share = max(1, min(TASK_BOXES, -(-search.open_count() // runner.jobs)))
        boxes = search.take_boxes(share)
        if search.open_count() < 2 * runner.jobs:
            seconds = SHORT_SLICE_SECONDS
        else:
            seconds = min(max(SLICE_SECONDS[0], 0.1 * (now - started)), SLICE_SECONDS[1])
        seconds = min(seconds, remaining)
        runner.submit("search", ("search", boxes, seconds, depth_limit, seconds > SHORT_SLICE_SECONDS, engine_unstable))
        return True
    return False


def attack_allowance(closed_fraction: float, seconds: float, jobs: int) -> float:
    """Falsification seconds due after `seconds` of search with `jobs` workers, `closed_fraction` of the box proved.

    The share of the input box still open is the evidence that a
    counterexample may exist (the closed part has none); see `_submit_next`.
    """
    if seconds < FIRST_ATTACK_SECONDS:
        return 0.0
    evidence = max(1.0 - closed_fraction, ATTACK_FLOOR)
    return FALSIFY_SECONDS + ATTACK_SHARE * evidence * max(0.0, seconds - ATTACK_DELAY_SECONDS) * jobs


def _attack_region(search: _Search) -> _falsify.Region | None:
    """The `ATTACK_BOXES` open boxes whose bounds are furthest from closing, weighted by that distance."""
    parts = search.open + search.for_engine
    if not parts:
        return None
    boxes = _split.Boxes.concat(parts)
    order = np.argsort(boxes.worst)[:ATTACK_BOXES]
    weight = np.maximum(-boxes.worst[order], 0.0)
    weight = np.where(np.isfinite(weight), weight, 1.0) + 1e-12
    return _falsify.Region(boxes.lower[order], boxes.upper[order], weight)


def _name(stats: dict, complete: str | None) -> str:
    return f"bounds+{complete}" if stats["closed_by_engine"] else "bounds"


def _absorb_search(search: _Search, outcome: _split.Outcome, started: float) -> Result | None:
    stats = search.stats
    stats["boxes"] += outcome.bounded_boxes
    stats["max_depth"] = max(stats["max_depth"], outcome.max_depth)
    stats["closed_by_bounds"] += outcome.closed.count()
    search.closed.merge(outcome.closed)
    search.closures += outcome.closures
    if len(outcome.open):
        search.open.append(outcome.open)
    if len(outcome.for_engine):
        search.for_engine.append(outcome.for_engine)
    for candidate in outcome.candidates:
        validation = validate_counterexample(search.network, search.prop, candidate)
        if validation.ok:
            return Result(
                VIOLATED,
                "falsify",
                time.monotonic() - started,
                reason="an attack point of branch and bound is a counterexample "
                "(unsafe exactly, in float64 and in onnxruntime)",
                counterexample=validation.x,
                outputs=validation.outputs,
                stats=stats,
            )
    return None


def _absorb_attack(search: _Search, answer, started: float) -> Result | None:
    candidate, _ = answer
    if candidate is None:
        return None
    validation = validate_counterexample(search.network, search.prop, candidate)
    if not validation.ok:
        return None
    return Result(
        VIOLATED,
        "falsify",
        time.monotonic() - started,
        reason="falsification found a counterexample (unsafe exactly, in float64 and in onnxruntime)",
        counterexample=validation.x,
        outputs=validation.outputs,
        stats=search.stats,
    )


def _absorb_engine(search: _Search, box: _split.Boxes, result: Result, complete, unresolved, started) -> Result | None:
    stats = search.stats
    if result.stats.get(WALL_CLOCK_GUARD):
        stats[WALL_CLOCK_GUARD] = True
        return Result(
            UNKNOWN,
            f"bounds+{complete}",
            time.monotonic() - started,
            stats=stats,
            reason=f"the wall-clock guard fired inside a box query before its rlimit ({result.reason})",
        )
    if result.stats.get("marabou_unsat") and result.verdict != PROVED:
        stats["marabou_unsat_unconfirmed"] = stats.get("marabou_unsat_unconfirmed", 0) + 1
    if result.stats.get("marabou_wrong_unsat"):
        stats["marabou_wrong_unsat"] = stats.get("marabou_wrong_unsat", 0) + 1
    if result.verdict == PROVED:
        if result.engine not in ("z3", "marabou+z3", "lp"):
            raise EngineError(
                f"internal error: the box engine answered proved through {result.engine!r}, "
                "which cannot close a box; refusing to call it proved (please report this)"
            )
        stats["closed_by_engine"] += 1
        search.closed.add(box.depth)
        evidence = ("lp",) if result.engine == "lp" else ("z3",)
        search.closures += [
            _split.Closure(box.lower[0].copy(), box.upper[0].copy(), int(k), evidence)
            for k in np.flatnonzero(box.open[0])
        ]
        return None
    if result.verdict == VIOLATED:
        validation = validate_counterexample(search.network, search.prop, result.counterexample)
        if validation.ok:
            return Result(
                VIOLATED,
                f"bounds+{complete}",
                time.monotonic() - started,
                reason=result.reason,
                counterexample=validation.x,
                outputs=validation.outputs,
                stats=stats,
            )
        unresolved.append(f"{complete} counterexample on a sub-box does not validate: {validation.reason}")
        return None
    exact_violation = _z3.exact_violation_reason(result.stats)
    if exact_violation is not None:
        stats["exact_model"] = result.stats["exact_model"]
        return Result(UNKNOWN, f"bounds+{complete}", time.monotonic() - started, reason=exact_violation, stats=stats)
    stats["engine_undecided"] = stats.get("engine_undecided", 0) + 1
    stats["engine_last_reason"] = result.reason
    if np.all(box.upper <= box.lower):
        unresolved.append(f"{complete} could not decide a point box: {result.reason}")
        return None
    children, bounded = _split.split(search.network, search.objectives, box)
    stats["boxes"] += bounded.boxes
    if bounded.boxes:
        search.closed.add_split(box, children)
        search.closures += bounded.closures
    if len(children):
        search.for_engine.append(children)
    return None


def _budget_spent(search: _Search, budget: WorkBudget) -> bool:
    """The proof needs more than `budget`: more boxes bounded, or another Z3 query when all are used.

    Both are facts of the search tree (every box is bounded once, in any
    order, and the boxes that go to Z3 are the same), not of the clock.
    """
    stats = search.stats
    return stats["boxes"] > budget.boxes or (
        bool(search.for_engine) and stats["engine_queries"] >= budget.engine_queries
    )


def _spent(search: _Search, started: float, complete, budget: WorkBudget) -> Result:
    stats = search.stats
    stats["open_boxes"] = search.open_count()
    return Result(
        UNKNOWN,
        _name(stats, complete),
        time.monotonic() - started,
        stats=stats,
        reason=f"work budget spent ({stats['boxes']} boxes bounded of {budget.boxes}, "
        f"{stats['engine_queries']} z3 queries of {budget.engine_queries}), "
        f"{search.open_count()} boxes open",
    )


def _timeout(search: _Search, started: float, deadline: float, complete, unresolved, budget=None) -> Result:
    reason = f"timeout after {deadline - started:.1f} s, {search.open_count()} boxes open"
    if budget is not None:
        search.stats[WALL_CLOCK_GUARD] = True
        reason = f"the wall-clock guard fired before the work budget was spent: {reason}"
    if unresolved:
        reason += f" ({unresolved[0]})"
    elif "engine_last_reason" in search.stats:
        undecided, last = search.stats["engine_undecided"], search.stats["engine_last_reason"]
        reason += f" ({complete} left {undecided} sub-boxes undecided, last: {last})"
    search.stats["open_boxes"] = search.open_count()
    return Result(UNKNOWN, _name(search.stats, complete), time.monotonic() - started, reason=reason, stats=search.stats)


# --- both engines -------------------------------------------------------------


def _both(network, prop, deadline, jobs, progress, seed, started) -> Result:
    """Marabou and Z3 on the whole query; the verdict stands only where they agree (see the module docstring).

    Two independent complete engines are a cross-check (docs/semantics.md,
    "Verdicts"): maraboupy 2.0 has known wrong answers, and Z3 shares no
    code with it.
    """
    z3 = engine_module("z3")
    share = (deadline - time.monotonic()) / 2
    first = _falsify_step(network, prop, _falsify_budget(network, share), seed, started) or _single_engine(
        "marabou", network, prop, started + share, started, confirm=False
    )
    remaining = deadline - time.monotonic()
    second = z3.check(network, prop, remaining) if remaining > 0 else Result(UNKNOWN, "z3", 0.0, "z3 got no time")
    sides = {"marabou": _summary(first), "z3": _summary(second)}
    stats = {"sides": sides}
    seconds = time.monotonic() - started
    verdicts = {first.verdict, second.verdict}
    reason = f"marabou ({first.engine}): {first.verdict}, {first.reason}; z3: {second.verdict}, {second.reason}"
    if verdicts == {PROVED, VIOLATED}:
        stats["disagreement"] = True
        return Result(UNKNOWN, "both", seconds, reason=f"the engines disagree: {reason}", stats=stats)
    if verdicts == {PROVED}:
        return Result(PROVED, "both", seconds, reason=reason, stats=stats)
    for side in (first, second):
        if side.verdict == VIOLATED:
            return Result(
                VIOLATED,
                "both",
                seconds,
                reason=reason,
                counterexample=side.counterexample,
                outputs=side.outputs,
                stats=stats,
            )
    return Result(UNKNOWN, "both", seconds, reason=f"the engines do not both prove it: {reason}", stats=stats)


def _summary(result: Result) -> dict:
    return {"verdict": result.verdict, "engine": result.engine, "seconds": result.seconds, "reason": result.reason}


# ------------------------------------------------------------------ the engines, registered in the order users see


def _search_engine(name: str):
    """auto and bounds: falsification on the seed points, then branch and bound (with the box engine for auto)."""

    def run(network: Network, prop: Property, search: Search) -> Result:
        found = _falsify_step(network, prop, 0.0, search.seed, search.started)
        return (
            found
            if found is not None
            else _branch_and_bound(
                network,
                prop,
                name,
                search.deadline,
                search.jobs,
                search.progress,
                search.seed,
                search.started,
                search.budget,
            )
        )

    return run


def _solver_engine(name: str):
    """marabou and z3: a short falsification, then the solver alone on the whole box."""

    def run(network: Network, prop: Property, search: Search) -> Result:
        budget = _falsify_budget(network, search.deadline - search.started)
        found = _falsify_step(network, prop, budget, search.seed, search.started)
        return found if found is not None else _single_engine(name, network, prop, search.deadline, search.started)

    return run


def _falsify_budget(network: Network, seconds: float) -> float:
    """Seconds of falsification before a solver given `seconds` on `network` (a tenth, at most FALSIFY_SECONDS)."""
    small = sum(network.hidden_sizes) <= _box_engine.Z3_FIRST_NETWORK
    return min(SMALL_FALSIFY_SECONDS if small else FALSIFY_SECONDS, seconds / 10)


def _both_engine(network: Network, prop: Property, search: Search) -> Result:
    return _both(network, prop, search.deadline, search.jobs, search.progress, search.seed, search.started)


register(
    FunctionEngine(
        "auto",
        True,
        (),
        "bounds and branch and bound; an exact Z3 query on the boxes they leave open",
        _search_engine("auto"),
        takes_budget=True,
    )
)
register(
    FunctionEngine(
        "marabou",
        True,
        ("marabou",),
        "Marabou on the whole box; its UNSAT counts only when Z3 agrees",
        _solver_engine("marabou"),
    )
)
register(FunctionEngine("z3", True, ("z3",), "Z3 alone on the whole box, exactly", _solver_engine("z3")))
register(
    FunctionEngine(
        "both", True, ("marabou", "z3"), "Marabou and Z3, each on the whole box; they must agree", _both_engine
    )
)
register(
    FunctionEngine(
        "bounds",
        False,
        (),
        "bounds and branch and bound alone: proved or unknown",
        _search_engine("bounds"),
        takes_budget=True,
    )
)
ENGINES = tuple(ENGINE_REGISTRY)
"""The registered engines' names, the default first."""
