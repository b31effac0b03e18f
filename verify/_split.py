"""Input splitting: branch and bound over the property's box with sound bounds.

Why: whole-box bounds are loose on large boxes; halving the box along the
right input tightens them quickly, and a partition of the box whose every
part is closed proves the property. The work is vectorised: a batch of
open boxes is split along every input at once, all children are bounded
in one call of `_bounds.objective_bounds`, and each box keeps the split
whose two children fall short of closing by the least in total (measured
on ACAS Xu: this "try every input" choice needs 5-50x fewer boxes than
splitting along the largest |coefficient| * width or the widest input,
which is worth its 5x cost per split). The two children kept then get
their slopes optimised (`_slopes`: a few gradient steps, about the cost of
one more bounding pass): on ACAS Xu 4_2 x property 2 that turns a search
that could not close boxes at depth 60 into one that is done at depth 25
(43 k boxes). Starting each optimisation from the parent's slopes, and
checking every candidate child with them, brings that to 30 k boxes;
tightening the hidden bounds of the kept children (all slope choices,
inherited below) to 21 k, for less CPU time each step.

Invariants:

- A box is closed for a disjunct when some row of that disjunct has a
  lower bound of ``A_r y - b_r`` above zero: no input of the box satisfies
  that row, so none is in the disjunct. Children inherit the closed
  disjuncts of their parent (they are subsets), and also its row bounds
  and hidden-neuron bounds, which stay valid on a subset: without that,
  the adaptive ReLU relaxation can give a child looser bounds than its
  parent and the search stalls (seen on ACAS Xu property 10).
- Every split halves one input's range, so a box of depth k holds 2**-k of
  the (non-degenerate) volume; `Closed` counts closed boxes by depth and a
  proof needs their exact sum to be 1.
- Candidates (points whose float64 outputs are unsafe) are only
  candidates: the caller validates them.
- Every box of the search tree on which a disjunct closes leaves one
  `Closure` (its box, the disjunct and what closed it: the refuting row
  with the name of its lower slopes, or the optimised row weights and
  slopes), and every box it halves one `Cut` (the box and the input), so
  a proof leaves the partition it built for each disjunct, in the order
  it built it (a checker that follows the same tree inherits bounds from
  the same parents),
  which a proof certificate keeps (`_certificate`; docs/design.md, "Box
  trees"). Recording reads values the search computes anyway.

The callers run the search with numpy's BLAS on one thread
(`_pool.single_threaded_blas`): these are many small matrix products.
"""

from __future__ import annotations

import time
from collections import Counter
from fractions import Fraction
from dataclasses import dataclass, field, replace

import numpy as np

from certfsm import Network

from ._bounds import SLOPE_CHOICES, LayerBounds, objective_bounds, pack, preactivation_bounds
from ._falsify import local_search
from ._property import Property
from ._slopes import optimised_disjunct_bounds

BATCH_BOXES = 64
ATTACK_STARTS = 16
ATTACK_STEPS = 30
MAX_CANDIDATES = 4
SPLIT_TIE_BREAK = 1e-9
SLOPE_STEPS = 10
WARM_SLOPES_LIMIT = 4096


@dataclass(frozen=True, eq=False)
class Closure:
    """Disjunct `disjunct` of the unsafe set is refuted on the closed box [lower, upper] of the search tree.

    `evidence` says how: ``("row", r, slopes)``, row r of the disjunct
    (counted within it) with the lower slopes named `slopes` (one of
    `_bounds.SLOPE_CHOICES`); ``("combination", weights, neurons, slopes)``,
    the rows combined with `weights` and the lower slope ``slopes[i]`` on
    hidden neuron ``neurons[i]`` (the neurons unstable on the box; the
    others keep their exact or adaptive slopes); ``("z3",)``, an exact
    UNSAT of the box's query. None: not known (a proof without it leaves
    no certificate).
    """

    lower: np.ndarray
    upper: np.ndarray
    disjunct: int
    evidence: tuple | None
    origin: int = 0
    """The box of a batch it lies in (`Boxes.origin`; `_box_batch.prove_boxes` proves many at once)."""


@dataclass(frozen=True, eq=False)
class Cut:
    """The search halved the closed box [lower, upper] at the float64 midpoint of input `dim`."""

    lower: np.ndarray
    upper: np.ndarray
    dim: int
    origin: int = 0


