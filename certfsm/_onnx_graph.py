"""Walking an ONNX graph: every tensor as an affine function of the activations, and the constants.

The walk accepts one float tensor input, one output and, between them, a
DAG of `SUPPORTED_OPS` in graph order (ONNX lists nodes topologically):
every tensor that depends on the input is an `Affine` of the activations
(`certfsm._onnx_fold` folds each operator into it), each Relu node starts
an activation, and `certfsm._onnx_layers` lays them out as the IR's
layers. Branches that are summed, skip connections, Slice and Concat of
the data and a plant model beside a policy are all affine between Relu
nodes, so they fold exactly. Operators outside the list, and products or
quotients of two computed tensors (not piecewise linear), are refused
with one line naming the file and the node. Constants (initializers,
Constant nodes, and shape or selection operators applied to constants,
which only relabel or pick values) are kept with where they came from,
so an error about a weight names its tensor.

The file is untrusted: onnx.checker passes names that are not UTF-8
(protobuf then hands them over as bytes), tensor data types it does not
know, and tensors whose stored data does not fill their `dims`. Each is
refused here with a message naming the tensor or node, before it is used.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import uses_external_data

from ._errors import ModelError
from ._network import Network
from ._onnx_fold import (
    MAX_FEATURES,
    SELECTION_OPS,
    SHAPE_OPS,
    Affine,
    broadcast,
    combined,
    fold_node,
    reshaped,
    selection_orders,
    stacked,
)
from ._onnx_layers import network_of

SUPPORTED_OPS = (
    "Gemm",
    "MatMul",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Relu",
    "Neg",
    "Concat",
    "Slice",
    "Split",
    "Gather",
    "Shape",
    "Flatten",
    "Reshape",
    "Squeeze",
    "Unsqueeze",
    "Identity",
    "Constant",
)
_FLOAT_NAMES = {TensorProto.FLOAT: "float32", TensorProto.DOUBLE: "float64", TensorProto.FLOAT16: "float16"}
_FLOAT_TYPES = tuple(_FLOAT_NAMES)
# Weights are floats; shape operands (Reshape's shape, Squeeze's axes) are integers.
_READABLE_TYPES = _FLOAT_TYPES + (
    TensorProto.INT64,
    TensorProto.INT32,
    TensorProto.INT16,
    TensorProto.INT8,
    TensorProto.UINT8,
    TensorProto.UINT16,
    TensorProto.UINT32,
    TensorProto.UINT64,
)


def network_from_graph(graph: onnx.GraphProto, where: str) -> Network:
    """The network `graph` computes; `where` names the model in errors (the caller adds the provenance)."""
    _check_names(graph, where)
    constants = {
        tensor.name: _Constant(tensor.name, "initializer", _tensor_array(tensor, where)) for tensor in graph.initializer
    }
    real_inputs = [value for value in graph.input if value.name not in constants]
    if len(real_inputs) != 1:
        names = ", ".join(repr(value.name) for value in real_inputs) or "none"
        raise ModelError(
            f"{where}: has {len(real_inputs)} inputs ({names}); certfsm supports networks with exactly one input tensor"
        )
    if len(graph.output) != 1:
        names = ", ".join(repr(value.name) for value in graph.output)
        raise ModelError(
            f"{where}: has {len(graph.output)} outputs ({names}); certfsm supports networks with exactly one output tensor"
        )
    source = real_inputs[0]
    shape = _declared_shape(source, where)
    values: dict[str, Affine] = {source.name: Affine.activation(where, 0, shape)}
    pre_activations: list[tuple[str, Affine]] = []
    for index, node in enumerate(graph.node):
        label = f"node '{node.name}'" if node.name else f"node #{index}"
        if node.domain in ("", "ai.onnx") and node.op_type in _FINAL_SQUASHES and _is_last(graph, node):
            raise ModelError(
                f"{where}: {label} is a final {node.op_type}, which is not piecewise linear; drop it and export "
                f"the scores before it (the {node.op_type} keeps their order, so argmax and argmin decide the same; "
                "for a threshold on the top probability give confidence_gate.probability, which certfsm proves as "
                "an exact logit margin)"
            )
        if node.domain not in ("", "ai.onnx") or node.op_type not in SUPPORTED_OPS:
            op = f"{node.domain}.{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type
            raise ModelError(
                f"{where}: {label} uses unsupported operator {op}; certfsm supports {', '.join(SUPPORTED_OPS)} "
                "(a piecewise-linear ReLU network), re-export the model with these"
            )
        if node.op_type == "Constant":
            value = _constant_node_value(node, where, label)
            constants[node.output[0]] = _Constant(node.output[0], "Constant output", value)
            continue
        operands = [name for name in node.input if name]
        for name in operands:
            if name not in constants and name not in values:
                raise ModelError(
                    f"{where}: {label} ({node.op_type}) reads '{name}', which is neither the model input, a constant "
                    "nor the output of an earlier node; ONNX lists nodes in the order they compute, re-export the model"
                )
        if not any(name in values for name in operands):
            for output, value in zip(node.output, _fold_constant(node, constants, where, label)):
                constants[output] = _Constant(output, f"output of {label}", value)
            continue
        if node.op_type == "Shape":  # the data's shape is static here (one row), so it is a constant
            dims = np.asarray(values[node.input[0]].shape, dtype=np.int64)
            constants[node.output[0]] = _Constant(node.output[0], f"output of {label}", _shape_slice(node, dims))
            continue
        name = node.name or f"{node.op_type}_{index}"
        results = _apply(node, name, label, values, constants, pre_activations)
        values.update(zip(node.output, results))
    output = graph.output[0].name
    if output not in values:
        detail = "a constant that does not depend on it" if output in constants else "not computed by any node"
        raise ModelError(
            f"{where}: output '{output}' is {detail}, not a function of input '{source.name}'; "
            "certfsm verifies a network from its input to its output, fix the model's output"
        )
    network = network_of(pre_activations, values[output], source.name, shape)
    return network.replace(input_type=_FLOAT_NAMES[source.type.tensor_type.elem_type])


def _apply(
    node: onnx.NodeProto,
    name: str,
    label: str,
    values: dict[str, Affine],
    constants: dict[str, "_Constant"],
    pre_activations: list[tuple[str, Affine]],
) -> list[Affine]:
    """The values a node computes from at least one value of the data (`values`), one per output."""
    op, where = node.op_type, next(iter(values.values())).where
    operands = [name for name in node.input if name]
    data = [n for n in operands if n in values]
    if op == "Concat":
        parts = [
            values[n] if n in values else Affine.constant(where, constants[n].weights(where, label)) for n in operands
        ]
        (order,) = selection_orders(node, [p.shape for p in parts], constants, where, label)
        parts[0].check_width(order.size, label)
        return [combined(name, parts, stacked, order.shape).rows(None, order)]
    if op in ("Relu",) + SHAPE_OPS + SELECTION_OPS and node.input[0] not in values:
        raise ModelError(
            f"{where}: {label} ({op}) takes the data as a later operand; "
            f"certfsm supports {op} with the data as its first input"
        )
    value = values[data[0]]
    if op == "Relu":
        pre_activations.append((name, value))
        return [Affine.activation(where, len(pre_activations), value.shape)]
    if op in SHAPE_OPS:
        return [value._with(shape=reshaped(node, value.shape, constants, where, label))]
    if op in SELECTION_OPS:
        return [value.rows(name, order) for order in selection_orders(node, [value.shape], constants, where, label)]
    if len(data) > 1 and op in ("Add", "Sub"):
        first, second = values[node.input[0]], values[node.input[1]]
        merged = broadcast(first.shape, second.shape)
        if merged is None or math.prod(merged) != first.size or first.size != second.size:
            raise ModelError(
                f"{where}: {label} ({op}) combines tensors of shapes {list(first.shape)} and {list(second.shape)}; "
                "certfsm needs two tensors of the same size (one feature vector each)"
            )
        return [combined(name, [first, second], _SUMS[op], merged)]
    if len(data) > 1:
        raise ModelError(
            f"{where}: {label} ({op}) multiplies or divides two tensors computed from the input, which is not "
            "piecewise linear; certfsm supports Mul, Div, MatMul and Gemm of the data with constants"
        )
    return [fold_node(value, node, name, label, constants)]


def _shape_slice(node: onnx.NodeProto, shape: np.ndarray) -> np.ndarray:
    """Shape's output: the dimensions from its `start` to its `end` attribute (opset 15), all by default."""
    attributes = {a.name: int(helper.get_attribute_value(a)) for a in node.attribute}
    return shape[attributes.get("start", 0) : attributes.get("end", len(shape))]


