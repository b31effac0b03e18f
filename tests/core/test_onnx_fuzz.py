"""load_onnx under fuzzing: every mutated model gives a Network or one ModelError line, within seconds.

Byte damage alone mostly stops at the protobuf decoder or onnx.checker,
so the models are first damaged field by field where the checker does not
look (dims that the data does not fill, unknown data types, wide or huge
declared inputs, names that are not UTF-8, rewired, dropped or repeated
nodes, odd attribute values), then sometimes damaged byte by byte too.
The seeds are the shipped example models and a tiny model with every
shape operator and Constant node the loader folds.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from certfsm._errors import ModelError
from certfsm.examples import example_spec_path
from parse_contract import FAST, SLOW, check_bytes, mutated, parser_fixture


def _shape_ops_model() -> bytes:
    def constant(name, values):
        return helper.make_node(
            "Constant", [], [name], name=name, value=numpy_helper.from_array(np.array(values, np.int64))
        )

    nodes = [
        helper.make_node("Flatten", ["x"], ["flat"], name="flatten", axis=1),
        constant("target", [1, -1]),
        helper.make_node("Reshape", ["flat", "target"], ["row"], name="reshape"),
        constant("axes", [0]),
        helper.make_node("Unsqueeze", ["row", "axes"], ["lifted"], name="unsqueeze"),
        helper.make_node("Squeeze", ["lifted", "axes"], ["row2"], name="squeeze"),
        helper.make_node("Gemm", ["row2", "W", "c"], ["h"], name="gemm", transB=1, alpha=0.5),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "M"], ["m"], name="matmul"),
        helper.make_node("Mul", ["m", "scale"], ["s"], name="mul"),
        helper.make_node("Identity", ["s"], ["y"], name="identity"),
    ]
    initializers = [
        numpy_helper.from_array(np.array(v, np.float32), n)
        for n, v in [("W", [[1, 2, 3], [-1, 0.5, 0.25]]), ("c", [0.1, -0.2]), ("M", [[1, 0], [0.3, 1]]), ("scale", 3.0)]
    ]
    graph = helper.make_graph(
        nodes,
        "shapes",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


SEEDS = [(example_spec_path(name).parent / f"{name}.onnx").read_bytes() for name in ("coadapt", "coadapt_unsafe")]
SEEDS.append(_shape_ops_model())
SIZES = st.sampled_from([-1, 0, 1, 2, 3, 5, 8, 64, 1025, 10**12, 2**62])


@st.composite
def _field_damage(draw) -> bytes:
    """A seed with one to three fields changed where onnx.checker does not look."""
    model = onnx.load_model_from_string(draw(st.sampled_from(SEEDS)))
    graph = model.graph
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(
            st.sampled_from(
                ["dims", "data_type", "input_dim", "rewire", "drop", "repeat", "op_type", "attribute", "outputs"]
            )
        )
        tensor = draw(st.sampled_from(list(graph.initializer)))
        node = draw(st.sampled_from(list(graph.node))) if graph.node else None
        if kind == "dims":
            del tensor.dims[:]
            tensor.dims.extend(draw(st.lists(SIZES, max_size=3)))
        elif kind == "data_type":
            tensor.data_type = draw(st.sampled_from([0, 2, 6, 7, 8, 9, 10, 11, 16, 119, 2**31 - 1]))
        elif kind == "input_dim":
            dims = graph.input[0].type.tensor_type.shape.dim
            dims[draw(st.integers(0, len(dims) - 1))].dim_value = draw(SIZES.filter(lambda v: v >= 0))
        elif kind == "rewire" and node is not None and node.input:
            names = [t.name for t in graph.initializer] + [n.output[0] for n in graph.node] + ["x", "probes", ""]
            node.input[draw(st.integers(0, len(node.input) - 1))] = draw(st.sampled_from(names))
        elif kind == "drop" and node is not None:
            graph.node.remove(node)
        elif kind == "repeat" and node is not None:
            graph.node.insert(draw(st.integers(0, len(graph.node))), node)
        elif kind == "op_type" and node is not None:
            node.op_type = draw(
                st.sampled_from(
                    [
                        "Relu",
                        "Gemm",
                        "MatMul",
                        "Add",
                        "Div",
                        "Reshape",
                        "Flatten",
                        "Squeeze",
                        "Unsqueeze",
                        "Identity",
                        "Constant",
                        "Sigmoid",
                    ]
                )
            )
        elif kind == "attribute" and node is not None:
            node.attribute.append(
                helper.make_attribute(
                    draw(st.sampled_from(["transA", "transB", "axis", "allowzero", "alpha", "beta"])),
                    draw(st.sampled_from([0, 1, -1, 7, 10**12, 0.0, 1e300])),
                )
            )
        elif kind == "outputs":
            del graph.output[draw(st.integers(0, 1)) :]
    data = model.SerializeToString()
    name = draw(st.sampled_from([n.name for n in graph.node if n.name] or [""])).encode()
    if name and draw(st.booleans()):  # a name that is not UTF-8, as a flipped byte makes it
        data = data.replace(name, b"\xa3" + name[1:], 1)
    return data


FILES = st.one_of(
    _field_damage(),
    mutated(
        SEEDS,
        [b"\x00", b"\xff", b"\x80" * 9, b"\xff" * 9 + b"\x01", b"Relu", b"Gemm"],
        [(b"\x0a\x02", b""), (b"\x12\x00", b"")],
        is_text=False,
    ),
    _field_damage().flatmap(lambda damaged: mutated([damaged], [b"\x00", b"\xff"], [(b"\x0a", b"")], is_text=False)),
)


parse = parser_fixture("certfsm._onnx.load_onnx")


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    return tmp_path_factory.mktemp("onnx-fuzz") / "case.onnx"


def _check(parse, case, data: bytes) -> None:
    check_bytes(parse, case, data, ModelError, "Network")


@pytest.mark.slow
def test_the_seeds_load(parse, case):
    for seed in SEEDS:
        _check(parse, case, seed)


@FAST
@given(data=FILES)
def test_mutated_models_load_or_give_one_line(parse, case, data):
    _check(parse, case, data)


@pytest.mark.slow
@SLOW
@given(data=FILES)
def test_many_mutated_models_load_or_give_one_line(parse, case, data):
    _check(parse, case, data)
