"""An exact judge of VNN-LIB instances that shares no code with certfsm.

Why: certfsm's verdicts are about the exact semantics of docs/semantics.md (a
float32 weight is the rational it denotes, a VNN-LIB constant is the
decimal written, ``<``/``>`` are strict). A wrong verdict can only be
caught by a judge that does not repeat certfsm's own reading of the files,
so this module interprets the ONNX graph node by node from its
initializers (onnx.numpy_helper) and reads the VNN-LIB text with its own
s-expression reader; it never imports certfsm.

One interpreter serves two arithmetics: `_Exact` (fractions.Fraction, to
evaluate a point: `is_violation`) and `_Symbolic` (z3 terms over Real with
exact rational constants, to decide an instance: `exact_answer`, or to
find an exact maximum: `exact_maximum`). The whole VNN-LIB assertion set,
input box included, is one formula over X and Y, so a point is a
violation exactly when it makes that formula true.
"""

from __future__ import annotations

import operator
import os
import re
from fractions import Fraction
from typing import Sequence

import numpy as np
import onnx
import z3
from onnx import helper, numpy_helper


class OracleError(Exception):
    """The oracle could not read an instance or Z3 gave no answer."""


# --- arithmetics ----------------------------------------------------------------


class _Exact:
    """Rationals: every operation is exact and comparisons are plain booleans."""

    def const(self, value: Fraction) -> Fraction:
        return value

    def relu(self, value: Fraction) -> Fraction:
        return value if value > 0 else Fraction(0)

    def all(self, items) -> bool:
        return all(items)

    def any(self, items) -> bool:
        return any(items)


class _Symbolic:
    """Z3 terms over Real; each ReLU gets named variables so terms stay small.

    `facts` collects the defining constraints of those variables; a query
    must assert them together with the formula.
    """

    def __init__(self) -> None:
        self.facts: list = []

    def const(self, value: Fraction):
        return z3.RealVal(f"{value.numerator}/{value.denominator}")

    def relu(self, value):
        index = len(self.facts) // 2
        pre, post = z3.Real(f"pre_{index}"), z3.Real(f"post_{index}")
        self.facts += [pre == value, post == z3.If(pre > 0, pre, 0)]
        return post

    def all(self, items):
        return z3.And(list(items))

    def any(self, items):
        return z3.Or(list(items))


# --- ONNX -----------------------------------------------------------------------


def load_model(source) -> onnx.ModelProto:
    """A ModelProto as given, or read from a path."""
    return source if isinstance(source, onnx.ModelProto) else onnx.load(os.fspath(source))


def input_count(model: onnx.ModelProto) -> int:
    """The number of scalar inputs: the product of the data input's dimensions (symbolic ones count 1)."""
    dims = [d.dim_value or 1 for d in _data_input(model).type.tensor_type.shape.dim]
    return int(np.prod(dims, dtype=np.int64))


