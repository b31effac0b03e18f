"""The checker reads ONNX DAGs by its own loader: its bounds hold for what onnxruntime computes, it numbers hidden
neurons by the rule its docstring states, and it refuses, naming the node, every operator and graph it does not read.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from graph_models import BUILDERS, N_INPUTS, Graph, build, evaluate, run_onnxruntime

from certfsm.checker import check_certificate
from certfsm.checker._arith import ModelError, forward, hidden_widths, lower_bound, read_model


def _boxes(rng, n: int, count: int, width: float = 1.0):
    lower = rng.uniform(-1.0, 0.5, (count, n))
    return lower, lower + width * rng.uniform(0.0, 1.0, (count, n)) ** 2


def _points(rng, n: int, lower, upper):
    """The box's vertices and 300 random points of it."""
    fractions = np.concatenate([np.array(list(itertools.product([0.0, 1.0], repeat=n))), rng.random((300, n))])
    return lower + fractions * (upper - lower)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_bounds_of_every_value_contain_the_values_and_onnxruntimes_outputs(tmp_path, kind, seed):
    """Interval and back-substituted bounds, in both passes, hold at sampled points and vertices; the checker's
    reading of the file computes what onnxruntime computes (to float32's precision)."""
    model = build(kind, tmp_path / "m.onnx", seed)
    ops, rng, n = read_model(model), np.random.default_rng(seed), N_INPUTS[kind]
    lower, upper = _boxes(rng, n, 6)
    first = forward(ops, lower, upper, ())
    for lows, highs in (first, forward(ops, lower, upper, known=first)):
        for box in range(len(lower)):
            points = _points(rng, n, lower[box], upper[box])
            values, reference = evaluate(ops, points), run_onnxruntime(model, points)
            slack = 1e-5 * (1.0 + np.abs(reference))
            assert np.all(np.abs(values[-1] - reference) <= slack), "the checker reads another function"
            assert np.all(lows[-1][box] <= reference + slack) and np.all(reference <= highs[-1][box] + slack)
            for i, value in enumerate(values):
                assert np.all(lows[i][box] <= value + 1e-12) and np.all(value <= highs[i][box] + 1e-12), (box, i)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_lower_bounds_are_at_most_the_sampled_minima_and_tight_on_small_boxes(tmp_path, kind, seed):
    """Every slope choice, the certificate's per-neuron slopes included, gives a lower bound of c . y no larger than
    its minimum over sampled points; on a box 1e-7 wide the bound is within 1e-4 of it (no branch is dropped)."""
    model = build(kind, tmp_path / "m.onnx", seed)
    ops, rng, n = read_model(model), np.random.default_rng(seed), N_INPUTS[kind]
    objectives = rng.normal(0.0, 1.0, (4, run_onnxruntime(model, np.zeros((1, n))).shape[1]))
    for width in (1.0, 1e-7):
        lower, upper = _boxes(rng, n, 5, width)
        lows, highs = forward(ops, lower, upper)
        codes = rng.uniform(-1.0, 1.5, (len(lower), sum(hidden_widths(ops))))
        codes[rng.random(codes.shape) < 0.3] = np.nan
        owner = np.repeat(np.arange(len(lower)), len(objectives))
        coef = np.tile(objectives, (len(lower), 1))
        bounds = lower_bound(ops, lows, highs, len(ops), coef, owner, (np.nan, 0.0, 1.0, -1.0, codes))
        for box in range(len(lower)):
            points = _points(rng, n, lower[box], upper[box])
            exact, reference = evaluate(ops, points)[-1] @ objectives.T, run_onnxruntime(model, points) @ objectives.T
            found = bounds[:, owner == box]
            assert np.all(found <= exact.min(axis=0) + 1e-12)
            assert np.all(found <= reference.min(axis=0) + 1e-5 * (1.0 + np.abs(reference).max()))
            if width < 1e-3:
                assert np.all(found[0] >= exact.min(axis=0) - 1e-4), found[0] - exact.min(axis=0)


