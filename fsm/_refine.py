"""Refinement: split every grid cell that did not end exact into a box tree and prove its leaves again.

docs/design.md, "Box trees". Runs after the flat distillation when the
spec has ``refine`` (a `certfsm.TreeBudget` per cell); without it nothing
here runs and the table is flat.

Rounds, breadth-first over every refined cell at once:

1. Split. In each cell, in pre-order, every leaf that is open (not
   exact, or exact on a token its own box forbids) is cut in two while
   the cell's tree stays within ``max_leaves`` and the leaf within
   ``max_depth``. The input: the one that separates the leaf's witness
   pair most (relative to the width of its cell on that input), else the
   widest input relative to its cell, ties to the lowest index; inputs
   whose interval holds no threshold are skipped. The threshold: the
   midpoint of the leaf's interval, rounded down to the fixed-point grid
   where the input has ``frac_bits`` (up when that is the low end), else
   the float64 midpoint; validated by the core's `threshold_problem`.
2. Prove the new leaves, cheapest first as cells are: samples in the
   leaf's half-open box (a pair with different decisions that
   re-validates in onnxruntime makes the leaf conservative at once), then
   bound propagation with bisection (`verify.prove_boxes`, the cell
   phase's depth and open-box limits) on the closed box of the leaf,
   chunks of `LEAF_CHUNK` leaves on the one pool.
3. A leaf that stays open and cannot be split further is closed: a
   witness pair -> conservative; unanimous samples -> `verify.check`
   with the distillation's work budget (proved -> exact; violated -> a
   witness from the counterexample when it re-validates; else
   undecided); samples that disagree only in float64 -> undecided.

Every leaf's allowed mask is the core's `leaf_allowed_mask` for its own
box; an exact leaf on a token forbidden there is held back (the
conservative token, status conservative), as a cell is. Only trees with
at least one exact leaf go into the table; the other refined cells keep
their flat conservative entry.

Reproducible (docs/semantics.md, "Reproducible verdicts"): the order of
splits, the samples (a fixed function of the seed, the cell and the
leaf's place in its tree), the chunks and every budget are counted in
leaves, boxes and solver queries, so the same spec and model give the same
tree on 1 or many jobs. Workers only compute; results are applied in leaf
order in this process. Nothing of a refinement goes to the checkpoint
(`_checkpoint` keeps flat decisions only): a resumed run refines again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from certfsm import (
    Box,
    BoxTree,
    Leaf,
    LeafStatus,
    Refinement,
    Split,
    TreeBudget,
    float_at_least,
    float_at_most,
    leaf_allowed_mask,
    threshold_problem,
)
from certfsm.verify import WALL_CLOCK_GUARD, Property, WorkBudget, check, prove_boxes

from ._cell_bounds import MAX_OPEN_BOXES, SPLIT_DEPTH
from ._cell_problem import _Problem
from ._cell_sampling import _INSET, _uniform
from ._cell_workers import _cells_label, _Outcome, _run_tasks
from ._table import CONSERVATIVE, EXACT, UNDECIDED

LEAF_SAMPLES = 16
"""Samples per new leaf: its centre, corners pulled inside (random ones beyond 8) and random points."""
LEAF_WORK = WorkBudget(boxes=2_000, engine_queries=2, z3_rlimit=2_000_000)
"""The most `verify.check` may spend on one leaf that cannot be split further (a tenth of a cell's default
`CELL_BUDGET`; a smaller `work` given to `refine` wins): a refined cell has up to ``max_leaves`` of them."""
LEAF_CHUNK = 256
"""Leaves per bound-propagation task: fixed, so that the tasks (and so the trees) do not depend on `jobs`."""
_STATUS = {EXACT: LeafStatus.EXACT, CONSERVATIVE: LeafStatus.CONSERVATIVE, UNDECIDED: LeafStatus.UNDECIDED}


@dataclass(eq=False)
class _Node:
    """A node of a tree being refined (mutable, in this process only); `place` is its heap number (root 1)."""

    cell: int
    place: int
    depth: int
    box: Box
    status: int | None = None
    token: int = -1
    candidate: int = -1
    hint: np.ndarray | None = None
    witness: tuple[np.ndarray, np.ndarray] | None = None
    pair: tuple[np.ndarray, np.ndarray] | None = None
    """Two samples with different float64 decisions (the witness when it validated), for choosing the input."""
    separating: tuple[int, ...] = ()
    """The inputs along which moving one end of `pair` to the other's value alone changes its decision."""
    engine: str = ""
    reason: str = ""
    allowed: int = 0
    split: tuple[int, Fraction] | None = None
    children: tuple[_Node, _Node] | None = None
    id: int = -1
    """Its number in the list of leaves sent to workers (-1: none sent)."""
    proof: tuple | None = None
    """(property proved, recorded proof) of an exact leaf, for the report's proof certificate."""

    def leaves(self) -> list[_Node]:
        if self.children is None:
            return [self]
        return self.children[0].leaves() + self.children[1].leaves()


