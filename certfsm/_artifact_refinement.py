"""The loader's reading of ``payload.table.refinement``: the box trees of a refined table, re-derived and checked.

docs/design.md, "Box trees". The field is absent in a flat artifact. When
present it is ``{"version": 1, "cells": [refined cell, ascending],
"trees": [pre-order list per refined cell], "proposal": [token per
leaf], "status": "ecu...", "allowed": [mask per leaf]}``, leaves numbered
in pre-order from tree to tree (`certfsm._box_tree`).

Order: the field's keys and version, the spec's budgets (a refinement
needs the spec's ``refine`` object), the refined cells, the leaf
columns, then each tree in order: its cell's own entry conservative, the
tree decoded over the cell's box (`certfsm._box_tree.decode_tree`:
well-formed nodes, thresholds on their grid and strictly inside their
node, so that the leaves partition the cell exactly; depth and leaves
within the budget; at least one split), then each of its leaves: the
conservative token allowed, only legal tokens allowed, the token
allowed, a conservative or undecided leaf on the conservative token, and
the mask the legality rules give for the leaf's own half-open box
(`certfsm._box_tree.leaf_allowed_mask`). The first failure is refused in
one line naming the JSON path, the cell and the leaf.

What the loader cannot re-derive is that of a flat table
(`certfsm._artifact_trust`): whether an exact leaf is exact needs the model.

Standard library and numpy only, like every module an artifact loader
imports.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ._artifact_checks import PayloadChecks, _kind, _show
from ._box_tree import Box, Leaf, LeafStatus, Refinement, decode_tree, leaf_allowed_mask
from ._errors import BoxTreeError
from ._stored_spec import StoredSpec

_AT = "payload.table.refinement"
_FORMAT = 1
_KEYS = ("allowed", "cells", "proposal", "status", "trees", "version")
_STATUS = {"e": LeafStatus.EXACT, "c": LeafStatus.CONSERVATIVE, "u": LeafStatus.UNDECIDED}


def read_refinement(
    checks: PayloadChecks,
    refinement: Any,
    edges: list[list[float]],
    frac_bits: list[int | None],
    spec: StoredSpec,
    exact: np.ndarray,
) -> Refinement:
    """The checked trees of a refined table; `exact` is the flat table's status, shaped by the bins."""
    refinement = checks.obj(refinement, _AT, _KEYS)
    if type(refinement["version"]) is not int or refinement["version"] != _FORMAT:
        raise checks.fail(
            f"{_AT}.version={_show(refinement['version'])} is not refinement format {_FORMAT}, the one this "
            "version of certfsm reads"
        )
    budget = spec.refine
    if budget is None:
        raise checks.fail(
            f"{_AT} is present but payload.spec has no refine object, so no budget bounds its trees; a refined "
            "table is distilled from a spec with refine"
        )
    shape = exact.shape
    n_cells = int(exact.size)
    cells = checks.items(refinement["cells"], f"{_AT}.cells", minimum=1)
    for j, cell in enumerate(cells):
        checks.integer(cell, f"{_AT}.cells[{j}]", 0, n_cells - 1, f"a cell index 0..{n_cells - 1}")
        if j and not cell > cells[j - 1]:
            raise checks.fail(
                f"{_AT}.cells[{j}]={cell} is not above {_AT}.cells[{j - 1}]={cells[j - 1]}; list refined cells "
                "ascending, each once"
            )
    trees = checks.items(refinement["trees"], f"{_AT}.trees", length=len(cells), of=f"{_AT}.cells has {len(cells)}")
    leaves = _read_leaves(checks, refinement, spec)
    read: list[Any] = []
    count = 0
    flat_exact = exact.reshape(-1)
    for j, (cell, encoded) in enumerate(zip(cells, trees)):
        bins = [int(b) for b in np.unravel_index(cell, shape)]
        where = f"cell {cell} (bins {', '.join(map(str, bins))})"
        if flat_exact[cell]:
            raise checks.fail(
                f"payload.table.status[{cell}]='e' in {where}, which {_AT}.cells[{j}] refines; a refined cell's "
                "own entry is conservative ('c', the conservative token) and its leaves decide"
            )
        box = Box.of_bounds(
            [row[b] for row, b in zip(edges, bins)],
            [row[b + 1] for row, b in zip(edges, bins)],
            [b + 2 == len(row) for row, b in zip(edges, bins)],
        )
        try:
            tree = decode_tree(
                encoded, box, frac_bits, leaves, where=f"{_AT}.trees[{j}]", first_leaf=count, budget=budget
            )
        except BoxTreeError as error:
            raise checks.fail(f"{error} ({where})") from None
        if tree.n_leaves < 2:
            raise checks.fail(
                f"{_AT}.trees[{j}] is a single leaf: {where} is not refined; drop it from {_AT}.cells and keep "
                "its entry in the flat table"
            )
        for k, (leaf_box, leaf) in enumerate(zip(tree.boxes, tree.leaves)):
            _check_leaf(checks, count + k, leaf, leaf_box, where, spec)
        count += tree.n_leaves
        read.append(tree)
    if count != len(leaves):
        raise checks.fail(
            f"{_AT}.proposal has {len(leaves)} leaves but {_AT}.trees number {count}; list one entry per leaf"
        )
    return Refinement(tuple(cells), tuple(read))


