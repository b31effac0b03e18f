"""The grid (cells, binning, the fixed-point path) and the table (allowed masks, the table-level check)."""

from __future__ import annotations

import copy
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from certfsm import SpecError
from certfsm import load_spec, spec_from_dict
from certfsm.fsm import CONSERVATIVE, EXACT, UNDECIDED
from certfsm.fsm._grid import Grid
from certfsm.fsm._table import Table, allowed_masks, check_table, rule_meets
from certfsm.machine import OUT_OF_ENVELOPE

EXAMPLE = Path(__file__).resolve().parents[2] / "certfsm" / "examples" / "coadapt.spec.json"

SMALL = {
    "certfsm_spec": 1,
    "name": "small",
    "model": "none.onnx",
    "inputs": [
        {"name": "load", "unit": "%", "min": 0, "max": 100, "bins": 4, "frac_bits": 3},
        {"name": "temp", "unit": "degC", "min": 20, "max": 110, "edges": [20, 80, 85, 95, 110], "frac_bits": 2},
    ],
    "outputs": ["KEEP", "FAST", "INT4", "RETIRED"],
    "tokens": {"KEEP": 0, "FAST": 5, "INT4": 9, "RETIRED": 15},
    "legal_tokens": ["KEEP", "FAST", "INT4"],
    "decision": "argmax",
    "conservative_token": "KEEP",
    "legality_rules": [
        {"name": "no-int4-when-hot", "when": {"temp": {"min": 85}}, "forbid": ["INT4"]},
        {"name": "no-fast-at-full-load", "when": {"load": {"min": 100}}, "forbid": ["FAST"]},
    ],
}


def small_spec(**changes):
    data = copy.deepcopy(SMALL)
    data.update(changes)
    return spec_from_dict(data, "small.json", require_model=False)


@pytest.fixture(scope="module")
def example():
    return load_spec(EXAMPLE)


# ---------------------------------------------------------------- cells


def test_grid_from_the_example_spec(example):
    grid = Grid.from_spec(example)
    assert grid.shape == (8, 9, 4, 5, 5) and grid.n_cells == 7200
    assert grid.names == ("compute_util", "mem_bw_util", "l2_miss_rate", "temperature", "queue_depth")
    assert grid.frac_bits == (6, 6, 6, 4, 0)
    assert grid == Grid.from_spec(example) and hash(grid) == hash(Grid.from_spec(example))
    assert grid != Grid.from_spec(small_spec())


def test_bins_are_half_open_and_the_last_one_closed():
    grid = Grid.from_spec(small_spec())
    # temp edges 20, 80, 85, 95, 110: 85 belongs to [85, 95), 110 to the closed [95, 110]
    assert [grid.multi_index(grid.cell_of([0, t]))[1] for t in (20, 79.999, 80, 84.999, 85, 95, 110)] == [
        0,
        0,
        1,
        1,
        2,
        3,
        3,
    ]
    assert grid.cell_of([100, 110]) == grid.n_cells - 1 and grid.cell_of([0, 20]) == 0


@pytest.mark.parametrize(
    "point", [[-0.001, 50], [100.001, 50], [50, 19.99], [50, 110.0001], [np.nan, 50], [50, np.inf], [-np.inf, 50]]
)
def test_outside_the_envelope_nan_and_inf_have_no_cell(point):
    assert Grid.from_spec(small_spec()).cell_of(point) == OUT_OF_ENVELOPE


def test_a_batch_is_binned_like_its_rows():
    grid = Grid.from_spec(small_spec())
    rows = np.array([[0, 20], [50, 85], [100, 110], [np.nan, 30], [25, 84.9], [101, 30]])
    assert grid.cell_of(rows).tolist() == [grid.cell_of(r) for r in rows]
    assert grid.cell_of(rows).dtype == np.int64