@dataclass(frozen=True, eq=False)
class Objectives:
    """The unsafe set as rows to refute: ``C y - d``, one row per constraint, with its disjunct.

    `d` is each row's exact right-hand side rounded up (`b_sound`), so a
    lower bound of ``C y - d`` is one of ``C y - b`` too. A row is refuted
    when that bound is > 0, or >= 0 where `at_zero` (a strict row, or one
    whose rounding moved d strictly above b).
    """

    C: np.ndarray
    d: np.ndarray
    owner: np.ndarray
    count: int
    at_zero: np.ndarray

    @staticmethod
    def of(prop: Property, n_outputs: int) -> "Objectives":
        if not prop.unsafe:
            return Objectives(
                np.zeros((0, n_outputs)), np.zeros(0), np.zeros(0, dtype=np.int64), 0, np.zeros(0, dtype=bool)
            )
        C = np.concatenate([c.A for c in prop.unsafe])
        d = np.concatenate([c.b_sound for c in prop.unsafe])
        owner = np.concatenate([np.full(len(c.b), k) for k, c in enumerate(prop.unsafe)])
        at_zero = np.concatenate([c.closes_at_zero() for c in prop.unsafe])
        return Objectives(C, d, owner, len(prop.unsafe), at_zero)

    def refuted(self, rows: np.ndarray) -> np.ndarray:
        """Which row bounds (..., R) refute their row (see the class docstring)."""
        return (rows > 0.0) | (self.at_zero & (rows >= 0.0))


@dataclass(frozen=True, eq=False)
class Boxes:
    """A batch of open boxes and what is known about them, one row per box.

    `lower`, `upper` (B, n): the box. `open` (B, D): disjuncts not yet
    refuted on it. `depth` (B,): number of halvings from the input box.
    `rows` (B, R): the best known lower bound of each objective row
    (a box inherits its parent's bounds, which stay valid on a subset, so
    bounds never get worse down the tree). `combined` (B, D): the best
    known lower bound of an optimised combination of each disjunct's rows
    (`_slopes`; -inf until one was tried), inherited the same way.
    `worst` (B,): the smallest, over the open disjuncts, of the disjunct's
    best bound (row or combination): how far the box is from being closed
    (negative). `hidden` (B, 2, N_hidden): the best known bounds of every
    hidden neuron, inherited the same way. `weights` (B, R) and `slopes`
    (B, D, N_hidden or 0): the row weights and lower slopes of the last
    optimisation of each disjunct (NaN before any), which its children
    start from; the slopes are only kept while D * N_hidden is at most
    `WARM_SLOPES_LIMIT` (memory), else the last axis is empty. `origin`
    (B,): the index of the box this one was cut from when many boxes are
    searched at once (`_box_batch`; 0 for a single property's search),
    inherited by the children. `proof` (B, D) objects: how each disjunct
    closed on this box since the box was made (a `Closure` evidence
    tuple), None where it did not; `split` turns them into `Closure`s.
    """

    lower: np.ndarray
    upper: np.ndarray
    open: np.ndarray
    depth: np.ndarray
    worst: np.ndarray
    rows: np.ndarray
    hidden: np.ndarray
    combined: np.ndarray | None = None
    weights: np.ndarray | None = None
    slopes: np.ndarray | None = None
    origin: np.ndarray | None = None
    proof: np.ndarray | None = None

    _FIELDS = (
        "lower",
        "upper",
        "open",
        "depth",
        "worst",
        "rows",
        "hidden",
        "combined",
        "weights",
        "slopes",
        "origin",
        "proof",
    )

    def __post_init__(self) -> None:
        """Fresh boxes (no optimisation yet) may leave out `combined`, `weights`, `slopes`, `origin` and `proof`."""
        count, disjuncts = self.open.shape
        if self.proof is None:
            object.__setattr__(self, "proof", np.full((count, disjuncts), None, dtype=object))
        if self.origin is None:
            object.__setattr__(self, "origin", np.zeros(count, dtype=np.int64))
        if self.combined is None:
            object.__setattr__(self, "combined", np.full((count, disjuncts), -np.inf))
        if self.weights is None:
            object.__setattr__(self, "weights", np.full((count, self.rows.shape[1]), np.nan))
        if self.slopes is None:
            n_hidden = self.hidden.shape[2]
            kept = n_hidden if disjuncts * n_hidden <= WARM_SLOPES_LIMIT else 0
            object.__setattr__(self, "slopes", np.full((count, disjuncts, kept), np.nan, dtype=np.float32))

    def __len__(self) -> int:
        return int(self.lower.shape[0])

    def take(self, index) -> "Boxes":
        return Boxes(*(getattr(self, name)[index] for name in self._FIELDS))

    @staticmethod
    def concat(parts: list["Boxes"]) -> "Boxes":
        """All boxes of `parts` (at least one part, possibly empty), in order."""
        return Boxes(*(np.concatenate([getattr(p, name) for p in parts]) for name in Boxes._FIELDS))

    def unstable(self) -> np.ndarray:
        """(B,) the number of hidden ReLUs whose phase the box's bounds leave open."""
        return np.count_nonzero((self.hidden[:, 0] < 0.0) & (self.hidden[:, 1] > 0.0), axis=1)

    def nothing(self) -> "Boxes":
        """No boxes, with this batch's shapes."""
        return self.take(slice(0, 0))