def test_hidden_neurons_are_numbered_by_depth_then_node_order_then_c_order(tmp_path):
    """Relu nodes a (depth 1), b (depth 2, after a in the node list), c (depth 1, after b): a's neurons come
    first, then c's, then b's; the hidden layers are {a, c} and {b}. A Relu node the output does not depend on
    (between b and c) numbers no neuron."""
    g = Graph(np.random.default_rng(0), 2)
    a = g.dense("x", 2, 4)
    b = g.dense(a, 4, 3)
    g.dense(a, 4, 6)
    c = g.dense("x", 2, 5)
    out = g.dense(g.node("Concat", [b, c], axis=1)[0], 8, 2, relu=False)
    ops = read_model(g.save(tmp_path / "m.onnx", out, 2))
    relus = [param for kind, _, param in ops if kind == "relu"]
    assert relus == [(0, 1, 4), (9, 2, 3), (4, 1, 5)]  # (first neuron, depth, width), in the node list's order
    assert hidden_widths(ops) == [9, 3]


def _bad(g: Graph, kind: str):
    """A graph with one node this checker does not read, and the node's name and operator."""
    h = g.dense("x", 2, 3, relu=False)
    cases = {
        "Transpose": lambda: g.node("Transpose", [h]),
        "Sigmoid": lambda: g.node("Sigmoid", [h]),
        "MaxPool": lambda: g.node("MaxPool", [g.node("Unsqueeze", [h, g.weight(1, data=[0])])[0]], kernel_shape=[2]),
        "Mul": lambda: g.node("Mul", [h, h]),
        "Div": lambda: g.node("Div", [g.weight(3), h]),
        "MatMul": lambda: g.node("MatMul", [g.weight(3, 3), g.node("Reshape", [h, g.weight(2, data=[3, 1])])[0]]),
        "Gemm": lambda: g.node("Gemm", [h, g.weight(3, 3)], alpha=2.0),
        "GemmT": lambda: g.node("Gemm", [h, g.weight(1, 3)], transA=1),
    }
    out = cases[kind]()[0]
    return out, g.nodes[-1].name, g.nodes[-1].op_type


@pytest.mark.parametrize(
    "kind,why",
    [
        ("Transpose", "this operator is not read by this checker"),
        ("Sigmoid", "this operator is not read by this checker"),
        ("MaxPool", "this operator is not read by this checker"),
        ("Mul", "a product or quotient of two values is not read"),
        ("Div", "constant / x is not read; only x / constant"),
        ("MatMul", "only data @ constant (+ constant) is read"),
        ("Gemm", "Gemm with alpha or beta other than 1, or transA, is not read"),
        ("GemmT", "Gemm with alpha or beta other than 1, or transA, is not read"),
    ],
)
def test_an_operator_it_does_not_read_is_refused_naming_the_node(tmp_path, kind, why):
    g = Graph(np.random.default_rng(0), 2)
    out, name, op = _bad(g, kind)
    path = g.save(tmp_path / "m.onnx", out, 3, check=False)
    with pytest.raises(ModelError, match="^" + re.escape(f"{path}: node {name} ({op}): {why}")):
        read_model(path)


def test_indices_made_from_the_input_are_refused_naming_the_node(tmp_path):
    g = Graph(np.random.default_rng(0), 2)
    h = g.dense("x", 2, 3, relu=False)
    out = g.node("Gather", [h, g.node("Relu", [h])[0]], axis=1)[0]
    path = g.save(tmp_path / "m.onnx", out, 3, check=False)
    message = f"{path}: node {g.nodes[-1].name} (Gather): input 1 must be a constant"
    with pytest.raises(ModelError, match="^" + re.escape(message)):
        read_model(path)


