"""Certified distillation: exact cells are proved, conservative cells carry validated witnesses, runs resume."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from certfsm import (
    AffineLayer,
    Network,
    ReportError,
    SpecError,
    gated_decide,
    load_onnx,
    load_spec,
    run_onnxruntime,
    spec_from_dict,
)
from certfsm.fsm import CONSERVATIVE, EXACT
from certfsm.fsm._grid import Grid
from certfsm.fsm import _cell_bounds, _cell_workers, _distill
from certfsm.fsm._distill import ENGINES, distill, sampled_cross_check

EXAMPLE = Path(__file__).resolve().parents[2] / "certfsm" / "examples" / "coadapt.spec.json"
KEEP, A, B = range(3)


def tiny_spec(x0_edges, margin=None, decision="argmax", x1_edges=(0.0, 0.5, 1.0), outputs=("KEEP", "A", "B")):
    document = {
        "certfsm_spec": 1,
        "name": "tiny",
        "model": "tiny.onnx",
        "inputs": [
            {"name": "x0", "unit": "", "min": x0_edges[0], "max": x0_edges[-1], "edges": list(x0_edges)},
            {"name": "x1", "unit": "", "min": x1_edges[0], "max": x1_edges[-1], "edges": list(x1_edges)},
        ],
        "outputs": list(outputs),
        "tokens": {t: k for k, t in enumerate(outputs)},
        "legal_tokens": list(outputs),
        "decision": decision,
        "conservative_token": outputs[0],
    }
    if margin is not None:
        document["confidence_gate"] = {"margin": margin}
    return spec_from_dict(document, "/nonexistent/tiny.spec.json", require_model=False)


def boundary_network():
    """KEEP scores 0; A scores 4 (x0 - 0.5) and B the opposite: A wins right of x0 = 0.5, B left of it."""
    hidden = AffineLayer(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([-0.5, 0.5]), "hidden")
    out = AffineLayer(np.array([[0.0, 0.0], [4.0, -4.0], [-4.0, 4.0]]), np.zeros(3), "out")
    return Network((hidden, out), input_name="x")


def decisions(spec, network, x):
    margin = 0.0 if spec.margin is None else spec.margin
    return gated_decide(network.evaluate(x), spec.decision, margin, spec.conservative_index)


def assert_witness_valid(spec, network, result, cell):
    grid = Grid.from_spec(spec)
    first, second = result.witnesses[cell]
    points = np.array([first, second])
    assert list(grid.cell_of(points)) == [cell, cell]
    exact = decisions(spec, network, points)
    assert exact[0] != exact[1]
    margin = 0.0 if spec.margin is None else spec.margin
    deployed = gated_decide(run_onnxruntime(network, points), spec.decision, margin, spec.conservative_index)
    assert list(deployed) == list(exact)


# ------------------------------------------------------------- known split


def test_boundary_inside_one_bin_makes_exactly_those_cells_conservative():
    spec, network = tiny_spec([0.0, 0.4, 0.6, 1.0]), boundary_network()
    result = distill(spec, network, jobs=1, per_cell_timeout=5)
    grid = result.table.grid
    for cell in range(grid.n_cells):
        x0_bin, _ = grid.multi_index(cell)
        if x0_bin == 1:
            assert result.table.status[cell] == CONSERVATIVE
            assert result.table.proposal[cell] == KEEP
            assert_witness_valid(spec, network, result, cell)
        else:
            assert result.table.status[cell] == EXACT
            assert result.table.proposal[cell] == (B if x0_bin == 0 else A)
            assert cell not in result.witnesses
    assert result.reasons == {}
    assert set(result.engine_of_cell.tolist()) <= set(ENGINES)
    assert result.stats["exact"] == 4 and result.stats["conservative_with_witness"] == 2
    assert result.stats["exact_share"] == pytest.approx(4 / 6)
    assert result.stats["exact_volume_share"] == pytest.approx(0.8)
    report = sampled_cross_check(result, spec, network, n=20_000, seed=1, check_onnxruntime=True)
    assert report["mismatches"] == 0 and report["onnxruntime_mismatches"] == 0
    assert report["on_exact"] + report["on_conservative"] == 20_000
    assert 0.7 < report["on_exact"] / 20_000 < 0.9


def test_the_cross_check_draws_only_readings_the_table_bins(monkeypatch):
    """-0.1 means -1/10 exactly and float64(-0.1) lies below it, outside the envelope: a draw of exactly the
    float64 minimum (a 2^-53 chance for numpy's uniform) used to index cell -1, the last cell, and count a
    mismatch that is not one (the last cell is exact A, the reading decides B), which withholds certification.
    Every draw here is the low end of the range the cross-check asks for."""
    spec, network = tiny_spec([-0.1, 0.4, 0.6, 1.0]), boundary_network()
    grid = Grid.from_spec(spec)
    assert grid.cell_of(np.array([[-0.1, 0.25]]))[0] == -1  # the premise
    lower, upper = grid.float_envelope
    assert list(grid.cell_of(np.array([lower, np.nextafter(upper, -np.inf)]))) == [0, grid.n_cells - 1]
    result = distill(spec, network, jobs=1, per_cell_timeout=5)

    class LowEnd:
        def uniform(self, low, high, size):
            return np.broadcast_to(np.asarray(low, dtype=np.float64), size).copy()

    monkeypatch.setattr(_distill.np.random, "default_rng", lambda seed: LowEnd())
    report = sampled_cross_check(result, spec, network, n=10, seed=1)
    assert report["on_exact"] == 10 and report["mismatches"] == 0  # cell 0 is exact (B); the last is A


def test_gate_band_gives_exact_conservative_cells_and_two_cut_bins():
    # margin 0.4: A needs x0 >= 0.6, B needs x0 <= 0.4, KEEP in between (the gate fails)
    spec, network = tiny_spec([0.0, 0.3, 0.45, 0.55, 0.7, 1.0], margin=0.4), boundary_network()
    result = distill(spec, network, jobs=1, per_cell_timeout=5)
    grid = result.table.grid
    expected = {0: (EXACT, B), 1: (CONSERVATIVE, KEEP), 2: (EXACT, KEEP), 3: (CONSERVATIVE, KEEP), 4: (EXACT, A)}
    for cell in range(grid.n_cells):
        status, token = expected[grid.multi_index(cell)[0]]
        assert (result.table.status[cell], result.table.proposal[cell]) == (status, token), grid.describe_cell(cell)
        if status == CONSERVATIVE:
            assert_witness_valid(spec, network, result, cell)
    assert sampled_cross_check(result, spec, network, n=20_000, seed=2)["mismatches"] == 0


def test_argmin_decides_the_smallest_score():
    spec, network = tiny_spec([0.0, 0.4, 0.6, 1.0], decision="argmin"), boundary_network()
    result = distill(spec, network, jobs=1, per_cell_timeout=5)
    grid = result.table.grid
    for cell in range(grid.n_cells):
        x0_bin = grid.multi_index(cell)[0]
        if x0_bin != 1:
            assert result.table.status[cell] == EXACT
            assert result.table.proposal[cell] == (A if x0_bin == 0 else B)


def sliver_network(width=1e-3):
    """A scores a tent of height 1 - 0.5 around x0 = 0.5 (half-width `width`), KEEP 0, B -1: A wins only on a
    sliver |x0 - 0.5| < width / 2 that random samples of a wide cell almost never hit."""
    hidden = AffineLayer(
        np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]]), np.array([-0.5 + width, -0.5, -0.5 - width]), "hidden"
    )
    out = AffineLayer(
        np.array([[0.0, 0.0, 0.0], [1 / width, -2 / width, 1 / width], [0.0, 0.0, 0.0]]),
        np.array([0.0, -0.5, -1.0]),
        "out",
    )
    return Network((hidden, out), input_name="x")


def test_a_thin_sliver_missed_by_sampling_is_found_by_the_engines():
    spec, network = tiny_spec([0.0, 0.3, 0.65, 1.0]), sliver_network()
    result = distill(spec, network, jobs=1, per_cell_timeout=5)
    grid = result.table.grid
    for cell in range(grid.n_cells):
        if grid.multi_index(cell)[0] == 1:
            assert result.table.status[cell] == CONSERVATIVE
            assert result.engine_of_cell[cell] == "check"
            assert_witness_valid(spec, network, result, cell)
            assert abs(result.witnesses[cell][1][0] - 0.5) < 1e-3
        else:
            assert (result.table.status[cell], result.table.proposal[cell]) == (EXACT, KEEP)


def random_network(seed=5):
    """Two hidden layers of 12: loose enough that some cells need splitting (fixed seed)."""
    rng = np.random.default_rng(seed)
    return Network(
        (
            AffineLayer(rng.normal(size=(12, 2)), rng.normal(size=12) * 0.5, "h1"),
            AffineLayer(rng.normal(size=(12, 12)) / 3, rng.normal(size=12) * 0.3, "h2"),
            AffineLayer(rng.normal(size=(3, 12)), rng.normal(size=3) * 0.3, "out"),
        ),
        "x",
    )


@pytest.mark.slow
def test_cells_the_whole_cell_bounds_cannot_close_are_proved_by_check(monkeypatch):
    spec, network = grid_spec(6), random_network()
    normal = distill(spec, network, jobs=1)
    monkeypatch.setattr(_cell_bounds, "SPLIT_DEPTH", 0)
    checked = distill(spec, network, jobs=1, per_cell_timeout=5)
    assert checked.table == normal.table
    by_check = np.isin(checked.engine_of_cell, ("check", "z3", "marabou"))
    proved_by_check = by_check & (checked.table.status == EXACT)
    assert np.count_nonzero(proved_by_check) > np.count_nonzero(np.isin(normal.engine_of_cell, ("check", "z3")))
    assert checked.stats["engine_tasks"] >= np.count_nonzero(by_check)


@pytest.mark.slow
def test_a_tie_everywhere_cannot_be_proved_and_stays_conservative_without_witness():
    # A and B tie everywhere, so the decision is A (lowest index) but no strict bound can prove it
    tie = Network((AffineLayer(np.zeros((3, 2)), np.array([-1.0, 1.0, 1.0]), "out"),), "x")
    spec = tiny_spec([0.0, 0.5, 1.0], x1_edges=(0.0, 1.0))
    result = distill(spec, tie, jobs=1, per_cell_timeout=2)
    assert list(result.table.status) == [CONSERVATIVE, CONSERVATIVE]
    assert list(result.table.proposal) == [KEEP, KEEP]
    assert result.witnesses == {} and list(result.engine_of_cell) == ["undecided", "undecided"]
    assert set(result.reasons) == {0, 1}
    assert all(
        re.match(
            r"^undecided: the closure of another decision is reached but no pair of points with "
            r"different decisions validated in float64 and onnxruntime$",
            r,
        )
        for r in result.reasons.values()
    )
    assert result.stats["undecided"] == 2 and result.stats["conservative_with_witness"] == 0


# ------------------------------------------------------------- random networks: nothing unproved


@st.composite
def tiny_problems(draw):
    dyadic = st.integers(1, 8).flatmap(lambda k: st.sampled_from([k / 4, -k / 4]))
    hidden = np.array(draw(st.lists(dyadic, min_size=8, max_size=8))).reshape(4, 2)
    hidden_bias = np.array(draw(st.lists(dyadic, min_size=4, max_size=4)))
    out = np.array(draw(st.lists(dyadic, min_size=12, max_size=12))).reshape(3, 4)
    out_bias = np.array(draw(st.lists(st.integers(-8, 8).map(lambda k: k / 4), min_size=3, max_size=3)))
    network = Network((AffineLayer(hidden, hidden_bias, "hidden"), AffineLayer(out, out_bias, "out")), "x")
    margin = draw(st.sampled_from([None, 0.25]))
    decision = draw(st.sampled_from(["argmax", "argmin"]))
    return tiny_spec([-1.0, -0.3, 0.2, 1.0], margin=margin, decision=decision, x1_edges=(-1.0, 0.0, 0.5, 1.0)), network


@pytest.mark.slow
@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_problems(), st.integers(0, 2**16))
def test_every_exact_cell_agrees_with_dense_sampling(problem, seed):
    spec, network = problem
    result = distill(spec, network, jobs=1, per_cell_timeout=1, seed=seed)
    grid = result.table.grid
    rng = np.random.default_rng(seed)
    for cell in range(grid.n_cells):
        lower, upper = grid.cell_bounds(cell)
        if result.table.status[cell] == EXACT:
            x = lower + rng.uniform(size=(2000, 2)) * (upper - lower)
            corners = np.array([[a, b] for a in (lower[0], upper[0]) for b in (lower[1], upper[1])])
            assert np.all(decisions(spec, network, np.concatenate([x, corners])) == result.table.proposal[cell])
        else:
            assert result.table.proposal[cell] == spec.conservative_index
            assert (cell in result.witnesses) != (cell in result.reasons)
            if cell in result.witnesses:
                assert_witness_valid(spec, network, result, cell)


# ------------------------------------------------------------- resume


def slanted_network():
    """A wins where x0 + x1 > 1, B where x0 - x1 < -0.2, else KEEP: boundaries cut many cells of a fine grid."""
    hidden = AffineLayer(np.array([[1.0, 1.0], [1.0, -1.0]]), np.array([-1.0, 0.2]), "hidden")
    out = AffineLayer(np.array([[0.0, 0.0], [3.0, 0.0], [0.0, -3.0]]), np.array([0.0, 0.0, 0.0]), "out")
    return Network((hidden, out), input_name="x")


def grid_spec(bins=12):
    edges = list(np.linspace(0.0, 1.0, bins + 1))
    return tiny_spec(edges, margin=0.1, x1_edges=edges)


def test_interrupted_run_resumes_without_redoing_decided_cells(tmp_path, monkeypatch):
    spec, network = grid_spec(), slanted_network()
    fresh = distill(spec, network, jobs=1, per_cell_timeout=5)
    path = tmp_path / "run.ckpt"

    class Stop(Exception):
        pass

    calls = []

    def stop_after_sampling(done, total, message):
        calls.append((done, total, message))
        if not message.startswith("sampling"):
            raise Stop

    with pytest.raises(Stop):
        distill(spec, network, jobs=1, per_cell_timeout=5, checkpoint=path, progress=stop_after_sampling)
    lines = path.read_text().splitlines()
    first_run = {json.loads(line)["cell"] for line in lines[1:] if json.loads(line)["status"] == "conservative"}
    assert 0 < len(first_run) < spec_cells(spec)
    assert any(json.loads(line)["status"] == "exact" for line in lines[1:])
    assert calls[-1][1] == spec_cells(spec)

    sampled, worked = [], []
    sampling, work = _distill._sampling_phase, _cell_workers._work

    def record_sampling(problem, cells, seed, on_batch):
        sampled.extend(int(c) for c in cells)
        return sampling(problem, cells, seed, on_batch)

    def record_work(problem, task):
        worked.extend(int(c) for c in (task.cells if hasattr(task, "cells") else [task.cell]))
        return work(problem, task)

    monkeypatch.setattr(_distill, "_sampling_phase", record_sampling)
    monkeypatch.setattr(_cell_workers, "_work", record_work)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"cell": 3, "status": "exa')
    resumed = distill(spec, network, jobs=1, per_cell_timeout=5, checkpoint=path)
    assert resumed.table == fresh.table
    assert resumed.stats["resumed_cells"] == len(first_run)
    assert worked and not first_run & set(sampled) and not first_run & set(worked)
    assert set(sampled) == set(range(spec_cells(spec))) - first_run
    assert all(line.startswith("{") and line.endswith("}") for line in path.read_text().splitlines())

    sampled.clear()
    again = distill(spec, network, jobs=1, per_cell_timeout=5, checkpoint=path)
    exact = int(np.count_nonzero(fresh.table.status == EXACT))
    assert again.table == fresh.table
    assert sorted(sampled) == [c for c in range(spec_cells(spec)) if fresh.table.status[c] == EXACT]
    assert (
        again.stats["resumed_cells"] == spec_cells(spec) - exact and again.stats["reproved_checkpoint_cells"] == exact
    )
    assert again.witnesses.keys() == fresh.witnesses.keys()


def test_an_edited_checkpoint_cannot_put_an_unproved_token_into_the_table(tmp_path):
    spec, network = grid_spec(), slanted_network()
    path = tmp_path / "run.ckpt"
    fresh = distill(spec, network, jobs=1, per_cell_timeout=5, checkpoint=path)
    conservative = [c for c in range(spec_cells(spec)) if c in fresh.witnesses]
    exact = [c for c in range(spec_cells(spec)) if fresh.table.status[c] == EXACT]
    promoted, forged = conservative[0], conservative[1]
    swapped = next(c for c in exact if spec.outputs[fresh.table.proposal[c]] != "B")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for record in lines[1:]:
        if record["cell"] == promoted:
            record.update(status="exact", token="A", engine="bounds", witness=None)
        elif record["cell"] == swapped:
            record.update(token="B")
        elif record["cell"] == forged:
            record["witness"] = [record["witness"][0], record["witness"][0]]
    path.write_text("".join(json.dumps(record) + "\n" for record in lines))
    resumed = distill(spec, network, jobs=1, per_cell_timeout=5, checkpoint=path)
    assert resumed.table == fresh.table
    assert resumed.table.status[promoted] == CONSERVATIVE and promoted in resumed.witnesses
    assert resumed.table.proposal[swapped] == fresh.table.proposal[swapped]
    assert forged in resumed.witnesses and not np.array_equal(*resumed.witnesses[forged])


def spec_cells(spec):
    return Grid.from_spec(spec).n_cells


def test_pool_of_two_workers_gives_the_same_table():
    spec, network = grid_spec(), slanted_network()
    assert distill(spec, network, jobs=2, per_cell_timeout=5).table == distill(spec, network, jobs=1).table


# ------------------------------------------------------------- refusals


def test_checkpoint_of_another_spec_is_refused(tmp_path):
    network = slanted_network()
    path = tmp_path / "run.ckpt"
    distill(grid_spec(4), network, jobs=1, checkpoint=path)
    other = tiny_spec(list(np.linspace(0.0, 1.0, 5)), margin=0.2, x1_edges=list(np.linspace(0.0, 1.0, 5)))
    with pytest.raises(
        SpecError,
        match=rf"^{re.escape(str(path))}: checkpoint belongs to another spec "
        r"\(spec_sha256 [0-9a-f]{12}\.\.\., this run has [0-9a-f]{12}\.\.\.\); "
        r"delete the file or give another checkpoint= path to start afresh$",
    ):
        distill(other, network, jobs=1, checkpoint=path)
    with pytest.raises(SpecError, match=rf"^{re.escape(str(path))}: checkpoint belongs to another model "):
        distill(grid_spec(4), boundary_network(), jobs=1, checkpoint=path)


def test_a_file_that_is_no_checkpoint_is_refused(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello\n")
    with pytest.raises(
        SpecError,
        match=rf"^{re.escape(str(path))}: not a certfsm distill checkpoint \(its first line "
        r"is not a checkpoint header\); give another checkpoint= path or delete the "
        r"file$",
    ):
        distill(grid_spec(4), slanted_network(), jobs=1, checkpoint=path)


def test_a_checkpoint_in_a_missing_folder_is_refused(tmp_path):
    path = tmp_path / "missing" / "run.ckpt"
    with pytest.raises(
        ReportError,
        match=rf"^{re.escape(str(path))}: cannot read or write the checkpoint "
        r"\(No such file or directory\); give a checkpoint= path in a writable "
        r"folder$",
    ):
        distill(grid_spec(2), slanted_network(), jobs=1, checkpoint=path)


@pytest.mark.parametrize(
    "arguments, message",
    [
        (
            {"per_cell_timeout": 0},
            r"^per_cell_timeout=0 is not a positive number of seconds; give e\.g\. "
            r"per_cell_timeout=600, or None to let the work budget alone end each cell$",
        ),
        ({"jobs": 0}, r"^jobs=0 is not a positive number of worker processes; give e\.g\. jobs=2 or None$"),
    ],
)
def test_bad_arguments_are_refused(arguments, message):
    with pytest.raises(SpecError, match=message):
        distill(grid_spec(2), slanted_network(), **arguments)


def test_a_network_of_another_shape_is_refused():
    wide = Network((AffineLayer(np.zeros((3, 3)), np.zeros(3), "out"),), "x")
    with pytest.raises(
        SpecError,
        match=r"^/nonexistent/tiny\.spec\.json: the spec has 2 inputs and 3 outputs but "
        r"the network \(in memory\) has 3 and 3; give the network the spec names$",
    ):
        distill(grid_spec(2), wide)


# ------------------------------------------------------------- the example


@pytest.mark.slow
def test_example_distillation_has_no_sampled_mismatch():
    spec = load_spec(EXAMPLE)
    network = load_onnx(spec.model_path)
    result = distill(spec, network, jobs=2)
    assert result.table.is_complete
    stats = result.stats
    assert stats["cells"] == 7200
    assert stats["exact"] + stats["conservative_with_witness"] + stats["undecided"] == 7200
    assert stats["decided_without_marabou_share"] >= 0.8
    report = sampled_cross_check(result, spec, network, n=100_000, seed=0)
    assert report["mismatches"] == 0 and report["on_exact"] > 50_000
    rng = np.random.default_rng(0)
    for cell in rng.choice(sorted(result.witnesses), size=25, replace=False):
        assert_witness_valid(spec, network, result, int(cell))


def _acasxu_network(folder):
    return load_onnx(folder / "onnx" / "ACASXU_run2a_1_1_batch_2000.onnx")


@pytest.mark.slow
def test_acasxu_region_argmin_with_real_onnx_model(acasxu):
    network = _acasxu_network(acasxu)
    names, outputs = ["rho", "theta", "psi", "v_own", "v_int"], ["COC", "WL", "WR", "SL", "SR"]
    lower = (-0.303531156, -0.009549297, 0.0, 0.318181818, 0.083333333)
    upper = (-0.298552812, 0.009549297, 0.001, 0.5, 0.166666667)
    spec = spec_from_dict(
        {
            "certfsm_spec": 1,
            "name": "acasxu_region",
            "model": network.source_path,
            "inputs": [{"name": n, "unit": "", "min": a, "max": b, "bins": 2} for n, a, b in zip(names, lower, upper)],
            "outputs": outputs,
            "tokens": {t: k for k, t in enumerate(outputs)},
            "legal_tokens": outputs,
            "decision": "argmin",
            "conservative_token": "COC",
        },
        "/nonexistent/acasxu_region.spec.json",
    )
    result = distill(spec, network, jobs=1, per_cell_timeout=5)
    assert result.table.is_complete and result.stats["exact"] >= 1
    assert set(result.table.proposal[result.table.status == EXACT]) <= set(range(5))
    for cell in result.witnesses:
        assert_witness_valid(spec, network, result, cell)
    report = sampled_cross_check(result, spec, network, n=5_000, seed=3, check_onnxruntime=True)
    assert report["mismatches"] == 0 and report["onnxruntime_mismatches"] == 0 and report["on_exact"] > 0


def test_a_grid_beyond_the_table_limit_is_refused_before_any_work(monkeypatch):
    monkeypatch.setattr(_distill, "MAX_CELLS", 15)
    spec = grid_spec(4)
    with pytest.raises(
        SpecError,
        match=rf"^{re.escape(str(spec.path))}: the grid has 16 cells \(4 x 4\); a table holds "
        r"at most 15; give fewer bins or edges$",
    ):
        distill(spec, slanted_network(), jobs=1)


# ------------------------------------------------------------- graph controllers


@pytest.mark.parametrize("seed", range(3))
def test_a_graph_controller_distils_and_every_exact_cell_agrees_with_dense_sampling(seed):
    """Layers that read the input and earlier layers (a skip, merged branches): the cells go through the same engines."""
    from graph_networks import random_graph

    network = random_graph(np.random.default_rng(seed), 2, [4, 3], 3, skip=0.7, grid=0.25).replace(input_name="x")
    assert not network.is_chain
    spec = tiny_spec([-1.0, -0.3, 0.2, 1.0], x1_edges=(-1.0, 0.0, 0.5, 1.0))
    result = distill(spec, network, jobs=1, per_cell_timeout=2, seed=seed)
    grid = result.table.grid
    rng = np.random.default_rng(seed)
    assert np.count_nonzero(result.table.status == EXACT) >= 1
    for cell in range(grid.n_cells):
        lower, upper = grid.cell_bounds(cell)
        if result.table.status[cell] == EXACT:
            x = lower + rng.uniform(size=(2000, 2)) * (upper - lower)
            assert np.all(decisions(spec, network, x) == result.table.proposal[cell])
        elif cell in result.witnesses:
            assert_witness_valid(spec, network, result, cell)
