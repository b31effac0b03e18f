"""The lookup table over the grid: a proposed token and an allowed-token row per cell, and its checks.

Distillation fills a `Table` cell by cell (status EXACT or CONSERVATIVE;
UNDECIDED only while it runs). The state machine reads a cell only
through ``(proposal[cell], allowed[cell])``.

Allowed rows come from the spec's legality rules (`allowed_masks`): a
token is forbidden in a cell when some rule forbidding it has a closed box
[lower, upper] that meets the cell. Cells are half-open [lo, hi) per
input except the closed last bin, so in input i the rule meets the cell
exactly when ``lower_i < hi`` (or ``lower_i <= hi`` on the last bin) and
``upper_i >= lo``: a rule starting at 85 does not touch the cell
[80, 85). Tokens outside `legal_tokens` are allowed nowhere.

The table-level property (`check_table`, and `prove_table` by Z3 over a
symbolic cell index): every cell's token is legal and allowed there, the
table's rows equal the rows the rules give, and the 4-bit code of every
cell's token is the code of a legal token. The Z3 script restates the
geometry of cells and rule boxes itself (exact decimals of the edges),
so it does not trust `allowed_masks`.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

import numpy as np

from certfsm import TABLE_PROPERTIES, SpecError, frozen_array

from ._grid import Grid
from ._machine import Proof

EXACT = 1
CONSERVATIVE = 0
UNDECIDED = -1
STATUSES = (EXACT, CONSERVATIVE, UNDECIDED)

_DESCRIPTIONS = {
    "table-tokens": "every cell's token is a legal token that no legality rule forbids anywhere in the cell",
    "table-masks": "every cell's allowed row holds exactly the legal tokens no rule forbids in the cell",
    "table-codes": "the 4-bit code of every cell's token is the code of a legal token",
}


@dataclass(frozen=True)
class CellClass:
    """Cells that look the same to the state machine: one proposal, one allowed row."""

    proposal: int
    allowed: tuple[bool, ...]
    n_cells: int
    first_cell: int


@dataclass(frozen=True, eq=False)
class Table:
    """Per cell of `grid`: the proposed output index, how it was decided, and which tokens may be emitted.

    Invariants: proposal is (n_cells,) int64 with values in 0..n_outputs-1;
    status is (n_cells,) int8 with values EXACT, CONSERVATIVE or UNDECIDED;
    allowed is (n_cells, n_outputs) bool. All three are read-only copies.
    """

    grid: Grid
    proposal: np.ndarray
    status: np.ndarray
    allowed: np.ndarray

    def __post_init__(self) -> None:
        allowed = np.asarray(self.allowed)
        proposal = np.asarray(self.proposal)
        status = np.asarray(self.status)
        n = self.grid.n_cells
        if allowed.dtype != bool or allowed.ndim != 2 or allowed.shape[0] != n or allowed.shape[1] < 1:
            raise SpecError(
                f"Table: allowed has dtype {allowed.dtype} and shape {allowed.shape}, expected bool of "
                f"shape ({n}, n_outputs); build it with allowed_masks(spec)"
            )
        if proposal.shape != (n,) or proposal.dtype.kind not in "iu":
            raise SpecError(
                f"Table: proposal has dtype {proposal.dtype} and shape {proposal.shape}, expected "
                f"integers of shape ({n},): one output index per cell"
            )
        if n and (proposal.min() < 0 or proposal.max() >= allowed.shape[1]):
            bad = int(np.flatnonzero((proposal < 0) | (proposal >= allowed.shape[1]))[0])
            raise SpecError(
                f"Table: proposal[{bad}]={int(proposal[bad])} is not an output index "
                f"0..{allowed.shape[1] - 1}; store output indices"
            )
        if status.shape != (n,) or not np.isin(status, STATUSES).all():
            raise SpecError(
                f"Table: status must hold one of EXACT=1, CONSERVATIVE=0, UNDECIDED=-1 per cell "
                f"(shape ({n},)), got shape {status.shape}"
            )
        object.__setattr__(self, "allowed", frozen_array(allowed))
        object.__setattr__(self, "proposal", frozen_array(proposal.astype(np.int64)))
        object.__setattr__(self, "status", frozen_array(status.astype(np.int8)))

    @classmethod
    def undecided(cls, spec, grid: Grid | None = None) -> "Table":
        """The table distillation starts from: every cell UNDECIDED, holding the conservative token."""
        grid = Grid.from_spec(spec) if grid is None else grid
        return cls(
            grid,
            np.full(grid.n_cells, spec.conservative_index, dtype=np.int64),
            np.full(grid.n_cells, UNDECIDED, dtype=np.int8),
            allowed_masks(spec, grid),
        )

    def with_decisions(self, cells, proposals, statuses) -> "Table":
        """A copy with `proposal[cells] = proposals` and `status[cells] = statuses`."""
        proposal, status = self.proposal.copy(), self.status.copy()
        proposal[np.asarray(cells, dtype=np.int64)] = proposals
        status[np.asarray(cells, dtype=np.int64)] = statuses
        return replace(self, proposal=proposal, status=status)

    @property
    def n_cells(self) -> int:
        return self.grid.n_cells

    @property
    def n_outputs(self) -> int:
        return self.allowed.shape[1]

    @property
    def is_complete(self) -> bool:
        """No cell is UNDECIDED."""
        return not bool((self.status == UNDECIDED).any())

    def __eq__(self, other) -> bool:
        if not isinstance(other, Table):
            return NotImplemented
        return (
            self.grid == other.grid
            and np.array_equal(self.proposal, other.proposal)
            and np.array_equal(self.status, other.status)
            and np.array_equal(self.allowed, other.allowed)
        )

    __hash__ = None

    def class_of_cells(self) -> tuple[tuple[CellClass, ...], np.ndarray]:
        """The distinct (proposal, allowed row) classes, and the class index of every cell.

        Classes are ordered by (proposal, row); the machine cannot tell
        two cells of the same class apart, so proofs quantify over classes.
        """
        key = np.column_stack([self.proposal, self.allowed.astype(np.int64)])
        unique, first, inverse, counts = np.unique(
            key, axis=0, return_index=True, return_inverse=True, return_counts=True
        )
        classes = tuple(
            CellClass(int(row[0]), tuple(bool(a) for a in row[1:]), int(count), int(cell))
            for row, count, cell in zip(unique, counts, first)
        )
        return classes, inverse.reshape(-1).astype(np.int64)

    def classes(self) -> tuple[CellClass, ...]:
        return self.class_of_cells()[0]


# ------------------------------------------------------------- rules and masks


def rule_meets(spec, grid: Grid | None = None) -> np.ndarray:
    """(n_rules, n_cells) bool: whether rule j's closed box meets cell c (half-open cell, closed last bin)."""
    grid = Grid.from_spec(spec) if grid is None else grid
    lower, upper = grid.all_cell_bounds()
    closed = upper == grid.upper
    meets = np.ones((len(spec.rules), grid.n_cells), dtype=bool)
    for j, rule in enumerate(spec.rules):
        a, b = np.asarray(rule.lower), np.asarray(rule.upper)
        below_top = (a < upper) | (closed & (a <= upper))
        meets[j] = np.all(below_top & (b >= lower), axis=1)
    return meets


