"""Small ONNX DAGs of every operator the checker reads, built with onnx.helper, and an evaluator of its operations.

Why: the checker reads ONNX graphs with its own loader (`certfsm.checker._arith.read_model`), so its tests need
graphs shaped like the benchmarks (branches from the input summed with Add as in cersyve; a Slice of the input on a
side branch, Concat and MatMul as in linearizenn), skips over ReLU layers, Split, Gather and the reshaping operators,
with float32 weights, and onnxruntime as the oracle of what the file computes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Graph:
    """A graph under construction: `node` adds a node and returns its output names, `weight` a float32 initializer."""

    def __init__(self, rng: np.random.Generator, n_inputs: int):
        self.rng, self.nodes, self.inits, self.n_inputs = rng, [], [], n_inputs

    def weight(self, *shape: int, scale: float = 1.0, data=None) -> str:
        name = f"w{len(self.inits)}"
        value = self.rng.normal(0.0, scale / np.sqrt(shape[0]), shape) if data is None else np.asarray(data)
        dtype = np.int64 if np.asarray(value).dtype.kind in "iu" else np.float32
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def node(self, op: str, inputs: list, outputs: int = 1, **attributes) -> list[str]:
        names = [f"n{len(self.nodes)}_{k}" for k in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, names, name=f"{op.lower()}{len(self.nodes)}", **attributes))
        return names

    def dense(self, x: str, n_in: int, n_out: int, relu: bool = True) -> str:
        """Gemm (transB) or MatMul + Add at random, then a Relu."""
        if self.rng.random() < 0.5:
            out = self.node("Gemm", [x, self.weight(n_out, n_in), self.weight(n_out, scale=0.3)], transB=1)[0]
        else:
            out = self.node("Add", [self.node("MatMul", [x, self.weight(n_in, n_out)])[0], self.weight(n_out)])[0]
        return self.node("Relu", [out])[0] if relu else out

    def save(self, path: Path, output: str, n_outputs: int, check: bool = True) -> Path:
        graph = helper.make_graph(
            self.nodes,
            "dag",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, self.n_inputs])],
            [helper.make_tensor_value_info(output, TensorProto.FLOAT, [1, n_outputs])],
            self.inits,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        if check:
            onnx.checker.check_model(model)
        onnx.save(model, path)
        return path


def chain(g: Graph) -> tuple[str, int]:
    """A chain, the case every certificate so far is about, through the same builder."""
    return g.dense(g.dense(g.dense("x", 2, 12), 12, 8), 8, 2, relu=False), 2


def summed_branches(g: Graph) -> tuple[str, int]:
    """cersyve's shape: branches from the input, one through ReLUs, one affine, summed (Add) and subtracted (Sub)."""
    deep = g.dense(g.dense("x", 3, 8), 8, 6, relu=False)
    wide = g.dense("x", 3, 6, relu=False)
    other = g.dense(g.dense("x", 3, 5), 5, 6, relu=False)
    mixed = g.node("Relu", [g.node("Add", [deep, wide])[0]])[0]
    return g.dense(g.node("Sub", [mixed, other])[0], 6, 2, relu=False), 2


def sliced_side_branch(g: Graph) -> tuple[str, int]:
    """linearizenn's shape: a ReLU chain on the input; a Slice of the input (Constant starts, ends, axes, steps)
    through a MatMul beside it; Concat of both and a constant; a last MatMul."""
    main = g.node("MatMul", [g.dense(g.dense("x", 4, 10), 10, 6), g.weight(6, 2)])[0]
    bounds = [
        g.node("Constant", [], value=numpy_helper.from_array(np.array([v], dtype=np.int64)))[0] for v in (1, 4, 1, 2)
    ]
    side = g.node("MatMul", [g.node("Slice", ["x", *bounds])[0], g.weight(2, 3)])[0]
    joined = g.node("Concat", [main, side, g.weight(1, 2)], axis=1)[0]
    return g.node("MatMul", [joined, g.weight(7, 3)])[0], 3