@given(st.lists(st.floats(0, 100), min_size=1, max_size=30), st.lists(st.floats(20, 110), min_size=30, max_size=30))
def test_every_envelope_point_lies_in_the_bounds_of_its_cell(loads, temps):
    grid = Grid.from_spec(small_spec())
    points = np.column_stack([loads, temps[: len(loads)]])
    cells = grid.cell_of(points)
    lower, upper = grid.all_cell_bounds()
    assert (cells >= 0).all()
    assert (lower[cells] <= points).all()
    assert ((points < upper[cells]) | ((points == upper[cells]) & (upper[cells] == grid.upper))).all()


def test_all_cell_bounds_match_cell_bounds_and_the_lower_corner_lies_in_its_cell(example):
    grid = Grid.from_spec(example)
    lower, upper = grid.all_cell_bounds()
    assert lower.shape == upper.shape == (grid.n_cells, 5)
    for index in (0, 1, 2049, 4097, grid.n_cells - 1):
        low, high = grid.cell_bounds(index)
        assert np.array_equal(low, lower[index]) and np.array_equal(high, upper[index])
    assert np.array_equal(grid.cell_of(lower), np.arange(grid.n_cells))


def test_describe_cell_marks_the_closed_last_bin():
    grid = Grid.from_spec(small_spec())
    assert grid.describe_cell(grid.cell_of([100, 100])) == "load in [75, 100], temp in [95, 110]"
    assert grid.describe_cell(0) == "load in [0, 25), temp in [20, 80)"


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda g: g.cell_of([1, 2, 3]),
            r"^cell_of: got an array of shape \(3,\), expected \(2,\) or \(m, 2\): "
            r"one value per input \(load, temp\) in that order$",
        ),
        (lambda g: g.cell_of([[1, 2, 3]]), r"^cell_of: got an array of shape \(1, 3\), expected"),
        (lambda g: g.cell_of(5.0), r"^cell_of: got an array of shape \(\), expected"),
        (lambda g: g.cell_of(["a", "b"]), r"^cell_of: got \['a', 'b'\], expected numbers: one value per input"),
        (lambda g: g.cell_of_fixed([1, 2, 3]), r"^cell_of_fixed: got an array of shape \(3,\), expected \(2,\)"),
        (lambda g: g.cell_of_fixed([1.0, 2.0]), r"^cell_of_fixed: got values of dtype float64, expected integers"),
        (
            lambda g: g.cell_bounds(20),
            r"^cell index 20 is outside 0\.\.15 of a grid with shape \(4, 4\); "
            r"use an index from cell_of$",
        ),
    ],
)
def test_wrong_arguments_are_refused_with_a_clear_message(call, message):
    with pytest.raises(SpecError, match=message):
        call(Grid.from_spec(small_spec()))


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ((np.array([0.0, 1.0, 1.0]),), ("a",), (None,)),
            r"^Grid: edges of inputs\[0\] \(a\) = \[0\.0, 1\.0, 1\.0\] "
            r"are not at least two finite, strictly increasing numbers",
        ),
        (((np.array([0.0]),), ("a",), (None,)), r"^Grid: edges of inputs\[0\] \(a\) = \[0\.0\] are not"),
        (((np.array([0.0, 1.0]),), ("a", "b"), (None,)), r"^Grid: 1 edge arrays but 2 names and 1 frac_bits"),
        (((np.array([0.0, 1.0]),), ("a",), (25,)), r"^Grid: frac_bits of inputs\[0\] \(a\) = 25 is outside 0\.\.24"),
        (((), (), ()), r"^Grid: no inputs were given"),
    ],
)
def test_an_invalid_grid_is_refused(args, message):
    with pytest.raises(SpecError, match=message):
        Grid(*args)


# ---------------------------------------------------------------- fixed point