def allowed_masks(spec, grid: Grid | None = None) -> np.ndarray:
    """(n_cells, n_outputs) bool: token k may be emitted in cell c (legal, and no rule that meets c forbids it).

    The vectorised twin of `certfsm.machine.cell_allowed_masks`, the
    standard-library statement the artifact loader re-derives masks with;
    tests/fsm/test_table_masks.py holds the two equal on random grids
    and rule boxes that touch cell edges exactly.
    """
    grid = Grid.from_spec(spec) if grid is None else grid
    allowed = np.zeros((grid.n_cells, spec.n_outputs), dtype=bool)
    allowed[:, list(spec.legal_indices)] = True
    for rule, meets in zip(spec.rules, rule_meets(spec, grid)):
        for k in spec.forbidden_indices(rule):
            allowed[meets, k] = False
    return allowed


@dataclass(frozen=True)
class TableViolation:
    """One cell breaking the table-level property; `kind` is illegal, forbidden, mask, code or conservative."""

    cell: int
    kind: str
    message: str


def _require_same_grid(table: Table, spec) -> None:
    grid = Grid.from_spec(spec)
    if table.grid != grid:
        raise SpecError(
            f"the table's grid (shape {table.grid.shape}, inputs {', '.join(table.grid.names)}) is not "
            f"the grid of spec {spec.name!r} (shape {grid.shape}); distil the table from this spec"
        )
    if table.n_outputs != spec.n_outputs:
        raise SpecError(
            f"the table has {table.n_outputs} tokens per allowed row but spec {spec.name!r} has "
            f"{spec.n_outputs} outputs; distil the table from this spec"
        )


