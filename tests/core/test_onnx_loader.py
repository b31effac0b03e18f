"""load_onnx / to_onnx / run_onnxruntime: ONNX models in and out of the network IR.

The oracles are independent of the loader: onnxruntime evaluating the
original file, numpy formulas written out by hand for the tiny models, and
the raw initializers read with onnx.numpy_helper.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples
from onnx import TensorProto, helper, numpy_helper

from certfsm._errors import ModelError
from certfsm import AffineLayer, Network
from certfsm._onnx import load_onnx, run_onnxruntime, to_onnx

# The whole ACAS Xu input range (the box of VNN-LIB property 7).
ACAS_LOWER = np.array([-0.328422877, -0.5, -0.5, -0.5, -0.5])
ACAS_UPPER = np.array([0.679857769, 0.5, 0.5, 0.5, 0.5])


def _acasxu_networks(root: Path) -> list[Path]:
    return sorted((root / "onnx").glob("*.onnx"))


def _model_bytes(nodes, inputs, outputs, initializers=(), opset=13, ir_version=8) -> bytes:
    graph = helper.make_graph(nodes, "tiny", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    return model.SerializeToString()


def _write(tmp_path: Path, data: bytes, name: str = "model.onnx") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _float_input(name="x", shape=("N", 3)):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def _init(name, array, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(array, dtype=dtype), name)


def _f32(array) -> np.ndarray:
    """The float64 values of float32-rounded numbers (what a float32 model stores)."""
    return np.asarray(array, dtype=np.float32).astype(np.float64)


def _assert_matches_onnxruntime(network: Network, x: np.ndarray) -> None:
    ours = network.evaluate(x)
    theirs = run_onnxruntime(network, x)
    scale = max(1.0, float(np.max(np.abs(ours))))
    np.testing.assert_allclose(theirs, ours, rtol=1e-4, atol=1e-5 * scale)


# --- ACAS Xu -----------------------------------------------------------------


def test_every_acasxu_network_loads_as_six_hidden_layers_of_fifty(acasxu):
    paths = _acasxu_networks(acasxu)
    assert len(paths) == 17
    for path in paths:
        network = load_onnx(path)
        assert network.n_inputs == 5 and network.n_outputs == 5
        assert network.hidden_sizes == (50,) * 6
        assert network.input_name == "input"
        assert network.input_shape == (1, 1, 1, 5)
        assert network.source_path == str(path.resolve())
        assert network.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
        assert network.layers[0].source == "input_Sub+Operation_1_MatMul+Operation_1_Add"
        assert network.layers[1].source == "Operation_2_MatMul+Operation_2_Add"
        assert network.layers[-1].source == "linear_7_MatMul+linear_7_Add"


def test_acasxu_networks_fold_without_rounding(acasxu):
    """Their only normalisation subtracts zeros, so every layer's floats are its exact weights."""
    for path in _acasxu_networks(acasxu)[:3]:
        assert load_onnx(path).is_exact


def test_acasxu_weights_are_the_stored_float32_values_exactly(acasxu):
    path = _acasxu_networks(acasxu)[0]
    stored = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in onnx.load(path).graph.initializer}
    assert not np.any(stored["input_AvgImg"]), "the folded Sub constant is zero, so the first bias must be exact too"
    network = load_onnx(path)
    names = [(f"Operation_{k}_MatMul_W", f"Operation_{k}_Add_B") for k in range(1, 7)] + [
        ("linear_7_MatMul_W", "linear_7_Add_B")
    ]
    for layer, (weight, bias) in zip(network.layers, names):
        assert np.array_equal(layer.weight, stored[weight].T)
        assert np.array_equal(layer.bias, stored[bias])


def test_acasxu_ir_agrees_with_onnxruntime_on_random_inputs(acasxu):
    rng = np.random.default_rng(20240601)
    for path in _acasxu_networks(acasxu):
        network = load_onnx(path)
        x = rng.uniform(ACAS_LOWER, ACAS_UPPER, size=(200, 5))
        _assert_matches_onnxruntime(network, x)


