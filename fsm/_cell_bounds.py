"""Phase 2 of `distill`: prove each cell's sampled token by bound propagation, many cells at once.

Cells are grouped by their sampled token t, so one property (the closure
of "the decision is not t" over the envelope, `_Problem.envelope_property`)
serves a whole group, and `verify.prove_boxes` proves it on every cell box
of the group at once: bounds in chunks of `BOUND_CHUNK`, bisection of what
a whole cell cannot close, up to `SPLIT_DEPTH` halvings and
`MAX_OPEN_BOXES` open boxes per cell. What is left open goes to the
engines (phase 3).

Invariant: a cell is EXACT here only when `prove_boxes` proved its closed
box, which covers the half-open cell (its soundness is checked with the
other engines in the verify conformance suite).
"""

from __future__ import annotations

import numpy as np

from certfsm.verify import prove_boxes

from ._cell_problem import _Decision, _Problem
from ._table import EXACT

BOUND_CHUNK = 2048
SPLIT_DEPTH = 12
MAX_OPEN_BOXES = 16


def _bounds_phase(problem: _Problem, cells: np.ndarray, candidate: np.ndarray, on_batch) -> list[int]:
    """Prove each cell's sampled token with `verify.prove_boxes`, one call per token; returns the cells left open."""
    left_open: list[int] = []
    for token in np.unique(candidate):
        group = np.asarray(cells[candidate == token], dtype=np.int64)
        lower, upper = problem.grid.proof_cells_bounds(group)
        prop = problem.envelope_property(int(token))
        found = prove_boxes(
            problem.network,
            prop,
            lower,
            upper,
            max_depth=SPLIT_DEPTH,
            max_open=MAX_OPEN_BOXES,
            chunk=BOUND_CHUNK,
            record=problem.records_proofs,
        )
        on_batch(
            [
                _Decision(
                    int(group[i]),
                    EXACT,
                    int(token),
                    "bounds",
                    proof=(prop.restricted(lower[i], upper[i], prop.unsafe), found.proofs[i]) if found.proofs else None,
                )
                for i in np.flatnonzero(found.proved)
            ]
        )
        left_open += group[~found.proved].tolist()
    return sorted(left_open)
