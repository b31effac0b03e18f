"""Certified distillation: decide every grid cell as EXACT (one token proved everywhere) or CONSERVATIVE.

Semantics (DESIGN, "Certified distillation"). The gated decision at x is
``gated_decide(scores, rule, margin, conservative)`` (margin 0 when the
spec has no gate). A cell is EXACT with token t only when the decision is
proved to be t on the whole closed cell box (proving over the closure is
sound for the half-open cell); the table then holds t. Every other cell
is CONSERVATIVE and holds the conservative token c: with a witness (two
inputs of the half-open cell whose decisions differ, in numpy float64 and
in onnxruntime alike), or, when neither a proof nor a witness was found in
the budget, "undecided" with the reason (safe, since it holds c, but
counted apart). The table never holds a token that was not proved.

What is proved, with p the scores turned so that larger is better:

- "decision is t != c": p_t - p_j > m for every j != t (strict, which
  also settles the tie rule). The engines get the closure of the
  negation as the unsafe set: OR over j != t of p_t - p_j <= m.
- "decision is c": no k != c wins, i.e. for every k != c some j has
  p_k - p_j < m. Unsafe set: OR over k != c of `chosen_conjunction(k,
  margin=m)` (non-strict, so ties are covered; an over-approximation for
  margin 0, hence sound).

Work, cheapest first:

1. sampling: every cell's centre, corners (pulled just inside the cell)
   and random points, in one vectorised batch per block of cells. A cell
   whose samples disagree gets its witness at once when the most robust
   sample of each decision re-validates in onnxruntime.
2. bound propagation over all remaining cells at once, grouped by their
   sampled token t (one unsafe set per group: the closure of "the
   decision is not t"), with `verify._split.bound` in chunks; what the
   whole cell cannot close is bisected (`verify._split.split`, along the
   input whose halves come closest to closing), vectorised over the
   boxes of all cells of the group, up to `SPLIT_DEPTH` halvings and
   `MAX_OPEN_BOXES` open boxes per cell. A cell is EXACT when its closed
   boxes' volumes add up exactly to the cell's (integer bookkeeping).
3. `verify._check.check(..., engine="auto", jobs=1)` per remaining cell
   (falsification, bounds, branch and bound, Marabou): proved -> EXACT;
   violated -> a witness from the counterexample and a cell sample (or
   from a short falsification of robust versions of both decisions) ->
   CONSERVATIVE; unknown -> undecided. Cells whose samples disagreed but
   whose pair did not re-validate only look for a witness.

Phases 2 and 3 run as tasks (chunks of cells, single cells) in a pool of
`jobs` worker processes, or inline for one job; a chunk's open cells
become cell tasks as soon as the chunk is done. Only this process writes
the checkpoint and calls `progress`.

Resume: with a checkpoint file, each decided cell is appended as one JSON
line as soon as its batch is done (flush + fsync); the first line binds
the file to the spec, the network weights and the grid. A rerun ignores a
torn last line, tries undecided cells again, keeps conservative cells
whose witness pair still re-validates (the expensive witness searches are
what a resume saves), and decides every exact cell of the checkpoint
again (sampling and bound propagation are cheap; the engines run again
only for what bounds leave open): the checkpoint saves searches, never
proofs, so no edit of the file can put an unproved token into the table.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import signal
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from certfsm._decision import gated_decide, preference
from certfsm._errors import ReportError, SpecError
from certfsm._network import Network
from certfsm.verify import _check, _falsify, _split
from certfsm.verify._property import Conjunction, Property, chosen_conjunction
from certfsm.verify._split import limit_blas_threads, single_threaded_blas

from ._grid import Grid
from ._table import CONSERVATIVE, EXACT, UNDECIDED, Table, allowed_masks

ENGINES = ("sampling", "bounds", "check", "falsify", "marabou", "z3", "undecided")
"""What decided a cell: phase-1 samples, phase-2 bounds (with vectorised splitting), `verify.check` without
a complete engine (bounds, branch and bound, falsification), the witness search alone, a complete engine
inside `verify.check`, or nothing (undecided, conservative without witness)."""

SAMPLES_PER_CELL = 64
MAX_CORNERS = 32
CELL_BLOCK = 2048
BOUND_CHUNK = 2048
SPLIT_DEPTH = 12
MAX_OPEN_BOXES = 16
WITNESS_SECONDS = 2.0
ROBUST_STEPS = (1e-6, 1e-4, 1e-2)
CHECKPOINT_FORMAT = 1
_INSET = 1.0 - 2.0**-20
_STATUS_NAMES = {EXACT: "exact", CONSERVATIVE: "conservative"}

Progress = Callable[[int, int, str], None]


# ----------------------------------------------------------------- the problem


@dataclass(frozen=True, eq=False)
class _Problem:
    """Everything a worker needs to decide a cell; picklable (the IR and the grid are plain numpy)."""

    network: Network
    grid: Grid
    rule: str
    margin: float
    conservative: int
    outputs: tuple[str, ...]

    @property
    def n_outputs(self) -> int:
        return len(self.outputs)

    def decisions(self, x: np.ndarray) -> np.ndarray:
        """Gated decisions of rows x in numpy float64."""
        return gated_decide(self.network.evaluate(x), self.rule, self.margin, self.conservative)

    def onnx_decisions(self, x: np.ndarray) -> np.ndarray:
        """Gated decisions of rows x in onnxruntime (the model as deployed, float32)."""
        from certfsm._onnx import run_onnxruntime

        scores = np.asarray(run_onnxruntime(self.network, np.atleast_2d(x)), dtype=np.float64)
        return gated_decide(scores, self.rule, self.margin, self.conservative)

    def robustness(self, scores: np.ndarray) -> np.ndarray:
        """How far each row's scores are from a change of gated decision (a heuristic for choosing witnesses)."""
        p = preference(scores, self.rule)
        diff = p[:, :, None] - p[:, None, :]
        n = self.n_outputs
        diff[:, np.arange(n), np.arange(n)] = np.inf
        win = diff.min(axis=2) - self.margin
        chosen = gated_decide(scores, self.rule, self.margin, self.conservative)
        others = np.delete(win, self.conservative, axis=1)
        return np.where(chosen != self.conservative, win[np.arange(len(p)), chosen], -others.max(axis=1))

    def cell_box(self, cell: int) -> tuple[np.ndarray, np.ndarray]:
        return self.grid.cell_bounds(cell)

    def witness_box(self, cell: int) -> tuple[np.ndarray, np.ndarray]:
        """The closed box of points that lie in the half-open cell: open upper sides pulled in by one ulp."""
        lower, upper = self.grid.cell_bounds(cell)
        inner = np.where(upper == self.grid.upper, upper, np.nextafter(upper, -np.inf))
        return lower, inner

    def _difference_row(self, a: int, b: int) -> np.ndarray:
        """Row r with r @ y = p_a - p_b."""
        row = np.zeros(self.n_outputs)
        sign = 1.0 if self.rule == "argmax" else -1.0
        row[a], row[b] = sign, -sign
        return row

    def loses(self, token: int, delta: float) -> tuple[Conjunction, ...]:
        """The decision is not `token`, by `delta` to spare (delta 0: the closure of "not token")."""
        if token != self.conservative:
            return tuple(Conjunction(self._difference_row(token, j)[None], [self.margin - delta],
                                     (f"p{token} - p{j} <= {self.margin - delta:g}",))
                         for j in range(self.n_outputs) if j != token)
        return tuple(chosen_conjunction(k, self.n_outputs, self.rule, self.margin + delta)
                     for k in range(self.n_outputs) if k != self.conservative)

    def wins(self, token: int, delta: float) -> tuple[Conjunction, ...]:
        """The decision is `token` with `delta` to spare (c: c beats every other score by delta)."""
        margin = self.margin + delta if token != self.conservative else delta
        return (chosen_conjunction(token, self.n_outputs, self.rule, margin),)

    def exact_property(self, cell: int, token: int) -> Property:
        """Unsafe set: the closure of "the decision is not `token`" over the closed cell box."""
        lower, upper = self.cell_box(cell)
        return Property(f"cell {cell}: decision is {self.outputs[token]}", lower, upper, self.loses(token, 0.0),
                        f"the gated decision is {self.outputs[token]} everywhere in {self.grid.describe_cell(cell)}")