@dataclass(eq=False)
class Closed:
    """Closed boxes counted by depth, so the fraction of the input box they cover is exact.

    A proof needs this fraction to be exactly 1 (`is_everything`): a box
    lost by the bookkeeping can then never turn into a wrong ``proved``.
    """

    by_depth: Counter = field(default_factory=Counter)

    def add(self, depths) -> None:
        self.by_depth.update(int(depth) for depth in np.asarray(depths).reshape(-1))

    def add_split(self, parents: Boxes, open_children: Boxes) -> None:
        """Each parent became two children one level deeper; those not among `open_children` are closed."""
        made = Counter()
        for depth, count in Counter((np.asarray(parents.depth) + 1).tolist()).items():
            made[depth] = 2 * count
        made.subtract(Counter(np.asarray(open_children.depth).tolist()))
        if any(count < 0 for count in made.values()):
            raise ValueError("more open children than the split made")
        self.by_depth.update(+made)

    def merge(self, other: "Closed") -> None:
        self.by_depth.update(other.by_depth)

    def count(self) -> int:
        return sum(self.by_depth.values())

    def fraction(self) -> Fraction:
        return sum((Fraction(count, 2**depth) for depth, count in self.by_depth.items()), Fraction(0))

    def is_everything(self) -> bool:
        return self.fraction() == 1


@dataclass(frozen=True, eq=False)
class Bounded:
    """Result of bounding a batch: open disjuncts, worst bounds and attack points per box.

    `layers`: the hidden-layer bounds of every box (`_bounds.LayerBounds`,
    unpacked), for the slope optimisation of the boxes that are kept.
    `proof` (B, D): the row that closed each disjunct closed here (see
    `Boxes.proof`). `closures`: what `split` and `root` closed (`Closure`),
    and the `Cut` of every box `split` halved.
    """

    open: np.ndarray
    worst: np.ndarray
    rows: np.ndarray
    hidden: np.ndarray
    attack_points: np.ndarray
    boxes: int
    layers: list = field(default_factory=list)
    proof: np.ndarray | None = None
    closures: list = field(default_factory=list)


def _best_rows(objectives: Objectives, rows: np.ndarray) -> np.ndarray:
    """(B, D): each disjunct's best row bound."""
    best_row = np.full((rows.shape[0], objectives.count), -np.inf)
    for k in range(objectives.count):
        members = np.flatnonzero(objectives.owner == k)
        if members.size:
            best_row[:, k] = np.max(rows[:, members], axis=1)
    return best_row


def _refuted_disjuncts(objectives: Objectives, rows: np.ndarray) -> np.ndarray:
    """(B, D): disjuncts some row of which is refuted (`Objectives.refuted`: > 0, or >= 0 where that suffices)."""
    refuted_rows = objectives.refuted(rows)
    refuted = np.zeros((rows.shape[0], objectives.count), dtype=bool)
    for k in range(objectives.count):
        members = np.flatnonzero(objectives.owner == k)
        if members.size:
            refuted[:, k] = np.any(refuted_rows[:, members], axis=1)
    return refuted


def _worst(open_disjuncts: np.ndarray, best: np.ndarray) -> np.ndarray:
    return np.min(np.where(open_disjuncts, best, np.inf), axis=1, initial=np.inf)