def test_integer_thresholds_are_the_ceiling_of_the_exact_scaled_edges(example):
    grid = Grid.from_spec(example)
    thresholds = grid.integer_thresholds()
    assert thresholds[3] == (320, 800, 1168, 1208, 1360, 1760)  # temperature * 2^4
    assert thresholds[4] == (0, 20, 38, 42, 56, 64)
    odd = Grid((np.array([0.1, 0.3, 1 / 3, 2.5]),), ("x",), (4,))
    (t,) = odd.integer_thresholds()
    for edge, threshold in zip(odd.edges[0], t):
        exact = Fraction(float(edge)) * 16
        assert threshold >= exact > threshold - 1  # v >= threshold  <=>  v / 16 >= edge
    assert t == (2, 5, 6, 40)
    assert odd.integer_envelope() == ((2, 40),)
    assert Grid((np.array([0.1, 0.3]),), ("x",), (0,)).integer_envelope() == ((1, 0),)  # no integer inside


def test_the_fixed_point_path_needs_frac_bits_on_every_input():
    grid = Grid((np.array([0.0, 1.0]), np.array([0.0, 2.0])), ("a", "b"), (3, None))
    with pytest.raises(
        SpecError,
        match=r"^inputs\[1\] \(b\) has no frac_bits, so the grid has no fixed-point path; "
        r"add frac_bits \(0\.\.24\) to that input in the spec$",
    ):
        grid.cell_of_fixed([1, 1])


edge_lists = st.lists(
    st.floats(-1000, 1000, allow_nan=False, allow_subnormal=False), min_size=2, max_size=6, unique=True
).map(sorted)


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.tuples(edge_lists, st.integers(0, 24)), min_size=1, max_size=3), st.data())
def test_integer_binning_equals_real_binning_of_the_scaled_value(inputs, data):
    grid = Grid(
        tuple(np.array(e) for e, _ in inputs), tuple(f"x{i}" for i in range(len(inputs))), tuple(f for _, f in inputs)
    )
    thresholds = grid.integer_thresholds()
    v = []
    for t, (lo, hi) in zip(thresholds, grid.integer_envelope()):
        near = [x + d for x in (*t, lo, hi) for d in (-1, 0, 1)]
        v.append(data.draw(st.one_of(st.sampled_from(near), st.integers(min(near) - 5, max(near) + 5)), label="v"))
    v = np.array(v, dtype=np.int64)
    assume(all(abs(int(x)) < 2**53 for x in v))
    real = v.astype(np.float64) * np.array([2.0**-f for f in grid.frac_bits])  # exact: power-of-two scaling
    assert grid.cell_of_fixed(v) == grid.cell_of(real)
    assert grid.cell_of_fixed(v[None, :]).tolist() == [grid.cell_of(real)]


def test_fixed_point_binning_on_the_example_thresholds(example):
    grid = Grid.from_spec(example)
    at_85 = [3200, 3200, 3200, 85 * 16, 55]
    below_85 = [3200, 3200, 3200, 85 * 16 - 1, 56]
    assert grid.multi_index(grid.cell_of_fixed(at_85)) == (2, 4, 1, 4, 3)
    assert grid.multi_index(grid.cell_of_fixed(below_85)) == (2, 4, 1, 3, 4)
    assert grid.cell_of_fixed([0, 0, 0, 319, 0]) == OUT_OF_ENVELOPE
    assert grid.cell_of_fixed([6400, 6400, 6400, 1760, 64]) == grid.n_cells - 1
    assert grid.cell_of_fixed([6401, 0, 0, 320, 0]) == OUT_OF_ENVELOPE


# ---------------------------------------------------------------- allowed masks


def test_a_rule_starting_at_an_edge_does_not_touch_the_bin_below(example):
    grid = Grid.from_spec(example)
    masks = allowed_masks(example, grid)
    keep, fuse, int4, offload, sparse = range(5)

    def row(temperature, queue):
        return masks[grid.cell_of([50, 50, 50, temperature, queue])]

    assert row(84.99, 10)[int4] and not row(85, 10)[int4] and not row(110, 10)[int4]
    assert row(50, 55.99)[offload] and not row(50, 56)[offload] and not row(50, 64)[offload]
    assert masks[:, keep].all() and masks[:, fuse].all() and not masks[:, sparse].any()
    assert masks[:, int4].sum() == 7200 * 4 // 5 and masks[:, offload].sum() == 7200 * 4 // 5


