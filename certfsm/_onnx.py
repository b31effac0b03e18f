"""ONNX in and out of the network IR, and the onnxruntime cross-check.

`load_onnx` reads a feed-forward ReLU network: one chain of supported
operators from the single real input to the single output
(`certfsm._onnx_graph` walks the graph, `certfsm._onnx_fold` folds each
operator into affine layers, in float64 on the exact stored values).

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
from typing import TYPE_CHECKING

import numpy as np
import onnx
import onnx.checker
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import uses_external_data

from ._errors import ModelError
from ._network import Network
from ._onnx_graph import external_data_message, network_from_graph

if TYPE_CHECKING:
    import onnxruntime

_ORT_FLOAT_TYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16}
_EXPORT_OPSET = 13
_EXPORT_IR_VERSION = 8


def load_onnx(path: str | os.PathLike[str]) -> Network:
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
    network = network_from_graph(model.graph, where)
    return network.replace(
        source_path=str(Path(path).resolve()),
        sha256=hashlib.sha256(data).hexdigest(),
    )


def to_onnx(network: Network) -> bytes:
    """A minimal ONNX model (Gemm with transB=1, Relu between layers) computing `network`.

    A layer that reads several activations gets them through one Concat.

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
    activations = [network.input_name]
    last = len(network.layers) - 1
    for index, layer in enumerate(network.layers):
        weight, bias = f"certfsm_weight{index}", f"certfsm_bias{index}"
        initializers.append(numpy_helper.from_array(layer.weight.astype(np.float32), weight))
        initializers.append(numpy_helper.from_array(layer.bias.astype(np.float32), bias))
        output = "certfsm_output" if index == last else f"certfsm_gemm{index}"
        read = [activations[r] for r in network.reads[index]]
        current = read[0]
        if len(read) > 1:
            current = f"certfsm_concat{index}"
            nodes.append(helper.make_node("Concat", read, [current], name=f"concat{index}", axis=1))
        nodes.append(
            helper.make_node(
                "Gemm",
                [current, weight, bias],
                [output],
                name=f"layer{index}",
                doc_string=layer.source,
                transB=1,
            )
        )
        if index < last:
            nodes.append(helper.make_node("Relu", [output], [f"certfsm_relu{index}"], name=f"relu{index}"))
            activations.append(f"certfsm_relu{index}")
    graph = helper.make_graph(
        nodes,
        "certfsm_network",
        [helper.make_tensor_value_info(network.input_name, TensorProto.FLOAT, ["batch", network.n_inputs])],
        [helper.make_tensor_value_info("certfsm_output", TensorProto.FLOAT, ["batch", network.n_outputs])],
        initializers,
    )
    model = helper.make_model(graph, producer_name="certfsm", opset_imports=[helper.make_opsetid("", _EXPORT_OPSET)])
    model.ir_version = _EXPORT_IR_VERSION
    onnx.checker.check_model(model)
    data: bytes = model.SerializeToString()  # protobuf's messages are untyped
    return data


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


def _read_bytes(path: str | os.PathLike[str], where: str) -> bytes:
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
    for tensor in model.graph.initializer:
        if uses_external_data(tensor):  # before the checker, which fails on it with a message about file paths
            raise ModelError(external_data_message(where, tensor.name))
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


# --- onnxruntime -------------------------------------------------------------


@functools.lru_cache(maxsize=32)
def _session_for_file(path: str, sha256: str) -> onnxruntime.InferenceSession:
    data = _read_bytes(path, path)
    if sha256 and hashlib.sha256(data).hexdigest() != sha256:
        raise ModelError(
            f"{path}: changed since the network was loaded (sha256 is now {hashlib.sha256(data).hexdigest()}, "
            f"was {sha256}); reload it with load_onnx"
        )
    return _new_session(data)


@functools.lru_cache(maxsize=32)
def _session_for_bytes(data: bytes) -> onnxruntime.InferenceSession:
    return _new_session(data)


def _new_session(data: bytes) -> onnxruntime.InferenceSession:
    import onnxruntime

    onnxruntime.set_default_logger_severity(3)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(data, sess_options=options, providers=["CPUExecutionProvider"])


def _session_input(session: onnxruntime.InferenceSession, name: str, where: str) -> onnxruntime.NodeArg:
    for declared in session.get_inputs():
        if declared.name == name:
            return declared
    names = ", ".join(repr(declared.name) for declared in session.get_inputs())
    raise ModelError(
        f"{where}: has inputs {names}, not the network's input_name={name!r}; reload the network from this model"
    )