def test_acasxu_round_trips_through_to_onnx_bit_for_bit(tmp_path, acasxu):
    network = load_onnx(_acasxu_networks(acasxu)[0])
    again = load_onnx(_write(tmp_path, to_onnx(network)))
    x = np.random.default_rng(3).uniform(ACAS_LOWER, ACAS_UPPER, size=(50, 5))
    assert np.array_equal(again.evaluate(x), network.evaluate(x))
    assert again.input_shape == (1, 5)
    exported = network.replace(source_path="", sha256="")
    _assert_matches_onnxruntime(exported, x)


# --- folding -----------------------------------------------------------------


def test_sub_div_normalisation_folds_into_the_first_layer(tmp_path):
    mean, std = [0.5, -1.0, 2.0], [2.0, 0.25, 3.0]
    W1 = np.arange(12, dtype=np.float64).reshape(4, 3) / 7 - 0.8
    b1 = np.array([0.1, -0.2, 0.3, 0.05])
    W2 = np.arange(8, dtype=np.float64).reshape(4, 2) / 5 - 0.7
    b2 = np.array([0.01, -0.02])
    nodes = [
        helper.make_node("Sub", ["x", "mean"], ["centred"], name="normalise_sub"),
        helper.make_node("Div", ["centred", "std"], ["scaled"], name="normalise_div"),
        helper.make_node("Gemm", ["scaled", "W1", "b1"], ["h"], name="dense1", transB=1),
        helper.make_node("Relu", ["h"], ["a"], name="relu1"),
        helper.make_node("MatMul", ["a", "W2"], ["m"], name="dense2_matmul"),
        helper.make_node("Add", ["m", "b2"], ["y"], name="dense2_add"),
    ]
    inits = [_init("mean", mean), _init("std", std), _init("W1", W1), _init("b1", b1), _init("W2", W2), _init("b2", b2)]
    data = _model_bytes(nodes, [_float_input()], [_float_input("y", ("N", 2))], inits)
    network = load_onnx(_write(tmp_path, data))

    assert [layer.source for layer in network.layers] == [
        "normalise_sub+normalise_div+dense1",
        "dense2_matmul+dense2_add",
    ]
    assert network.input_shape == (1, 3)
    x = np.random.default_rng(1).uniform(-3, 3, size=(100, 3))
    expected = np.maximum(((x - _f32(mean)) / _f32(std)) @ _f32(W1).T + _f32(b1), 0) @ _f32(W2) + _f32(b2)
    np.testing.assert_allclose(network.evaluate(x), expected, rtol=1e-12, atol=1e-12)
    _assert_matches_onnxruntime(network, x)


def test_a_fold_that_rounds_keeps_the_layers_exact_rational_weights(tmp_path):
    """(x - mean) / 3 folded into a Gemm: 1/3 has no float64, so the layer keeps its exact rationals.

    The exact weights are those of the ONNX function read exactly, the
    floats are their nearest values, and the recorded error bounds the gap.
    """
    from fractions import Fraction

    from certfsm.verify import exact_outputs

    mean, std = [0.5, -1.0], [3.0, 0.25]
    W1, b1 = _f32([[0.7, -1.3], [2.1, 0.4]]), _f32([0.1, -0.2])
    nodes = [
        helper.make_node("Sub", ["x", "mean"], ["centred"], name="normalise_sub"),
        helper.make_node("Div", ["centred", "std"], ["scaled"], name="normalise_div"),
        helper.make_node("Gemm", ["scaled", "W1", "b1"], ["y"], name="dense1", transB=1),
    ]
    inits = [_init("mean", mean), _init("std", std), _init("W1", W1), _init("b1", b1)]
    data = _model_bytes(nodes, [_float_input(shape=("N", 2))], [_float_input("y", ("N", 2))], inits)
    network = load_onnx(_write(tmp_path, data))
    (layer,) = network.layers
    assert not layer.is_exact and not network.is_exact
    F = [[Fraction(float(w)) for w in row] for row in W1]
    means, stds = [Fraction(v) for v in mean], [Fraction(v) for v in std]
    expected_weight = tuple(tuple(F[j][i] / stds[i] for i in range(2)) for j in range(2))
    expected_bias = tuple(
        Fraction(float(b1[j])) - sum(F[j][i] * means[i] / stds[i] for i in range(2)) for j in range(2)
    )
    assert layer.exact_weight() == expected_weight and layer.exact_bias() == expected_bias
    weight_error, bias_error = layer.rounding_error()
    for j in range(2):
        assert abs(Fraction(float(layer.bias[j])) - expected_bias[j]) <= Fraction(float(bias_error[j]))
        for i in range(2):
            assert abs(Fraction(float(layer.weight[j, i])) - expected_weight[j][i]) <= Fraction(
                float(weight_error[j, i])
            )
    x = np.array([0.25, -0.75])
    exact = exact_outputs(network, x)
    xs = [Fraction(float(v)) for v in x]
    assert exact == [
        sum(w * (v - m) / s for w, v, m, s in zip(F[j], xs, means, stds)) + Fraction(float(b1[j])) for j in range(2)
    ]


