"""A network of the IR written as a plain ONNX model, for the distill tests that need a model file of their own.

The core's own writer is private to it; this one writes the same shape (Gemm with transB=1, Relu between
layers, float32 weights), so the loader reads the file back as the network it came from.
"""

from __future__ import annotations

import numpy as np


def onnx_bytes(network):
    """`network` as an ONNX model of Gemm and Relu nodes, float32 weights (the loader reads it back as `network`).

    A layer that reads several activations (a graph) gets them through a Concat.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, weights, activations = [], [], [network.input_name]
    for index, layer in enumerate(network.layers):
        weights += [
            numpy_helper.from_array(layer.weight.astype(np.float32), f"w{index}"),
            numpy_helper.from_array(layer.bias.astype(np.float32), f"b{index}"),
        ]
        read = [activations[r] for r in network.reads[index]]
        current = read[0]
        if len(read) > 1:
            current = f"concat{index}"
            nodes.append(helper.make_node("Concat", read, [current], axis=1))
        nodes.append(helper.make_node("Gemm", [current, f"w{index}", f"b{index}"], [f"gemm{index}"], transB=1))
        current = f"gemm{index}"
        if index < len(network.layers) - 1:
            nodes.append(helper.make_node("Relu", [current], [f"relu{index}"]))
            current = f"relu{index}"
            activations.append(current)
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info(network.input_name, TensorProto.FLOAT, ["batch", network.n_inputs])],
        [helper.make_tensor_value_info(current, TensorProto.FLOAT, ["batch", network.n_outputs])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()