def check_table(table: Table, spec) -> list[TableViolation]:
    """Every violation of the table-level property, cell by cell (empty when the table is sound).

    Kinds: ``illegal`` (token not in legal_tokens), ``forbidden`` (a rule
    meeting the cell forbids the token), ``mask`` (the allowed row differs
    from the rules'), ``code`` (the token's 4-bit code is not a legal
    token's), ``conservative`` (a CONSERVATIVE cell not holding the
    conservative token). Raises SpecError when the table does not belong
    to the spec's grid.
    """
    _require_same_grid(table, spec)
    grid = table.grid
    meets = rule_meets(spec, grid)
    expected = allowed_masks(spec, grid)
    legal = np.zeros(spec.n_outputs, dtype=bool)
    legal[list(spec.legal_indices)] = True
    legal_codes = {spec.tokens[t] for t in spec.legal_tokens}
    cells = np.arange(grid.n_cells)
    proposal = table.proposal
    violations: list[TableViolation] = []

    def where(cell: int) -> str:
        return f"cell {cell} ({grid.describe_cell(cell)})"

    for cell in np.flatnonzero(~legal[proposal]):
        token = spec.outputs[proposal[cell]]
        violations.append(
            TableViolation(
                int(cell),
                "illegal",
                f"{where(cell)} holds {token}, which is not in legal_tokens ({', '.join(spec.legal_tokens)})",
            )
        )
    for j, rule in enumerate(spec.rules):
        forbidden = np.isin(proposal, spec.forbidden_indices(rule)) & meets[j]
        for cell in cells[forbidden]:
            violations.append(
                TableViolation(
                    int(cell),
                    "forbidden",
                    f"{where(cell)} holds {spec.outputs[proposal[cell]]}, which rule {rule.name!r} forbids there",
                )
            )
    for cell in np.flatnonzero(np.any(table.allowed != expected, axis=1)):
        differ = [spec.outputs[k] for k in np.flatnonzero(table.allowed[cell] != expected[cell])]
        violations.append(
            TableViolation(
                int(cell),
                "mask",
                f"{where(cell)}: the allowed row differs from the legality rules for {', '.join(differ)}",
            )
        )
    codes = np.array([spec.tokens[t] for t in spec.outputs])
    for cell in np.flatnonzero(~np.isin(codes[proposal], list(legal_codes))):
        violations.append(
            TableViolation(
                int(cell), "code", f"{where(cell)}: code {codes[proposal[cell]]} is not the code of a legal token"
            )
        )
    wrong = (table.status == CONSERVATIVE) & (proposal != spec.conservative_index)
    for cell in np.flatnonzero(wrong):
        violations.append(
            TableViolation(
                int(cell),
                "conservative",
                f"{where(cell)} is conservative but holds "
                f"{spec.outputs[proposal[cell]]}, not {spec.conservative_token}",
            )
        )
    return violations


# ------------------------------------------------------------- the Z3 proof


_KINDS_OF_PROPERTY = {"table-tokens": {"illegal", "forbidden"}, "table-masks": {"mask"}, "table-codes": {"code"}}


