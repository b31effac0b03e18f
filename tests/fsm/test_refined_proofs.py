"""The table and machine proofs of a refined table range over its leaves as well as its cells.

A tiny spec (two inputs, three tokens, TURBO forbidden where b >= 20) and a
table whose cells 3 and 5 are refined: the leaves of cell 3 propose TURBO
and FAST, which no flat cell proposes with those rows, so the machine
proofs must take the leaves' classes; a leaf planted with TURBO where the
rule forbids it is a violation that the cells alone cannot show.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pytest

from certfsm import Box, BoxTree, Leaf, LeafStatus, Refinement, Split, leaf_allowed_mask, spec_from_dict
from certfsm.fsm._explicit import alphabet, check_explicit, table_rows
from certfsm.fsm._grid import Grid
from certfsm.fsm._machine_proofs import prove_machine
from certfsm.fsm._table import CONSERVATIVE, EXACT, Table, allowed_masks, leaf_violations, prove_table
from certfsm.machine import MachineParams

SPEC = spec_from_dict(
    {
        "certfsm_spec": 1,
        "name": "tiny",
        "model": "tiny.onnx",
        "inputs": [
            {"name": "a", "unit": "%", "min": 0, "max": 3, "bins": 3, "frac_bits": 4},
            {"name": "b", "unit": "degC", "min": 0, "max": 30, "edges": [0, 10, 20, 30]},
        ],
        "outputs": ["KEEP", "FAST", "TURBO"],
        "tokens": {"KEEP": 0, "FAST": 5, "TURBO": 9},
        "legal_tokens": ["KEEP", "FAST", "TURBO"],
        "decision": "argmax",
        "conservative_token": "KEEP",
        "legality_rules": [{"name": "no-turbo-when-hot", "when": {"b": {"min": 20}}, "forbid": ["TURBO"]}],
        "hysteresis": {"confirm_cycles": 2, "cooldown_cycles": 3},
        "overrides": {"overridable": ["KEEP", "FAST"]},
    },
    "/certfsm-test/spec.json",
    require_model=False,
)
PARAMS = MachineParams.from_spec(SPEC)
RULES = [(r.lower, r.upper, sum(1 << k for k in SPEC.forbidden_indices(r))) for r in SPEC.rules]


def table() -> Table:
    """Cell k = 3 * bin(a) + bin(b); refined cells 3 and 5 hold KEEP, conservative; no cell proposes TURBO."""
    grid = Grid.from_spec(SPEC)
    proposal = np.array([0, 1, 1, 0, 1, 0, 0, 0, 1])
    status = np.array([EXACT, EXACT, EXACT, CONSERVATIVE, EXACT, CONSERVATIVE, CONSERVATIVE, EXACT, EXACT])
    return Table(grid, proposal, status, allowed_masks(SPEC, grid))


def box_of(cell: int) -> Box:
    grid = Grid.from_spec(SPEC)
    bins = [cell // 3, cell % 3]
    edges = [[float(v) for v in e] for e in grid.edges]
    return Box.of_bounds(
        [e[k] for e, k in zip(edges, bins)],
        [e[k + 1] for e, k in zip(edges, bins)],
        [k == len(e) - 2 for e, k in zip(edges, bins)],
    )


def tree(cell: int, input: int, threshold: Fraction, low: tuple[int, str], high: tuple[int, str]) -> BoxTree:
    box = box_of(cell)
    parts = box.split(input, threshold)
    legal = sum(1 << t for t in SPEC.legal_indices)
    leaves = [
        Leaf(LeafStatus(status), token, leaf_allowed_mask(part, legal, RULES))
        for part, (token, status) in zip(parts, (low, high))
    ]
    return BoxTree(box, Split(input, threshold, leaves[0], leaves[1]), (4, None))


def refinement(hot_token: int = 0, hot_status: str = "conservative") -> Refinement:
    """Cell 3 (a in [1, 2), b in [0, 10)): b < 2.5 TURBO, else FAST. Cell 5 (a in [1, 2), b in [20, 30]): a < 1.5
    FAST, else `hot_token`."""
    return Refinement(
        (3, 5),
        (
            tree(3, 1, Fraction(5, 2), (2, "exact"), (1, "exact")),
            tree(5, 0, Fraction(3, 2), (1, "exact"), (hot_token, hot_status)),
        ),
    )


def test_a_refined_table_is_proved_over_its_cells_and_leaves(tmp_path):
    proofs = prove_table(table(), SPEC, tmp_path, stable=True, refinement=refinement())
    assert [p.verdict for p in proofs] == ["proved"] * 3, proofs
    text = (tmp_path / "table-tokens.smt2").read_text()
    assert "(declare-const leaf_3 Bool)" in text and "leaf_permitted leaf_token" in text and "leaves: 4" in text
    assert (
        "; description: every cell's token is a legal token that no legality rule forbids anywhere in the cell; "
        "likewise every leaf in its own box\n" in text
    )


def test_a_planted_forbidden_leaf_token_is_found_by_the_leaf_queries_only(tmp_path):
    planted = refinement(hot_token=2, hot_status="exact")  # TURBO where b >= 20 forbids it
    assert [v[2] for v in leaf_violations(planted, SPEC)] == ["forbidden"]
    proofs = {p.property: p for p in prove_table(table(), SPEC, refinement=planted)}
    assert proofs["table-tokens"].verdict == "violated" and proofs["table-tokens"].cell == 5
    assert proofs["table-tokens"].reason.startswith("leaf 3 of cell 5 (a in [1.5, 2.0), b in [20.0, 30.0]) holds TURBO")
    assert proofs["table-masks"].verdict == proofs["table-codes"].verdict == "proved"
    assert all(p.verdict == "proved" for p in prove_table(table(), SPEC)), "the cells alone hide the leaf"


def test_a_planted_leaf_mask_is_found(tmp_path):
    good = refinement()
    bad_tree = dataclasses.replace(
        good.trees[1], root=dataclasses.replace(good.trees[1].root, high=Leaf(LeafStatus.CONSERVATIVE, 0, 0b111))
    )
    planted = Refinement(good.cells, (good.trees[0], bad_tree))
    proofs = {p.property: p for p in prove_table(table(), SPEC, refinement=planted)}
    assert proofs["table-masks"].verdict == "violated" and "leaf 3 of cell 5" in proofs["table-masks"].reason
    assert proofs["table-tokens"].verdict == "proved"


def test_the_machine_proofs_take_the_leaves_classes(tmp_path):
    rows = table_rows(table(), refinement())
    flat = table_rows(table())
    assert rows[: len(flat)] == flat and (2, (True, True, True)) in rows[len(flat) :]
    proofs = prove_machine(PARAMS, table(), tmp_path, stable=True, refinement=refinement())
    assert all(p.verdict == "proved" for p in proofs), proofs
    assert "cells and 4 leaves" in (tmp_path / "machine-output-allowed.smt2").read_text()
    explicit = check_explicit(PARAMS, alphabet(PARAMS, rows))
    assert all(p.verdict == "proved" for p in explicit), explicit


def test_a_step_that_mishandles_only_a_leafs_class_is_caught(tmp_path):
    """A step that emits an illegal token on a TURBO proposal: only the leaves propose TURBO, so only the proofs
    over the leaves' classes see it."""
    from certfsm.fsm._machine import step

    def broken(params, state, proposal, allowed, in_envelope, sla_ok, override=None):
        next_state, token, reason = step(params, state, proposal, allowed, in_envelope, sla_ok, override)
        return (next_state, 7, reason) if in_envelope and proposal == 2 else (next_state, token, reason)

    leafless = check_explicit(PARAMS, alphabet(PARAMS, table_rows(table())), step_function=broken)
    assert all(p.verdict == "proved" for p in leafless)
    with_leaves = check_explicit(PARAMS, alphabet(PARAMS, table_rows(table(), refinement())), step_function=broken)
    assert any(p.verdict == "violated" for p in with_leaves)


@pytest.mark.parametrize("refined", [False, True])
def test_the_queries_of_a_flat_table_do_not_change_with_the_leaf_support(tmp_path, refined):
    """The flat queries are the same text whether or not prove_table was given leaves, up to the leaf block."""
    folder = tmp_path / str(refined)
    folder.mkdir()
    prove_table(table(), SPEC, folder, stable=True, refinement=refinement() if refined else None)
    text = (folder / "table-codes.smt2").read_text()
    assert ("(declare-const leaf_0 Bool)" in text) is refined