def bound(
    network: Network,
    objectives: Objectives,
    lower: np.ndarray,
    upper: np.ndarray,
    still_open: np.ndarray,
    known_rows: np.ndarray | None = None,
    known_hidden: np.ndarray | None = None,
    known_combined: np.ndarray | None = None,
) -> Bounded:
    """Bound every box; close the disjuncts some row of which is refuted.

    `known_rows` (B, R), `known_hidden` (B, 2, N_hidden) and
    `known_combined` (B, D) are bounds already proved for boxes containing
    these (their parents); the results are never looser than them.
    """
    result = objective_bounds(network, lower, upper, objectives.C, objectives.d, known=known_hidden)
    rows = result.lower if known_rows is None else np.maximum(result.lower, known_rows)
    count = lower.shape[0]
    best = _best_rows(objectives, rows)
    if known_combined is not None:
        best = np.maximum(best, known_combined)
    now_open = still_open & ~(_refuted_disjuncts(objectives, rows) | (best > 0.0))
    proof = _row_proofs(objectives, result, still_open & ~now_open)
    worst = _worst(now_open, best)
    centres = (lower + upper) / 2.0
    if objectives.C.size:
        chosen = np.argmax(np.where(now_open[:, objectives.owner], result.lower, -np.inf), axis=1)
        points = np.concatenate([centres, result.minimisers[np.arange(count), chosen]])
    else:
        points = centres
    return Bounded(now_open, worst, rows, pack(result.hidden, count), points, count, result.hidden, proof)


def _row_proofs(objectives: Objectives, result, closed: np.ndarray) -> np.ndarray:
    """(B, D) objects: for each disjunct closed here, its first row that this box's own bound refutes, with the
    name of the lower slopes that gave that bound (None where no such row: then the proof is not recorded)."""
    proof = np.full(closed.shape, None, dtype=object)
    if not closed.any():
        return proof
    refuted = objectives.refuted(result.lower)
    for box, k in zip(*np.nonzero(closed)):
        members = np.flatnonzero(objectives.owner == k)
        hits = np.flatnonzero(refuted[box, members])
        if hits.size:
            row = int(hits[0])
            proof[box, k] = ("row", row, SLOPE_CHOICES[int(result.choice[box, members[row]])])
    return proof


def _closures(boxes: Boxes) -> list:
    """The `Closure` of every disjunct that closed on these boxes since they were made."""
    return [
        Closure(boxes.lower[box].copy(), boxes.upper[box].copy(), int(k), boxes.proof[box, k], int(boxes.origin[box]))
        for box, k in zip(*np.nonzero(boxes.proof != None))  # noqa: E711 (elementwise on objects)
    ]


def optimise(network: Network, objectives: Objectives, boxes: Boxes, layers: list, steps: int | None = None) -> Boxes:
    """The boxes with each open disjunct's bound improved by optimised slopes and row combinations (`_slopes`).

    `layers`: the boxes' hidden-layer bounds (`_bounds.LayerBounds`). Each
    box starts from the weights and slopes it holds (its parent's, see
    `Boxes`) where it has them; with `steps` = 1 only those boxes are
    evaluated, at that start point (the cheap check of split candidates).
    A disjunct whose bound is above zero is closed.
    """
    steps = SLOPE_STEPS if steps is None else steps
    if not len(boxes) or steps <= 0 or not objectives.count:
        return boxes
    open_disjuncts, combined = boxes.open.copy(), boxes.combined.copy()
    weights, slopes, proof = boxes.weights.copy(), boxes.slopes.copy(), boxes.proof.copy()
    for k in range(objectives.count):
        members = np.flatnonzero(objectives.owner == k)
        if not members.size:
            continue
        warm = np.all(np.isfinite(weights[:, members]), axis=1) & (slopes.shape[2] > 0)
        for is_warm in (True, False):
            which = np.flatnonzero(open_disjuncts[:, k] & (warm == is_warm))
            if not which.size or (steps == 1 and not is_warm):
                continue
            start = np.argmax(boxes.rows[which][:, members], axis=1)
            part = [LayerBounds(h.low[which], h.high[which], h.magnitude[which]) for h in layers]
            value, found_weights, found_slopes = optimised_disjunct_bounds(
                network,
                part,
                boxes.lower[which],
                boxes.upper[which],
                objectives.C[members],
                objectives.d[members],
                start,
                steps,
                (weights[which][:, members], slopes[which, k]) if is_warm else None,
            )
            combined[which, k] = np.maximum(combined[which, k], value)
            open_disjuncts[which, k] &= ~(combined[which, k] > 0.0)
            for at in np.flatnonzero(value > 0.0):
                unstable = np.flatnonzero(np.concatenate([(h.low[at] < 0.0) & (h.high[at] > 0.0) for h in part]))
                proof[which[at], k] = ("combination", found_weights[at].copy(), unstable, found_slopes[at, unstable])
            weights[np.ix_(which, members)] = found_weights
            if slopes.shape[2]:
                slopes[which, k] = found_slopes
    best = np.maximum(_best_rows(objectives, boxes.rows), combined)
    return replace(
        boxes,
        open=open_disjuncts,
        combined=combined,
        worst=_worst(open_disjuncts, best),
        weights=weights,
        slopes=slopes,
        proof=proof,
    )