def outputs(model: onnx.ModelProto, inputs: Sequence, arithmetic) -> list:
    """The network's outputs (C order) at `inputs` (C order), computed node by node in `arithmetic`."""
    graph = model.graph
    data = _data_input(model)
    shape = [d.dim_value or 1 for d in data.type.tensor_type.shape.dim]
    values = {data.name: _objects(list(inputs)).reshape(shape)}
    raw = {}
    for tensor in graph.initializer:
        raw[tensor.name] = numpy_helper.to_array(tensor)
    for node in graph.node:
        if node.op_type == "Constant":
            raw[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
            continue
        operands = [_operand(name, values, raw, arithmetic) for name in node.input]
        if node.op_type == "Split":
            axis = _attributes(node).get("axis", 0)
            sizes = np.asarray(operands[1]).reshape(-1)
            for name, part in zip(node.output, np.split(operands[0], np.cumsum(sizes)[:-1], axis=axis)):
                values[name] = part
            continue
        values[node.output[0]] = _apply(node, operands, arithmetic)
    return list(values[graph.output[0].name].reshape(-1))


def _data_input(model: onnx.ModelProto):
    initialized = {t.name for t in model.graph.initializer}
    return next(i for i in model.graph.input if i.name not in initialized)


def _objects(items: list) -> np.ndarray:
    """An object array of `items`, filled one by one so numpy never looks inside a z3 term."""
    array = np.empty(len(items), dtype=object)
    for index, item in enumerate(items):
        array[index] = item
    return array


def _operand(name: str, values: dict, raw: dict, arithmetic) -> np.ndarray | None:
    if not name:
        return None
    if name in values:
        return values[name]
    array = np.asarray(raw[name])
    if array.dtype.kind != "f":
        return array
    exact = [arithmetic.const(Fraction(float(v))) for v in array.reshape(-1)]
    return _objects(exact).reshape(array.shape)


def _attributes(node) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _elementwise(function, *arrays) -> np.ndarray:
    return np.frompyfunc(function, len(arrays), 1)(*arrays)


def _slice_operands(operands: list) -> tuple:
    starts, ends = (np.asarray(o).reshape(-1).tolist() for o in operands[1:3])
    axes = (
        np.asarray(operands[3]).reshape(-1).tolist()
        if len(operands) > 3 and operands[3] is not None
        else list(range(len(starts)))
    )
    steps = (
        np.asarray(operands[4]).reshape(-1).tolist()
        if len(operands) > 4 and operands[4] is not None
        else [1] * len(axes)
    )
    return starts, ends, axes, steps


def _apply(node, operands: list, arithmetic) -> np.ndarray:
    op, attributes = node.op_type, _attributes(node)
    if op == "Relu":
        return _elementwise(arithmetic.relu, operands[0])
    if op in ("Add", "Sub", "Mul", "Div"):
        return _elementwise(
            getattr(operator, {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "truediv"}[op]), *operands
        )
    if op == "MatMul":
        return np.matmul(operands[0], operands[1])
    if op == "Gemm":
        a, b = operands[0], operands[1]
        a = a.T if attributes.get("transA", 0) else a
        b = b.T if attributes.get("transB", 0) else b
        alpha = arithmetic.const(Fraction(float(attributes.get("alpha", 1.0))))
        product = _elementwise(lambda v: alpha * v, np.dot(a, b))
        if len(operands) > 2 and operands[2] is not None:
            beta = arithmetic.const(Fraction(float(attributes.get("beta", 1.0))))
            product = _elementwise(lambda p, c: p + beta * c, product, operands[2])
        return product
    if op == "Identity":
        return operands[0]
    if op == "Neg":
        return _elementwise(operator.neg, operands[0])
    if op == "Concat":
        return np.concatenate([o for o in operands if o is not None], axis=attributes["axis"])
    if op == "Slice":
        data, (starts, ends, axes, steps) = operands[0], _slice_operands(operands)
        slices = [slice(None)] * data.ndim
        for start, end, axis, step in zip(starts, ends, axes, steps):
            slices[axis] = slice(start, end, step)
        return data[tuple(slices)]
    if op == "Gather":
        return np.take(operands[0], np.asarray(operands[1]), axis=attributes.get("axis", 0))
    if op == "Flatten":
        data, axis = operands[0], attributes.get("axis", 1)
        axis = axis + data.ndim if axis < 0 else axis
        return data.reshape(int(np.prod(data.shape[:axis])), -1)
    if op == "Reshape":
        data, target = operands[0], [int(v) for v in np.asarray(operands[1]).reshape(-1)]
        if not attributes.get("allowzero", 0):
            target = [data.shape[i] if d == 0 else d for i, d in enumerate(target)]
        return data.reshape(target)
    raise OracleError(f"the oracle does not interpret ONNX op {op} (node {node.name!r})")


# --- VNN-LIB --------------------------------------------------------------------

_TOKEN = re.compile(r";[^\n]*|\(|\)|[^\s();]+")


def _sexprs(text: str) -> list:
    stack: list[list] = [[]]
    for token in _TOKEN.findall(text):
        if token.startswith(";"):
            continue
        if token == "(":
            stack.append([])
        elif token == ")":
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(token)
    if len(stack) != 1:
        raise OracleError("unbalanced parentheses in the VNN-LIB text")
    return stack[0]


def _render(expr) -> str:
    return expr if isinstance(expr, str) else "(" + " ".join(_render(item) for item in expr) + ")"


def _asserts(text: str) -> list:
    return [command[1] for command in _sexprs(text) if command[0] == "assert"]


def _names(xs: Sequence, ys: Sequence) -> dict:
    return {f"X_{i}": x for i, x in enumerate(xs)} | {f"Y_{j}": y for j, y in enumerate(ys)}


def formula(text: str, xs: Sequence, ys: Sequence, arithmetic):
    """The conjunction of the file's asserts, with X_i -> xs[i] and Y_j -> ys[j] and decimals read exactly."""
    names = _names(xs, ys)
    return arithmetic.all(_term(a, names, arithmetic) for a in _asserts(text))


_COMPARE = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt, "=": operator.eq}