def _problem(spec, network: Network) -> _Problem:
    grid = Grid.from_spec(spec)
    if network.n_inputs != spec.n_inputs or network.n_outputs != spec.n_outputs:
        raise SpecError(f"{spec.path}: the spec has {spec.n_inputs} inputs and {spec.n_outputs} outputs but the "
                        f"network {network.source_path or '(in memory)'} has {network.n_inputs} and "
                        f"{network.n_outputs}; give the network the spec names")
    margin = 0.0 if spec.margin is None else float(spec.margin)
    return _Problem(network, grid, spec.decision, margin, spec.conservative_index, tuple(spec.outputs))


# ----------------------------------------------------------------- decisions


@dataclass(frozen=True, eq=False)
class _Decision:
    """How one cell was decided: status EXACT, CONSERVATIVE or UNDECIDED (conservative without witness)."""

    cell: int
    status: int
    token: int
    engine: str
    witness: tuple[np.ndarray, np.ndarray] | None = None
    reason: str = ""
    marabou_queries: int = 0

    def to_json(self, outputs) -> dict:
        status = _STATUS_NAMES.get(self.status, "undecided")
        witness = None if self.witness is None else [[float(v) for v in x] for x in self.witness]
        return {"cell": self.cell, "status": status, "token": outputs[self.token], "engine": self.engine,
                "witness": witness, "reason": self.reason}