def test_a_malformed_graph_is_refused_naming_the_node(tmp_path):
    """A node that reads what a later node makes (the node list is not in order) and an output made of constants."""
    g = Graph(np.random.default_rng(0), 2)
    h = g.dense("x", 2, 3, relu=False)
    out = g.node("Relu", [h])[0]
    g.nodes.insert(0, g.nodes.pop())
    path = g.save(tmp_path / "m.onnx", out, 3, check=False)
    message = f"{path}: node {g.nodes[0].name} (Relu) reads {h!r}, which no earlier node, initializer or input makes"
    with pytest.raises(ModelError, match="^" + re.escape(message)):
        read_model(path)
    g = Graph(np.random.default_rng(0), 2)
    g.dense("x", 2, 3, relu=False)
    path = g.save(tmp_path / "c.onnx", g.weight(3), 3, check=False)
    with pytest.raises(ModelError, match="^" + re.escape(f"{path}: the output 'w2' is not made from the input")):
        read_model(path)


def _certificate(tmp_path, model, rhs: str, leaves: list) -> Path:
    """A certificate written by hand (the format of `certfsm.verify._certificate`): y0 - y1 <= rhs is unreachable
    on [-0.5, 0.5]^3, split once on x0 at 0, each half closed by the evidence given."""
    query = tmp_path / "leaf.smt2"
    query.write_text("(check-sat)\n")
    z3_leaf = {"z3": {"file": query.name, "sha256": hashlib.sha256(query.read_bytes()).hexdigest()}}
    document = {
        "certfsm_certificate": 2,
        "network_sha256": hashlib.sha256(model.read_bytes()).hexdigest(),
        "unsafe_sets": [[[{"coefficients": ["1", "-1"], "rhs": rhs, "strict": False}]]],
        "proofs": [
            {
                "tree": [["split", 0, 0.0], ["leaf", 0], ["leaf", 1]],
                "leaves": [z3_leaf if k is True else k for k in leaves],
            }
        ],
        "properties": [{"name": "p", "inputs": [["-0.5", "0.5"]] * 3, "unsafe": 0, "proofs": [0]}],
    }
    path = tmp_path / "p.cert.json"
    path.write_text(json.dumps(document))
    return path


def test_a_certificate_of_a_graph_checks_with_bounds_and_z3_leaves_and_a_false_one_is_refused(tmp_path):
    """On the summed-branches graph: a claim below the checker's own bound on each half checks, by bounds on one
    half and by the checker's exact z3 query on the other; a claim above the sampled minimum is refused by both."""
    pytest.importorskip("z3")
    model = build("summed", tmp_path / "m.onnx", 0)
    ops = read_model(model)
    lower, upper = np.array([[-0.5] * 3, [0.0, -0.5, -0.5]]), np.array([[0.0, 0.5, 0.5], [0.5] * 3])
    lows, highs = forward(ops, lower, upper)
    bound = lower_bound(ops, lows, highs, len(ops), np.array([[1.0, -1.0]] * 2), np.arange(2), (np.nan,)).min()
    points = _points(np.random.default_rng(0), 3, lower.min(axis=0), upper.max(axis=0))
    lowest = float(np.min(run_onnxruntime(model, points) @ np.array([1.0, -1.0])))
    assert bound < lowest
    adaptive = {"bounds": {"row": 0, "slopes": "adaptive"}}
    outcome = check_certificate(_certificate(tmp_path, model, f"{bound - 0.01:.6f}", [adaptive, True]), model)
    assert outcome.ok and outcome.leaves == 2, outcome.failure
    outcome = check_certificate(_certificate(tmp_path, model, f"{lowest + 0.01:.6f}", [adaptive, True]), model)
    assert not outcome.ok and "leaf 0 " in outcome.failure and "does not refute" in outcome.failure
    outcome = check_certificate(_certificate(tmp_path, model, f"{lowest + 0.01:.6f}", [True, True]), model)
    assert not outcome.ok and "z3 answers sat" in outcome.failure, outcome.failure