def test_a_fold_that_does_not_round_stays_float(tmp_path):
    """Subtracting a zero mean and dividing by a power of two is exact in float64: no rationals are kept."""
    nodes = [
        helper.make_node("Sub", ["x", "mean"], ["centred"], name="normalise_sub"),
        helper.make_node("Div", ["centred", "std"], ["scaled"], name="normalise_div"),
        helper.make_node("Gemm", ["scaled", "W1", "b1"], ["y"], name="dense1", transB=1),
    ]
    inits = [
        _init("mean", [0.0, 0.0]),
        _init("std", [2.0, 0.5]),
        _init("W1", [[0.7, -1.3], [2.1, 0.4]]),
        _init("b1", [0.1, -0.2]),
    ]
    data = _model_bytes(nodes, [_float_input(shape=("N", 2))], [_float_input("y", ("N", 2))], inits)
    network = load_onnx(_write(tmp_path, data))
    assert network.is_exact and network.layers[0].rounding_error() is None


def test_constants_on_either_side_of_add_sub_mul(tmp_path):
    # y = relu(2.5 * (c - x) + d) then a Gemm to 2 outputs
    c, d = [1.0, 2.0, 3.0], [-0.5, 0.5, 0.0]
    W = np.array([[1.0, -2.0, 0.5], [0.25, 1.0, -1.0]])
    nodes = [
        helper.make_node("Sub", ["c", "x"], ["s"], name="flip"),
        helper.make_node("Mul", ["k", "s"], ["m"], name="scale"),
        helper.make_node("Add", ["d", "m"], ["a"], name="shift"),
        helper.make_node("Relu", ["a"], ["r"], name="relu"),
        helper.make_node("Gemm", ["r", "W"], ["y"], name="out", transB=1),
    ]
    inits = [_init("c", c), _init("k", 2.5), _init("d", d), _init("W", W)]
    network = load_onnx(_write(tmp_path, _model_bytes(nodes, [_float_input()], [_float_input("y", ("N", 2))], inits)))

    assert [layer.source for layer in network.layers] == ["flip+scale+shift", "out"]
    x = np.random.default_rng(2).uniform(-4, 4, size=(100, 3))
    expected = np.maximum(2.5 * (_f32(c) - x) + _f32(d), 0) @ _f32(W).T
    np.testing.assert_allclose(network.evaluate(x), expected, rtol=1e-12, atol=1e-12)
    _assert_matches_onnxruntime(network, x)


@pytest.mark.parametrize("trans_b, alpha, beta", [(0, 1.0, 1.0), (1, 1.0, 1.0), (0, 0.5, 2.0), (1, -1.5, 0.25)])
def test_gemm_transb_alpha_beta(tmp_path, trans_b, alpha, beta):
    rng = np.random.default_rng(5)
    weight = rng.normal(size=(3, 4))  # (n_in, n_out) as the product x @ B
    bias = rng.normal(size=4)
    shift = rng.normal(size=3)
    stored = weight.T if trans_b else weight
    nodes = [
        helper.make_node("Add", ["x", "shift"], ["shifted"], name="shift"),
        helper.make_node("Gemm", ["shifted", "B", "C"], ["y"], name="g", transB=trans_b, alpha=alpha, beta=beta),
    ]
    inits = [_init("shift", shift), _init("B", stored), _init("C", bias)]
    network = load_onnx(_write(tmp_path, _model_bytes(nodes, [_float_input()], [_float_input("y", ("N", 4))], inits)))

    assert [layer.source for layer in network.layers] == ["shift+g"]
    x = rng.uniform(-2, 2, size=(60, 3))
    expected = alpha * ((x + _f32(shift)) @ _f32(weight)) + beta * _f32(bias)
    np.testing.assert_allclose(network.evaluate(x), expected, rtol=1e-12, atol=1e-12)
    _assert_matches_onnxruntime(network, x)