def _table_encoding(table: Table, spec) -> list[str]:
    """The cell, the geometry of the rules and the table, shared by the three properties.

    The cell is one Boolean per (input, bin), exactly one per input. The
    table is a set of clauses "these bins => class c", one per leaf of the
    decision tree that splits the grid input by input into runs of
    sub-arrays that hold one class (a uniform sub-array is one leaf), so
    a smooth table gives few clauses; each class fixes the token and the
    allowed row. The geometry is written out per bin with the exact
    decimals of the edges and rule bounds, and the solver evaluates it.
    """
    from certfsm.verify import exact_decimal

    grid = table.grid
    shape = grid.shape
    lines = ["; the cell: b_i_k means input i lies in its bin k; exactly one bin per input"]
    for i, (name, n) in enumerate(zip(grid.names, shape)):
        bins = [f"b_{i}_{k}" for k in range(n)]
        lines.append(f"; input {i}: {name}, {n} bins")
        lines += [f"(declare-const {b} Bool)" for b in bins]
        lines.append(f"(assert {_any(bins)})")
        lines += [f"(assert (not (and {bins[j]} {bins[k]})))" for j in range(n) for k in range(j + 1, n)]
    positions = []
    for i, n in enumerate(shape):
        index = "0"
        for k in range(n - 1, 0, -1):
            index = f"(ite b_{i}_{k} {k} {index})"
        stride = int(np.prod(shape[i + 1 :]))
        positions.append(index if stride == 1 else f"(* {stride} {index})")
    lines.append("; the flat cell index in C order (for reading a model; the proof does not need it)")
    flat = positions[0] if len(positions) == 1 else f"(+ {' '.join(positions)})"
    lines.append(f"(define-fun cell () Int {flat})")
    lines.append("; legality rules: a rule's closed box meets the cell [lo, hi) per input (closed on the last bin)")
    forbidders: dict[int, list[str]] = {}
    for j, rule in enumerate(spec.rules):
        sides = []
        for i, (edges, low, high) in enumerate(zip(grid.edges, rule.lower, rule.upper)):
            a, b = exact_decimal(low), exact_decimal(high)
            cases = []
            for k in range(shape[i]):
                lo, hi = exact_decimal(edges[k]), exact_decimal(edges[k + 1])
                top = f"(<= {a} {hi})" if k == shape[i] - 1 else f"(< {a} {hi})"
                cases.append(f"(and b_{i}_{k} {top} (<= {lo} {b}))")
            sides.append(_any(cases))
        lines.append(f"; rule {j}: {rule.name} forbids {', '.join(rule.forbid)}")
        lines.append(f"(define-fun meets_{j} () Bool (and {' '.join(sides)}))")
        for k in spec.forbidden_indices(rule):
            forbidders.setdefault(k, []).append(f"meets_{j}")
    legal = [f"(= t {k})" for k in spec.legal_indices]
    forbidden = [f"(and (= t {k}) {_any(names)})" for k, names in sorted(forbidders.items())]
    lines.append(f"(define-fun legal ((t Int)) Bool {_any(legal)})")
    lines.append(f"(define-fun permitted ((t Int)) Bool (and (legal t) (not {_any(forbidden)})))")
    code = "(- 1)"
    for k in range(spec.n_outputs - 1, -1, -1):
        code = f"(ite (= t {k}) {spec.tokens[spec.outputs[k]]} {code})"
    lines.append(f"(define-fun code ((t Int)) Int {code})")
    classes, class_index = table.class_of_cells()
    n_out = spec.n_outputs
    lines.append(f"; the table: {len(classes)} classes of cells with the same token and allowed row")
    lines.append("(declare-const token Int)")
    lines += [f"(declare-const allowed_{k} Bool)" for k in range(n_out)]
    lines += [f"(declare-const class_{c} Bool)" for c in range(len(classes))]
    for c, item in enumerate(classes):
        row = " ".join(f"allowed_{k}" if a else f"(not allowed_{k})" for k, a in enumerate(item.allowed))
        lines.append(f"(assert (=> class_{c} (and (= token {item.proposal}) {row})))")
    leaves: list[tuple[list[str], int]] = []
    _leaves(class_index.reshape(shape), 0, [], leaves)
    lines.append(f"; which cells hold which class: {len(leaves)} clauses cover the {grid.n_cells} cells")
    for path, c in leaves:
        premise = _all(path)
        lines.append(f"(assert class_{c})" if premise == "true" else f"(assert (=> {premise} class_{c}))")
    return lines