def root(network: Network, prop: Property, objectives: Objectives) -> tuple[Boxes, Bounded]:
    """The property's box, bounded: open if some disjunct is not refuted on it."""
    lower, upper = prop.lower[None], prop.upper[None]
    bounded = bound(network, objectives, lower, upper, np.ones((1, objectives.count), bool))
    boxes = Boxes(
        lower,
        upper,
        bounded.open,
        np.zeros(1, np.int64),
        bounded.worst,
        bounded.rows,
        bounded.hidden,
        proof=bounded.proof,
    )
    boxes = optimise(network, objectives, boxes, bounded.layers)
    bounded = replace(bounded, closures=_closures(boxes))
    boxes = replace(boxes, proof=None)
    return boxes.take(np.flatnonzero(boxes.open.any(axis=1))), bounded


def split(network: Network, objectives: Objectives, boxes: Boxes) -> tuple[Boxes, Bounded]:
    """Halve each box along the input whose children fall short of closing by the least; return the open children.

    The shortfall of a child is min(worst bound, 0) (0 once closed); ties
    go to the wider input. Every candidate child is also bounded with its
    parent's optimised slopes and row weights (valid on a sub-box, and one
    cheap pass). The kept children then get tighter hidden-layer bounds
    (each unstable neuron bounded with every slope choice, which their own
    children inherit) and their own optimised slopes (`optimise`, starting
    from the parent's), which closes many of them.

    Inputs of zero width are never split. A box with no splittable input
    is returned unchanged (only a complete engine can decide it).
    """
    count, n = boxes.lower.shape
    width = boxes.upper - boxes.lower
    dims = np.flatnonzero(np.any(width > 0.0, axis=0))
    if dims.size == 0:
        return boxes, Bounded(boxes.open, boxes.worst, boxes.rows, boxes.hidden, (boxes.lower + boxes.upper) / 2.0, 0)
    mid = (boxes.lower + boxes.upper) / 2.0
    lowers, uppers = [], []
    for dim in dims:
        left_upper = boxes.upper.copy()
        left_upper[:, dim] = mid[:, dim]
        right_lower = boxes.lower.copy()
        right_lower[:, dim] = mid[:, dim]
        lowers += [boxes.lower, right_lower]
        uppers += [left_upper, boxes.upper]
    lower, upper = np.concatenate(lowers), np.concatenate(uppers)
    repeat = (2 * dims.size, 1)
    bounded = bound(
        network,
        objectives,
        lower,
        upper,
        np.tile(boxes.open, repeat),
        np.tile(boxes.rows, repeat),
        np.tile(boxes.hidden, (2 * dims.size, 1, 1)),
        np.tile(boxes.combined, repeat),
    )
    candidates = Boxes(
        lower,
        upper,
        bounded.open,
        np.tile(boxes.depth + 1, 2 * dims.size),
        bounded.worst,
        bounded.rows,
        bounded.hidden,
        np.tile(boxes.combined, repeat),
        np.tile(boxes.weights, repeat),
        np.tile(boxes.slopes, (2 * dims.size, 1, 1)),
        np.tile(boxes.origin, 2 * dims.size),
        bounded.proof,
    )
    candidates = optimise(network, objectives, candidates, bounded.layers, steps=1)
    shortfall = np.where(candidates.open.any(axis=1), np.minimum(candidates.worst, 0.0), 0.0)
    shortfall = shortfall.reshape(dims.size, 2, count)
    widths = width[:, dims].T
    score = np.where(widths > 0.0, shortfall.sum(axis=1) + SPLIT_TIE_BREAK * widths, -np.inf)
    choice = np.argmax(score, axis=0)
    rows = np.arange(count)
    picked = np.concatenate([choice * 2 * count + rows, choice * 2 * count + count + rows])
    children = candidates.take(picked)
    is_open = children.open.any(axis=1)
    closures: list = [
        Cut(boxes.lower[i].copy(), boxes.upper[i].copy(), int(dims[choice[i]]), int(boxes.origin[i])) for i in rows
    ]
    closures += _closures(children.take(np.flatnonzero(~is_open)))
    children = children.take(np.flatnonzero(is_open))
    layers = preactivation_bounds(network, children.lower, children.upper, known=children.hidden, slope_choices=True)
    children = optimise(network, objectives, replace(children, hidden=pack(layers, len(children))), layers)
    closures += _closures(children)
    children = replace(children, proof=None)
    children = children.take(np.flatnonzero(children.open.any(axis=1)))
    return children, replace(bounded, closures=closures)


