"""ONNX in and out of the network IR, and the onnxruntime cross-check.

`load_onnx` reads a feed-forward ReLU network: one chain of supported
operators from the single real input to the single output. Consecutive
affine operators (Gemm, MatMul, Add, Sub, Mul, Div by constants) fold into
one `AffineLayer`, so input normalisation merges into the first layer; a
Relu ends a layer. The folding is done in float64 on the exact stored
values, and each layer's `source` names the nodes merged into it.

Shape operators (Flatten, Reshape, Squeeze, Unsqueeze, Identity) only
relabel the tensor: the IR works on the tensor flattened in C order, so
they are accepted as long as the data stays one feature vector (every
dimension but one is 1 where a matrix product needs it).

`to_onnx` writes an IR network back as a minimal model, and
`run_onnxruntime` evaluates the model behind a network with onnxruntime,
the independent second evaluator that every counterexample must pass.

This module imports onnx at the top; only code that loads or exports
models imports it (the runtime never does).
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

import numpy as np
import onnx
import onnx.checker
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import uses_external_data

from ._errors import ModelError
from ._network import AffineLayer, Network

SUPPORTED_OPS = (
    "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Relu",
    "Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity", "Constant",
)
_AFFINE_OPS = ("Gemm", "MatMul", "Add", "Sub", "Mul", "Div")
_SHAPE_OPS = ("Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity")
_FLOAT_TYPES = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16)
_ORT_FLOAT_TYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16}
_EXPORT_OPSET = 13
_EXPORT_IR_VERSION = 8


def load_onnx(path: str | os.PathLike) -> Network:
    """Read an ONNX feed-forward ReLU network into the IR.

    The returned network evaluates, in float64, exactly the stored weights
    (float32 values are kept exactly; folded normalisation constants are
    combined in float64). `input_shape` is the declared input shape with
    symbolic or zero dimensions read as 1; `sha256` covers the file bytes.
    A model whose last operator is a Relu gets an identity output layer, so
    the IR's "no ReLU after the last layer" still matches the model.
    Raises ModelError (one line, naming the file and the node) otherwise.
    """
    where = str(path)
    data = _read_bytes(path, where)
    model = _parse_model(data, where)
    network = _network_from_graph(model.graph, where)
    return network.replace(
        source_path=str(Path(path).resolve()),
        sha256=hashlib.sha256(data).hexdigest(),
    )


def to_onnx(network: Network) -> bytes:
    """A minimal ONNX model (Gemm with transB=1, Relu between layers) computing `network`.

    The input is named `network.input_name` with shape [batch, n_inputs]
    (a symbolic batch dimension, so a batch of rows runs in one call and
    [1, n_inputs] is accepted too); the output is [batch, n_outputs].
    Weights are stored as float32: weights that are float32 values (all of
    a network loaded from a float32 model) are exported exactly, other
    float64 weights are rounded to the nearest float32. Each Gemm node's
    doc_string keeps the layer's `source`.
    """
    if not network.input_name or network.input_name.startswith("certfsm_"):
        raise ModelError(
            f"network input_name={network.input_name!r} is empty or uses the prefix 'certfsm_' "
            "kept for exported tensors; rename the input"
        )
    nodes, initializers = [], []
    current = network.input_name
    last = len(network.layers) - 1
    for index, layer in enumerate(network.layers):
        weight, bias = f"certfsm_weight{index}", f"certfsm_bias{index}"
        initializers.append(numpy_helper.from_array(layer.weight.astype(np.float32), weight))
        initializers.append(numpy_helper.from_array(layer.bias.astype(np.float32), bias))
        output = "certfsm_output" if index == last else f"certfsm_gemm{index}"
        nodes.append(helper.make_node(
            "Gemm", [current, weight, bias], [output], name=f"layer{index}", doc_string=layer.source, transB=1,
        ))
        current = output
        if index < last:
            nodes.append(helper.make_node("Relu", [current], [f"certfsm_relu{index}"], name=f"relu{index}"))
            current = f"certfsm_relu{index}"
    graph = helper.make_graph(
        nodes,
        "certfsm_network",
        [helper.make_tensor_value_info(network.input_name, TensorProto.FLOAT, ["batch", network.n_inputs])],
        [helper.make_tensor_value_info("certfsm_output", TensorProto.FLOAT, ["batch", network.n_outputs])],
        initializers,
    )
    model = helper.make_model(
        graph, producer_name="certfsm", opset_imports=[helper.make_opsetid("", _EXPORT_OPSET)]
    )
    model.ir_version = _EXPORT_IR_VERSION
    onnx.checker.check_model(model)
    return model.SerializeToString()


def run_onnxruntime(network: Network, x: np.ndarray) -> np.ndarray:
    """Scores of the ONNX model behind `network` for one input or a batch, as float64.

    The model is `network.source_path` when set (checked against
    `network.sha256`, so the cross-check runs on the very bytes that were
    loaded), else `to_onnx(network)`. Each row is reshaped to the model's
    declared input shape; a model with a fixed batch of 1 (ACAS Xu) runs
    one row at a time. Sessions are cached per file and per exported model.
    """
    inputs = np.asarray(x, dtype=np.float64)
    is_single = inputs.ndim == 1
    batch = inputs.reshape(1, -1) if is_single else inputs
    if batch.ndim != 2 or batch.shape[1] != network.n_inputs:
        raise ValueError(f"x has shape {inputs.shape}; expected (N, {network.n_inputs}) or ({network.n_inputs},)")
    if network.source_path:
        session = _session_for_file(network.source_path, network.sha256)
    else:
        session = _session_for_bytes(to_onnx(network))
    where = network.source_path or "the exported model"
    declared = _session_input(session, network.input_name, where)
    dtype = _ORT_FLOAT_TYPES.get(declared.type)
    if dtype is None:
        raise ModelError(f"{where}: input {network.input_name!r} has type {declared.type}; expected a float tensor")
    row_shape = tuple(d if isinstance(d, int) and d > 0 else 1 for d in declared.shape)
    if int(np.prod(row_shape)) != network.n_inputs:
        raise ModelError(
            f"{where}: input shape {declared.shape} holds {int(np.prod(row_shape))} values "
            f"but the network has {network.n_inputs} inputs; reload the network from this model"
        )
    feed = batch.astype(dtype)
    has_free_batch = bool(declared.shape) and not (isinstance(declared.shape[0], int) and declared.shape[0] > 0)
    if has_free_batch:
        raw = session.run(None, {network.input_name: feed.reshape((len(feed),) + row_shape[1:])})[0]
        scores = np.asarray(raw, dtype=np.float64).reshape(len(feed), -1)
    else:
        rows = [session.run(None, {network.input_name: row.reshape(row_shape)})[0] for row in feed]
        scores = np.asarray(rows, dtype=np.float64).reshape(len(feed), -1)
    if scores.shape[1] != network.n_outputs:
        raise ModelError(
            f"{where}: onnxruntime returned {scores.shape[1]} outputs per input "
            f"but the network has {network.n_outputs}; reload the network from this model"
        )
    return scores[0] if is_single else scores


# --- reading -----------------------------------------------------------------


def _read_bytes(path, where: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ModelError(f"{where}: no such file; give the path of an .onnx model") from None
    except IsADirectoryError:
        raise ModelError(f"{where}: is a directory; give the path of an .onnx model file") from None
    except OSError as error:
        raise ModelError(f"{where}: cannot be read ({error.strerror}); check the path and its permissions") from None
    if not data:
        raise ModelError(f"{where}: is empty; expected an ONNX model, re-export it")
    return data


def _parse_model(data: bytes, where: str) -> onnx.ModelProto:
    try:
        model = onnx.load_model_from_string(data)
    except Exception as error:  # protobuf raises DecodeError, but other parse failures exist too
        raise ModelError(
            f"{where}: is not an ONNX model ({_first_line(error)}); "
            "the file is truncated, corrupt or in another format, re-export it"
        ) from None
    try:
        onnx.checker.check_model(model)
    except Exception as error:  # ValidationError and friends
        raise ModelError(
            f"{where}: is not a valid ONNX model (onnx.checker: {_first_line(error)}); "
            "re-export it so that onnx.checker.check_model passes"
        ) from None
    return model


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# --- the chain ---------------------------------------------------------------


def _network_from_graph(graph: onnx.GraphProto, where: str) -> Network:
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
    chain = _Chain(where, _declared_shape(source, where))
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


class _Chain:
    """Folds the chain into affine layers; ``weight @ x + bias`` maps the layer's input x to the current tensor.

    Invariant: `shape` is the current tensor's shape (batch 1) and its C-order
    flattening has `weight.shape[0]` entries.
    """

    def __init__(self, where: str, input_shape: tuple[int, ...]) -> None:
        self.where, self.input_shape = where, input_shape
        self.shape = input_shape
        self.layers: list[AffineLayer] = []
        self._restart(int(np.prod(input_shape)))

    def _restart(self, size: int) -> None:
        self.weight, self.bias, self.sources = np.eye(size), np.zeros(size), []

    def _close(self, fallback: str) -> None:
        source = "+".join(self.sources) or fallback
        if not (np.all(np.isfinite(self.weight)) and np.all(np.isfinite(self.bias))):
            raise ModelError(f"{self.where}: folding {source} overflows float64; check the model's constants")
        self.layers.append(AffineLayer(self.weight, self.bias, source))

    def finish(self, input_name: str) -> Network:
        self._close("identity output layer" if self.layers else "identity")
        return Network(tuple(self.layers), input_name=input_name, input_shape=self.input_shape)

    def apply(self, node: onnx.NodeProto, name: str, label: str, running: str, constants: dict) -> None:
        op = node.op_type
        if op in ("Relu",) + _SHAPE_OPS and node.input[0] != running:
            raise ModelError(
                f"{self.where}: {label} ({op}) takes the data as a later operand; "
                f"certfsm supports {op} with the data as its first input"
            )
        if op == "Relu":
            self._close(f"identity before {name}")
            self._restart(self.weight.shape[0])
            return
        if op in _SHAPE_OPS:
            self.shape = _reshaped(node, self.shape, constants, self.where, label)
            return
        getattr(self, f"_{op.lower()}")(node, label, constants)
        self.sources.append(name)

    def _constant_operand(self, node, label: str, constants: dict) -> tuple[np.ndarray, bool]:
        """The constant operand of a binary op and whether the data is the first operand."""
        first, second = node.input[0], node.input[1]
        is_data_first = first not in constants
        constant = constants[second if is_data_first else first]
        return constant.weights(self.where, label), is_data_first

    def _per_feature(self, value: np.ndarray, label: str, op: str) -> np.ndarray:
        """Broadcast a constant onto the current tensor; refuse to grow it beyond one feature vector."""
        try:
            result = np.broadcast_shapes(self.shape, value.shape)
        except ValueError:
            result = None
        if result is None or int(np.prod(result)) != int(np.prod(self.shape)):
            raise ModelError(
                f"{self.where}: {label} ({op}) combines the data of shape {list(self.shape)} with a constant of shape "
                f"{list(value.shape)}; certfsm needs a scalar or per-feature constant that keeps one feature vector"
            )
        self.shape = tuple(result)
        return np.broadcast_to(value, result).reshape(-1)

    def _add(self, node, label, constants) -> None:
        value, _ = self._constant_operand(node, label, constants)
        self.bias = self.bias + self._per_feature(value, label, "Add")

    def _sub(self, node, label, constants) -> None:
        value, is_data_first = self._constant_operand(node, label, constants)
        offset = self._per_feature(value, label, "Sub")
        if is_data_first:
            self.bias = self.bias - offset
        else:
            self.weight, self.bias = -self.weight, offset - self.bias

    def _mul(self, node, label, constants) -> None:
        value, _ = self._constant_operand(node, label, constants)
        scale = self._per_feature(value, label, "Mul")
        self.weight, self.bias = self.weight * scale[:, None], self.bias * scale

    def _div(self, node, label, constants) -> None:
        value, is_data_first = self._constant_operand(node, label, constants)
        if not is_data_first:
            raise ModelError(
                f"{self.where}: {label} (Div) divides a constant by the data, which is not linear; "
                "certfsm supports Div of the data by a constant"
            )
        scale = self._per_feature(value, label, "Div")
        if np.any(scale == 0.0):
            raise ModelError(
                f"{self.where}: {label} (Div) divides by zero in constant '{node.input[1]}'; fix the model's normalisation"
            )
        self.weight, self.bias = self.weight / scale[:, None], self.bias / scale

    def _matmul(self, node, label, constants) -> None:
        if node.input[0] in constants:
            raise ModelError(
                f"{self.where}: {label} (MatMul) multiplies a constant by the data from the left; "
                "certfsm supports data @ constant (re-export with the weight as the second input)"
            )
        matrix = constants[node.input[1]].weights(self.where, label)
        if matrix.ndim == 1:
            matrix, new_tail = matrix[:, None], ()
        else:
            new_tail = matrix.shape[1:2]
        if matrix.ndim != 2 or self.shape[-1:] != matrix.shape[:1] or int(np.prod(self.shape[:-1])) != 1:
            raise ModelError(
                f"{self.where}: {label} (MatMul) multiplies data of shape {list(self.shape)} by a constant of shape "
                f"{list(constants[node.input[1]].value.shape)}; "
                "certfsm needs one feature row [1, k] times a [k, m] matrix"
            )
        self.weight, self.bias = matrix.T @ self.weight, self.bias @ matrix
        self.shape = self.shape[:-1] + new_tail

    def _gemm(self, node, label, constants) -> None:
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.input[0] in constants:
            raise ModelError(
                f"{self.where}: {label} (Gemm) takes the data as operand B; "
                "certfsm supports Gemm with the data as A and constant B and C"
            )
        if attributes.get("transA", 0):
            raise ModelError(
                f"{self.where}: {label} (Gemm) has transA=1; "
                "certfsm supports Gemm with transA=0, re-export without transposing A"
            )
        matrix = constants[node.input[1]].weights(self.where, label)
        if attributes.get("transB", 0):
            matrix = matrix.T
        if len(self.shape) != 2 or self.shape[0] != 1 or matrix.ndim != 2 or matrix.shape[0] != self.shape[1]:
            raise ModelError(
                f"{self.where}: {label} (Gemm) multiplies data of shape {list(self.shape)} by B of shape "
                f"{list(matrix.shape)} (after transB); certfsm needs data [1, k] and B [k, m]"
            )
        alpha, beta = float(attributes.get("alpha", 1.0)), float(attributes.get("beta", 1.0))
        self.weight, self.bias = alpha * (matrix.T @ self.weight), alpha * (self.bias @ matrix)
        self.shape = (1, matrix.shape[1])
        if len(node.input) > 2 and node.input[2]:
            offset = constants[node.input[2]].weights(self.where, label)
            self.bias = self.bias + beta * self._per_feature(offset, label, "Gemm")


# --- tensors and shapes ------------------------------------------------------


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
    if node.op_type not in _SHAPE_OPS:
        raise ModelError(
            f"{where}: {label} ({node.op_type}) computes on constants only; "
            f"certfsm folds only {', '.join(_SHAPE_OPS)} of constants "
            "(the model's own float arithmetic would differ), fold constants before export"
        )
    value = constants[node.input[0]].value
    return value.reshape(_reshaped(node, value.shape, constants, where, label))


def _shape_operand(node: onnx.NodeProto, name: str, constants: dict) -> list[int] | None:
    """An integer list given as an attribute (old opsets) or as the constant second input (new opsets)."""
    for attribute in node.attribute:
        if attribute.name == name:
            return [int(v) for v in helper.get_attribute_value(attribute)]
    if len(node.input) > 1 and node.input[1]:
        return [int(v) for v in np.asarray(constants[node.input[1]].value).reshape(-1)]
    return None


def _reshaped(node: onnx.NodeProto, shape: tuple[int, ...], constants: dict, where: str, label: str) -> tuple[int, ...]:
    """The shape after a Flatten/Reshape/Squeeze/Unsqueeze/Identity node (C-order data unchanged)."""
    op, rank, size = node.op_type, len(shape), int(np.prod(shape))

    def fail(detail: str) -> ModelError:
        return ModelError(f"{where}: {label} ({op}) {detail} for data of shape {list(shape)}; fix the model's shapes")

    if op == "Identity":
        return tuple(shape)
    if op == "Flatten":
        axis = next((int(helper.get_attribute_value(a)) for a in node.attribute if a.name == "axis"), 1)
        axis = axis + rank if axis < 0 else axis
        if not 0 <= axis <= rank:
            raise fail("has axis out of range")
        return (int(np.prod(shape[:axis])), int(np.prod(shape[axis:])))
    if op == "Reshape":
        target = _shape_operand(node, "shape", constants)
        allow_zero = any(a.name == "allowzero" and helper.get_attribute_value(a) for a in node.attribute)
        if target is None:
            raise fail("has no target shape")
        dims = [shape[i] if d == 0 and not allow_zero and i < rank else d for i, d in enumerate(target)]
        if dims.count(-1) == 1:
            known = int(np.prod([d for d in dims if d != -1]))
            dims[dims.index(-1)] = size // known if known and size % known == 0 else -2
        if any(d < 0 for d in dims) or int(np.prod(dims)) != size:
            raise fail(f"cannot reshape to {target}")
        return tuple(dims)
    axes = _shape_operand(node, "axes", constants)
    if op == "Squeeze":
        if axes is None:
            return tuple(d for d in shape if d != 1)
        axes = [a + rank if a < 0 else a for a in axes]
        if any(not 0 <= a < rank or shape[a] != 1 for a in axes):
            raise fail(f"cannot squeeze axes {axes}")
        return tuple(d for i, d in enumerate(shape) if i not in axes)
    if axes is None:
        raise fail("has no axes")
    out_rank = rank + len(axes)
    axes = sorted(a + out_rank if a < 0 else a for a in axes)
    if any(not 0 <= a < out_rank for a in axes) or len(set(axes)) != len(axes):
        raise fail(f"cannot unsqueeze axes {axes}")
    dims = list(shape)
    for axis in axes:
        dims.insert(axis, 1)
    return tuple(dims)


# --- onnxruntime -------------------------------------------------------------


@functools.lru_cache(maxsize=32)
def _session_for_file(path: str, sha256: str):
    data = _read_bytes(path, path)
    if sha256 and hashlib.sha256(data).hexdigest() != sha256:
        raise ModelError(
            f"{path}: changed since the network was loaded (sha256 is now {hashlib.sha256(data).hexdigest()}, "
            f"was {sha256}); reload it with load_onnx"
        )
    return _new_session(data)


@functools.lru_cache(maxsize=32)
def _session_for_bytes(data: bytes):
    return _new_session(data)


def _new_session(data: bytes):
    import onnxruntime

    onnxruntime.set_default_logger_severity(3)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(data, sess_options=options, providers=["CPUExecutionProvider"])


def _session_input(session, name: str, where: str):
    for declared in session.get_inputs():
        if declared.name == name:
            return declared
    names = ", ".join(repr(declared.name) for declared in session.get_inputs())
    raise ModelError(
        f"{where}: has inputs {names}, not the network's input_name={name!r}; reload the network from this model"
    )