def _negated_property(spec, prop: str, leaves: bool = False) -> list[str]:
    """The property's negation over the cell; with `leaves`, over the cell or the leaf (`_leaf_encoding`)."""
    if prop not in TABLE_PROPERTIES:
        raise ValueError(f"prop={prop!r} is not one of {TABLE_PROPERTIES}")
    lines = [f"; the property, negated: {_DESCRIPTIONS[prop]}" + ("; in the cell or in the leaf" if leaves else "")]

    def holds(token: str, allowed: str, permitted: str) -> str:
        if prop == "table-tokens":
            return f"({permitted} {token})"
        if prop == "table-masks":
            return f"(and {' '.join(f'(= {allowed}_{k} ({permitted} {k}))' for k in range(spec.n_outputs))})"
        legal_codes = sorted({spec.tokens[t] for t in spec.legal_tokens})
        return _any([f"(= (code {token}) {c})" for c in legal_codes])

    cell = holds("token", "allowed", "permitted")
    if not leaves:
        lines.append(f"(assert (not {cell}))")
    else:
        lines.append(f"(assert (or (not {cell}) (not {holds('leaf_token', 'leaf_allowed', 'leaf_permitted')})))")
    return lines


def _rational(value: Fraction) -> str:
    """An exact rational as an SMT-LIB real term: 1.5, (/ 1.0 10.0), (- 2.0)."""
    magnitude = abs(value)
    term = (
        f"{magnitude.numerator}.0"
        if magnitude.denominator == 1
        else f"(/ {magnitude.numerator}.0 {magnitude.denominator}.0)"
    )
    return f"(- {term})" if value < 0 else term


def _leaf_encoding(refinement, spec) -> list[str]:
    """The leaves of a refined table beside the cell: a symbolic leaf, its exact box, its token and allowed row.

    A Boolean ``leaf_m`` per leaf of every tree (numbered as the artifact
    numbers them), at least one of them true; each fixes the box's sides
    (lo_i, hi_i, whether hi_i is closed) to its exact rationals, re-derived
    from its cell and the splits (`certfsm.BoxTree.boxes`), and its token
    and row, so two distinct leaves never hold together. Booleans rather
    than one integer index: Z3 splits on them in its SAT core (on the
    example refined to 120 460 leaves, table-masks is proved in 150 s,
    where an integer index ran out of 600 s). A rule's
    closed box meets the leaf exactly as it meets a cell (docs/semantics.md,
    "Legality rules"): ``lower_i < hi_i`` (``<=`` on a closed side) and
    ``upper_i >= lo_i`` in every input; the rule bounds are the spec's
    decimals, exactly (`certfsm.decimal_value`).
    """
    from certfsm import decimal_value

    boxes = [(box, leaf) for tree in refinement.trees for box, leaf in zip(tree.boxes, tree.leaves)]
    n_in = len(boxes[0][0].intervals)
    lines = [
        f"; the leaves of the refined table: {len(boxes)} leaves under {len(refinement.cells)} cells, each with its "
        "exact box (lo_i <= x_i < hi_i, <= hi_i where closed)",
        *(f"(declare-const leaf_{m} Bool)" for m in range(len(boxes))),
        f"(assert {_any([f'leaf_{m}' for m in range(len(boxes))])})",
        "(declare-const leaf_token Int)",
    ]
    lines += [f"(declare-const leaf_allowed_{k} Bool)" for k in range(spec.n_outputs)]
    for i in range(n_in):
        lines += [f"(declare-const lo_{i} Real)", f"(declare-const hi_{i} Real)", f"(declare-const closed_{i} Bool)"]
    for m, (box, leaf) in enumerate(boxes):
        sides = []
        for i, side in enumerate(box.intervals):
            closed = f"closed_{i}" if side.closed else f"(not closed_{i})"
            sides.append(f"(= lo_{i} {_rational(side.low)}) (= hi_{i} {_rational(side.high)}) {closed}")
        row = " ".join(
            f"leaf_allowed_{k}" if leaf.allowed >> k & 1 else f"(not leaf_allowed_{k})" for k in range(spec.n_outputs)
        )
        lines.append(f"(assert (=> leaf_{m} (and {' '.join(sides)} (= leaf_token {leaf.token}) {row})))")
    forbidders: dict[int, list[str]] = {}
    for j, rule in enumerate(spec.rules):
        sides = []
        for i, (low, high) in enumerate(zip(rule.lower, rule.upper)):
            a, b = _rational(decimal_value(low)), _rational(decimal_value(high))
            sides.append(f"(or (< {a} hi_{i}) (and closed_{i} (<= {a} hi_{i}))) (<= lo_{i} {b})")
        lines.append(f"(define-fun leaf_meets_{j} () Bool (and {' '.join(sides)}))")
        for k in spec.forbidden_indices(rule):
            forbidders.setdefault(k, []).append(f"leaf_meets_{j}")
    forbidden = [f"(and (= t {k}) {_any(names)})" for k, names in sorted(forbidders.items())]
    lines.append(f"(define-fun leaf_permitted ((t Int)) Bool (and (legal t) (not {_any(forbidden)})))")
    return lines


