"""Proof certificates are checked by certfsm.checker, and every mutation of one is refused, naming the leaf.

The checker shares no code with the prover (it imports nothing of certfsm), so these tests prove with
`certfsm.verify`, write the certificate through the report writer and check it with `certfsm.checker` alone.
"""

from __future__ import annotations

import ast
import csv
import json
import os
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from certfsm import load_onnx
from certfsm.checker import CertificateError, check_certificate, check_report
from certfsm.verify import check, parse_vnnlib, write_certificate

ROOT = Path(__file__).resolve().parents[2]
ACASXU = Path(os.environ.get("CERTFSM_ACASXU", ROOT.parent / "shared" / "benchmarks" / "acasxu"))


def _network(path: Path, seed: int, normalise: bool = False) -> Path:
    """A random 2-16-16-2 ReLU chain (MatMul + Add), float32 weights; with `normalise`, first (x - m) / s * k."""
    rng = np.random.default_rng(seed)
    sizes, nodes, inits, current = [2, 16, 16, 2], [], [], "x"
    if normalise:
        for op, name in (("Sub", "m"), ("Div", "s"), ("Mul", "k")):
            constant = rng.uniform(0.3, 3.0, 2).astype(np.float32) * np.float32(-1.0 if name == "k" else 1.0)
            inits.append(numpy_helper.from_array(constant, name))
            nodes.append(helper.make_node(op, [current, name], [f"{name}_out"]))
            current = f"{name}_out"
    for k in range(3):
        weight = rng.normal(0, 1 / np.sqrt(sizes[k]), (sizes[k], sizes[k + 1])).astype(np.float32)
        bias = rng.normal(0, 0.1, sizes[k + 1]).astype(np.float32)
        inits += [numpy_helper.from_array(weight, f"W{k}"), numpy_helper.from_array(bias, f"b{k}")]
        nodes += [
            helper.make_node("MatMul", [current, f"W{k}"], [f"m{k}"]),
            helper.make_node("Add", [f"m{k}", f"b{k}"], [f"a{k}"]),
        ]
        current = f"a{k}"
        if k < 2:
            nodes.append(helper.make_node("Relu", [current], [f"r{k}"]))
            current = f"r{k}"
    graph = helper.make_graph(
        nodes,
        "net",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info(current, onnx.TensorProto.FLOAT, [1, 2])],
        inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def _proved(tmp_path: Path, seed: int = 0, margin: float = 0.05, engine: str = "bounds"):
    """A network, and a property it provably meets that needs branch and bound: y0 - y1 stays above its minimum
    over a grid, less a margin (so small with engine auto that Z3 closes some leaves)."""
    model = _network(tmp_path / "net.onnx", seed)
    network = load_onnx(model)
    grid = np.stack(np.meshgrid(np.linspace(-1, 1, 101), np.linspace(-1, 1, 101)), -1).reshape(-1, 2)
    lowest = float(np.min(network.evaluate(grid) @ np.array([1.0, -1.0])))
    rhs = f"{lowest - margin:.6f}"
    text = "(declare-const X_0 Real)\n(declare-const X_1 Real)\n(declare-const Y_0 Real)\n(declare-const Y_1 Real)\n"
    text += "(assert (>= X_0 -1))\n(assert (<= X_0 1))\n(assert (>= X_1 -1))\n(assert (<= X_1 1))\n"
    text += f"(assert (<= (- Y_0 Y_1) {rhs}))\n"
    (tmp_path / "p.vnnlib").write_text(text)
    prop = parse_vnnlib(tmp_path / "p.vnnlib", n_inputs=2, n_outputs=2)[0]
    result = check(network, prop, engine=engine, timeout=60, jobs=1)
    assert result.verdict == "proved", result.reason
    cert = tmp_path / "p.cert.json"
    assert write_certificate(cert, network, [prop], [result])
    return model, cert


def _rewrite(cert: Path, change) -> Path:
    document = json.loads(cert.read_text())
    change(document)
    out = cert.with_name("mutated.cert.json")
    out.write_text(json.dumps(document))
    return out


def _refused(cert: Path, model: Path, pattern: str) -> None:
    try:
        outcome = check_certificate(cert, model)
    except CertificateError as error:
        assert pattern in str(error), str(error)
        return
    assert not outcome.ok
    assert pattern in outcome.failure, outcome.failure


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_certificates_of_generated_networks_check(tmp_path, seed):
    model, cert = _proved(tmp_path, seed)
    outcome = check_certificate(cert, model)
    assert outcome.ok, outcome.failure
    assert outcome.leaves >= 1


