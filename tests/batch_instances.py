"""A tiny VNN-COMP benchmark folder made in the test's own folder: instances.csv, onnx/ and vnnlib/.

Why: the batch tests need instances with known answers that take a
fraction of a second each and exist wherever the tests run, and one whose
model certfsm cannot read. The network is y = 2x - 1 on one input
(a Gemm); the unsupported one computes a Sigmoid, which is not piecewise
linear. Answers, on x in [0, 1], so y in [-1, 1]:

- ``above_2``: unsafe y >= 2, unsat;
- ``above_half``: unsafe y >= 0.5, sat (x = 0.75 is a witness);
- ``at_1``: unsafe y >= 1, sat only at the tie x = 1 (non-strict);
- ``sigmoid``: the Sigmoid model, an error row.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HEADER = "onnx,vnnlib,timeout_s,expected"

INSTANCES = (
    ("onnx/line.onnx", "vnnlib/above_2.vnnlib", "unsat"),
    ("onnx/line.onnx", "vnnlib/above_half.vnnlib", "sat"),
    ("onnx/line.onnx", "vnnlib/at_1.vnnlib", "sat"),
    ("onnx/sigmoid.onnx", "vnnlib/above_half.vnnlib", ""),
)
"""(onnx, vnnlib, expected answer or "") of each row, in the order of instances.csv."""

_THRESHOLDS = {"above_2": "2", "above_half": "0.5", "at_1": "1"}


def _model(op: str) -> onnx.ModelProto:
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["y" if op == "Gemm" else "z"], transB=1)]
    if op != "Gemm":
        nodes.append(helper.make_node(op, ["z"], ["y"]))
    graph = helper.make_graph(
        nodes,
        "line",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])],
        [
            numpy_helper.from_array(np.array([[2.0]], dtype=np.float32), "w"),
            numpy_helper.from_array(np.array([-1.0], dtype=np.float32), "b"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _property(threshold: str) -> str:
    return (
        "(declare-const X_0 Real)\n(declare-const Y_0 Real)\n"
        f"(assert (>= X_0 0))\n(assert (<= X_0 1))\n(assert (>= Y_0 {threshold}))\n"
    )


def make_benchmark(folder: Path, rows=INSTANCES, timeout: float = 10) -> Path:
    """Write the benchmark into `folder` (instances.csv listing `rows`); returns the csv's path."""
    (folder / "onnx").mkdir(parents=True, exist_ok=True)
    (folder / "vnnlib").mkdir(exist_ok=True)
    onnx.save(_model("Gemm"), str(folder / "onnx" / "line.onnx"))
    onnx.save(_model("Sigmoid"), str(folder / "onnx" / "sigmoid.onnx"))
    for name, threshold in _THRESHOLDS.items():
        (folder / "vnnlib" / f"{name}.vnnlib").write_text(_property(threshold))
    lines = [HEADER] + [f"{model},{prop},{timeout:g},{expected}" for model, prop, expected in rows]
    csv_path = folder / "instances.csv"
    csv_path.write_text("\n".join(lines) + "\n")
    return csv_path