def leaf_violations(refinement, spec) -> list[tuple[int, int, str, str]]:
    """Every leaf breaking the table-level property: (leaf number, its cell, kind, message), kinds as `check_table`.

    The mask a leaf must hold is the rules' for its own box
    (`certfsm.leaf_allowed_mask`, the loader's check); the token must be
    legal and allowed there, its code a legal token's, and a conservative
    or undecided leaf must hold the conservative token.
    """
    from certfsm import LeafStatus, leaf_allowed_mask

    legal = sum(1 << t for t in spec.legal_indices)
    rules = [(r.lower, r.upper, sum(1 << k for k in spec.forbidden_indices(r))) for r in spec.rules]
    legal_codes = {spec.tokens[t] for t in spec.legal_tokens}
    names = [item.name for item in spec.inputs]
    found, number = [], 0
    for cell, tree in zip(refinement.cells, refinement.trees):
        for box, leaf in zip(tree.boxes, tree.leaves):
            where = f"leaf {number} of cell {cell} ({', '.join(s.describe(n) for s, n in zip(box.intervals, names))})"
            token = spec.outputs[leaf.token] if 0 <= leaf.token < spec.n_outputs else str(leaf.token)
            expected = leaf_allowed_mask(box, legal, rules)
            if not legal >> leaf.token & 1:
                found.append((number, cell, "illegal", f"{where} holds {token}, which is not in legal_tokens"))
            elif not expected >> leaf.token & 1:
                found.append((number, cell, "forbidden", f"{where} holds {token}, which a legality rule forbids there"))
            if leaf.allowed != expected:
                found.append(
                    (
                        number,
                        cell,
                        "mask",
                        f"{where}: the allowed mask {leaf.allowed} differs from the rules' {expected}",
                    )
                )
            if spec.tokens.get(token) not in legal_codes:
                found.append((number, cell, "code", f"{where}: {token}'s code is not the code of a legal token"))
            if leaf.status is not LeafStatus.EXACT and leaf.token != spec.conservative_index:
                found.append((number, cell, "conservative", f"{where} is {leaf.status.value} but holds {token}"))
            number += 1
    return found


def _leaves(classes: np.ndarray, axis: int, path: list[str], out: list) -> None:
    """Split `classes` along `axis` into runs of equal sub-arrays; a uniform array is one leaf (path, class)."""
    first = classes.flat[0]
    if (classes == first).all():
        out.append((path, int(first)))
        return
    n, k = classes.shape[0], 0
    while k < n:
        end = k + 1
        while end < n and np.array_equal(classes[end], classes[k]):
            end += 1
        _leaves(classes[k], axis + 1, path + [_any([f"b_{axis}_{j}" for j in range(k, end)])], out)
        k = end


def _any(terms: list[str]) -> str:
    if not terms:
        return "false"
    return terms[0] if len(terms) == 1 else f"(or {' '.join(terms)})"