def _proof(document):
    return document["proofs"][document["properties"][0]["proofs"][0]]


def _unsafe(document):
    return document["unsafe_sets"][document["properties"][0]["unsafe"]]


def _split_tree(tmp_path):
    """A proved certificate whose tree splits at least once (seeds are tried until one does)."""
    for seed in range(10):
        folder = tmp_path / str(seed)
        folder.mkdir()
        model, cert = _proved(folder, seed)
        if len(_proof(json.loads(cert.read_text()))["leaves"]) > 2:
            return model, cert
    pytest.skip("no generated network needed a split")


def test_a_dropped_leaf_is_refused(tmp_path):
    model, cert = _split_tree(tmp_path)
    _refused(_rewrite(cert, lambda d: _proof(d)["leaves"].pop()), model, "leaves")


def test_a_moved_split_is_refused(tmp_path):
    model, cert = _split_tree(tmp_path)

    def move(document):
        tree = _proof(document)["tree"]
        first = next(j for j, node in enumerate(tree) if node[0] == "split" and j > 0)
        tree[first][2] = 5.0  # outside its node: the leaves would overlap or leave a gap

    _refused(_rewrite(cert, move), model, "not strictly inside its node")


def _break_evidence(leaf):
    bounds = leaf["bounds"]
    if "row" in bounds:
        bounds["slopes"] = "zero" if bounds["slopes"] != "zero" else "one"
    else:
        bounds["slopes"] = [1.0 - s for s in bounds["slopes"]]


def test_changed_slopes_are_refused_naming_the_leaf(tmp_path):
    model, cert = _split_tree(tmp_path)
    document = json.loads(cert.read_text())
    refused = 0
    for k in range(len(_proof(document)["leaves"])):
        mutated = _rewrite(cert, lambda d, k=k: _break_evidence(_proof(d)["leaves"][k]))
        outcome = check_certificate(mutated, model)
        refused += not outcome.ok
        if not outcome.ok:
            assert f"leaf {k}" in outcome.failure
    assert refused >= 1


def test_a_swapped_constant_is_refused_naming_a_leaf(tmp_path):
    model, cert = _split_tree(tmp_path)

    def swap(document):
        row = _unsafe(document)[0][0]
        row["rhs"] = str(float(row["rhs"]) + 1.0)

    _refused(_rewrite(cert, swap), model, "leaf")


def _another_format(document):
    document["certfsm_certificate"] = 1
    return "{file}: certfsm_certificate=1, this checker reads format 2; write the certificate again with this certfsm"


def _a_dangling_unsafe_set(document):
    document["properties"][0]["unsafe"] = 7
    return "property {name}: unsafe=7 names no entry of unsafe_sets (it has 1)"


def _a_dangling_proof(document):
    document["properties"][0]["proofs"][-1] = len(document["proofs"])
    return f"property {{name}}: proofs={len(document['proofs'])} names no entry of proofs"


def _a_shared_proof_out_of_order(document):
    shared = document["properties"][0]["proofs"][0]
    document["proofs"][shared]["tree"] = [["leaf", 1]]
    return f"property {{name}}: proofs[{shared}].tree[0] names leaf 1, expected 0 (pre-order)"


@pytest.mark.parametrize(
    "change", [_another_format, _a_dangling_unsafe_set, _a_dangling_proof, _a_shared_proof_out_of_order]
)
def test_a_certificate_of_another_format_or_with_a_bad_reference_is_refused_naming_the_field(tmp_path, change):
    model, cert = _proved(tmp_path)
    document = json.loads(cert.read_text())
    pattern = change(document)
    mutated = cert.with_name("mutated.cert.json")
    mutated.write_text(json.dumps(document))
    message = pattern.format(file=mutated, name=document["properties"][0]["name"])
    with pytest.raises(CertificateError, match="^" + re.escape(message)):
        check_certificate(mutated, model)


def test_a_changed_weight_is_refused(tmp_path):
    model, cert = _split_tree(tmp_path)
    graph = onnx.load(model)
    tensor = graph.graph.initializer[4]  # W2, the output layer
    weight = numpy_helper.to_array(tensor).copy()
    weight[0, 0] -= 10.0
    tensor.CopyFrom(numpy_helper.from_array(weight, tensor.name))
    changed = model.with_name("changed.onnx")
    onnx.save(graph, changed)
    _refused(cert, changed, "SHA-256")
    import hashlib

    sha = hashlib.sha256(changed.read_bytes()).hexdigest()
    _refused(_rewrite(cert, lambda d: d.update(network_sha256=sha)), changed, "leaf")


