"""Small float32 ReLU networks as plain layer lists, and the many ONNX files that can hold one.

Why: the soundness cases need (1) networks assembled from a random part and
a planted part, and (2) the same kind of network written in each ONNX
encoding certfsm reads (Gemm with transB 0/1 and alpha/beta, MatMul+Add,
a leading Sub/Div/Mul normalisation, Flatten/Reshape around the data),
because each encoding is folded by a different piece of certfsm's loader.

A network is a tuple of layers ``(weight[out, in], bias[out])`` in float32
with a ReLU after every layer but the last. Whatever float32 values end up
in the file are the network: the oracle reads the file, never this list.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

Layer = tuple[np.ndarray, np.ndarray]

LAYER_ENCODINGS = ("gemm_transB", "gemm", "gemm_scaled", "matmul_add")
NORMALISATIONS = ("none", "sub_div", "sub_mul", "mul_add")
WRAPPERS = ("plain", "flatten", "reshape")


def layer(weight, bias) -> Layer:
    return np.asarray(weight, dtype=np.float32), np.asarray(bias, dtype=np.float32)


def random_layers(rng: np.random.Generator, sizes: list[int], grid: float | None = None) -> tuple[Layer, ...]:
    """Dense layers of the given widths; weights on a multiple of `grid` when given (few bits, exact sums)."""
    layers = []
    for n_in, n_out in zip(sizes, sizes[1:]):
        weight = rng.normal(0.0, 1.0 / np.sqrt(n_in), (n_out, n_in))
        bias = rng.normal(0.0, 0.3, n_out)
        if grid is not None:
            weight, bias = np.round(weight / grid) * grid, np.round(bias / grid) * grid
        layers.append(layer(weight, bias))
    return tuple(layers)


def identity_layers(width: int, count: int) -> tuple[Layer, ...]:
    """ReLU layers that pass non-negative values through unchanged (after a ReLU every value is)."""
    return tuple(layer(np.eye(width), np.zeros(width)) for _ in range(count))


def join(base: tuple[Layer, ...], planted: tuple[Layer, ...], readout: np.ndarray) -> tuple[Layer, ...]:
    """`base` with a planted part beside it: outputs = base outputs + readout @ (planted's last hidden layer).

    Both parts read the same inputs; `planted` is hidden layers only and
    `readout` ([n_out, width of its last layer]) adds them to the outputs.
    The shallower part is lengthened with identity layers after its last
    hidden layer, which keeps its function.
    """
    base_hidden, (out_weight, out_bias) = list(base[:-1]), base[-1]
    planted = list(planted)
    depth = max(len(base_hidden), len(planted))
    base_hidden += identity_layers(base_hidden[-1][0].shape[0], depth - len(base_hidden))
    planted += identity_layers(planted[-1][0].shape[0], depth - len(planted))
    layers = [layer(np.vstack([base_hidden[0][0], planted[0][0]]), np.concatenate([base_hidden[0][1], planted[0][1]]))]
    for (bw, bb), (pw, pb) in zip(base_hidden[1:], planted[1:]):
        weight = np.zeros((bw.shape[0] + pw.shape[0], bw.shape[1] + pw.shape[1]))
        weight[: bw.shape[0], : bw.shape[1]], weight[bw.shape[0] :, bw.shape[1] :] = bw, pw
        layers.append(layer(weight, np.concatenate([bb, pb])))
    layers.append(layer(np.hstack([out_weight, np.asarray(readout, dtype=np.float32)]), out_bias))
    return tuple(layers)


@dataclass(frozen=True)
class Encoding:
    """How to write a network: one encoding per layer, an input normalisation, a shape wrapper.

    `normalisation` holds the constants of the leading nodes: for
    ``sub_div`` (mean, std), ``sub_mul`` (mean, scale), ``mul_add`` (scale,
    shift), each a float32 vector over the inputs.
    """

    layers: tuple[str, ...] = ()
    normalisation: str = "none"
    constants: tuple[np.ndarray, ...] = ()
    wrapper: str = "plain"
    alpha_beta: tuple[float, float] = (1.0, 1.0)


def to_onnx(layers: tuple[Layer, ...], encoding: Encoding = Encoding(), name: str = "net") -> onnx.ModelProto:
    """An opset-13 ONNX model computing the network after the encoding's normalisation."""
    n_in, n_out = layers[0][0].shape[1], layers[-1][0].shape[0]
    writer = _Writer()
    input_shape = {"plain": [1, n_in], "flatten": [1, 1, n_in], "reshape": [n_in]}[encoding.wrapper]
    current = "X"
    if encoding.wrapper == "flatten":
        current = writer.node("Flatten", [current], axis=1)
    elif encoding.wrapper == "reshape":
        current = writer.node("Reshape", [current, writer.constant(np.array([1, -1], dtype=np.int64))])
    if encoding.normalisation != "none":
        first, second = encoding.constants
        ops = {"sub_div": ("Sub", "Div"), "sub_mul": ("Sub", "Mul"), "mul_add": ("Mul", "Add")}[encoding.normalisation]
        current = writer.node(ops[0], [current, writer.constant(first)])
        current = writer.node(ops[1], [current, writer.constant(second)])
    kinds = encoding.layers or ("gemm_transB",) * len(layers)
    for index, ((weight, bias), kind) in enumerate(zip(layers, kinds)):
        current = writer.dense(current, weight, bias, kind, encoding.alpha_beta)
        if index < len(layers) - 1:
            current = writer.node("Relu", [current])
    output_shape = [1, n_out]
    if encoding.wrapper == "reshape":
        current = writer.node("Reshape", [current, writer.constant(np.array([-1], dtype=np.int64))])
        output_shape = [n_out]
    writer.nodes[-1].output[0] = "Y"
    graph = helper.make_graph(
        writer.nodes,
        name,
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, input_shape)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, output_shape)],
        writer.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="certfsm-tests")
    model.ir_version = 7
    onnx.checker.check_model(model)
    return model