def test_a_rule_on_the_envelope_top_forbids_only_in_the_closed_last_bin():
    spec = small_spec()
    grid = Grid.from_spec(spec)
    masks = allowed_masks(spec, grid)
    fast = spec.output_index("FAST")
    loads = [grid.multi_index(c)[0] for c in range(grid.n_cells) if not masks[c, fast]]
    assert set(loads) == {3}  # [75, 100] is closed, so the rule's box {100} meets it; [50, 75) is untouched
    assert rule_meets(spec, grid).sum(axis=1).tolist() == [8, 4]


def test_a_rule_ending_inside_a_bin_meets_it_and_one_ending_on_its_lower_edge_too():
    data = copy.deepcopy(SMALL)
    data["legality_rules"] = [
        {"name": "ends-at-80", "when": {"temp": {"max": 80}}, "forbid": ["INT4"]},
        {"name": "ends-at-79", "when": {"temp": {"max": 79.5}}, "forbid": ["FAST"]},
    ]
    spec = spec_from_dict(data, "small.json", require_model=False)
    grid = Grid.from_spec(spec)
    meets = rule_meets(spec, grid)
    bins = [sorted({grid.multi_index(c)[1] for c in np.flatnonzero(row)}) for row in meets]
    assert bins == [[0, 1], [0]]  # the closed box [20, 80] reaches the point 80 of [80, 85)


# ---------------------------------------------------------------- tables


def _table(spec, proposals=None, status=EXACT):
    grid = Grid.from_spec(spec)
    proposal = np.zeros(grid.n_cells, dtype=np.int64) if proposals is None else np.asarray(proposals)
    return Table(grid, proposal, np.full(grid.n_cells, status, dtype=np.int8), allowed_masks(spec, grid))


def test_a_sound_table_has_no_violations_and_its_classes_cover_the_cells():
    spec = small_spec()
    grid = Grid.from_spec(spec)
    masks = allowed_masks(spec, grid)
    proposal = np.where(masks[:, 2], 2, np.where(masks[:, 1], 1, 0))
    table = _table(spec, proposal)
    assert check_table(table, spec) == []
    classes, index = table.class_of_cells()
    assert sum(c.n_cells for c in classes) == grid.n_cells
    for c, item in enumerate(classes):
        assert index[item.first_cell] == c and proposal[item.first_cell] == item.proposal
        assert np.array_equal(masks[index == c], np.tile(item.allowed, ((index == c).sum(), 1)))


def test_check_table_names_each_kind_of_violation():
    spec = small_spec()
    grid = Grid.from_spec(spec)
    hot = grid.cell_of([10, 90])
    full = grid.cell_of([100, 30])
    proposal = np.zeros(grid.n_cells, dtype=np.int64)
    proposal[[hot, full, 0]] = [2, 1, 3]
    status = np.full(grid.n_cells, EXACT, dtype=np.int8)
    status[5] = CONSERVATIVE
    proposal[5] = 1
    allowed = allowed_masks(spec, grid).copy()
    allowed[4, 2] = False
    table = Table(grid, proposal, status, allowed)
    found = {(v.cell, v.kind): v.message for v in check_table(table, spec)}
    assert set(found) == {
        (hot, "forbidden"),
        (full, "forbidden"),
        (0, "illegal"),
        (0, "code"),
        (4, "mask"),
        (5, "conservative"),
    }
    assert found[(hot, "forbidden")] == (
        "cell 2 (load in [0, 25), temp in [85, 95)) holds INT4, which rule 'no-int4-when-hot' forbids there"
    )
    assert found[(0, "illegal")] == (
        "cell 0 (load in [0, 25), temp in [20, 80)) holds RETIRED, which is not in legal_tokens (KEEP, FAST, INT4)"
    )
    assert found[(0, "code")] == "cell 0 (load in [0, 25), temp in [20, 80)): code 15 is not the code of a legal token"
    assert found[(4, "mask")] == (
        "cell 4 (load in [25, 50), temp in [20, 80)): the allowed row differs from the legality rules for INT4"
    )
    assert found[(5, "conservative")] == (
        "cell 5 (load in [25, 50), temp in [80, 85)) is conservative but holds FAST, not KEEP"
    )