_SUMS = {
    "Add": lambda a, b: (a[0] + b[0], a[1] + b[1]),
    "Sub": lambda a, b: (a[0] - b[0], a[1] - b[1]),
}
"""Add and Sub of two tensors on (weight, bias) pairs, float or Fraction alike (no float factor, which would
turn Fractions back into floats)."""


_FINAL_SQUASHES = ("Softmax", "LogSoftmax", "Sigmoid")
"""Monotone output layers that exporters often append to a classifier: each keeps the order of the scores along
the decision axis, so the fix is to drop it (Sigmoid is monotone per score, so it keeps the order too)."""


def _is_last(graph: onnx.GraphProto, node: onnx.NodeProto) -> bool:
    """True when `node` writes the graph's output, which the decision rule reads directly."""
    return bool(graph.output) and graph.output[0].name in node.output


def _check_names(graph: onnx.GraphProto, where: str) -> None:
    """Refuse a name that is not UTF-8 text (protobuf returns it as bytes, which no message or lookup expects)."""
    places = [
        (
            f"node #{index}",
            node.name,
            node.op_type,
            node.domain,
            *node.input,
            *node.output,
            *(attribute.name for attribute in node.attribute),
        )
        for index, node in enumerate(graph.node)
    ]
    places += [(f"initializer #{index}", tensor.name) for index, tensor in enumerate(graph.initializer)]
    places += [(f"graph input #{index}", value.name) for index, value in enumerate(graph.input)]
    places += [(f"graph output #{index}", value.name) for index, value in enumerate(graph.output)]
    for place, *names in places:
        for name in names:
            if isinstance(name, bytes):
                raise ModelError(
                    f"{where}: {place} has the name {name[:40]!r}, which is not UTF-8 text (ONNX names "
                    "are UTF-8); the file is damaged or was written by a broken exporter, re-export it"
                )


