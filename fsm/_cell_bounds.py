"""Phase 2 of `distill`: prove each cell's sampled token by bound propagation, many cells at once.

Cells are grouped by their sampled token t, so one unsafe set (the
closure of "the decision is not t", `_Problem.exact_property`) serves a
whole group; the group's boxes are bounded in chunks of `BOUND_CHUNK`
(`verify._split.bound`), and what a whole cell cannot close is bisected
(`verify._split.split`, along the input whose halves come closest to
closing), vectorised over the boxes of all cells of the group, up to
`SPLIT_DEPTH` halvings and `MAX_OPEN_BOXES` open boxes per cell. What is
left open goes to the engines (phase 3).

Invariant: a cell is EXACT only when the volumes of its closed boxes,
counted exactly in integer units of 2**-SPLIT_DEPTH of the cell, add up
to the whole cell, and every box lies inside the cell it is counted for
(`_owners` checks); anything else is an internal error, never a proof.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from certfsm.verify import _split

from ._cell_problem import _Decision, _Problem
from ._grid import Grid
from ._table import EXACT

BOUND_CHUNK = 2048
SPLIT_DEPTH = 12
MAX_OPEN_BOXES = 16


def _bounds_phase(problem: _Problem, cells: np.ndarray, candidate: np.ndarray, on_batch) -> list[int]:
    """Prove each cell's sampled token by bound propagation, bisecting what the whole cell cannot close.

    Cells are grouped by candidate token, so one unsafe set (the closure
    of "the decision is not t") serves a whole group, and the group's
    boxes are bounded and split together (`verify._split.bound` and
    `split`, which halves each box along the input whose halves come
    closest to closing). A box's cell is the cell of its centre (strictly
    inside it). A cell whose open boxes exceed `MAX_OPEN_BOXES` or
    `SPLIT_DEPTH` halvings is left to the engines. A cell is EXACT when
    the closed boxes' volumes, counted exactly in units of 2**-SPLIT_DEPTH,
    add up to the whole cell. Returns the cells left open.
    """
    full = 1 << SPLIT_DEPTH
    left_open: list[int] = []
    for token in np.unique(candidate):
        group = np.asarray(cells[candidate == token], dtype=np.int64)
        objectives = _split.Objectives.of(problem.exact_property(int(group[0]), int(token)), problem.n_outputs)
        weight = dict.fromkeys(group.tolist(), 0)
        given_up: set[int] = set()
        lower, upper = problem.grid.cells_bounds(group)
        boxes = []
        for start in range(0, len(group), BOUND_CHUNK):
            part = slice(start, start + BOUND_CHUNK)
            bounded = _split.bound(problem.network, objectives, lower[part], upper[part],
                                   np.ones((len(lower[part]), objectives.count), dtype=bool))
            level = _split.Boxes(lower[part], upper[part], bounded.open, np.zeros(len(lower[part]), np.int64),
                                 bounded.worst, bounded.rows, bounded.hidden)
            is_open = bounded.open.any(axis=1)
            for cell in group[part][~is_open]:
                weight[int(cell)] += full
            boxes.append(level.take(np.flatnonzero(is_open)))
        boxes = _split.Boxes.concat(boxes)
        while len(boxes):
            owner = _owners(problem.grid, boxes)
            counts = Counter(owner.tolist())
            stop = {cell for cell, n in counts.items() if n > MAX_OPEN_BOXES}
            if int(boxes.depth.max()) >= SPLIT_DEPTH:
                stop |= set(owner[boxes.depth >= SPLIT_DEPTH].tolist())
            given_up |= stop
            keep = np.flatnonzero(~np.isin(owner, list(given_up)))
            boxes, owner = boxes.take(keep), owner[keep]
            children = []
            step = max(1, BOUND_CHUNK // (2 * problem.grid.n_inputs))
            for start in range(0, len(boxes), step):
                parents = boxes.take(slice(start, start + step))
                made, _ = _split.split(problem.network, objectives, parents)
                if len(made) and made.depth.min() <= parents.depth.min():
                    given_up |= set(owner[start:start + step].tolist())
                    continue
                born = Counter(zip(owner[start:start + step].tolist(), parents.depth.tolist()))
                alive = Counter(zip(_owners(problem.grid, made).tolist(), (made.depth - 1).tolist()))
                for (cell, depth), n in born.items():
                    weight[cell] += (2 * n - alive[(cell, depth)]) << (SPLIT_DEPTH - depth - 1)
                children.append(made)
            boxes = _split.Boxes.concat(children) if children else boxes.nothing()
        if any(w > full for w in weight.values()):
            raise AssertionError("internal error: closed sub-boxes cover more than their cell; refusing the proof")
        exact = [cell for cell in group.tolist() if weight[cell] == full and cell not in given_up]
        left_open += [cell for cell in group.tolist() if weight[cell] != full or cell in given_up]
        on_batch([_Decision(cell, EXACT, int(token), "bounds") for cell in exact])
    return sorted(left_open)


def _owners(grid: Grid, boxes) -> np.ndarray:
    """The cell of each box (the cell of its centre), after checking that the box lies inside that cell."""
    if not len(boxes):
        return np.zeros(0, dtype=np.int64)
    owner = grid.cell_of((boxes.lower + boxes.upper) / 2.0)
    cell_lower, cell_upper = grid.cells_bounds(np.maximum(owner, 0))
    if np.any(owner < 0) or np.any(boxes.lower < cell_lower) or np.any(boxes.upper > cell_upper):
        raise AssertionError("internal error: a sub-box does not lie inside the cell of its centre")
    return owner