def test_check_table_refuses_a_table_of_another_grid(example):
    message = (
        r"^the table's grid \(shape \(4, 4\), inputs load, temp\) is not the grid of spec 'coadapt' "
        r"\(shape \(8, 9, 4, 5, 5\)\); distil the table from this spec$"
    )
    with pytest.raises(SpecError, match=message):
        check_table(_table(small_spec()), example)


def test_undecided_table_and_decisions():
    spec = small_spec()
    table = Table.undecided(spec)
    assert not table.is_complete and (table.status == UNDECIDED).all() and (table.proposal == 0).all()
    done = table.with_decisions(np.arange(table.n_cells), np.ones(table.n_cells, dtype=np.int64), EXACT)
    assert done.is_complete and (done.proposal == 1).all() and (table.proposal == 0).all()
    assert done != table and done == Table(done.grid, done.proposal, done.status, done.allowed)
    with pytest.raises(ValueError):
        done.proposal[0] = 2


@pytest.mark.parametrize(
    "change, message",
    [
        (
            dict(proposal=np.full(16, 4)),
            r"^Table: proposal\[0\]=4 is not an output index 0\.\.3; store output indices$",
        ),
        (dict(proposal=np.zeros(15, dtype=np.int64)), r"^Table: proposal has dtype int64 and shape \(15,\), expected"),
        (dict(proposal=np.zeros(16)), r"^Table: proposal has dtype float64 and shape \(16,\), expected integers"),
        (
            dict(status=np.full(16, 2, dtype=np.int8)),
            r"^Table: status must hold one of EXACT=1, CONSERVATIVE=0, "
            r"UNDECIDED=-1 per cell",
        ),
        (
            dict(allowed=np.ones((16, 4), dtype=np.int64)),
            r"^Table: allowed has dtype int64 and shape \(16, 4\), "
            r"expected bool of shape \(16, n_outputs\)",
        ),
    ],
)
def test_an_invalid_table_is_refused(change, message):
    spec = small_spec()
    grid = Grid.from_spec(spec)
    fields = dict(
        proposal=np.zeros(16, dtype=np.int64), status=np.ones(16, dtype=np.int8), allowed=allowed_masks(spec, grid)
    )
    fields.update(change)
    with pytest.raises(SpecError, match=message):
        Table(grid, **fields)


def test_masks_are_exact_at_every_edge_against_dense_points():
    """Sampled oracle: a token is forbidden in a cell exactly when some point of the cell lies in a forbidding box."""
    spec = small_spec()
    grid = Grid.from_spec(spec)
    masks = allowed_masks(spec, grid)
    loads = np.unique(np.concatenate([np.linspace(0, 100, 401), grid.edges[0]]))
    temps = np.unique(np.concatenate([np.linspace(20, 110, 361), grid.edges[1]]))
    points = np.array([(a, b) for a in loads for b in temps])
    cells = grid.cell_of(points)
    oracle = np.zeros_like(masks)
    oracle[:, list(spec.legal_indices)] = True
    for rule in spec.rules:
        inside = np.all((points >= rule.lower) & (points <= rule.upper), axis=1)
        for k in spec.forbidden_indices(rule):
            oracle[np.unique(cells[inside]), k] = False
    assert np.array_equal(masks, oracle)
    assert math.prod(grid.shape) == masks.shape[0]