def test_shape_operators_and_constant_nodes_keep_one_feature_vector(tmp_path):
    # input [1, 1, 4] -> Squeeze(axis 1) -> Unsqueeze(axis 0) -> Reshape to [1, 4] -> MatMul
    W = np.array([[1.0, 0.0], [0.0, 2.0], [-1.0, 1.0], [0.5, 0.5]])
    nodes = [
        helper.make_node(
            "Constant", [], ["axes1"], name="axes1", value=numpy_helper.from_array(np.array([1], np.int64))
        ),
        helper.make_node("Squeeze", ["x", "axes1"], ["s"], name="squeeze"),
        helper.make_node("Constant", [], ["axes0"], name="axes0", value_ints=[0]),
        helper.make_node("Unsqueeze", ["s", "axes0"], ["u"], name="unsqueeze"),
        helper.make_node(
            "Constant", [], ["target"], name="target", value=numpy_helper.from_array(np.array([1, -1], np.int64))
        ),
        helper.make_node("Reshape", ["u", "target"], ["f"], name="reshape"),
        helper.make_node("Identity", ["f"], ["i"], name="identity"),
        helper.make_node("MatMul", ["i", "W"], ["y"], name="dense"),
    ]
    data = _model_bytes(nodes, [_float_input("x", (1, 1, 4))], [_float_input("y", (1, 2))], [_init("W", W)])
    network = load_onnx(_write(tmp_path, data))

    assert network.input_shape == (1, 1, 4)
    assert [layer.source for layer in network.layers] == ["dense"]
    x = np.random.default_rng(4).uniform(-1, 1, size=(20, 4))
    np.testing.assert_array_equal(network.evaluate(x), x @ W)
    _assert_matches_onnxruntime(network, x)


def test_relu_at_the_output_gets_an_identity_output_layer(tmp_path):
    W = np.array([[1.0, -1.0, 0.5], [-2.0, 0.25, 1.0]])
    nodes = [
        helper.make_node("Gemm", ["x", "W"], ["h"], name="dense", transB=1),
        helper.make_node("Relu", ["h"], ["y"], name="final_relu"),
    ]
    network = load_onnx(
        _write(tmp_path, _model_bytes(nodes, [_float_input()], [_float_input("y", ("N", 2))], [_init("W", W)]))
    )

    assert [layer.source for layer in network.layers] == ["dense", "identity output layer"]
    assert np.array_equal(network.layers[1].weight, np.eye(2)) and not np.any(network.layers[1].bias)
    x = np.random.default_rng(6).uniform(-1, 1, size=(50, 3))
    np.testing.assert_array_equal(network.evaluate(x), np.maximum(x @ W.T, 0))
    _assert_matches_onnxruntime(network, x)


# --- bad models --------------------------------------------------------------


def _dense(name="dense", data_input="x", output="y"):
    return helper.make_node("Gemm", [data_input, "W"], [output], name=name, transB=1)


def _tiny(nodes, inits=None, inputs=None, outputs=None) -> bytes:
    inits = [_init("W", np.ones((2, 3)))] if inits is None else inits
    return _model_bytes(nodes, inputs or [_float_input()], outputs or [_float_input("y", ("N", 2))], inits)