def _term(expr, names: dict, arithmetic):
    if isinstance(expr, str):
        if expr in names:
            return names[expr]
        try:
            return arithmetic.const(Fraction(expr))
        except ValueError:
            raise OracleError(f"the oracle does not know the VNN-LIB symbol {expr!r}") from None
    head, args = expr[0], [_term(item, names, arithmetic) for item in expr[1:]]
    if head == "and":
        return arithmetic.all(args)
    if head == "or":
        return arithmetic.any(args)
    if head in _COMPARE:
        return arithmetic.all(_COMPARE[head](a, b) for a, b in zip(args, args[1:]))
    if head == "+":
        return sum(args[1:], args[0])
    if head == "-":
        return -args[0] if len(args) == 1 else args[0] - sum(args[2:], args[1])
    if head == "*":
        product = args[0]
        for factor in args[1:]:
            product = product * factor
        return product
    if head == "/":
        return args[0] / args[1]
    raise OracleError(f"the oracle does not read VNN-LIB operator {head!r}")


# --- questions ------------------------------------------------------------------


def _read_text(vnnlib) -> str:
    """VNN-LIB text: read from a path (os.PathLike), or the text itself (str)."""
    if isinstance(vnnlib, os.PathLike):
        with open(vnnlib) as handle:
            return handle.read()
    return vnnlib


def rational(value) -> Fraction:
    """A value read exactly: Fractions and ints as they are, floats (any width) as the binary value they hold."""
    return Fraction(value) if isinstance(value, (int, Fraction)) else Fraction(float(value))


def exact_outputs(model, point: Sequence) -> list[Fraction]:
    """The network's outputs at `point` (rationals, or floats read exactly), computed exactly."""
    model = load_model(model)
    xs = [rational(v) for v in point]
    if len(xs) != input_count(model):
        raise OracleError(f"point has {len(xs)} values but the network takes {input_count(model)} inputs")
    return outputs(model, xs, _Exact())


def failing_asserts(model, vnnlib, point: Sequence) -> list[str]:
    """The text of each top-level assert that `point` (rationals, or floats read exactly) makes false, exactly.

    Empty exactly when the point is a violation; a test failure can name
    what the point misses (an input bound, an output constraint).
    """
    xs = [rational(v) for v in point]
    names = _names(xs, exact_outputs(model, xs))
    return [_render(a) for a in _asserts(_read_text(vnnlib)) if not _term(a, names, _Exact())]


def is_violation(model, vnnlib, point: Sequence) -> bool:
    """Whether `point` (rationals, or floats read exactly) makes the whole VNN-LIB formula true exactly."""
    return not failing_asserts(model, vnnlib, point)


def exact_witness(model, vnnlib, timeout_s: float = 60.0) -> list[Fraction] | None:
    """A real input that makes the VNN-LIB formula true under the exact semantics, or None when there is none."""
    model, text = load_model(model), _read_text(vnnlib)
    arithmetic = _Symbolic()
    xs = [z3.Real(f"X_{i}") for i in range(input_count(model))]
    unsafe = formula(text, xs, outputs(model, xs, arithmetic), arithmetic)
    solver = z3.Solver()
    solver.set(timeout=int(timeout_s * 1000))
    solver.add(*arithmetic.facts, unsafe)
    answer = solver.check()
    if answer == z3.unknown:
        raise OracleError(f"z3 gave no answer within {timeout_s} s: {solver.reason_unknown()}")
    if answer == z3.unsat:
        return None
    found = solver.model()
    return [found.eval(x, model_completion=True).as_fraction() for x in xs]


def exact_answer(model, vnnlib, timeout_s: float = 60.0) -> str:
    """'sat' if some real input makes the VNN-LIB formula true under the exact semantics, else 'unsat'."""
    return "unsat" if exact_witness(model, vnnlib, timeout_s) is None else "sat"


def exact_maximum(
    model, lower: Sequence, upper: Sequence, weights: Sequence, timeout_s: float = 60.0
) -> tuple[Fraction, list[Fraction]]:
    """The exact maximum of sum_j weights[j] * Y_j over the box [lower, upper], and a point reaching it."""
    model = load_model(model)
    arithmetic = _Symbolic()
    xs = [z3.Real(f"X_{i}") for i in range(input_count(model))]
    ys = outputs(model, xs, arithmetic)
    objective = sum((arithmetic.const(rational(w)) * y for w, y in zip(weights, ys) if w), z3.RealVal(0))
    optimizer = z3.Optimize()
    optimizer.set(timeout=int(timeout_s * 1000))
    optimizer.add(*arithmetic.facts)
    for x, lo, hi in zip(xs, lower, upper):
        optimizer.add(x >= arithmetic.const(rational(lo)), x <= arithmetic.const(rational(hi)))
    optimizer.maximize(objective)
    if optimizer.check() != z3.sat:
        raise OracleError(f"z3 found no maximum within {timeout_s} s: {optimizer.reason_unknown()}")
    found = optimizer.model()
    point = [found.eval(x, model_completion=True).as_fraction() for x in xs]
    return found.eval(objective, model_completion=True).as_fraction(), point