@dataclass(frozen=True, eq=False)
class _LeafBounds:
    """Leaves for bound propagation: ids, closed float64 boxes rounded outward, the sampled token of each."""

    ids: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    tokens: np.ndarray

    @property
    def label(self) -> str:
        """The chunk's leaves, as a failed task's message names them."""
        return _cells_label("leaves", self.ids)


@dataclass(frozen=True, eq=False)
class _LeafCheck:
    """One leaf for `verify.check`: prove `token` on the closed `box`."""

    id: int
    box: Box
    token: int
    timeout: float
    seed: int
    budget: WorkBudget

    @property
    def label(self) -> str:
        """The leaf, as a failed task's message names it."""
        return f"leaf {self.id}"


@dataclass(frozen=True, eq=False)
class RefineResult:
    """The refinement of a distillation: the trees for the artifact, one record per leaf and the stats."""

    refinement: Refinement | None
    records: tuple[dict, ...]
    stats: dict
    proofs: dict = field(default_factory=dict)
    """Per exact leaf in the table, (cell, leaf in pre-order) -> (property proved, recorded proof), where the
    problem records proofs: the report's proof certificate names each leaf by them."""


def _leaf_work(problem: _Problem, task) -> _Outcome:
    """Run one leaf task in a worker: bound propagation on a chunk, or `verify.check` on one leaf."""
    started = time.monotonic()
    if isinstance(task, _LeafBounds):
        answers = []
        for token in np.unique(task.tokens):
            rows = np.flatnonzero(task.tokens == token)
            prop = problem.envelope_property(int(token))
            found = prove_boxes(
                problem.network,
                prop,
                task.lower[rows],
                task.upper[rows],
                max_depth=SPLIT_DEPTH,
                max_open=MAX_OPEN_BOXES,
                record=problem.records_proofs,
            )
            for k, row in enumerate(rows):
                proof = None
                if found.proved[k] and found.proofs:
                    proof = (prop.restricted(task.lower[row], task.upper[row], prop.unsafe), found.proofs[k])
                answers.append((int(task.ids[row]), bool(found.proved[k]), proof))
        return _Outcome("bounds", sorted(answers, key=lambda answer: answer[0]), [], time.monotonic() - started)
    prop = _leaf_property(problem, task.box, task.token)
    result = check(
        problem.network,
        prop,
        engine="auto",
        timeout=task.timeout,
        jobs=1,
        seed=task.seed,
        budget=task.budget,
    )
    verdict = (
        "guard"
        if result.stats.get(WALL_CLOCK_GUARD)
        else "proved"
        if result.is_proved
        else "violated"
        if result.is_violated
        else "unknown"
    )
    found = None if result.counterexample is None else np.asarray(result.counterexample, dtype=np.float64)
    engine = "marabou" if "marabou" in result.engine else "z3" if "z3" in result.engine else "check"
    proof = (
        (prop, result.proof) if verdict == "proved" and result.proof is not None and problem.records_proofs else None
    )
    outcome = (task.id, verdict, found, engine, f"{result.engine}: {result.reason}", proof)
    return _Outcome("engines", [outcome], [], time.monotonic() - started)