@dataclass(frozen=True, eq=False)
class Distillation:
    """The certified table and how each cell got its status.

    Invariants: `table` is complete (no UNDECIDED status: an undecided
    cell is CONSERVATIVE and listed in `reasons`); every EXACT cell's
    token was proved on the whole cell; every CONSERVATIVE cell holds the
    conservative token and has either a witness pair (two inputs of the
    cell with different gated decisions in float64 and onnxruntime) or a
    reason, or is in `held_back`: the network's decision was proved for
    the whole cell but is a token the legality rules forbid there (or an
    illegal token), so the table holds the conservative token instead and
    the cell counts as conservative; `held_back` maps such cells to the
    network's token. `engine_of_cell` holds one of `ENGINES` per cell
    (read-only).
    """

    table: Table
    engine_of_cell: np.ndarray
    witnesses: dict[int, tuple[np.ndarray, np.ndarray]]
    reasons: dict[int, str]
    held_back: dict[int, int]
    stats: dict
    seconds: float


# ----------------------------------------------------------------- checkpoint


def _fingerprints(spec, problem: _Problem) -> dict:
    document = spec.to_json()
    document.pop("model", None)
    spec_hash = hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()
    model = hashlib.sha256()
    for layer in problem.network.layers:
        model.update(repr(layer.weight.shape).encode())
        model.update(np.ascontiguousarray(layer.weight).tobytes())
        model.update(np.ascontiguousarray(layer.bias).tobytes())
    grid = hashlib.sha256(json.dumps([problem.grid.names, [e.tolist() for e in problem.grid.edges]]).encode())
    return {"certfsm_distill_checkpoint": CHECKPOINT_FORMAT, "spec_sha256": spec_hash,
            "model_sha256": model.hexdigest(), "grid_sha256": grid.hexdigest(), "cells": problem.grid.n_cells}


class _Checkpoint:
    """An append-only JSON-lines file of decided cells, bound by its first line to spec, model and grid."""

    def __init__(self, path, header: dict, problem: _Problem) -> None:
        self.path = Path(path)
        self.header = header
        self.problem = problem

    def load(self) -> dict[int, _Decision]:
        """Decided cells recorded so far (the last record of a cell wins); creates the file when absent.

        A torn last line (a crash mid-write) is cut off so that the next
        append starts on a clean line.
        """
        try:
            if not self.path.exists() or self.path.stat().st_size == 0:
                self._write("w", json.dumps(self.header, sort_keys=True) + "\n")
                return {}
            data = self.path.read_bytes()
        except OSError as error:
            raise self._unwritable(error) from None
        lines = data.split(b"\n")
        complete, torn = lines[:-1], lines[-1]
        good_end = len(data) - len(torn)
        try:
            header = json.loads(complete[0]) if complete else None
        except ValueError:
            header = None
        if not isinstance(header, dict) or "certfsm_distill_checkpoint" not in header:
            raise SpecError(f"{self.path}: not a certfsm distill checkpoint (its first line is not a checkpoint "
                            "header); give another --checkpoint path or delete the file")
        for key, what in (("spec_sha256", "spec"), ("model_sha256", "model"), ("grid_sha256", "grid")):
            if header.get(key) != self.header[key]:
                raise SpecError(f"{self.path}: checkpoint belongs to another {what} ({key} "
                                f"{str(header.get(key))[:12]}..., this run has {self.header[key][:12]}...); "
                                "delete the file or give another --checkpoint path to start afresh")
        decided: dict[int, _Decision] = {}
        for number, line in enumerate(complete[1:], start=2):
            if not line.strip():
                continue
            try:
                record = self._record(json.loads(line))
            except (ValueError, KeyError, TypeError) as error:
                raise SpecError(f"{self.path}: line {number} is not a cell record ({error}); delete the file "
                                "or give another --checkpoint path to start afresh") from None
            decided[record.cell] = record
        if torn:
            try:
                with open(self.path, "r+b") as handle:
                    handle.truncate(good_end)
            except OSError as error:
                raise self._unwritable(error) from None
        return {cell: d for cell, d in decided.items() if d.status != UNDECIDED}

    def _record(self, item: dict) -> _Decision:
        cell = int(item["cell"])
        if not 0 <= cell < self.problem.grid.n_cells:
            raise ValueError(f"cell {cell} is outside the grid")
        token = self.problem.outputs.index(item["token"])
        status = {"exact": EXACT, "conservative": CONSERVATIVE, "undecided": UNDECIDED}[item["status"]]
        witness = item.get("witness")
        if witness is not None:
            witness = tuple(np.array(x, dtype=np.float64) for x in witness)
            if len(witness) != 2 or any(x.shape != (self.problem.grid.n_inputs,) for x in witness):
                raise ValueError("the witness is not two input points")
        if status == CONSERVATIVE and (witness is None or token != self.problem.conservative):
            raise ValueError("a conservative cell needs a witness and the conservative token")
        if item["engine"] not in ENGINES:
            raise ValueError(f"engine {item['engine']!r} is not one of {ENGINES}")
        return _Decision(cell, status, token, item["engine"], witness, str(item.get("reason", "")))

    def append(self, decisions: list[_Decision]) -> None:
        if not decisions:
            return
        try:
            self._write("a", "".join(json.dumps(d.to_json(self.problem.outputs)) + "\n" for d in decisions))
        except OSError as error:
            raise self._unwritable(error) from None

    def _write(self, mode: str, text: str) -> None:
        with open(self.path, mode, encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())

    def _unwritable(self, error: OSError) -> ReportError:
        return ReportError(f"{self.path}: cannot read or write the checkpoint ({error.strerror or error}); "
                           "give a --checkpoint path in a writable folder")