@dataclass(eq=False)
class Outcome:
    """What one stretch of search did: boxes still open, boxes for a complete engine, candidates, counts."""

    open: Boxes
    for_engine: Boxes
    candidates: list = field(default_factory=list)
    closed: Closed = field(default_factory=Closed)
    closures: list = field(default_factory=list)
    bounded_boxes: int = 0
    max_depth: int = 0


def search(
    network: Network,
    prop: Property,
    objectives: Objectives,
    boxes: Boxes,
    deadline: float,
    *,
    engine_depth: int,
    batch: int = BATCH_BOXES,
    attack: bool = True,
    engine_unstable: int = -1,
) -> Outcome:
    """Split and bound the boxes depth-first until all are closed or time is up.

    A box that reaches `engine_depth` splits (or has nothing left to split,
    or has at most `engine_unstable` unstable ReLUs, where an exact query
    is cheap) is set aside for the box engine. Unsafe points met on the way (box
    centres, minimisers of the linear bounds, with `attack` a short gradient
    ascent at the end) are returned as candidates, at most `MAX_CANDIDATES`; the
    caller validates them. The search goes on after a candidate, since a
    candidate may fail validation (float32 may miss where float64 hits).
    """
    stack = [boxes] if len(boxes) else []
    for_engine: list[Boxes] = []
    outcome = Outcome(boxes.nothing(), boxes.nothing())
    while stack and time.monotonic() < deadline:
        current = stack.pop()
        cut = max(len(current) - batch, 0)
        work, rest = current.take(slice(cut, None)), current.take(slice(0, cut))
        if len(rest):
            stack.append(rest)
        deep = (
            (work.depth >= engine_depth)
            | np.all(work.upper <= work.lower, axis=1)
            | (work.unstable() <= engine_unstable)
        )
        if np.any(deep):
            for_engine.append(work.take(np.flatnonzero(deep)))
            work = work.take(np.flatnonzero(~deep))
            if not len(work):
                continue
        children, bounded = split(network, objectives, work)
        outcome.bounded_boxes += bounded.boxes
        outcome.closed.add_split(work, children)
        outcome.closures += bounded.closures
        outcome.max_depth = max(outcome.max_depth, int(work.depth.max()) + 1)
        if len(outcome.candidates) < MAX_CANDIDATES:
            outcome.candidates += _unsafe_points(network, prop, bounded.attack_points)
        if len(children):
            stack.append(children)
    if attack and not outcome.candidates and stack:
        outcome.candidates += _attack(network, prop, Boxes.concat(stack))
    outcome.open = Boxes.concat([boxes.nothing(), *stack])
    outcome.for_engine = Boxes.concat([boxes.nothing(), *for_engine])
    return outcome


def _unsafe_points(network: Network, prop: Property, points: np.ndarray) -> list:
    if not len(points):
        return []
    slack = prop.unsafe_slack(network.evaluate(points))
    best = int(np.argmax(slack))
    return [points[best]] if slack[best] >= 0.0 else []


def _attack(network: Network, prop: Property, boxes: Boxes) -> list:
    """A short gradient ascent from the centres of the boxes closest to unsafe (smallest worst bound)."""
    if not len(boxes) or not prop.unsafe:
        return []
    order = np.argsort(boxes.worst)[:ATTACK_STARTS]
    starts = (boxes.lower[order] + boxes.upper[order]) / 2.0
    found, slack = local_search(network, prop, starts, ATTACK_STEPS, 0.01, 1e-5)
    best = int(np.argmax(slack))
    return [found[best]] if slack[best] >= 0.0 else []