def _leaf_property(problem: _Problem, box: Box, token: int) -> Property:
    """`_Problem.decision_property` over the closed leaf box, read exactly."""
    lower = tuple(i.low for i in box.intervals)
    upper = tuple(i.high for i in box.intervals)
    return problem.decision_property(f"leaf: decision is {problem.outputs[token]}", lower, upper, token, "the leaf")


def _proof_box(box: Box) -> tuple[list[float], list[float]]:
    """The closed float64 box around the leaf, rounded outward."""
    return [float_at_most(i.low) for i in box.intervals], [float_at_least(i.high) for i in box.intervals]


def _float_box(box: Box) -> tuple[np.ndarray, np.ndarray]:
    """The closed box of the float64 points in the half-open leaf (lower > upper on an input: no such point)."""
    lower, upper = [], []
    for i in box.intervals:
        lower.append(float_at_least(i.low))
        top = float_at_most(i.high)
        if not i.closed and Fraction(top) == i.high:
            top = float(np.nextafter(top, -np.inf))
        upper.append(top)
    return np.array(lower), np.array(upper)


def _threshold(box: Box, axis: int, frac_bits: tuple[int | None, ...]) -> Fraction | None:
    """Where to cut `box` on `axis` (see the module docstring), or None when no threshold fits."""
    cut = box.intervals[axis]
    middle = (cut.low + cut.high) / 2
    bits = frac_bits[axis]
    if bits is None:
        choices = [Fraction(float(middle))]
    else:
        scale = 1 << bits
        down = Fraction((middle * scale).numerator // (middle * scale).denominator, scale)
        choices = [down, down + Fraction(1, scale)]
    for threshold in choices:
        if threshold_problem(box, axis, threshold, frac_bits) is None:
            low, high = box.split(axis, threshold)
            if all(np.all(a <= b) for a, b in (_float_box(low), _float_box(high))):
                return threshold
    return None


def _choose_split(node: _Node, widths: list[Fraction], frac_bits) -> tuple[int, Fraction] | None:
    """The input and threshold of the next cut of `node` (the module docstring's rule), None when none fits."""
    spans = [(i.high - i.low) / w for i, w in zip(node.box.intervals, widths)]
    order = sorted(range(len(spans)), key=lambda k: (-spans[k], k))
    if node.pair is not None:
        gap = [abs(Fraction(float(a)) - Fraction(float(b))) / w for a, b, w in zip(*node.pair, widths)]
        order = sorted(range(len(gap)), key=lambda k: (k not in node.separating, -gap[k], -spans[k], k))
    for axis in order:
        threshold = _threshold(node.box, axis, frac_bits)
        if threshold is not None:
            return axis, threshold
    return None


def refine(
    problem: _Problem,
    spec,
    budget: TreeBudget,
    cells: list[int],
    witnesses: dict[int, tuple[np.ndarray, np.ndarray]],
    *,
    jobs: int,
    seed: int,
    work: WorkBudget,
    guard: float,
    exact_before: float = 0.0,
    progress=None,
) -> RefineResult:
    """Refine `cells` (flat cells that are not exact) within `budget`; see the module docstring. `exact_before`
    (the exact share of the volume of the flat table) and `progress(message)` after each round for the words."""
    started = time.monotonic()
    grid = problem.grid
    frac_bits = tuple(grid.frac_bits)
    legal = sum(1 << k for k in spec.legal_indices)
    rules = [(r.lower, r.upper, sum(1 << k for k in spec.forbidden_indices(r))) for r in spec.rules]
    envelope = np.prod(grid.upper - grid.lower)
    roots: dict[int, _Node] = {}
    widths: dict[int, list[Fraction]] = {}
    for cell in cells:
        bins = grid.multi_index(cell)
        box = Box.of_bounds(
            [e[b] for e, b in zip(grid.edges, bins)],
            [e[b + 1] for e, b in zip(grid.edges, bins)],
            [b + 2 == len(e) for e, b in zip(grid.edges, bins)],
        )
        roots[cell] = _Node(cell, 1, 0, box, witness=witnesses.get(cell), pair=witnesses.get(cell))
        widths[cell] = [i.high - i.low for i in box.intervals]
    _separate(problem, [root for root in roots.values() if root.pair is not None])
    nodes: list[_Node] = []
    counts = {"rounds": 0, "bound_tasks": 0, "check_tasks": 0}
    final: list[_Node] = []

    def run(tasks: list) -> list:
        answers: list = []
        _run_tasks(
            problem, tasks, lambda outcome: [], jobs, lambda outcome: answers.extend(outcome.decisions), _leaf_work
        )
        return answers

    frontier = {cell: [root] for cell, root in roots.items()}
    while frontier:
        fresh: list[_Node] = []
        for cell in sorted(frontier):
            count = len(roots[cell].leaves())
            for node in frontier[cell]:
                choice = None
                if node.depth < budget.max_depth and count < budget.max_leaves:
                    choice = _choose_split(node, widths[cell], frac_bits)
                if choice is None:
                    final.append(node)
                    continue
                node.split = choice
                low, high = node.box.split(*choice)
                node.children = (
                    _Node(cell, 2 * node.place, node.depth + 1, low),
                    _Node(cell, 2 * node.place + 1, node.depth + 1, high),
                )
                fresh += node.children
                count += 1
        if not fresh:
            break
        counts["rounds"] += 1
        _sample(problem, fresh, seed)
        unanimous = [node for node in fresh if node.candidate >= 0]
        for node in unanimous:
            node.id = len(nodes)
            nodes.append(node)
        tasks = []
        for start in range(0, len(unanimous), LEAF_CHUNK):
            part = unanimous[start : start + LEAF_CHUNK]
            boxes = [_proof_box(node.box) for node in part]
            tasks.append(
                _LeafBounds(
                    np.array([node.id for node in part]),
                    np.array([b[0] for b in boxes]),
                    np.array([b[1] for b in boxes]),
                    np.array([node.candidate for node in part]),
                )
            )
        counts["bound_tasks"] += len(tasks)
        for id, proved, proof in sorted(run(tasks), key=lambda answer: answer[0]):
            if proved:
                node = nodes[id]
                node.status, node.token, node.engine, node.proof = EXACT, node.candidate, "bounds", proof
        frontier = {}
        for node in fresh:
            node.allowed = leaf_allowed_mask(node.box, legal, rules)
            if node.status == EXACT and node.allowed >> node.token & 1:
                continue
            frontier.setdefault(node.cell, []).append(node)
        if progress is not None:
            progress(_progress_line(roots, envelope, counts["rounds"], exact_before))
    leaf_work = WorkBudget(
        min(work.boxes, LEAF_WORK.boxes),
        min(work.engine_queries, LEAF_WORK.engine_queries),
        min(work.z3_rlimit, LEAF_WORK.z3_rlimit),
    )
    clock = time.monotonic()
    _close(problem, final, nodes, run, counts, seed, leaf_work, guard)
    counts["check_seconds"] = round(time.monotonic() - clock, 3)
    return _result(problem, roots, budget, envelope, counts, time.monotonic() - started)


def _sample(problem: _Problem, fresh: list[_Node], seed: int) -> None:
    """Sample the new leaves (vectorised): a candidate token where the samples agree, else a validated pair."""
    n = problem.grid.n_inputs
    keys = np.array([node.cell * (1 << 26) + node.place for node in fresh], dtype=np.int64)
    u = _uniform(seed, keys, LEAF_SAMPLES, n)
    corners = min(2**n, 8)
    if 2**n <= 8:
        bits = (np.arange(corners)[:, None] >> np.arange(n)[None, :]) & 1
        u[:, 1 : corners + 1] = np.where(bits[None] == 1, _INSET, 0.0)
    else:
        u[:, 1 : corners + 1] = np.where(u[:, 1 : corners + 1] >= 0.5, _INSET, 0.0)
    u[:, 0] = 0.5
    boxes = [_float_box(node.box) for node in fresh]
    lower = np.array([b[0] for b in boxes])
    upper = np.array([b[1] for b in boxes])
    x = np.minimum(lower[:, None, :] + u * (upper - lower)[:, None, :], upper[:, None, :])
    flat = x.reshape(-1, n)
    scores = problem.network.evaluate(flat)
    decision = problem.decisions(flat).reshape(len(fresh), -1)
    robust = problem.robustness(scores).reshape(len(fresh), -1)
    rows = np.arange(len(fresh))
    best = np.argmax(robust, axis=1)
    first = decision[rows, best]
    differs = decision != first[:, None]
    mixed = differs.any(axis=1)
    runner_up = np.argmax(np.where(differs, robust, -np.inf), axis=1)
    mixed_rows = np.flatnonzero(mixed)
    valid = _valid(problem, x[mixed_rows, best[mixed_rows]], x[mixed_rows, runner_up[mixed_rows]])
    for k, node in enumerate(fresh):
        node.hint = x[k, best[k]]
        node.candidate = -1 if mixed[k] else int(first[k])
    for j, k in enumerate(mixed_rows.tolist()):
        fresh[k].pair = (x[k, best[k]], x[k, runner_up[k]])
        if valid[j]:
            fresh[k].witness = fresh[k].pair
            fresh[k].engine = "sampling"
    _separate(problem, [fresh[k] for k in mixed_rows.tolist()])


def _separate(problem: _Problem, nodes: list[_Node]) -> None:
    """Set each node's `separating` inputs: those where giving the pair's first point the second's value alone
    changes its float64 decision (vectorised: one evaluation of n points per node)."""
    if not nodes:
        return
    n = problem.grid.n_inputs
    first = np.array([node.pair[0] for node in nodes])  # type: ignore[index]
    second = np.array([node.pair[1] for node in nodes])  # type: ignore[index]
    moved = np.repeat(first[:, None, :], n, axis=1)
    moved[:, np.arange(n), np.arange(n)] = second
    base = problem.decisions(first)
    changed = problem.decisions(moved.reshape(-1, n)).reshape(len(nodes), n) != base[:, None]
    for node, row in zip(nodes, changed):
        node.separating = tuple(int(k) for k in np.flatnonzero(row))


def _valid(problem: _Problem, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Per row: the two points (inside their leaf by construction) decide differently in float64 and onnxruntime."""
    if not len(first):
        return np.zeros(0, dtype=bool)
    points = np.concatenate([first, second])
    exact = problem.decisions(points)
    deployed = problem.onnx_decisions(points)
    count = len(first)
    return (exact[:count] != exact[count:]) & (deployed == exact)[:count] & (deployed == exact)[count:]


def _close(problem: _Problem, final: list[_Node], nodes: list, run, counts: dict, seed: int, work, guard) -> None:
    """Give every leaf that cannot be split further its verdict (the module docstring, step 3)."""
    tasks = []
    for node in final:
        if node.status == EXACT:
            continue
        if node.witness is not None:
            node.status, node.token = CONSERVATIVE, problem.conservative
            node.engine = node.engine or "sampling"
        elif node.candidate >= 0:
            if node.id < 0:
                node.id = len(nodes)
                nodes.append(node)
            tasks.append(_LeafCheck(node.id, node.box, node.candidate, guard, seed + node.cell + node.place, work))
        else:
            node.status, node.token, node.engine = UNDECIDED, problem.conservative, "undecided"
            node.reason = "undecided: samples disagree in float64 but no pair validated in onnxruntime"
    counts["check_tasks"] = len(tasks)
    for id, verdict, found, engine, reason, proof in sorted(run(tasks), key=lambda answer: answer[0]):
        node = nodes[id]
        if verdict == "guard":
            _raise_guard(node, reason)
        if verdict == "proved":
            node.status, node.token, node.engine, node.proof = EXACT, node.candidate, engine, proof
            continue
        node.status, node.token, node.engine = UNDECIDED, problem.conservative, "undecided"
        node.reason = f"undecided: {reason}"
        if verdict == "violated" and found is not None and node.box.contains([Fraction(float(v)) for v in found]):
            if _valid(problem, node.hint[None], found[None])[0]:
                node.status, node.engine, node.reason = CONSERVATIVE, engine, ""
                node.witness = (node.hint, found)


def _raise_guard(node: _Node, reason: str) -> None:
    from certfsm import EngineError

    raise EngineError(
        f"cell {node.cell}, leaf {node.place} of its tree: the wall-clock guard fired before the work budget was "
        f"spent ({reason}), so this leaf's verdict would depend on the machine's speed; no artifact was written; "
        "give a larger per_cell_timeout= or leave it out"
    )


def _volume(box: Box, envelope: float) -> float:
    return float(np.prod([float(i.high - i.low) for i in box.intervals])) / envelope


def _progress_line(roots: dict[int, _Node], envelope: float, rounds: int, before: float) -> str:
    leaves = [leaf for root in roots.values() for leaf in root.leaves()]
    exact = before + sum(_volume(leaf.box, envelope) for leaf in leaves if leaf.status == EXACT)
    return f"refining: round {rounds}, {len(leaves):,} leaves done, {100 * exact:.2f}% of the volume exact so far"


def _result(problem: _Problem, roots, budget: TreeBudget, envelope: float, counts, seconds: float) -> RefineResult:
    """The trees that hold an exact leaf, one record per leaf of them, and the stats (the module docstring)."""
    outputs = problem.outputs
    cells, trees, records, proofs = [], [], [], {}
    by_status = {"exact": 0, "conservative": 0, "undecided": 0, "held_back": 0}
    volume_by_token = {name: 0.0 for name in outputs}
    all_leaves = 0
    for cell in sorted(roots):
        root = roots[cell]
        leaves = root.leaves()
        all_leaves += len(leaves)
        usable = [leaf.status == EXACT and leaf.allowed >> leaf.token & 1 for leaf in leaves]
        if root.children is None or not any(usable):
            continue
        built = {}

        def build(node: _Node) -> Leaf | Split:
            if node.children is None:
                ok = node.status == EXACT and node.allowed >> node.token & 1
                held = node.status == EXACT and not ok
                status = _STATUS[node.status] if ok or node.status != EXACT else LeafStatus.CONSERVATIVE
                leaf = Leaf(status, node.token if ok else problem.conservative, node.allowed)
                built[id(node)] = (leaf, held)
                return leaf
            return Split(*node.split, build(node.children[0]), build(node.children[1]))

        tree = BoxTree(root.box, build(root), tuple(problem.grid.frac_bits))
        cells.append(cell)
        trees.append(tree)
        for k, (node, leaf_box) in enumerate(zip(leaves, tree.boxes)):
            leaf, held = built[id(node)]
            volume = _volume(leaf_box, envelope)
            kind = "held_back" if held else leaf.status.value
            by_status[kind] += 1
            if leaf.status is LeafStatus.EXACT:
                volume_by_token[outputs[leaf.token]] += volume
                if node.proof is not None:
                    proofs[cell, k] = node.proof
            record = {
                "cell": cell,
                "leaf": k,
                "box": [[_exact(i.low), _exact(i.high), i.closed] for i in leaf_box.intervals],
                "status": leaf.status.value,
                "token": outputs[leaf.token],
                "engine": node.engine or "none",
            }
            if held:
                record["held_back"] = outputs[node.token]
            if node.witness is not None and leaf.status is not LeafStatus.EXACT:
                record["witness"] = [[float(v) for v in x] for x in node.witness]
            if node.reason:
                record["reason"] = node.reason
            records.append(record)
    stats = {
        "max_depth": budget.max_depth,
        "max_leaves": budget.max_leaves,
        "cells_tried": len(roots),
        "leaves_tried": all_leaves,
        "cells_refined": len(cells),
        "leaves": sum(by_status.values()),
        "leaves_by_status": by_status,
        "exact_volume_by_token": volume_by_token,
        "exact_volume_share": sum(volume_by_token.values()),
        **counts,
        "seconds": round(seconds, 3),
    }
    refinement = Refinement(tuple(cells), tuple(trees)) if cells else None
    return RefineResult(refinement, tuple(records), stats, proofs)


def _exact(value: Fraction) -> str:
    """An exact rational as text: the integer, or p/q."""
    return str(value)