BENCHMARKS = Path(__file__).resolve().parents[3] / "shared" / "benchmarks"
SHARED_MODELS = sorted(
    str(path.relative_to(BENCHMARKS))
    for folder in ("cersyve", "linearizenn", "rl", "acasxu")
    for path in (BENCHMARKS / folder / "onnx").glob("*.onnx")
)[::2]


def _hidden_by_numbering(ops, x: np.ndarray) -> np.ndarray:
    """The checker's hidden neurons at the points x, in its numbering."""
    values, hidden = evaluate(ops, x), np.zeros((len(x), sum(hidden_widths(ops))))
    for index, (kind, _, param) in enumerate(ops):
        if kind == "relu":
            hidden[:, param[0] : param[0] + param[2]] = values[index + 1]
    return hidden


def _hidden_of_prover(network, x: np.ndarray) -> np.ndarray:
    """The prover's hidden layers (`certfsm.Network`) at the points x, side by side."""
    activations = [x]
    for index, layer in enumerate(network.layers[:-1]):
        activations.append(np.maximum(network.gather(index, activations) @ layer.weight.T + layer.bias, 0.0))
    return np.concatenate(activations[1:], axis=1)


@pytest.mark.parametrize("model", ["summed", "sliced", "skip"] + SHARED_MODELS)
def test_the_hidden_neurons_are_numbered_as_the_provers_loader_numbers_them(tmp_path, model):
    """Neuron k of the checker's numbering is neuron k of the prover's layers (`certfsm.load_onnx`) at random
    points: the certificate's slopes name the same neurons on both sides (graphs, and chains as before)."""
    from certfsm import load_onnx

    path = build(model, tmp_path / "m.onnx", 0) if model in BUILDERS else BENCHMARKS / model
    if not path.exists():
        pytest.skip(f"{path} is not there")
    ops, network = read_model(path), load_onnx(path)
    assert hidden_widths(ops) == list(network.hidden_sizes)
    x = np.random.default_rng(0).uniform(-1.0, 1.0, (50, network.n_inputs))
    mine, theirs = _hidden_by_numbering(ops, x), _hidden_of_prover(network, x)
    assert np.allclose(mine, theirs, rtol=1e-9, atol=1e-9 * (1.0 + np.abs(theirs).max()))
    assert np.allclose(evaluate(ops, x)[-1], network.evaluate(x), rtol=1e-9, atol=1e-9 * (1.0 + np.abs(theirs).max()))


@pytest.mark.parametrize("model", ["cersyve/onnx/pendulum_finetune_con.onnx", "linearizenn/onnx/AllInOne_10_10.onnx"])
def test_bounds_on_the_benchmarks_graphs_contain_onnxruntimes_outputs(model):
    """cersyve's summed branches and linearizenn's sliced plant branch: output bounds and lower bounds of random
    objectives hold at onnxruntime's outputs on sampled points of random boxes."""
    path = BENCHMARKS / model
    if not path.exists():
        pytest.skip(f"{path} is not there")
    ops, rng = read_model(path), np.random.default_rng(0)
    n = onnx.load(path).graph.input[0].type.tensor_type.shape.dim[-1].dim_value
    lower, upper = _boxes(rng, n, 4, 0.2)
    lows, highs = forward(ops, lower, upper)
    objectives = rng.normal(0.0, 1.0, (3, lows[-1].shape[1]))
    owner = np.repeat(np.arange(len(lower)), len(objectives))
    bounds = lower_bound(ops, lows, highs, len(ops), np.tile(objectives, (len(lower), 1)), owner, (np.nan, -1.0))
    for box in range(len(lower)):
        reference = run_onnxruntime(path, _points(rng, n, lower[box], upper[box]))
        slack = 1e-5 * (1.0 + np.abs(reference).max())
        assert np.all(lows[-1][box] <= reference + slack) and np.all(reference <= highs[-1][box] + slack)
        assert np.all(bounds[:, owner == box] <= (reference @ objectives.T).min(axis=0) + slack)