class _Writer:
    """Collects nodes and initializers under fresh names."""

    def __init__(self) -> None:
        self.nodes: list = []
        self.initializers: list = []

    def constant(self, value: np.ndarray) -> str:
        name = f"c{len(self.initializers)}"
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op: str, inputs: list[str], **attributes) -> str:
        output = f"t{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, inputs, [output], name=f"{op.lower()}{len(self.nodes)}", **attributes))
        return output

    def dense(self, current: str, weight: np.ndarray, bias: np.ndarray, kind: str, alpha_beta) -> str:
        if kind == "gemm_transB":
            return self.node("Gemm", [current, self.constant(weight), self.constant(bias)], transB=1)
        if kind == "gemm":
            return self.node("Gemm", [current, self.constant(weight.T.copy()), self.constant(bias)])
        if kind == "gemm_scaled":
            alpha, beta = alpha_beta
            scaled_weight = (weight.T / np.float32(alpha)).astype(np.float32)
            scaled_bias = (bias / np.float32(beta)).astype(np.float32)
            return self.node(
                "Gemm",
                [current, self.constant(scaled_weight), self.constant(scaled_bias)],
                alpha=float(alpha),
                beta=float(beta),
            )
        if kind == "matmul_add":
            product = self.node("MatMul", [current, self.constant(weight.T.copy())])
            return self.node("Add", [product, self.constant(bias)])
        raise ValueError(f"layer encoding {kind!r} is not one of {LAYER_ENCODINGS}")


GRAPH_JOINS = ("concat", "sum", "split_concat")
"""How a layer that reads several activations is written: Concat then one Gemm; one Gemm per activation, the
branches summed with Add; or its input Split into pieces and joined again through Slice and Concat."""


def graph_to_onnx(
    rng: np.random.Generator, layers: tuple[Layer, ...], reads: tuple[tuple[int, ...], ...]
) -> onnx.ModelProto:
    """An opset-13 model of a graph network (layer k reads the activations `reads[k]`, 0 the input), joins at random.

    Whatever the join, the model computes weight @ concat(activations) + bias
    per layer with float32 constants; the oracle reads the file, so the
    expected answers never depend on this plan.
    """
    writer = _Writer()
    activations = ["X"]
    for index, ((weight, bias), chosen) in enumerate(zip(layers, reads)):
        parts = [activations[r] for r in chosen]
        widths = [_width(layers, r) for r in chosen]
        join = str(rng.choice(GRAPH_JOINS)) if len(parts) > 1 else "concat"
        if join == "sum":
            starts = np.cumsum([0] + widths)
            branches = [
                writer.node("MatMul", [part, writer.constant(weight[:, a:b].T.copy())])
                for part, a, b in zip(parts, starts[:-1], starts[1:])
            ]
            current = branches[0]
            for branch in branches[1:]:
                current = writer.node("Add", [current, branch])
            current = writer.node("Add", [current, writer.constant(bias)])
        else:
            joined = parts[0] if len(parts) == 1 else writer.node("Concat", parts, axis=1)
            if join == "split_concat":
                joined = _reversed_halves(writer, joined, sum(widths))
                half = sum(widths) // 2
                weight = np.hstack([weight[:, half:], weight[:, :half]])
            current = writer.dense(joined, weight, bias, "gemm_transB", (1.0, 1.0))
        if index < len(layers) - 1:
            current = writer.node("Relu", [current])
            activations.append(current)
    writer.nodes[-1].output[0] = "Y"
    n_in, n_out = layers[0][0].shape[1], layers[-1][0].shape[0]
    graph = helper.make_graph(
        writer.nodes,
        "graph",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, n_in])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, n_out])],
        writer.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="certfsm-tests")
    model.ir_version = 7
    onnx.checker.check_model(model)
    return model


def _width(layers: tuple[Layer, ...], activation: int) -> int:
    """The width of an activation: the first layer's input for 0, else hidden layer activation - 1's output."""
    return layers[activation - 1][0].shape[0] if activation else layers[0][0].shape[1]


def _reversed_halves(writer: _Writer, tensor: str, width: int) -> str:
    """The tensor [1, width] with its two halves swapped, through Split, Slice and Concat (the weights follow)."""
    half = width // 2
    low = f"{tensor}_low"
    sizes = writer.constant(np.array([half, width - half], dtype=np.int64))
    split = helper.make_node(
        "Split", [tensor, sizes], [low, f"{tensor}_high"], name=f"split{len(writer.nodes)}", axis=1
    )
    writer.nodes.append(split)  # its second output goes unused: the Slice below takes the same values
    bounds = [writer.constant(np.array([v], dtype=np.int64)) for v in (half, 2**62, 1)]
    tail = writer.node("Slice", [tensor, *bounds])
    return writer.node("Concat", [tail, low], axis=1)
