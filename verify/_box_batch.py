"""Batched box bounding: one property proved on each of many boxes at once, with sound bounds only.

Why: distillation asks one question ("is the decision anything but t?")
of thousands of grid cells. One `check` per cell would pay numpy's
per-call cost thousands of times; here the boxes are bounded together in
chunks (`_split.bound`), and what a whole box cannot close is bisected
(`_split.split`: along the input whose halves come closest to closing),
vectorised over the sub-boxes of all boxes, up to `max_depth` halvings
and `max_open` open sub-boxes per box. Nothing else runs (no
falsification, no complete engine): a box that is not closed is simply
not proved, and the caller takes it to `check`.

Invariant: box i is proved only when every sub-box counted for it lies
inside it (checked at each level) and the volumes of its closed
sub-boxes, counted exactly in integer units of 2**-max_depth of box i,
add up to the whole box; anything else is an internal error, never a
proof. Each sub-box carries the index of the box it was cut from
(`_split.Boxes.origin`), so the boxes may overlap.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from certfsm import Network

from ._property import Property, check_fits
from ._split import Boxes, Closure, Objectives, bound, split

MAX_DEPTH = 12
MAX_OPEN = 16
CHUNK = 2048


@dataclass(frozen=True, eq=False)
class BoxProofs:
    """What `prove_boxes` found: `proved` (B,) bool, and the work it did.

    `proved[i]`: no input of the closed box i reaches the unsafe set (sound
    bounds over a partition of the box). `bounded`: boxes and sub-boxes
    bounded, split candidates included; `deepest`: the most halvings any
    sub-box needed. Both count work, not time, so tests can pin them.
    """

    proved: np.ndarray
    bounded: int
    deepest: int
    proofs: tuple | None = None
    """With ``record=True``: per box, the `_split.Closure` and `_split.Cut` records of its proof (None where it was
    not proved), from which `_certificate.proof_documents` builds the box's certificate entry."""


def prove_boxes(
    network: Network,
    prop: Property,
    lower,
    upper,
    *,
    max_depth: int = MAX_DEPTH,
    max_open: int = MAX_OPEN,
    chunk: int = CHUNK,
    record: bool = False,
) -> BoxProofs:
    """Prove `prop` on each box [lower[i], upper[i]] (rows inside `prop`'s box) by bounds and bisection.

    Its boxes are bounded `chunk` at a time; a box not closed whole is
    halved, level by level, until it closes, needs more than `max_depth`
    halvings, or has more than `max_open` open sub-boxes at once (then it
    is given up: not proved). Only `prop`'s unsafe set is read from
    `prop`; its box bounds where the rows may lie. With `record`, each
    proved box also gets what closed it (`BoxProofs.proofs`).
    """
    check_fits(network, prop, "prove_boxes")
    lower, upper = _rows(prop, lower, upper)
    count = lower.shape[0]
    objectives = Objectives.of(prop, network.n_outputs)
    full = 1 << max_depth
    weight = [0] * count
    given_up = np.zeros(count, dtype=bool)
    bounded, deepest = 0, 0
    levels = []
    records: list[list] = [[] for _ in range(count)] if record else []
    for start in range(0, count, chunk):
        part = slice(start, start + chunk)
        result = bound(
            network, objectives, lower[part], upper[part], np.ones((len(lower[part]), objectives.count), dtype=bool)
        )
        bounded += result.boxes
        origin = np.arange(start, start + len(lower[part]))
        if record and result.proof is not None:
            for box, k in zip(*np.nonzero(result.proof != None)):  # noqa: E711 (elementwise on objects)
                at = start + int(box)
                records[at].append(Closure(lower[at].copy(), upper[at].copy(), int(k), result.proof[box, k], at))
        is_open = result.open.any(axis=1)
        for box in origin[~is_open].tolist():
            weight[box] += full
        level = Boxes(
            lower[part],
            upper[part],
            result.open,
            np.zeros(len(origin), np.int64),
            result.worst,
            result.rows,
            result.hidden,
            origin=origin,
        )
        levels.append(level.take(np.flatnonzero(is_open)))
    boxes = Boxes.concat(levels) if levels else None
    step = max(1, chunk // (2 * max(1, network.n_inputs)))
    while boxes is not None and len(boxes):
        _require_inside(boxes, lower, upper)
        given_up |= np.bincount(boxes.origin, minlength=count) > max_open
        given_up[boxes.origin[boxes.depth >= max_depth]] = True
        boxes = boxes.take(np.flatnonzero(~given_up[boxes.origin]))
        children = []
        for start in range(0, len(boxes), step):
            parents = boxes.take(slice(start, start + step))
            made, result = split(network, objectives, parents)
            bounded += result.boxes
            for item in result.closures if record else ():
                records[item.origin].append(item)
            if len(made) and made.depth.min() <= parents.depth.min():
                given_up[parents.origin] = True
                continue
            deepest = max(deepest, int(parents.depth.max()) + 1)
            born = Counter(zip(parents.origin.tolist(), parents.depth.tolist()))
            alive = Counter(zip(made.origin.tolist(), (made.depth - 1).tolist()))
            for (box, depth), n in born.items():
                weight[box] += (2 * n - alive[(box, depth)]) << (max_depth - depth - 1)
            children.append(made)
        boxes = Boxes.concat(children) if children else boxes.nothing()
    if any(w > full for w in weight):
        raise AssertionError("internal error: closed sub-boxes cover more than their box; refusing the proof")
    proved = np.array([w == full for w in weight], dtype=bool) & ~given_up
    proofs = tuple(tuple(r) if p else None for r, p in zip(records, proved.tolist())) if record else None
    return BoxProofs(proved, bounded, deepest, proofs)


def _rows(prop: Property, lower, upper) -> tuple[np.ndarray, np.ndarray]:
    """The boxes as float64 (B, n) arrays, refused unless finite, ordered and inside `prop`'s box."""
    lower = np.array(lower, dtype=np.float64, ndmin=2)
    upper = np.array(upper, dtype=np.float64, ndmin=2)
    if lower.shape != upper.shape or lower.shape[1] != prop.n_inputs:
        raise ValueError(
            f"prove_boxes: lower {lower.shape} and upper {upper.shape} must both be "
            f"(boxes, {prop.n_inputs}), one row per box of property {prop.name!r}"
        )
    if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper)) and np.all(lower <= upper)):
        raise ValueError(f"prove_boxes: every box must be finite with lower <= upper (property {prop.name!r})")
    if np.any(lower < prop.lower) or np.any(upper > prop.upper):
        raise ValueError(
            f"prove_boxes: a box leaves the box of property {prop.name!r}; widen the property's box "
            "or cut the boxes to it"
        )
    return lower, upper


def _require_inside(boxes: Boxes, lower: np.ndarray, upper: np.ndarray) -> None:
    """Every sub-box lies inside the box it is counted for: otherwise its volume would prove the wrong box."""
    if np.any(boxes.lower < lower[boxes.origin]) or np.any(boxes.upper > upper[boxes.origin]):
        raise AssertionError("internal error: a sub-box does not lie inside the box it was cut from")