@pytest.mark.parametrize("seed", range(4))
def test_the_checkers_node_bounds_contain_every_sampled_value(tmp_path, seed):
    """Interval and back-substituted bounds, in both passes, hold at sampled points and vertices."""
    from certfsm.checker._arith import forward, read_model
    from graph_models import evaluate

    ops = read_model(_network(tmp_path / "net.onnx", seed, normalise=seed % 2 == 1))
    rng = np.random.default_rng(seed)
    lower = rng.uniform(-1.0, 0.5, (8, 2))
    upper = lower + rng.uniform(0.0, 1.0, (8, 2)) ** 3
    lows, highs = forward(ops, lower, upper, ())
    lows, highs = forward(ops, lower, upper, known=(lows, highs))
    corners = np.array([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    fractions = np.concatenate([corners, rng.random((400, 2))])
    for box in range(len(lower)):
        values = lower[box] + fractions * (upper[box] - lower[box])
        for i, value in enumerate(evaluate(ops, values)):
            assert np.all(lows[i][box] <= value + 1e-12) and np.all(value <= highs[i][box] + 1e-12), (box, i)


def _with_z3_leaves(tmp_path):
    """A proved certificate with at least one leaf that Z3 closed."""
    pytest.importorskip("z3")
    model, cert = _proved(tmp_path, 0, margin=0.002, engine="auto")
    if not any("z3" in leaf for leaf in _proof(json.loads(cert.read_text()))["leaves"]):
        pytest.skip("Z3 closed no leaf of the generated property")
    return model, cert


@pytest.mark.slow
def test_z3_leaves_are_decided_again_by_the_checkers_own_query(tmp_path):
    model, cert = _with_z3_leaves(tmp_path)
    outcome = check_certificate(cert, model)
    assert outcome.ok, outcome.failure


def test_a_changed_query_file_is_refused_naming_the_leaf(tmp_path):
    model, cert = _with_z3_leaves(tmp_path)
    leaves = _proof(json.loads(cert.read_text()))["leaves"]
    k = next(k for k, leaf in enumerate(leaves) if "z3" in leaf)
    query = cert.parent / leaves[k]["z3"]["file"]
    query.write_text(query.read_text().replace("(check-sat)", "(check-sat)\n"))
    _refused(cert, model, f"leaf {k} ")
    _refused(cert, model, "query file")


@pytest.mark.slow
def test_a_z3_leaf_of_a_false_claim_is_refused_naming_the_leaf(tmp_path):
    """Every leaf becomes a z3 leaf (its file and hash intact) of a disjunct that every point reaches."""
    model, cert = _with_z3_leaves(tmp_path)

    def falsify(document):
        leaves = _proof(document)["leaves"]
        recorded = next(leaf for leaf in leaves if "z3" in leaf)
        leaves[:] = [recorded] * len(leaves)
        _unsafe(document)[0][0]["rhs"] = "1000"

    _refused(_rewrite(cert, falsify), model, "leaf 0 ")
    _refused(_rewrite(cert, falsify), model, "z3 answers sat")


def test_the_certificates_of_a_spec_report_check(tmp_path):
    """certfsm verify on the example's spec (a model that normalises with Sub and Div) writes certificates that
    check_report accepts, every one."""
    from cli_in_process import run_main

    code, out, err = run_main("verify", "--example", "--report", tmp_path / "report", "--no-progress")
    assert code == 0, out + err
    outcomes = check_report(tmp_path / "report")
    assert len(outcomes) == 6 and all(o.ok for o in outcomes), [o.failure for o in outcomes]


def test_vnnlib_writes_its_certificate_into_a_new_folder_and_it_checks(tmp_path):
    """The VNN-COMP-style writer (`vnnlib --certificate`) makes the certificate's folder, as the report writers do."""
    from cli_in_process import run_main

    model, _ = _proved(tmp_path)
    cert = tmp_path / "new" / "folder" / "p.cert.json"
    code, out, err = run_main("vnnlib", model, tmp_path / "p.vnnlib", "--certificate", cert, "--engine", "bounds")
    assert code == 0 and cert.exists(), out + err
    outcome = check_certificate(cert, model)
    assert outcome.ok and outcome.leaves >= 1, outcome.failure


def test_the_checker_imports_nothing_of_certfsm():
    for source in (ROOT / "checker").glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                assert not (node.module or "").startswith("certfsm"), f"{source.name} imports {node.module}"
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("certfsm") for a in node.names), source.name


@pytest.mark.slow
@pytest.mark.parametrize(
    "net,prop", [("1_9", "prop_1"), ("2_4", "prop_3"), ("3_3", "prop_4"), ("3_3", "prop_1"), ("1_1", "prop_2")]
)
def test_certificates_of_acasxu_unsat_instances_check(tmp_path, net, prop):
    model = ACASXU / "onnx" / f"ACASXU_run2a_{net}_batch_2000.onnx"
    if not model.exists():
        pytest.skip(f"the ACAS Xu benchmark is not at {ACASXU} (set CERTFSM_ACASXU)")
    network = load_onnx(model)
    properties = parse_vnnlib(ACASXU / "vnnlib" / f"{prop}.vnnlib", n_inputs=5, n_outputs=5)
    results = [check(network, p, timeout=60, jobs=1) for p in properties]
    cert = tmp_path / "c.cert.json"
    assert write_certificate(cert, network, properties, results)
    outcome = check_certificate(cert, model)
    assert outcome.ok, outcome.failure


RL = ROOT.parent / "shared" / "benchmarks" / "rl"


def _rl_unsat_instances() -> list[tuple[str, str]]:
    listing = RL / "instances.csv"
    if not listing.exists():
        return []
    with open(listing, encoding="utf-8") as handle:
        return [(row["onnx"], row["vnnlib"]) for row in csv.DictReader(handle) if row["expected"] == "unsat"]


@pytest.mark.slow
@pytest.mark.skipif(not (RL / "instances.csv").exists(), reason=f"the VNN-COMP controller set is not at {RL}")
@pytest.mark.parametrize("onnx_name,vnnlib_name", _rl_unsat_instances())
def test_certificates_of_every_unsat_controller_instance_check(tmp_path, onnx_name, vnnlib_name):
    """cartpole, lunarlander, dubinsrejoin and the TLL networks, whose first ReLU follows three matrix products
    that the prover folds into one layer: the checker must bound that ReLU's input as tightly as the prover."""
    model = RL / onnx_name
    network = load_onnx(model)
    properties = parse_vnnlib(RL / vnnlib_name, n_inputs=network.n_inputs, n_outputs=network.n_outputs)
    results = [check(network, p, timeout=60, jobs=1) for p in properties]
    cert = tmp_path / "c.cert.json"
    assert write_certificate(cert, network, properties, results)
    outcome = check_certificate(cert, model)
    assert outcome.ok, outcome.failure


def test_a_leaf_that_closed_on_bounds_inherited_from_the_untightened_root_box_checks(tmp_path):
    """The prover tightens the hidden bounds of the boxes it keeps splitting (every slope choice), not those of the
    box it starts from, and a leaf bounded from the tighter ones can come out looser (the parallel slopes change):
    on this cell of the example's grid with its first two inputs' bins cut finer, "the decision is KEEP" has such a
    leaf (x1 >= 70.25), whose bound from the root's first pass refutes and from its second does not, so the checker
    gives the root the first pass alone, as the prover does."""
    from certfsm.examples import example_spec_path
    from certfsm.verify import prove_boxes, write_cell_certificate

    model = example_spec_path("coadapt").with_name("coadapt.onnx")
    network = load_onnx(model)
    box = [("75.921875", "79.828125"), ("67", "73.5"), ("61.5", "100"), ("75.5", "85"), ("38", "42")]
    text = "".join(f"(declare-const X_{i} Real)\n" for i in range(5))
    text += "".join(f"(declare-const Y_{i} Real)\n" for i in range(5))
    text += "".join(f"(assert (>= X_{i} {lo}))\n(assert (<= X_{i} {hi}))\n" for i, (lo, hi) in enumerate(box))
    wins = ["(and " + " ".join(f"(<= (- Y_{j} Y_{t}) -0.5)" for j in range(5) if j != t) + ")" for t in range(1, 5)]
    (tmp_path / "keep.vnnlib").write_text(text + f"(assert (or {' '.join(wins)}))\n")  # another token wins by 0.5
    prop = parse_vnnlib(tmp_path / "keep.vnnlib", n_inputs=5, n_outputs=5)[0]
    proved = prove_boxes(network, prop, np.array([prop.lower]), np.array([prop.upper]), record=True)
    assert proved.proved[0]
    cert = tmp_path / "cell.cert.json"
    assert write_cell_certificate(cert, network, [("the cell", prop, proved.proofs[0])])[1] == (True,)
    document = json.loads(cert.read_text())
    trees = [document["proofs"][j]["tree"] for j in document["properties"][0]["proofs"]]
    assert ["split", 1, 70.25] in [node for tree in trees for node in tree]
    outcome = check_certificate(cert, model)
    assert outcome.ok, outcome.failure