BAD_MODELS = [
    (
        "sigmoid inside",
        lambda: _tiny(
            [
                helper.make_node("Sigmoid", ["x"], ["s"], name="n3"),
                _dense(data_input="s"),
            ]
        ),
        r"node 'n3' uses unsupported operator Sigmoid; certfsm supports Gemm, MatMul, Add, Sub, Mul, Div, Relu, ",
    ),
    (
        "final sigmoid",
        lambda: _tiny([_dense(output="h"), helper.make_node("Sigmoid", ["h"], ["y"], name="n3")]),
        r"node 'n3' is a final Sigmoid, which is not piecewise linear; drop it and export the scores before it "
        r"\(the Sigmoid keeps their order, so argmax and argmin decide the same; .*confidence_gate\.probability",
    ),
    (
        "final softmax",
        lambda: _tiny([_dense(output="h"), helper.make_node("Softmax", ["h"], ["y"], name="probabilities")]),
        r"node 'probabilities' is a final Softmax, .* drop it .* give confidence_gate\.probability, which certfsm "
        r"proves as an exact logit margin\)$",
    ),
    (
        "final log-softmax",
        lambda: _tiny([_dense(output="h"), helper.make_node("LogSoftmax", ["h"], ["y"], name="logp")]),
        r"node 'logp' is a final LogSoftmax, .* drop it ",
    ),
    (
        "softmax before a layer",
        lambda: _tiny(
            [
                helper.make_node("Softmax", ["x"], ["p"], name="early"),
                _dense(data_input="p"),
            ]
        ),
        r"node 'early' uses unsupported operator Softmax; certfsm supports Gemm, ",
    ),
    (
        "two inputs",
        lambda: _tiny(
            [_dense(output="h"), helper.make_node("Add", ["h", "b"], ["y"], name="add")],
            inputs=[_float_input("x"), _float_input("b", ("N", 2))],
        ),
        r"has 2 inputs \('x', 'b'\); certfsm supports networks with exactly one input tensor$",
    ),
    (
        "two outputs",
        lambda: _tiny(
            [_dense(output="h"), helper.make_node("Relu", ["h"], ["y"], name="relu")],
            outputs=[_float_input("h", ("N", 2)), _float_input("y", ("N", 2))],
        ),
        r"has 2 outputs \('h', 'y'\); certfsm supports networks with exactly one output tensor$",
    ),
    (
        "nan initializer",
        lambda: _tiny([_dense()], inits=[_init("W", [[1.0, 2.0, 3.0], [4.0, 5.0, np.nan]])]),
        r"initializer 'W' used by node 'dense' holds nan at index \[1, 2\]; certfsm needs finite weights",
    ),
    (
        "inf initializer",
        lambda: _tiny([_dense()], inits=[_init("W", [[1.0, -np.inf, 3.0], [4.0, 5.0, 6.0]])]),
        r"initializer 'W' used by node 'dense' holds -inf at index \[0, 1\]; certfsm needs finite weights",
    ),
    (
        "data times data",
        lambda: _tiny([_dense(output="h"), helper.make_node("Mul", ["h", "h"], ["y"], name="square")]),
        r"node 'square' \(Mul\) multiplies or divides two tensors computed from the input, which is not piecewise "
        r"linear; ",
    ),
    (
        "constant divided by data",
        lambda: _tiny(
            [_dense(output="h"), helper.make_node("Div", ["one", "h"], ["y"], name="reciprocal")],
            inits=[_init("W", np.ones((2, 3))), _init("one", 1.0)],
        ),
        r"node 'reciprocal' \(Div\) divides a constant by the data, which is not linear; ",
    ),
    (
        "division by zero",
        lambda: _tiny(
            [_dense(output="h"), helper.make_node("Div", ["h", "s"], ["y"], name="norm")],
            inits=[_init("W", np.ones((2, 3))), _init("s", [1.0, 0.0])],
        ),
        r"node 'norm' \(Div\) divides by zero in constant 's'; ",
    ),
    (
        "weight on the left",
        lambda: _tiny(
            [helper.make_node("MatMul", ["M", "x"], ["y"], name="left")],
            inits=[_init("M", np.ones((2, 1)))],
            inputs=[_float_input("x", (1, 3))],
        ),
        r"node 'left' \(MatMul\) multiplies a constant by the data from the left; ",
    ),
    (
        "transA",
        lambda: _tiny(
            [helper.make_node("Gemm", ["x", "W"], ["y"], name="g", transA=1, transB=1)],
            inputs=[_float_input("x", (3, 1))],
        ),
        r"node 'g' \(Gemm\) has transA=1; certfsm supports Gemm with transA=0",
    ),
    (
        "broadcast grows the vector",
        lambda: _tiny(
            [_dense(output="h"), helper.make_node("Add", ["h", "grid"], ["y"], name="spread")],
            inits=[_init("W", np.ones((2, 3))), _init("grid", np.zeros((4, 1)))],
        ),
        r"node 'spread' \(Add\) combines the data of shape \[1, 2\] with a constant of shape \[4, 1\]; ",
    ),
    (
        "constant-only arithmetic",
        lambda: _tiny(
            [
                helper.make_node("Add", ["W", "W"], ["W2"], name="double"),
                helper.make_node("Gemm", ["x", "W2"], ["y"], name="g", transB=1),
            ]
        ),
        r"node 'double' \(Add\) computes on constants only; ",
    ),
    (
        "checker",
        lambda: _tiny([helper.make_node("Gemm", ["x", "missing"], ["y"], name="g", transB=1)]),
        r"is not a valid ONNX model \(onnx\.checker: .*\); re-export it so that onnx\.checker\.check_model passes$",
    ),
    # what onnx.checker passes but fuzzing showed the loader must refuse itself
    (
        "unknown data type",
        lambda: _tiny([_dense()], inits=[_retyped(_init("W", np.ones((2, 3))), 119)]),
        r"tensor 'W' has data_type 119 \(not an ONNX data type\); certfsm reads FLOAT, DOUBLE, FLOAT16, INT64, ",
    ),
    (
        "dims that the data does not fill",
        lambda: _tiny([_dense()], inits=[_redimensioned(_init("W", np.ones((2, 3))), [2, 2])]),
        r"tensor 'W' declares dims \[2, 2\] \(4 values\), which its stored data does not fill exactly \(cannot "
        r"reshape array of size 6 into shape \(2,2\)\); the file is damaged, re-export the model$",
    ),
    (
        "input wider than a controller",
        lambda: _tiny([_dense()], inputs=[_float_input("x", ("N", 10**12))]),
        r"input 'x' declares shape \[1, 1000000000000\], 1000000000000 features, more than the 1024 certfsm supports ",
    ),
    (
        "layer wider than a controller",
        lambda: _tiny([_dense()], inits=[_init("W", np.ones((2000, 3)))]),
        r"node 'dense' gives 2000 values, more than the 1024 a layer may have in certfsm ",
    ),
    (
        "zero outputs",
        lambda: _tiny([_dense()], inits=[_init("W", np.ones((0, 3)))]),
        r"dense gives 0 values, so the network would have a layer without neurons or no outputs; fix the model's ",
    ),
    (
        "integer weights",
        lambda: _tiny([_dense()], inits=[_init("W", np.ones((2, 3)), dtype=np.int64)]),
        r"initializer 'W' used by node 'dense' holds int64 values; certfsm needs float weights ",
    ),
    (
        "name that is not UTF-8",
        lambda: _tiny([_dense()]).replace(b"\x1a\x05dense", b"\x1a\x05\xa3ense"),
        r"node #0 has the name b'\\xa3ense', which is not UTF-8 text \(ONNX names are UTF-8\); ",
    ),
]