# ----------------------------------------------------------------- phase 1: sampling


def _uniform(seed: int, cells: np.ndarray, count: int, n: int) -> np.ndarray:
    """(len(cells), count, n) numbers in [0, 1), a fixed function of (seed, cell, k, i) (splitmix64).

    Per-cell determinism makes a resumed run draw the same samples as an
    uninterrupted one, whatever cells remain.
    """
    with np.errstate(over="ignore"):
        key = np.uint64((seed * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) % 2**64)
        z = (np.asarray(cells, dtype=np.uint64)[:, None] * np.uint64(count * n)
             + np.arange(count * n, dtype=np.uint64)[None, :] + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15) + key
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
        u[:, 1:corners + 1] = np.where(bits[None] == 1, _INSET, 0.0)
    else:
        u[:, 1:corners + 1] = np.where(u[:, 1:corners + 1] >= 0.5, _INSET, 0.0)
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
        block = cells[start:start + CELL_BLOCK]
        lower, upper = _bounds_of(grid, block)
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
        on_batch([_Decision(int(block[k]), CONSERVATIVE, problem.conservative, "sampling",
                            (pairs[0][i], pairs[1][i])) for i, k in enumerate(mixed_rows) if valid[i]])
    return {"candidate": candidate, "hint": hint, "other": other}