class _Constant:
    """A constant tensor and where it came from (for error messages)."""

    def __init__(self, name: str, kind: str, value: np.ndarray) -> None:
        self.name, self.kind, self.value = name, kind, value

    def weights(self, where: str, label: str) -> np.ndarray:
        if self.value.dtype.kind != "f":
            raise ModelError(
                f"{where}: {self.kind} '{self.name}' used by {label} holds {self.value.dtype} values; certfsm needs "
                "float weights (FLOAT, DOUBLE or FLOAT16, as ONNX requires of the data's operands), fix the model"
            )
        values = np.asarray(self.value, dtype=np.float64)
        bad = ~np.isfinite(values)
        if np.any(bad):
            position = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ModelError(
                f"{where}: {self.kind} '{self.name}' used by {label} holds {values[position]} "
                f"at index {list(position)}; "
                "certfsm needs finite weights, fix or retrain the model"
            )
        return values


def _declared_shape(value: onnx.ValueInfoProto, where: str) -> tuple[int, ...]:
    """The input's declared shape with symbolic or zero dimensions read as 1 (one row)."""
    if not value.type.HasField("tensor_type"):
        raise ModelError(f"{where}: input '{value.name}' is not a tensor; certfsm supports one float tensor input")
    tensor_type = value.type.tensor_type
    if tensor_type.elem_type not in _FLOAT_TYPES:
        type_name = TensorProto.DataType.Name(tensor_type.elem_type)
        raise ModelError(
            f"{where}: input '{value.name}' has element type {type_name}; certfsm supports FLOAT, DOUBLE or FLOAT16 inputs"
        )
    if not tensor_type.HasField("shape"):
        raise ModelError(
            f"{where}: input '{value.name}' declares no shape; "
            "certfsm needs it to count the features, export with a fixed feature size"
        )
    shape = tuple(int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in tensor_type.shape.dim)
    if math.prod(shape) > MAX_FEATURES:
        raise ModelError(
            f"{where}: input '{value.name}' declares shape {list(shape)}, {math.prod(shape)} features, more than the "
            f"{MAX_FEATURES} certfsm supports (it verifies small controller networks); fix the declared input shape"
        )
    return shape


