"""The loader's reading of an artifact's table: the three per-cell lists, checked cell by cell against the spec.

A refined table's trees (``refinement``, the one optional key) are read
after the cells by `certfsm._artifact_refinement`.

Order: the three lengths, then each list's values, then the cells in
order; at one cell: the conservative token allowed, only legal tokens
allowed, the proposal allowed, a conservative cell holding the
conservative token, the mask the one the spec's legality rules give
(`certfsm.machine.cell_allowed_masks`). The first failing cell is
refused with one line naming it, its bins and the rule.

Standard library and numpy only, like every module an artifact loader
imports.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable

import numpy as np

from ._arrays import frozen_array
from ._artifact_checks import PayloadChecks, _kind
from ._stored_spec import StoredSpec
from .machine import bins_met, cell_allowed_masks

_AT = "payload.table"


def read_table(
    checks: PayloadChecks, table: Any, edges: list[list[float]], spec: StoredSpec
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(proposal, exact, allowed), read-only and shaped by the inputs' bin counts."""
    shape = tuple(len(row) - 1 for row in edges)
    n_cells, n_outputs = math.prod(shape), len(spec.outputs)
    table = checks.obj(table, _AT, ("allowed", "proposal", "status"), only=False)
    for key in table:
        if key not in ("allowed", "proposal", "refinement", "status"):
            raise checks.fail(
                f"{_AT}.{key} is not a field of an artifact's table (expected allowed, proposal, status and, in a "
                "refined table, refinement)"
            )
    grid = f"the grid has {n_cells} cells"
    proposal = checks.items(table["proposal"], f"{_AT}.proposal", length=n_cells, of=grid)
    status = table["status"]
    if not isinstance(status, str):
        raise checks.fail(f"{_AT}.status is {_kind(status)}, expected a string of one 'e' or 'c' per cell")
    if len(status) != n_cells:
        raise checks.fail(f"{_AT}.status has {len(status)} characters but {grid}")
    allowed = checks.items(table["allowed"], f"{_AT}.allowed", length=n_cells, of=grid)
    for k, value in enumerate(proposal):
        if type(value) is not int or not 0 <= value < n_outputs:
            checks.integer(value, f"{_AT}.proposal[{k}]", 0, n_outputs - 1, f"an output index 0..{n_outputs - 1}")
    wrong = re.search(r"[^ec]", status)
    if wrong:
        raise checks.fail(
            f"{_AT}.status[{wrong.start()}]={wrong.group()!r} is neither 'e' (exact) nor 'c' (conservative)"
        )
    full = (1 << n_outputs) - 1
    for k, value in enumerate(allowed):
        if type(value) is not int or not 0 <= value <= full:
            checks.integer(
                value,
                f"{_AT}.allowed[{k}]",
                0,
                full,
                f"a bitmask over {n_outputs} outputs (an integer from 0 to {full})",
            )
    chosen = frozen_array(proposal, np.int64).reshape(shape)
    masks = frozen_array(allowed, np.int64).reshape(shape)
    exact = frozen_array(np.frombuffer(status.encode("ascii"), dtype=np.uint8) == ord("e"), bool).reshape(shape)
    _check_cells(checks, chosen.reshape(-1), masks.reshape(-1), exact.reshape(-1), edges, spec)
    return chosen, exact, masks


def _check_cells(
    checks: PayloadChecks,
    chosen: np.ndarray,
    masks: np.ndarray,
    exact: np.ndarray,
    edges: list[list[float]],
    spec: StoredSpec,
) -> None:
    """Refuse the first cell (flat index) that breaks one of the rules, naming the rule it breaks there."""
    shape = tuple(len(row) - 1 for row in edges)
    names, conservative, legal_mask, rules = spec.outputs, spec.conservative, spec.legal_mask, spec.rules
    expected = np.array(
        cell_allowed_masks(edges, legal_mask, [(r.lower, r.upper, r.forbidden) for r in rules]), dtype=np.int64
    )

    def rules_at(k: int, token: int) -> str:
        bins = np.unravel_index(k, shape)
        met = [
            repr(r.name)
            for r in rules
            if r.forbidden >> token & 1
            and all(int(b) in bins_met(e, lo, hi) for b, e, lo, hi in zip(bins, edges, r.lower, r.upper))
        ]
        return (
            f"rule {' and rule '.join(met)} of payload.spec.legality_rules forbids"
            if met
            else "payload.spec.legality_rules forbids"
        )

    def difference(k: int) -> str:
        extra, missing = int(masks[k]) & ~int(expected[k]), int(expected[k]) & ~int(masks[k])
        if extra:
            token = (extra & -extra).bit_length() - 1
            return f"it allows {names[token]}, which {rules_at(k, token)} there"
        token = (missing & -missing).bit_length() - 1
        return f"it forbids {names[token]}, which no rule of payload.spec.legality_rules forbids there"

    def cell(k: int) -> str:
        return f"cell {k} (bins {', '.join(str(int(b)) for b in np.unravel_index(k, shape))})"

    def tokens(mask: int) -> str:
        return ", ".join(name for i, name in enumerate(names) if mask >> i & 1) or "none"

    def token(k: int) -> str:
        return f"{int(chosen[k])} ({names[int(chosen[k])]})"

    problems: tuple[tuple[np.ndarray, Callable[[int], str]], ...] = (
        (
            (masks >> conservative) & 1 == 0,
            lambda k: (
                f"{_AT}.allowed[{k}]={int(masks[k])} does not allow the conservative token "
                f"{names[conservative]} in {cell(k)}; the fallback must be allowed in every cell"
            ),
        ),
        (
            masks & ~legal_mask != 0,
            lambda k: (
                f"{_AT}.allowed[{k}]={int(masks[k])} allows {tokens(int(masks[k]) & ~legal_mask)} in "
                f"{cell(k)}, which payload.spec.legal_tokens does not list; a cell allows only legal tokens"
            ),
        ),
        (
            (masks >> chosen) & 1 == 0,
            lambda k: (
                f"{_AT}.proposal[{k}]={token(k)} is not allowed in {cell(k)} (allowed there: "
                f"{tokens(int(masks[k]))}); the table may propose only an allowed token"
            ),
        ),
        (
            ~exact & (chosen != conservative),
            lambda k: (
                f"{_AT}.proposal[{k}]={token(k)} in {cell(k)}, whose status is 'c' (conservative); a "
                f"conservative cell holds the conservative token {conservative} ({names[conservative]})"
            ),
        ),
        (
            masks != expected,
            lambda k: (
                f"{_AT}.allowed[{k}]={int(masks[k])} in {cell(k)} differs from the mask {int(expected[k])} "
                f"that the spec's legality rules give: {difference(k)}"
            ),
        ),
    )
    first: tuple[int, Callable[[int], str]] | None = None
    for failing, message in problems:
        hits = np.flatnonzero(failing)
        if hits.size and (first is None or hits[0] < first[0]):
            first = (int(hits[0]), message)
    if first is not None:
        raise checks.fail(first[1](first[0]))