def _bounds_of(grid: Grid, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    bins = np.unravel_index(np.asarray(cells, dtype=np.int64), grid.shape)
    lower = np.stack([e[b] for e, b in zip(grid.edges, bins)], axis=1)
    upper = np.stack([e[b + 1] for e, b in zip(grid.edges, bins)], axis=1)
    return lower, upper


def _valid_pairs(problem: _Problem, cells: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Per row: both points finite and in the half-open cell, their float64 decisions different, and
    onnxruntime giving the same two decisions. Vectorised over pairs (one onnxruntime call)."""
    points = np.concatenate([first, second]).astype(np.float64)
    ok = np.all(np.isfinite(points), axis=1)
    points = np.where(ok[:, None], points, problem.grid.lower)
    ok &= problem.grid.cell_of(points) == np.concatenate([cells, cells])
    exact = problem.decisions(points)
    count = len(cells)
    ok = ok[:count] & ok[count:] & (exact[:count] != exact[count:])
    if ok.any():
        rows = np.concatenate([np.flatnonzero(ok), count + np.flatnonzero(ok)])
        deployed = np.zeros_like(exact)
        deployed[rows] = problem.onnx_decisions(points[rows])
        ok &= (deployed[:count] == exact[:count]) & (deployed[count:] == exact[count:])
    return ok


# ----------------------------------------------------------------- phase 2: bounds


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
        lower, upper = _bounds_of(problem.grid, group)
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
    cell_lower, cell_upper = _bounds_of(grid, np.maximum(owner, 0))
    if np.any(owner < 0) or np.any(boxes.lower < cell_lower) or np.any(boxes.upper > cell_upper):
        raise AssertionError("internal error: a sub-box does not lie inside the cell of its centre")
    return owner


# ----------------------------------------------------------------- phase 3: engines per cell


@dataclass(frozen=True, eq=False)
class _Task:
    """One cell for the engines: prove `candidate` (mode "prove") or only find a witness (mode "witness")."""

    cell: int
    mode: str
    candidate: int
    hints: np.ndarray
    timeout: float
    seed: int


def _engine_label(engine: str) -> str:
    if "marabou" in engine:
        return "marabou"
    if "z3" in engine:
        return "z3"
    return "check"


def _decide_cell(problem: _Problem, task: _Task) -> _Decision:
    """Decide one cell with `verify.check` and, when the cell is not exact, look for a validated witness."""
    label, queries, hints = "falsify", 0, task.hints
    if task.mode == "prove":
        result = _check.check(problem.network, problem.exact_property(task.cell, task.candidate), engine="auto",
                              timeout=task.timeout, jobs=1, seed=task.seed)
        label, queries = _engine_label(result.engine), int(result.stats.get("engine_queries", 0))
        if result.is_proved:
            return _Decision(task.cell, EXACT, task.candidate, label, marabou_queries=queries)
        if not result.is_violated:
            return _Decision(task.cell, UNDECIDED, problem.conservative, "undecided",
                             reason=f"undecided: {result.engine}: {result.reason}", marabou_queries=queries)
        hints = np.concatenate([hints, result.counterexample[None]])
    budget = min(WITNESS_SECONDS, task.timeout / 2)
    pair = _find_witness(problem, task.cell, task.candidate, hints, budget, task.seed)
    if pair is None:
        why = ("the closure of another decision is reached but no pair of points with different decisions "
               "validated in float64 and onnxruntime" if task.mode == "prove" else
               "samples disagree in float64 but no pair validated in onnxruntime")
        return _Decision(task.cell, UNDECIDED, problem.conservative, "undecided", reason=f"undecided: {why}",
                         marabou_queries=queries)
    return _Decision(task.cell, CONSERVATIVE, problem.conservative, label, pair, marabou_queries=queries)


def _find_witness(problem: _Problem, cell: int, token: int, hints: np.ndarray, budget: float, seed: int):
    """Two points of the cell, one deciding `token` and one deciding otherwise, in float64 and onnxruntime alike.

    Tries the hints first (most robust first), then falsification of the
    robust versions of "decision is token" and "decision is not token"
    (margins widened by a growing delta) inside the half-open cell.
    """
    lower, upper = problem.witness_box(cell)
    points = np.asarray(hints, dtype=np.float64).reshape(-1, problem.grid.n_inputs)
    points = points[np.all(np.isfinite(points), axis=1)]
    points = points[problem.grid.cell_of(points) == cell] if len(points) else points
    same = different = None
    if len(points):
        scores = problem.network.evaluate(points)
        decided = gated_decide(scores, problem.rule, problem.margin, problem.conservative)
        agree = problem.onnx_decisions(points) == decided
        order = np.argsort(-problem.robustness(scores))
        same = next((points[i] for i in order if agree[i] and decided[i] == token), None)
        different = next((points[i] for i in order if agree[i] and decided[i] != token), None)
    if same is not None and different is not None:
        return same, different
    scale = 1.0 + float(np.max(np.abs(problem.network.evaluate((lower + upper) / 2.0))))
    deadline = time.monotonic() + budget
    for step, delta in enumerate(ROBUST_STEPS):
        for wanted in ("same", "different"):
            if (same if wanted == "same" else different) is not None:
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            unsafe = problem.wins(token, delta * scale) if wanted == "same" else problem.loses(token, delta * scale)
            prop = Property(f"cell {cell} witness", lower, upper, unsafe)
            x = _falsify.falsify(problem.network, prop, remaining / (2 * (len(ROBUST_STEPS) - step)),
                                 seed + 7919 * step)
            if x is None or problem.grid.cell_of(x) != cell:
                continue
            exact = int(problem.decisions(x[None])[0])
            if int(problem.onnx_decisions(x[None])[0]) != exact or (exact == token) != (wanted == "same"):
                continue
            if wanted == "same":
                same = x
            else:
                different = x
        if same is not None and different is not None:
            return same, different
    return None


# ----------------------------------------------------------------- running phases 2 and 3


@dataclass(frozen=True, eq=False)
class _BoundTask:
    """A chunk of cells with one sampled token each, for `_bounds_phase`."""

    cells: np.ndarray
    candidates: np.ndarray


@dataclass(frozen=True, eq=False)
class _Outcome:
    """What one task decided, the cells it left for the engines (bound tasks only) and its seconds."""

    kind: str
    decisions: list
    left_open: list
    seconds: float


def _work(problem: _Problem, task) -> _Outcome:
    started = time.monotonic()
    if isinstance(task, _BoundTask):
        decisions: list[_Decision] = []
        left_open = _bounds_phase(problem, task.cells, task.candidates, decisions.extend)
        return _Outcome("bounds", decisions, left_open, time.monotonic() - started)
    return _Outcome("engines", [_decide_cell(problem, task)], [], time.monotonic() - started)


_WORKER: tuple = ()


def _init_worker(problem: _Problem) -> None:
    global _WORKER
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _WORKER = (problem,)
    limit_blas_threads()


def _work_in_worker(task) -> _Outcome:
    return _work(_WORKER[0], task)


def _run_tasks(problem: _Problem, tasks: list, follow_up, jobs: int, on_outcome) -> None:
    """Run `tasks` and the tasks `follow_up(outcome)` returns, inline (one job) or in `jobs` worker processes.

    A `multiprocessing.Pool` rather than a ProcessPoolExecutor, because
    `terminate` ends running tasks at once (with the solver children
    they fork) when the caller stops the run, e.g. from `progress`.
    Workers are forked where the platform can (they inherit the network),
    else spawned (the network and grid are pickled); each runs
    `verify.check` with jobs=1, so no worker starts a pool of its own.
    """
    if jobs <= 1:
        queue = list(reversed(tasks))
        while queue:
            outcome = _work(problem, queue.pop())
            queue.extend(reversed(follow_up(outcome)))
            on_outcome(outcome)
        return
    import queue as queues

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    pool = multiprocessing.get_context(method).Pool(jobs, initializer=_init_worker, initargs=(problem,))
    done: queues.Queue = queues.Queue()
    running = 0

    def submit(task) -> None:
        nonlocal running
        running += 1
        pool.apply_async(_work_in_worker, (task,), callback=lambda outcome: done.put(("ok", outcome)),
                         error_callback=lambda error: done.put(("error", error)))

    try:
        for task in tasks:
            submit(task)
        while running:
            kind, answer = done.get()
            running -= 1
            if kind == "error":
                raise answer
            for task in follow_up(answer):
                submit(task)
            on_outcome(answer)
    finally:
        pool.terminate()
        pool.join()


# ----------------------------------------------------------------- the driver


def distill(spec, network: Network, *, jobs: int | None = None, per_cell_timeout: float = 10.0,
            checkpoint=None, progress: Progress | None = None, seed: int = 0) -> Distillation:
    """Decide every cell of the spec's grid (see the module docstring) and return the certified table.

    `jobs` worker processes for phases 2 and 3 (default: the number of
    CPUs); `per_cell_timeout` seconds for `verify.check` on one cell;
    `checkpoint` a JSON-lines file to resume from and append to;
    `progress(done_cells, total_cells, message)` after every batch (an
    exception raised there stops the run; the checkpoint keeps what was
    decided); `seed` fixes the samples and the falsifiers.

    Stats: counts by status and by engine (`ENGINES`), exact share by
    count and by volume, bounds shares, Marabou queries, seconds per phase
    (wall clock for sampling and for phases 2-3 together, worker seconds
    for each of 2 and 3), cells per second. Raises SpecError for bad
    arguments, a network that does not fit the spec or a checkpoint that
    belongs to another spec, model or grid; ReportError when the
    checkpoint cannot be written.
    """
    started = time.monotonic()
    if not (isinstance(per_cell_timeout, (int, float)) and per_cell_timeout > 0):
        raise SpecError(f"per_cell_timeout={per_cell_timeout!r} is not a positive number of seconds; "
                        "give e.g. per_cell_timeout=10")
    if jobs is not None and not (isinstance(jobs, int) and not isinstance(jobs, bool) and jobs >= 1):
        raise SpecError(f"jobs={jobs!r} is not a positive number of worker processes; give e.g. jobs=2 or None")
    jobs = jobs or os.cpu_count() or 1
    problem = _problem(spec, network)
    total = problem.grid.n_cells
    store = _Checkpoint(checkpoint, _fingerprints(spec, problem), problem) if checkpoint is not None else None
    recorded = store.load() if store is not None else {}
    decided = _trusted_part(problem, recorded)
    resumed = len(decided)
    reproved = sum(d.status == EXACT for d in recorded.values())
    seconds: dict[str, float] = {"bounds_in_workers": 0.0, "engines_in_workers": 0.0}
    engine_tasks = [0]

    def on_batch(batch: list[_Decision], message: str) -> None:
        for item in batch:
            if item.cell in decided:
                raise AssertionError(f"internal error: cell {item.cell} was decided twice; refusing to go on")
        if store is not None:
            store.append(batch)
        for item in batch:
            decided[item.cell] = item
        if progress is not None:
            progress(len(decided), total, message)

    with single_threaded_blas():
        clock = time.monotonic()
        todo = np.array(sorted(set(range(total)) - set(decided)), dtype=np.int64)
        sampled = _sampling_phase(problem, todo, seed, lambda b: on_batch(b, "sampling"))
        seconds["sampling"] = time.monotonic() - clock
        clock = time.monotonic()
        unanimous = sampled["candidate"] >= 0
        position = {cell: k for k, cell in enumerate(todo.tolist())}
        tasks: list = _bound_tasks(todo[unanimous], sampled["candidate"][unanimous], jobs)
        for k in np.flatnonzero(~unanimous):
            cell = int(todo[k])
            if cell not in decided:
                hints = np.array([sampled["hint"][k], sampled["other"][k]])
                candidate = int(problem.decisions(hints[:1])[0])
                tasks.append(_Task(cell, "witness", candidate, hints, float(per_cell_timeout), seed + cell))

        def follow_up(outcome: _Outcome) -> list:
            return [_Task(cell, "prove", int(sampled["candidate"][position[cell]]),
                          sampled["hint"][position[cell]][None], float(per_cell_timeout), seed + cell)
                    for cell in outcome.left_open]

        def on_outcome(outcome: _Outcome) -> None:
            seconds[f"{outcome.kind}_in_workers"] += outcome.seconds
            engine_tasks[0] += outcome.kind == "engines"
            on_batch(outcome.decisions, "bound propagation" if outcome.kind == "bounds" else "engines")

        _run_tasks(problem, tasks, follow_up, jobs, on_outcome)
        seconds["bounds_and_engines"] = time.monotonic() - clock
    return _result(spec, problem, decided, resumed, reproved, engine_tasks[0], seconds,
                   time.monotonic() - started, jobs, per_cell_timeout, seed)


def _trusted_part(problem: _Problem, recorded: dict[int, _Decision]) -> dict[int, _Decision]:
    """The checkpoint's decisions that are kept as they are: conservative cells whose witness still holds.

    A witness pair is re-validated now (both points in the cell,
    different decisions in float64 and onnxruntime: two evaluations
    each). An exact cell is never taken on trust: it is decided again
    from scratch (sampling and bound propagation are cheap; the engines
    run again only for what bounds leave open), so no edit of the file
    can put an unproved token into the table.
    """
    conservative = sorted(c for c, d in recorded.items() if d.status == CONSERVATIVE)
    if not conservative:
        return {}
    cells = np.array(conservative, dtype=np.int64)
    first = np.array([recorded[c].witness[0] for c in conservative])
    second = np.array([recorded[c].witness[1] for c in conservative])
    valid = _valid_pairs(problem, cells, first, second)
    return {c: recorded[c] for c, ok in zip(conservative, valid.tolist()) if ok}


def _bound_tasks(cells: np.ndarray, candidates: np.ndarray, jobs: int) -> list[_BoundTask]:
    """Chunks of cells for bound propagation: large enough to vectorise, small enough to share out."""
    if not len(cells):
        return []
    size = int(np.clip(-(-len(cells) // (4 * jobs)), 32, 1024))
    return [_BoundTask(cells[start:start + size], candidates[start:start + size])
            for start in range(0, len(cells), size)]


def _result(spec, problem: _Problem, decided: dict[int, _Decision], resumed: int, reproved: int, engine_tasks: int,
            seconds: dict, elapsed: float, jobs: int, per_cell_timeout: float, seed: int) -> Distillation:
    grid, total = problem.grid, problem.grid.n_cells
    missing = set(range(total)) - set(decided)
    if missing:
        raise AssertionError(f"internal error: {len(missing)} cells were never decided (first: {min(missing)})")
    cells = np.arange(total)
    ordered = [decided[c] for c in cells]
    status = np.array([d.status if d.status != UNDECIDED else CONSERVATIVE for d in ordered], dtype=np.int8)
    proposal = np.array([d.token if d.status == EXACT else problem.conservative for d in ordered], dtype=np.int64)
    held = (status == EXACT) & ~allowed_masks(spec, grid)[cells, proposal]
    held_back = {int(c): int(proposal[c]) for c in np.flatnonzero(held)}
    status[held], proposal[held] = CONSERVATIVE, problem.conservative
    table = Table.undecided(spec, grid).with_decisions(cells, proposal, status)
    engines = np.array([d.engine for d in ordered])
    engines.setflags(write=False)
    witnesses = {d.cell: tuple(_frozen_point(x) for x in d.witness) for d in ordered if d.witness is not None}
    reasons = {d.cell: d.reason for d in ordered if d.status == UNDECIDED}
    lower, upper = grid.all_cell_bounds()
    volume = np.prod(upper - lower, axis=1)
    volume = volume / volume.sum()
    exact = status == EXACT
    by_engine = Counter(engines.tolist())
    without_marabou = sum(by_engine[e] for e in ("sampling", "bounds", "check", "falsify"))
    stats = {
        "cells": total,
        "exact": int(exact.sum()),
        "conservative_with_witness": len(witnesses),
        "undecided": len(reasons),
        "exact_share": float(exact.mean()),
        "exact_volume_share": float(volume[exact].sum()),
        "by_engine": {e: by_engine[e] for e in ENGINES if by_engine[e]},
        "exact_by_token": {problem.outputs[t]: int(np.count_nonzero(exact & (proposal == t)))
                           for t in range(problem.n_outputs)},
        "bounds_share": by_engine["bounds"] / total,
        "bounds_share_of_exact": (int(np.count_nonzero(exact & (engines == "bounds"))) / int(exact.sum())
                                  if exact.any() else 0.0),
        "decided_without_marabou_share": without_marabou / total,
        "marabou_queries": sum(d.marabou_queries for d in ordered),
        "engine_tasks": engine_tasks,
        "held_back_by_rules": len(held_back),
        "held_back_by_token": {problem.outputs[t]: n for t, n in sorted(Counter(held_back.values()).items())},
        "resumed_cells": resumed,
        "reproved_checkpoint_cells": reproved,
        "seconds": {**{k: round(v, 3) for k, v in seconds.items()}, "total": round(elapsed, 3)},
        "cells_per_second": (total - resumed) / elapsed if elapsed > 0 else float("inf"),
        "jobs": jobs,
        "per_cell_timeout": per_cell_timeout,
        "seed": seed,
    }
    return Distillation(table, engines, witnesses, reasons, held_back, stats, elapsed)


def _frozen_point(x) -> np.ndarray:
    point = np.array(x, dtype=np.float64)
    point.setflags(write=False)
    return point


# ----------------------------------------------------------------- the sampled cross-check


def sampled_cross_check(distillation: Distillation, spec, network: Network, n: int = 100_000, seed: int = 0,
                        *, check_onnxruntime: bool = False) -> dict:
    """`n` uniform random inputs over the envelope: on EXACT cells the table must equal the gated decision.

    Returns counts: samples, on_exact, mismatches (float64; must be 0),
    on_conservative and how many of those the network also decides as
    the conservative token, and the first few mismatching cells. With
    `check_onnxruntime` the exact-cell samples are also decided by
    onnxruntime (float32), reported as onnxruntime_mismatches.
    """
    problem = _problem(spec, network)
    table = distillation.table
    if table.grid != problem.grid:
        raise SpecError(f"the distillation's grid (shape {table.grid.shape}) is not the grid of spec {spec.name!r} "
                        f"(shape {problem.grid.shape}); cross-check against the spec it was distilled from")
    rng = np.random.default_rng(seed)
    x = rng.uniform(problem.grid.lower, problem.grid.upper, size=(n, problem.grid.n_inputs))
    cells = problem.grid.cell_of(x)
    decisions = problem.decisions(x)
    on_exact = table.status[cells] == EXACT
    wrong = on_exact & (table.proposal[cells] != decisions)
    conservative = ~on_exact
    report = {
        "samples": n,
        "seed": seed,
        "on_exact": int(on_exact.sum()),
        "mismatches": int(wrong.sum()),
        "mismatch_cells": sorted({int(c) for c in cells[wrong]})[:10],
        "on_conservative": int(conservative.sum()),
        "conservative_agreements": int(np.count_nonzero(conservative & (decisions == problem.conservative))),
    }
    if check_onnxruntime:
        exact_points = np.flatnonzero(on_exact)
        deployed = problem.onnx_decisions(x[exact_points]) if exact_points.size else np.zeros(0, dtype=np.int64)
        report["onnxruntime_mismatches"] = int(np.count_nonzero(deployed != table.proposal[cells[exact_points]]))
    return report