def external_data_message(where: str, tensor_name: str) -> str:
    """Why a model whose weights live in a second file is refused, and the two ways to fix it.

    certfsm names a network by the SHA-256 of its model file (the report,
    the artifact and `inspect --deep` all check it), so the weights must be
    inside that file. PyTorch's exporter writes them beside the model
    (`model.onnx.data`) unless asked not to.
    """
    return (
        f"{where}: tensor '{tensor_name}' keeps its data in an external file, and certfsm hashes the model file "
        "alone, so the weights must be inside it; export with torch.onnx.export(..., external_data=False), or "
        "re-save with onnx.save_model(onnx.load(path), path, save_as_external_data=False)"
    )


def _tensor_array(tensor: onnx.TensorProto, where: str) -> np.ndarray:
    """The tensor's values, once its data type is one certfsm reads and its data fills its dims exactly."""
    if uses_external_data(tensor):
        raise ModelError(external_data_message(where, tensor.name))
    if tensor.data_type not in _READABLE_TYPES:
        names = ", ".join(TensorProto.DataType.Name(t) for t in _READABLE_TYPES)
        raise ModelError(
            f"{where}: tensor '{tensor.name}' has data_type {tensor.data_type} ({_type_name(tensor.data_type)}); "
            f"certfsm reads {names}, fix or re-export the model"
        )
    dims = list(tensor.dims)
    try:
        return numpy_helper.to_array(tensor)
    except ValueError as error:  # the stored values do not fill dims (onnx.checker does not compare them)
        raise ModelError(
            f"{where}: tensor '{tensor.name}' declares dims {dims} ({math.prod(dims)} values), which its stored data "
            f"does not fill exactly ({_first_line(error)}); the file is damaged, re-export the model"
        ) from None


def _type_name(data_type: int) -> str:
    try:
        name: str = TensorProto.DataType.Name(data_type)  # protobuf's enum wrapper is untyped
    except ValueError:
        return "not an ONNX data type"
    return name


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:120] if text else type(error).__name__


def _constant_node_value(node: onnx.NodeProto, where: str, label: str) -> np.ndarray:
    for attribute in node.attribute:
        value = helper.get_attribute_value(attribute)
        if attribute.name == "value":
            return _tensor_array(value, where)
        if attribute.name in ("value_float", "value_floats"):
            return np.asarray(value, dtype=np.float32)
        if attribute.name in ("value_int", "value_ints"):
            return np.asarray(value, dtype=np.int64)
    kinds = ", ".join(a.name for a in node.attribute) or "no attribute"
    raise ModelError(
        f"{where}: {label} (Constant) holds {kinds}; "
        "certfsm supports numeric Constant nodes (value, value_float(s), value_int(s))"
    )


def _fold_constant(node: onnx.NodeProto, constants: dict[str, _Constant], where: str, label: str) -> list[np.ndarray]:
    """A node computed from constants only: folded when it just relabels or picks values (exact), one per output."""
    if node.op_type not in SHAPE_OPS + SELECTION_OPS:
        raise ModelError(
            f"{where}: {label} ({node.op_type}) computes on constants only; "
            f"certfsm folds only {', '.join(SHAPE_OPS + SELECTION_OPS)} of constants "
            "(the model's own float arithmetic would differ), fold constants before export"
        )
    if node.op_type in SHAPE_OPS:
        value = constants[node.input[0]].value
        return [value.reshape(reshaped(node, value.shape, constants, where, label))]
    parts = (
        [constants[name].value for name in node.input if name]
        if node.op_type == "Concat"
        else [constants[node.input[0]].value]
    )
    orders = selection_orders(node, [p.shape for p in parts], constants, where, label)
    flat = np.concatenate([p.reshape(-1) for p in parts])
    return [flat[order] for order in orders]
