"""Refined tables in distill: cells that are not exact become box trees whose exact leaves are proved."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from certfsm import (
    AffineLayer,
    LeafStatus,
    Network,
    TreeBudget,
    gated_decide,
    load_artifact,
    load_spec,
    run_onnxruntime,
    spec_from_dict,
)
from certfsm.fsm import EXACT, distill, distill_controller
from gemm_onnx import onnx_bytes

BOUNDARY = 0.4375 + 1e-3
"""Where A (right) and B (left) swap: inside the middle bin, on no threshold the refinement can place."""


def spec(refine=None, frac_bits=None, folder=None):
    inputs = [
        {"name": "x0", "unit": "", "min": 0.0, "max": 1.0, "edges": [0.0, 0.25, 0.75, 1.0]},
        {"name": "x1", "unit": "", "min": 0.0, "max": 1.0, "edges": [0.0, 0.5, 1.0]},
    ]
    if frac_bits is not None:
        inputs[0]["frac_bits"] = frac_bits
    document = {
        "certfsm_spec": 1,
        "name": "tiny",
        "model": "tiny.onnx",
        "inputs": inputs,
        "outputs": ["KEEP", "A", "B"],
        "tokens": {"KEEP": 0, "A": 1, "B": 2},
        "legal_tokens": ["KEEP", "A", "B"],
        "decision": "argmax",
        "conservative_token": "KEEP",
    }
    if refine is not None:
        document["refine"] = {"max_depth": refine[0], "max_leaves": refine[1]}
    if folder is None:
        return spec_from_dict(document, "/nonexistent/tiny.spec.json", require_model=False)
    (folder / "tiny.onnx").write_bytes(onnx_bytes(network()))
    (folder / "tiny.spec.json").write_text(json.dumps(document))
    return load_spec(folder / "tiny.spec.json")


def network():
    """KEEP scores 0.1; A scores 4 (x0 - b) and B the opposite: B wins left of b - 1/40, A right of b + 1/40,
    KEEP between."""
    hidden = AffineLayer(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([-BOUNDARY, BOUNDARY]), "hidden")
    out = AffineLayer(np.array([[0.0, 0.0], [4.0, -4.0], [-4.0, 4.0]]), np.array([0.1, 0.0, 0.0]), "out")
    return Network((hidden, out), input_name="x")


def decisions(x, onnx=False):
    scores = run_onnxruntime(network(), x) if onnx else network().evaluate(x)
    return gated_decide(np.asarray(scores, dtype=np.float64), "argmax", 0.0, 0)


def dense(box, n=400, seed=0):
    """Points of a leaf's half-open box: a uniform cloud and its corners pulled just inside."""
    rng = np.random.default_rng(seed)
    low = np.array([float(i.low) for i in box.intervals])
    high = np.array([float(i.high) for i in box.intervals])
    x = low + rng.uniform(0, 1, size=(n, len(low))) * (high - low)
    corners = np.array([[lo, hi] for lo, hi in zip(low, np.nextafter(high, -np.inf))])
    grid = np.array(np.meshgrid(*corners)).reshape(len(low), -1).T
    points = np.concatenate([x, grid])
    return points[[box.contains([Fraction(v) for v in row]) for row in points]]


def test_without_refine_the_middle_cells_stay_conservative_and_nothing_is_refined():
    flat = distill(spec(), network(), jobs=1)
    assert flat.refinement is None and flat.leaf_records == ()
    assert "refinement" not in flat.stats
    assert list(np.flatnonzero(flat.table.status != EXACT)) == [2, 3]


@pytest.mark.parametrize("frac_bits", [None, 8])
def test_conservative_cells_become_exact_leaves_that_agree_with_dense_sampling(frac_bits):
    result = distill(spec((6, 12), frac_bits), network(), jobs=1)
    refinement = result.refinement
    assert refinement is not None and refinement.cells == (2, 3)
    stats = result.stats["refinement"]
    assert stats["exact_volume_share"] > stats["exact_volume_share_before"] + 0.2
    assert stats["exact_volume_by_token"]["A"] > stats["exact_volume_by_token_before"]["A"]
    exact_leaves = 0
    for tree in refinement.trees:
        assert tree.depth <= 6 and tree.n_leaves <= 12
        for leaf, box in zip(tree.leaves, tree.boxes):
            if leaf.status is not LeafStatus.EXACT:
                assert leaf.token == 0
                continue
            exact_leaves += 1
            points = dense(box)
            assert len(points) > 4
            assert set(decisions(points)) == {leaf.token}
            assert set(decisions(points, onnx=True)) == {leaf.token}
        if frac_bits is not None:  # every threshold on x0 lies on the 2^-8 grid
            for box in tree.boxes:
                assert (box.intervals[0].low * 256).denominator == 1 or box.intervals[0].low == Fraction(1, 4)
    assert exact_leaves >= 4


def test_the_leaf_next_to_the_boundary_carries_a_witness_pair():
    result = distill(spec((6, 12)), network(), jobs=1)
    around = [r for r in result.leaf_records if r["status"] != "exact"]
    assert around
    for record in around:
        low, high = (Fraction(record["box"][0][0]), Fraction(record["box"][0][1]))
        edges = [Fraction(BOUNDARY) - Fraction(1, 40), Fraction(BOUNDARY) + Fraction(1, 40)]  # where KEEP starts
        assert any(low - Fraction(1, 10**6) <= edge <= high + Fraction(1, 10**6) for edge in edges)
        if "witness" in record:
            pair = np.array(record["witness"])
            assert decisions(pair)[0] != decisions(pair)[1]
            assert list(decisions(pair, onnx=True)) == list(decisions(pair))