def _all(terms: list[str]) -> str:
    if not terms:
        return "true"
    return terms[0] if len(terms) == 1 else f"(and {' '.join(terms)})"


def prove_table(
    table: Table,
    spec,
    folder=None,
    *,
    timeout: float = 60.0,
    stable: bool = False,
    rlimit: int | None = None,
    refinement=None,
) -> tuple[Proof, ...]:
    """The table-level property by Z3, one `Proof` per name in TABLE_PROPERTIES, each with its SMT-LIB file.

    Proved only from unsat; a sat answer counts as violated only when
    `check_table` confirms a violation of that kind in the cell Z3 names;
    otherwise unknown. With `folder`, writes ``<property>.smt2`` there
    (``table-tokens.smt2`` ...; the folder must exist). `rlimit` (Z3's
    deterministic resource count) makes the verdict independent of the
    machine's speed, `timeout` then being a guard
    (`certfsm.verify.solve_text`).

    `refinement` (a `certfsm.Refinement`; None for a flat table) adds the
    leaves: each query ranges over a cell or a leaf (`_leaf_encoding`), so
    a proof covers every leaf as well as every cell's own entry, and a
    violation names the leaf (`leaf_violations`). A flat table's queries
    are written exactly as before.
    """
    from ._machine_proofs import solve_script, write_proof_file

    _require_same_grid(table, spec)
    concrete = check_table(table, spec)
    in_leaves = [] if refinement is None else leaf_violations(refinement, spec)
    results = []
    encoding = _table_encoding(table, spec) + ([] if refinement is None else _leaf_encoding(refinement, spec))
    bodies = [encoding + _negated_property(spec, prop, leaves=refinement is not None) for prop in TABLE_PROPERTIES]

    def solve(body: list[str]) -> tuple:
        started = time.perf_counter()
        return (*solve_script(body, "QF_LIRA", timeout, rlimit), time.perf_counter() - started)

    # Each query has its own Z3 context, and Z3 runs outside the GIL: on a refined table's leaves the three
    # queries take seconds each, so they run side by side. With `rlimit` the answers do not depend on it.
    with ThreadPoolExecutor(max_workers=min(len(bodies), os.cpu_count() or 1)) as threads:
        answers = list(threads.map(solve, bodies))
    for prop, body, (answer, model, reason, seconds) in zip(TABLE_PROPERTIES, bodies, answers):
        cell = None
        if answer == "unsat":
            verdict = "proved"
        elif answer == "sat":
            cell = table.grid.cell_index(
                [next((k for k in range(n) if model.bool(f"b_{i}_{k}")), 0) for i, n in enumerate(table.grid.shape)]
            )
            hits = [v.message for v in concrete if v.cell == cell and v.kind in _KINDS_OF_PROPERTY[prop]]
            if refinement is not None and not hits:
                found = [v for v in in_leaves if v[2] in _KINDS_OF_PROPERTY[prop] and model.bool(f"leaf_{v[0]}")]
                hits, cell = [v[3] for v in found], found[0][1] if found else cell
            verdict = "violated" if hits else "unknown"
            reason = (
                hits[0] if hits else (f"z3 answered sat at cell {cell} but the concrete check finds no violation there")
            )
            cell = cell if hits else None
        else:
            verdict = "unknown"
        name = sha = None
        if folder is not None:
            name = f"{prop}.smt2"
            sha = write_proof_file(
                Path(folder) / name,
                body,
                "QF_LIRA",
                prop=prop,
                description=_DESCRIPTIONS[prop] + ("; likewise every leaf in its own box" if refinement else ""),
                verdict=verdict,
                stable=stable,
                extra={"spec": spec.name, "cells": table.n_cells}
                | ({} if refinement is None else {"leaves": refinement.n_leaves}),
            )
        results.append(
            Proof(
                verdict,
                "z3",
                seconds,
                reason if verdict != "proved" else "",
                cell=cell,
                property=prop,
                smt2=name,
                smt2_sha256=sha,
            )
        )
    return tuple(results)