def _retyped(tensor: onnx.TensorProto, data_type: int) -> onnx.TensorProto:
    tensor.data_type = data_type
    return tensor


def _redimensioned(tensor: onnx.TensorProto, dims: list[int]) -> onnx.TensorProto:
    del tensor.dims[:]
    tensor.dims.extend(dims)
    return tensor


@pytest.mark.parametrize("build, message", [case[1:] for case in BAD_MODELS], ids=[case[0] for case in BAD_MODELS])
def test_bad_models_are_rejected_with_one_line_messages(tmp_path, build, message):
    path = _write(tmp_path, build())
    with pytest.raises(ModelError, match=rf"^{re.escape(str(path))}: {message}") as caught:
        load_onnx(path)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", r"is empty; expected an ONNX model, re-export it$"),
        (
            b"this is not a protobuf at all \x00\xff\xfe",
            r"is not an ONNX model \(.*\); the file is truncated, corrupt or in another format, re-export it$",
        ),
        (None, r"is not an ONNX model \(.*\); the file is truncated, corrupt or in another format, re-export it$"),
    ],
    ids=["empty", "garbage", "truncated"],
)
def test_unreadable_bytes(tmp_path, data, message):
    if data is None:
        whole = _tiny([_dense()])
        data = whole[: len(whole) // 2]
    path = _write(tmp_path, data)
    with pytest.raises(ModelError, match=rf"^{re.escape(str(path))}: {message}"):
        load_onnx(path)


def test_missing_file(tmp_path):
    path = tmp_path / "absent.onnx"
    with pytest.raises(ModelError, match=rf"^{re.escape(str(path))}: no such file; give the path of an \.onnx model$"):
        load_onnx(path)


# --- export and onnxruntime ----------------------------------------------------


def _random_network(rng: np.random.Generator, sizes: list[int]) -> Network:
    layers = [
        AffineLayer(_f32(rng.normal(size=(n_out, n_in))), _f32(rng.normal(size=n_out)), f"layer {k}")
        for k, (n_in, n_out) in enumerate(zip(sizes, sizes[1:]))
    ]
    return Network(tuple(layers), input_name="features")


@settings(max_examples=examples(25), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), sizes=st.lists(st.integers(1, 6), min_size=2, max_size=5))
def test_to_onnx_round_trip_evaluates_identically(tmp_path_factory, seed, sizes):
    rng = np.random.default_rng(seed)
    network = _random_network(rng, sizes)
    path = _write(tmp_path_factory.mktemp("export"), to_onnx(network))
    again = load_onnx(path)
    x = rng.uniform(-3, 3, size=(30, sizes[0]))
    assert again.input_name == "features"
    assert [layer.source for layer in again.layers] == [f"layer{k}" for k in range(len(sizes) - 1)]
    assert np.array_equal(again.evaluate(x), network.evaluate(x))
    _assert_matches_onnxruntime(network, x)
    _assert_matches_onnxruntime(again, x)