def skip_over_relus(g: Graph) -> tuple[str, int]:
    """A skip connection over two ReLU layers, with the normalisation and reshaping operators on the way."""
    centred = g.node("Sub", ["x", g.weight(3)])[0]
    scaled = g.node("Div", [g.node("Mul", [centred, g.weight(3)])[0], g.weight(3, data=g.rng.uniform(0.5, 2.0, 3))])[0]
    square = g.node("Reshape", [scaled, g.weight(3, data=[1, 3, 1])])[0]
    flat = g.node("Flatten", [g.node("Identity", [square])[0]], axis=1)[0]
    deep = g.dense(g.dense(flat, 3, 7), 7, 5)
    lifted = g.node("Unsqueeze", [g.node("Neg", [flat])[0], g.weight(1, data=[0])])[0]
    back = g.node("Squeeze", [lifted, g.weight(1, data=[0])])[0]
    joined = g.node("Concat", [deep, back], axis=1)[0]
    return g.dense(g.node("Add", [g.weight(8), joined])[0], 8, 3, relu=False), 3


def split_and_gather(g: Graph) -> tuple[str, int]:
    """A Split into a ReLU part and a negated part, a Gather with repeated and negative indices, broadcasting Add
    of a column and a row, constant minus value."""
    first, second = g.node("Split", [g.dense("x", 2, 9, relu=False), g.weight(2, data=[5, 4])], 2, axis=1)
    parts = g.node("Concat", [g.node("Relu", [first])[0], g.node("Neg", [second])[0]], axis=1)[0]
    picked = g.node("Gather", [parts, g.weight(6, data=[0, 3, 3, -1, 7, 2])], axis=1)[0]
    column = g.node("Reshape", [g.dense(picked, 6, 3), g.weight(2, data=[3, 1])])[0]
    grid = g.node("Add", [column, g.dense("x", 2, 3, relu=False)])[0]  # (3, 1) + (1, 3): broadcast both
    flat = g.node("Reshape", [g.node("Sub", [g.weight(3, 3), grid])[0], g.weight(2, data=[1, 9])])[0]
    return g.dense(g.node("Relu", [flat])[0], 9, 2, relu=False), 2


def dynamic_flatten(g: Graph) -> tuple[str, int]:
    """What older PyTorch exports write for x.view(x.size(0), -1): Shape, Gather, Unsqueeze and Concat fold to a
    constant Reshape target, then a chain."""
    batch = g.node("Gather", [g.node("Shape", ["x"])[0], g.weight(1, data=np.int64(0))], axis=0)[0]
    target = g.node("Concat", [g.node("Unsqueeze", [batch, g.weight(1, data=[0])])[0], g.weight(1, data=[-1])], axis=0)
    flat = g.node("Reshape", ["x", target[0]])[0]
    return g.dense(g.dense(flat, 3, 5), 5, 2, relu=False), 2


BUILDERS = {
    "chain": chain,
    "summed": summed_branches,
    "sliced": sliced_side_branch,
    "skip": skip_over_relus,
    "split": split_and_gather,
    "shape": dynamic_flatten,
}
N_INPUTS = {"chain": 2, "summed": 3, "sliced": 4, "skip": 3, "split": 2, "shape": 3}


def build(kind: str, path: Path, seed: int) -> Path:
    g = Graph(np.random.default_rng(seed), N_INPUTS[kind])
    output, n_outputs = BUILDERS[kind](g)
    return g.save(path, output, n_outputs)


def evaluate(ops, x: np.ndarray) -> list[np.ndarray]:
    """Every value of the checker's operations at the rows x, in float64 (the reference the bounds must hold at)."""
    values = [x]
    for kind, reads, param in ops:
        v = values[reads[0]]
        if kind == "pick":
            joined = np.concatenate([values[r] for r in reads], axis=1)
            v = np.where(param[0] >= 0, joined[:, param[0]], param[1])
        else:
            steps = {"matmul": lambda: v @ param, "add": lambda: v + param, "mul": lambda: v * param}
            steps.update(div=lambda: v / param, neg=lambda: -v, relu=lambda: np.maximum(v, 0.0))
            v = values[reads[1]] + v if kind == "sum" else steps[kind]()
        values.append(v)
    return values


def run_onnxruntime(path: Path, points: np.ndarray) -> np.ndarray:
    """The file's outputs at each point (one run per point: the input is [1, n]), flattened, float64."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    rows = [session.run(None, {name: p.astype(np.float32)[None, :]})[0].reshape(-1) for p in points]
    return np.array(rows, dtype=np.float64)