def _read_leaves(checks: PayloadChecks, refinement: dict[str, Any], spec: StoredSpec) -> list[Leaf]:
    n_outputs = len(spec.outputs)
    full = (1 << n_outputs) - 1
    proposal = checks.items(refinement["proposal"], f"{_AT}.proposal")
    of = f"{_AT}.proposal has {len(proposal)} leaves"
    status = refinement["status"]
    if not isinstance(status, str):
        raise checks.fail(f"{_AT}.status is {_kind(status)}, expected a string of one 'e', 'c' or 'u' per leaf")
    if len(status) != len(proposal):
        raise checks.fail(f"{_AT}.status has {len(status)} characters but {of}")
    allowed = checks.items(refinement["allowed"], f"{_AT}.allowed", length=len(proposal), of=of)
    for k, value in enumerate(proposal):
        checks.integer(value, f"{_AT}.proposal[{k}]", 0, n_outputs - 1, f"an output index 0..{n_outputs - 1}")
    wrong = re.search(r"[^ecu]", status)
    if wrong:
        raise checks.fail(
            f"{_AT}.status[{wrong.start()}]={wrong.group()!r} is neither 'e' (exact), 'c' (conservative) nor "
            "'u' (undecided)"
        )
    for k, value in enumerate(allowed):
        checks.integer(
            value, f"{_AT}.allowed[{k}]", 0, full, f"a bitmask over {n_outputs} outputs (an integer from 0 to {full})"
        )
    return [Leaf(_STATUS[s], token, mask) for token, s, mask in zip(proposal, status, allowed)]


def _check_leaf(checks: PayloadChecks, k: int, leaf: Leaf, box: Box, cell: str, spec: StoredSpec) -> None:
    """Refuse leaf `k` where it breaks a rule of a table entry, as a cell of the flat table would be refused."""
    names, conservative, legal = spec.outputs, spec.conservative, spec.legal_mask

    def where() -> str:  # only for a refusal: describing every leaf's box costs more than checking it
        return f"leaf {k} ({'; '.join(i.describe(n) for i, n in zip(box.intervals, spec.input_names))}) of {cell}"

    def tokens(mask: int) -> str:
        return ", ".join(name for i, name in enumerate(names) if mask >> i & 1) or "none"

    if not leaf.allowed >> conservative & 1:
        raise checks.fail(
            f"{_AT}.allowed[{k}]={leaf.allowed} does not allow the conservative token {names[conservative]} in "
            f"{where()}; the fallback must be allowed in every leaf"
        )
    if leaf.allowed & ~legal:
        raise checks.fail(
            f"{_AT}.allowed[{k}]={leaf.allowed} allows {tokens(leaf.allowed & ~legal)} in {where()}, which "
            "payload.spec.legal_tokens does not list; a leaf allows only legal tokens"
        )
    if not leaf.allowed >> leaf.token & 1:
        raise checks.fail(
            f"{_AT}.proposal[{k}]={leaf.token} ({names[leaf.token]}) is not allowed in {where()} (allowed there: "
            f"{tokens(leaf.allowed)}); a leaf may propose only an allowed token"
        )
    if leaf.status is not LeafStatus.EXACT and leaf.token != conservative:
        raise checks.fail(
            f"{_AT}.proposal[{k}]={leaf.token} ({names[leaf.token]}) in {where()}, whose status is "
            f"{leaf.status.value}; such a leaf holds the conservative token {conservative} ({names[conservative]})"
        )
    expected = leaf_allowed_mask(box, legal, [(r.lower, r.upper, r.forbidden) for r in spec.rules])
    if leaf.allowed != expected:
        raise checks.fail(
            f"{_AT}.allowed[{k}]={leaf.allowed} in {where()} differs from the mask {expected} that the spec's "
            f"legality rules give for the leaf's own box (allowed there: {tokens(expected)})"
        )