def test_budgets_bound_every_tree():
    shallow = distill(spec((2, 64)), network(), jobs=1)
    few = distill(spec((24, 3)), network(), jobs=1)
    assert all(tree.depth <= 2 for tree in shallow.refinement.trees)
    assert all(tree.n_leaves <= 3 for tree in few.refinement.trees)
    assert max(tree.depth for tree in shallow.refinement.trees) == 2
    assert max(tree.n_leaves for tree in few.refinement.trees) == 3


def run(tmp_path, name, jobs, budget=(6, 12)):
    folder = tmp_path / name
    folder.mkdir()
    return distill_controller(
        spec(budget, folder=folder),
        out=tmp_path / f"{name}.cfsm",
        report=tmp_path / f"{name}-report",
        jobs=jobs,
    )


@pytest.mark.slow
def test_the_artifact_loads_leaf_by_leaf_and_is_the_same_on_one_and_two_jobs(tmp_path):
    one, two = run(tmp_path, "one", 1), run(tmp_path, "two", 2)
    assert one.certified and one.cross_check["mismatches"] == 0 and one.cross_check["on_exact_leaves"] > 0
    assert (tmp_path / "one.cfsm").read_bytes() == (tmp_path / "two.cfsm").read_bytes()
    assert one.distillation.leaf_records == two.distillation.leaf_records
    artifact = load_artifact(tmp_path / "one.cfsm")
    assert artifact.refinement is not None and artifact.refinement.cells == (2, 3)
    assert artifact.refinement.has_exact
    leaves = [json.loads(line) for line in (tmp_path / "one-report" / "leaves.jsonl").read_text().splitlines()]
    assert len(leaves) == artifact.refinement.n_leaves
    summary = json.loads((tmp_path / "one-report" / "summary.json").read_text())
    assert summary["refinement"]["leaves"] == len(leaves)
    assert "## Refinement" in (tmp_path / "one-report" / "report.md").read_text()
    # The certificate's table and machine proofs range over the leaves, not only the cells' flat entries.
    for name in ("table-tokens", "table-masks", "table-codes"):
        assert "likewise every leaf in its own box" in (tmp_path / "one-report" / f"{name}.smt2").read_text(), name


@pytest.mark.slow
def test_a_budget_given_to_distill_controller_replaces_the_specs_and_is_written_with_it(tmp_path):
    result = distill_controller(
        spec(folder=tmp_path),
        out=tmp_path / "c.cfsm",
        report=tmp_path / "r",
        jobs=1,
        refine=TreeBudget(3, 4),
    )
    artifact = load_artifact(tmp_path / "c.cfsm")
    assert artifact.spec["refine"] == {"max_depth": 3, "max_leaves": 4}
    assert result.distillation.stats["refinement"]["max_leaves"] == 4
    assert all(tree.n_leaves <= 4 for tree in artifact.refinement.trees)


def test_a_flat_spec_writes_no_refinement_and_no_leaves_file(tmp_path):
    distill_controller(spec(folder=tmp_path), out=tmp_path / "c.cfsm", report=tmp_path / "r", jobs=1)
    payload = json.loads((tmp_path / "c.cfsm").read_text())
    assert "refinement" not in json.dumps(payload)
    assert not (tmp_path / "r" / "leaves.jsonl").exists()
    assert "refinement" not in json.loads((tmp_path / "r" / "summary.json").read_text())


@pytest.mark.slow
def test_every_exact_leaf_has_a_certificate_entry_over_its_box_that_checks_and_a_moved_box_is_refused(tmp_path):
    """Leaves are the same kind of claim as cells: "cell N leaf K: the decision is T" over a box that covers leaf
    K (pre-order) of cell N's tree, re-checked by the independent checker; the entry of a leaf moved onto the
    boundary, where the token does not hold, is refused by name."""
    from certfsm.checker import check_certificate

    result = run(tmp_path, "cert", 1)
    report = tmp_path / "cert-report"
    entry = json.loads((report / "summary.json").read_text())["cell_certificate"]
    artifact = load_artifact(tmp_path / "cert.cfsm")
    exact_leaves = [
        (cell, k, leaf.token, box)
        for cell, tree in zip(artifact.refinement.cells, artifact.refinement.trees)
        for k, (leaf, box) in enumerate(zip(tree.leaves, tree.boxes))
        if leaf.status is LeafStatus.EXACT
    ]
    assert entry["exact_leaves"] == entry["certified_leaves"] == len(exact_leaves) > 0
    assert "not_certified" not in entry
    document = json.loads((report / entry["file"]).read_text())
    by_name = {item["name"]: item for item in document["properties"]}
    outputs = artifact.spec["outputs"]
    for cell, k, token, box in exact_leaves:
        stated = by_name[f"cell {cell} leaf {k}: the decision is {outputs[token]}"]["inputs"]
        for interval, (lower, upper) in zip(box.intervals, stated):
            assert Fraction(lower) <= interval.low and interval.high <= Fraction(upper)
    model = tmp_path / "cert" / "tiny.onnx"
    assert check_certificate(report / entry["file"], model).ok
    assert result.certified
    # Move the first exact leaf's entry onto the boundary's interval on x0: the token no longer holds there.
    name = next(n for n in by_name if " leaf " in n)
    by_name[name]["inputs"][0] = [str(Fraction(BOUNDARY) - Fraction(1, 8)), str(Fraction(BOUNDARY) + Fraction(1, 8))]
    mutated = tmp_path / "mutated.cert.json"
    mutated.write_text(json.dumps(document))
    checked = check_certificate(mutated, model)
    assert not checked.ok and name in checked.failure
