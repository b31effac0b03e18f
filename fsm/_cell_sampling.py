"""Phase 1 of `distill`: sample every cell, in one vectorised batch per block of cells.

Each cell gets its centre, its corners (pulled just inside the cell;
random corners when there are more than `MAX_CORNERS`) and random points,
`SAMPLES_PER_CELL` in all. A cell whose samples disagree gets its witness
at once when the most robust sample of each decision re-validates in
onnxruntime; the other cells leave with their unanimous token (what
phase 2 tries to prove) or, when mixed, their best pair (what phase 3
starts its witness search from).

Invariant: the samples are a fixed function of (seed, cell) (`_uniform`),
so a resumed run draws the same samples as an uninterrupted one. Samples
never prove anything: they only find witnesses and candidate tokens.
"""

from __future__ import annotations

import numpy as np

from certfsm import gated_decide

from ._cell_problem import _Decision, _Problem, _valid_pairs
from ._table import CONSERVATIVE

SAMPLES_PER_CELL = 64
MAX_CORNERS = 32
CELL_BLOCK = 2048
_INSET = 1.0 - 2.0**-20


def _uniform(seed: int, cells: np.ndarray, count: int, n: int) -> np.ndarray:
    """(len(cells), count, n) numbers in [0, 1), a fixed function of (seed, cell, k, i) (splitmix64).

    Per-cell determinism makes a resumed run draw the same samples as an
    uninterrupted one, whatever cells remain.
    """
    with np.errstate(over="ignore"):
        key = np.uint64((seed * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) % 2**64)
        z = (
            np.asarray(cells, dtype=np.uint64)[:, None] * np.uint64(count * n)
            + np.arange(count * n, dtype=np.uint64)[None, :]
            + np.uint64(1)
        ) * np.uint64(0x9E3779B97F4A7C15) + key
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return ((z >> np.uint64(11)).astype(np.float64) * 2.0**-53).reshape(len(cells), count, n)


def _sample_fractions(seed: int, cells: np.ndarray, n: int) -> np.ndarray:
    """Where each cell's samples sit, as fractions of the cell: centre, corners pulled inside, random points."""
    u = _uniform(seed, cells, SAMPLES_PER_CELL, n)
    corners = min(2**n, MAX_CORNERS)
    if 2**n <= MAX_CORNERS:
        bits = (np.arange(corners)[:, None] >> np.arange(n)[None, :]) & 1
        u[:, 1 : corners + 1] = np.where(bits[None] == 1, _INSET, 0.0)
    else:
        u[:, 1 : corners + 1] = np.where(u[:, 1 : corners + 1] >= 0.5, _INSET, 0.0)
    u[:, 0] = 0.5
    return u


def _sampling_phase(problem: _Problem, cells: np.ndarray, seed: int, on_batch) -> dict:
    """Sample every cell; returns per cell the unanimous token (-1 when samples disagree) and its best samples.

    Cells whose samples disagree and whose most robust pair re-validates
    in onnxruntime are decided here (reported through `on_batch`).
    Returns {"candidate": (N,), "hint": (N, n) best sample of the
    candidate, "other": (N, n) best sample of another decision (mixed
    cells)} aligned with `cells`.
    """
    grid, n = problem.grid, problem.grid.n_inputs
    candidate = np.full(len(cells), -1, dtype=np.int64)
    hint = np.zeros((len(cells), n))
    other = np.full((len(cells), n), np.nan)
    for start in range(0, len(cells), CELL_BLOCK):
        block = cells[start : start + CELL_BLOCK]
        lower, upper = grid.cells_bounds(block)
        x = lower[:, None, :] + _sample_fractions(seed, block, n) * (upper - lower)[:, None, :]
        flat = x.reshape(-1, n)
        scores = problem.network.evaluate(flat)
        decision = gated_decide(scores, problem.rule, problem.margin, problem.conservative).reshape(len(block), -1)
        robust = problem.robustness(scores).reshape(len(block), -1)
        inside = (grid.cell_of(flat) == np.repeat(block, SAMPLES_PER_CELL)).reshape(len(block), -1)
        robust = np.where(inside, robust, -np.inf)
        rows = np.arange(len(block))
        best = np.argmax(robust, axis=1)
        first = decision[rows, best]
        differs = inside & (decision != first[:, None])
        mixed = differs.any(axis=1)
        runner_up = np.argmax(np.where(differs, robust, -np.inf), axis=1)
        here = slice(start, start + len(block))
        candidate[here] = np.where(mixed, -1, first)
        hint[here] = x[rows, best]
        other[here] = np.where(mixed[:, None], x[rows, runner_up], np.nan)
        mixed_rows = np.flatnonzero(mixed)
        pairs = (x[mixed_rows, best[mixed_rows]], x[mixed_rows, runner_up[mixed_rows]])
        valid = _valid_pairs(problem, block[mixed_rows], *pairs)
        on_batch(
            [
                _Decision(int(block[k]), CONSERVATIVE, problem.conservative, "sampling", (pairs[0][i], pairs[1][i]))
                for i, k in enumerate(mixed_rows)
                if valid[i]
            ]
        )
    return {"candidate": candidate, "hint": hint, "other": other}
