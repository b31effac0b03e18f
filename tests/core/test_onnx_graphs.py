"""Reading ONNX graphs (branches summed, skips, Slice, Concat, Split, Gather): the network equals the file.

Why: a controller exported from PyTorch or Keras is a DAG as often as a
chain (a plant model beside the policy, residual blocks, normalisation
branches), and every proof is about the network the loader builds. Each
graph here is checked against onnxruntime on the file itself, and the
loader's layers against the depth rule the certificates rely on.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

from certfsm._errors import ModelError
from certfsm._onnx import load_onnx

BENCHMARKS = Path(__file__).resolve().parents[3] / "shared" / "benchmarks"


def _init(name, array, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(array, dtype=dtype), name)


def _model(tmp_path, nodes, inits, n_in=4, n_out=2, opset=13, name="graph.onnx") -> Path:
    graph = helper.make_graph(
        nodes,
        "graph",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n_in])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n_out])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = tmp_path / name
    path.write_bytes(model.SerializeToString())
    return path


def _assert_matches_file(path: Path, network, points: int = 64, tolerance: float = 1e-5) -> None:
    session = onnxruntime.InferenceSession(str(path))
    rng = np.random.default_rng(7)
    x = rng.uniform(-2.0, 2.0, (points, network.n_inputs)).astype(np.float32)
    shape = session.get_inputs()[0].shape
    rows = [
        session.run(
            None, {session.get_inputs()[0].name: r.reshape([1 if not isinstance(d, int) else d for d in shape])}
        )[0].reshape(-1)
        for r in x
    ]
    np.testing.assert_allclose(network.evaluate(x.astype(np.float64)), np.array(rows), rtol=tolerance, atol=tolerance)


def _gemm(name, data, out, rng, n_in, n_out, inits):
    inits += [_init(f"{name}_W", rng.normal(size=(n_out, n_in))), _init(f"{name}_b", rng.normal(size=n_out))]
    return helper.make_node("Gemm", [data, f"{name}_W", f"{name}_b"], [out], name=name, transB=1)


def test_branches_summed_and_a_skip_over_relu_layers(tmp_path):
    rng, inits = np.random.default_rng(1), []
    nodes = [
        _gemm("a", "x", "a", rng, 4, 5, inits),
        helper.make_node("Relu", ["a"], ["ra"], name="ra"),
        _gemm("b", "ra", "b", rng, 5, 5, inits),
        helper.make_node("Relu", ["b"], ["rb"], name="rb"),
        _gemm("c", "x", "c", rng, 4, 5, inits),  # a linear branch from the input
        helper.make_node("Add", ["rb", "c"], ["s"], name="sum"),
        helper.make_node("Sub", ["s", "ra"], ["d"], name="skip"),  # a skip over one ReLU layer
        helper.make_node("Relu", ["d"], ["rd"], name="rd"),
        _gemm("out", "rd", "y0", rng, 5, 2, inits),
        helper.make_node("Add", ["y0", "y0"], ["y"], name="twice"),  # the same tensor on both sides
    ]
    network = load_onnx(_model(tmp_path, nodes, inits))
    assert network.reads == ((0,), (1,), (0, 1, 2), (3,))
    assert [layer.n_out for layer in network.layers] == [5, 5, 5, 2]
    _assert_matches_file(tmp_path / "graph.onnx", network)


def test_slice_concat_split_gather_and_neg(tmp_path):
    rng, inits = np.random.default_rng(2), []
    inits += [
        _init("starts", [1], np.int64),
        _init("ends", [2**62], np.int64),
        _init("axes", [1], np.int64),
        _init("steps", [2], np.int64),
        _init("pick", [3, 0], np.int64),
        _init("halves", [3, 3], np.int64),
        _init("extra", np.ones((1, 1)) * 0.5),
    ]
    nodes = [
        _gemm("a", "x", "a", rng, 4, 6, inits),
        helper.make_node("Relu", ["a"], ["ra"], name="ra"),
        helper.make_node("Split", ["ra", "halves"], ["left", "right"], name="split", axis=1),
        helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["odd"], name="slice"),
        helper.make_node("Gather", ["x", "pick"], ["picked"], name="gather", axis=1),
        helper.make_node("Neg", ["picked"], ["negated"], name="neg"),
        helper.make_node("Concat", ["right", "odd", "negated", "extra"], ["joined"], name="concat", axis=1),
        _gemm("out", "joined", "y1", rng, 8, 2, inits),
        _gemm("other", "left", "y2", rng, 3, 2, inits),
        helper.make_node("Sub", ["y1", "y2"], ["y"], name="difference"),
    ]
    network = load_onnx(_model(tmp_path, nodes, inits))
    assert network.reads == ((0,), (0, 1))
    _assert_matches_file(tmp_path / "graph.onnx", network)


def test_concat_along_the_first_axis_keeps_the_values_in_place(tmp_path):
    rng, inits = np.random.default_rng(3), [_init("shape", [1, 4], np.int64), _init("rows", [2, 2], np.int64)]
    nodes = [
        helper.make_node("Reshape", ["x", "rows"], ["square"], name="square"),
        helper.make_node("Relu", ["square"], ["r"], name="relu"),
        helper.make_node("Concat", ["r", "square"], ["tall"], name="tall", axis=0),  # [4, 2]
        helper.make_node("Slice", ["tall", "one", "three"], ["middle"], name="middle"),  # rows 1 and 2
        helper.make_node("Reshape", ["middle", "shape"], ["flat"], name="flat"),
        _gemm("out", "flat", "y", rng, 4, 2, inits),
    ]
    inits += [_init("one", [1], np.int64), _init("three", [3], np.int64)]
    network = load_onnx(_model(tmp_path, nodes, inits))
    _assert_matches_file(tmp_path / "graph.onnx", network)


def test_a_dynamic_flatten_through_shape_gather_and_concat_folds_to_constants(tmp_path):
    """What older PyTorch exports write for x.view(x.size(0), -1): Shape, Gather, Unsqueeze, Concat, Reshape."""
    rng, inits = np.random.default_rng(5), [_init("zero", 0, np.int64), _init("minus_one", [-1], np.int64)]
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], name="batch", axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes0"], ["batch1"], name="unsqueeze"),
        helper.make_node("Concat", ["batch1", "minus_one"], ["target"], name="target", axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat"], name="flat"),
        _gemm("a", "flat", "a", rng, 4, 3, inits),
        helper.make_node("Relu", ["a"], ["r"], name="relu"),
        _gemm("out", "r", "y", rng, 3, 2, inits),
    ]
    inits.append(_init("axes0", [0], np.int64))
    network = load_onnx(_model(tmp_path, nodes, inits))
    assert network.is_chain and network.hidden_sizes == (3,)
    _assert_matches_file(tmp_path / "graph.onnx", network)


def test_hidden_layers_group_relu_nodes_by_depth_in_node_order(tmp_path):
    """The numbering certificates use: depth = most Relu nodes on a path from the input, itself included."""
    rng, inits = np.random.default_rng(4), []
    nodes = [
        _gemm("p", "x", "p", rng, 4, 3, inits),
        helper.make_node("Relu", ["p"], ["rp"], name="deep1"),
        _gemm("q", "x", "q", rng, 4, 2, inits),
        helper.make_node("Relu", ["q"], ["rq"], name="shallow"),
        _gemm("p2", "rp", "p2", rng, 3, 3, inits),
        helper.make_node("Relu", ["p2"], ["rp2"], name="deep2"),
        helper.make_node("Concat", ["rp2", "rq"], ["both"], name="both", axis=1),
        _gemm("out", "both", "y", rng, 5, 2, inits),
        _gemm("unused", "x", "u", rng, 4, 3, inits),
        helper.make_node("Relu", ["u"], ["ru"], name="dead"),
    ]
    network = load_onnx(_model(tmp_path, nodes, inits))
    assert network.hidden_sizes == (5, 3)  # depth 1: deep1 (3) then shallow (2); depth 2: deep2; dead dropped
    assert network.layers[0].source == "p, q"
    assert network.reads == ((0,), (1,), (1, 2))
    _assert_matches_file(tmp_path / "graph.onnx", network)


def test_a_sum_that_rounds_in_floats_keeps_its_exact_rationals(tmp_path):
    inits = [
        _init("W1", [[1.0, 0, 0, 0]]),
        _init("W2", [[2.0**-30, 0, 0, 0]]),
        _init("b", [1.0]),
        _init("c", [2.0**-60]),
    ]
    nodes = [
        helper.make_node("Gemm", ["x", "W1", "b"], ["u"], name="u", transB=1),
        helper.make_node("Gemm", ["x", "W2", "c"], ["v"], name="v", transB=1),
        helper.make_node("Add", ["u", "v"], ["y"], name="sum"),
    ]
    network = load_onnx(_model(tmp_path, nodes, inits, n_out=1))
    (layer,) = network.layers
    from fractions import Fraction

    assert layer.exact_bias() == (Fraction(1) + Fraction(1, 2**60),)
    assert not layer.is_exact and layer.bias[0] == 1.0


BAD_GRAPHS = [
    (
        "Transpose",
        [helper.make_node("Transpose", ["x"], ["y"], name="t", perm=[1, 0])],
        r"node 't' uses unsupported operator Transpose; ",
    ),
    (
        "MatMul of two tensors",
        [
            helper.make_node("Reshape", ["x", "column"], ["x2"], name="column"),
            helper.make_node("MatMul", ["x", "x2"], ["y"], name="mm"),
        ],
        r"node 'mm' \(MatMul\) multiplies or divides two tensors computed from the input, which is not piecewise "
        r"linear; ",
    ),
    (
        "Gather with computed indices",
        [helper.make_node("Gather", ["x", "x"], ["y"], name="g", axis=1)],
        r"node 'g' \(Gather\) needs constant integer indices for data of shape \[1, 4\]; ",
    ),
    (
        "Gather out of range",
        [helper.make_node("Gather", ["x", "far"], ["y"], name="g", axis=1)],
        r"node 'g' \(Gather\) has indices \[9\] out of range for data of shape \[1, 4\]; ",
    ),
    (
        "Concat of mismatched shapes",
        [helper.make_node("Concat", ["x", "wide"], ["y"], name="c", axis=0)],
        r"node 'c' \(Concat\) joins a tensor of shape \[1, 5\] along axis 0 for data of shape \[1, 4\]; ",
    ),
    (
        "Split that does not add up",
        [helper.make_node("Split", ["x", "bad_split"], ["y", "z"], name="s", axis=1)],
        r"node 's' \(Split\) splits axis 1 into \[1, 1\] for 2 outputs for data of shape \[1, 4\]; ",
    ),
    (
        "Add of tensors of different sizes",
        [
            helper.make_node("Slice", ["x", "zero", "one", "axis1"], ["head"], name="head"),
            helper.make_node("Add", ["x", "head"], ["y"], name="add"),
        ],
        r"node 'add' \(Add\) combines tensors of shapes \[1, 4\] and \[1, 1\]; certfsm needs two tensors of the same size",
    ),
    (
        "an output that does not depend on the input",
        [helper.make_node("Identity", ["wide"], ["y"], name="const")],
        r"output 'y' is a constant that does not depend on it, not a function of input 'x'; ",
    ),
]


@pytest.mark.parametrize("nodes, message", [c[1:] for c in BAD_GRAPHS], ids=[c[0] for c in BAD_GRAPHS])
def test_bad_graphs_are_refused_naming_the_node(tmp_path, nodes, message):
    inits = [
        _init("far", [9], np.int64),
        _init("wide", np.ones((1, 5))),
        _init("bad_split", [1, 1], np.int64),
        _init("zero", [0], np.int64),
        _init("one", [1], np.int64),
        _init("axis1", [1], np.int64),
        _init("column", [4, 1], np.int64),
    ]
    graph = helper.make_graph(
        nodes,
        "bad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "n"])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path / "bad.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(ModelError, match=rf"^{path}: {message}") as caught:
        load_onnx(path)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("folder", ["cersyve", "linearizenn"])
def test_the_vnncomp_graph_benchmarks_load_and_equal_onnxruntime(folder):
    models = sorted((BENCHMARKS / folder / "onnx").glob("*.onnx"))
    if not models:
        pytest.skip(f"{BENCHMARKS / folder} is not here")
    for path in models:
        network = load_onnx(path)
        assert not network.is_chain
        _assert_matches_file(path, network, points=16, tolerance=2e-5)