def test_to_onnx_rounds_float64_weights_to_float32(tmp_path):
    network = Network((AffineLayer(np.array([[0.1, 1 / 3]]), np.array([0.2]), "exact float64"),))
    again = load_onnx(_write(tmp_path, to_onnx(network)))
    assert again.layers[0].weight.tolist() == [[float(np.float32(0.1)), float(np.float32(1 / 3))]]
    assert again.layers[0].bias.tolist() == [float(np.float32(0.2))]
    exported = onnx.load_model_from_string(to_onnx(network))
    assert exported.graph.node[0].doc_string == "exact float64"


def test_run_onnxruntime_single_row_and_bad_width():
    network = _random_network(np.random.default_rng(8), [3, 4, 2])
    x = np.array([0.5, -1.0, 2.0])
    single = run_onnxruntime(network, x)
    assert single.shape == (2,)
    np.testing.assert_allclose(single, network.evaluate(x), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"^x has shape \(2, 4\); expected \(N, 3\) or \(3,\)$"):
        run_onnxruntime(network, np.zeros((2, 4)))


def test_run_onnxruntime_refuses_a_file_changed_since_loading(tmp_path):
    first = _random_network(np.random.default_rng(9), [3, 2])
    path = _write(tmp_path, to_onnx(first))
    network = load_onnx(path)
    path.write_bytes(to_onnx(_random_network(np.random.default_rng(10), [3, 2])))
    with pytest.raises(
        ModelError,
        match=rf"^{re.escape(str(path.resolve()))}: changed since the network was loaded \(sha256 is now [0-9a-f]{{64}}, was {network.sha256}\); reload it with load_onnx$",
    ):
        run_onnxruntime(network, np.zeros((1, 3)))


def test_weights_in_an_external_file_are_refused_with_both_fixes_before_the_checker(tmp_path):
    """PyTorch's exporter writes weights beside the model by default; certfsm hashes the model file alone."""
    model = onnx.load_model_from_string(_tiny([_dense()]))
    path = tmp_path / "controller.onnx"
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True, size_threshold=0)
    assert len(list(tmp_path.iterdir())) == 2  # the model and the file that holds its weights
    with pytest.raises(ModelError) as caught:
        load_onnx(path)
    assert re.fullmatch(
        rf"{re.escape(str(path))}: tensor 'W' keeps its data in an external file, and certfsm hashes the model file "
        r"alone, so the weights must be inside it; export with torch\.onnx\.export\(\.\.\., external_data=False\), "
        r"or re-save with onnx\.save_model\(onnx\.load\(path\), path, save_as_external_data=False\)",
        str(caught.value),
    )
