"""Walking an ONNX graph: the one chain from the input to the output, and its constants.

The walk accepts one float tensor input, one output and, between them, a
single chain of `SUPPORTED_OPS` in graph order: every node either reads
the running value of the chain (and then goes to `certfsm._onnx_fold`,
which folds it into the affine layers) or computes only from constants.
Branches, skip connections, a node that uses the data twice and
operators outside the list are refused with one line naming the file and
the node. Constants (initializers, Constant nodes, and shape operators
applied to constants, which only relabel the data) are kept with where
they came from, so an error about a weight names its tensor.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import uses_external_data

from ._errors import ModelError
from ._network import Network
from ._onnx_fold import SHAPE_OPS, Chain, reshaped

SUPPORTED_OPS = (
    "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Relu",
    "Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity", "Constant",
)
_FLOAT_TYPES = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16)


def network_from_graph(graph: onnx.GraphProto, where: str) -> Network:
    """The network `graph` computes; `where` names the model in errors (the caller adds the provenance)."""
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
    chain = Chain(where, _declared_shape(source, where))
    running, visited = source.name, {source.name}
    for index, node in enumerate(graph.node):
        label = f"node '{node.name}'" if node.name else f"node #{index}"
        if node.domain not in ("", "ai.onnx") or node.op_type not in SUPPORTED_OPS:
            op = f"{node.domain}.{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type
            raise ModelError(
                f"{where}: {label} uses unsupported operator {op}; certfsm supports {', '.join(SUPPORTED_OPS)} "
                "(a feed-forward ReLU network), re-export the model with these"
            )
        if node.op_type == "Constant":
            value = _constant_node_value(node, where, label)
            constants[node.output[0]] = _Constant(node.output[0], "Constant output", value)
            continue
        operands = [name for name in node.input if name]
        for name in operands:
            if name not in constants and name != running:
                if name in visited:
                    detail = "an earlier value of the chain (a branch or skip connection)"
                else:
                    detail = "neither the model input nor a constant"
                raise ModelError(
                    f"{where}: {label} ({node.op_type}) reads '{name}', {detail}; "
                    "certfsm supports a single chain of operators from the input to the output"
                )
        if running not in operands:
            value = _fold_constant(node, constants, where, label)
            constants[node.output[0]] = _Constant(node.output[0], f"output of {label}", value)
            continue
        if operands.count(running) > 1:
            raise ModelError(
                f"{where}: {label} ({node.op_type}) uses the data twice, as a non-constant second operand; "
                "certfsm supports only operations of the data with constants"
            )
        chain.apply(node, node.name or f"{node.op_type}_{index}", label, running, constants)
        running = node.output[0]
        visited.add(running)
    output = graph.output[0].name
    if output != running:
        raise ModelError(
            f"{where}: output '{output}' is not the end of the chain from input '{source.name}' "
            f"(which ends at '{running}'); "
            "certfsm supports a single chain of operators from the input to the output"
        )
    return chain.finish(source.name)


class _Constant:
    """A constant tensor and where it came from (for error messages)."""

    def __init__(self, name: str, kind: str, value: np.ndarray) -> None:
        self.name, self.kind, self.value = name, kind, value

    def weights(self, where: str, label: str) -> np.ndarray:
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
    return tuple(int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in tensor_type.shape.dim)


def _tensor_array(tensor: onnx.TensorProto, where: str) -> np.ndarray:
    if uses_external_data(tensor):
        raise ModelError(
            f"{where}: initializer '{tensor.name}' keeps its data in an external file; "
            "certfsm needs a self-contained model, "
            "re-save it with onnx.save_model(model, path, save_as_external_data=False)"
        )
    return numpy_helper.to_array(tensor)


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


def _fold_constant(node: onnx.NodeProto, constants: dict, where: str, label: str) -> np.ndarray:
    """A node computed from constants only: folded when it just relabels the tensor (exact)."""
    if node.op_type not in SHAPE_OPS:
        raise ModelError(
            f"{where}: {label} ({node.op_type}) computes on constants only; "
            f"certfsm folds only {', '.join(SHAPE_OPS)} of constants "
            "(the model's own float arithmetic would differ), fold constants before export"
        )
    value = constants[node.input[0]].value
    return value.reshape(reshaped(node, value.shape, constants, where, label))
