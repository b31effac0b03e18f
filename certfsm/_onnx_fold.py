"""Folding the graph's operators into affine functions of the activations, exactly.

Every tensor that depends on the input is held as an `Affine`: a matrix
times the concatenation of some activations (the input, or the output of
a Relu node) plus a bias, over the tensor flattened in C order. Affine
operators (Gemm, MatMul, Add, Sub, Mul, Div by constants, Neg, and Add or
Sub of two such tensors) fold into the matrix, so input normalisation
merges into the first layer and a plant model's matrices merge into the
output; selections (Slice, Gather, Split, Concat) pick and stack rows,
which is exact. A Relu node starts a new activation (`certfsm._onnx_layers`
then groups them into the IR's layers). Each value keeps the names of the
nodes folded into it, which become the layer's `source`.

Folding in float64 can round (a division by a standard deviation, a
mean pushed through a matrix product, two branches summed), and then the
folded layer is no longer the function the ONNX file stores. So every
fold is also done in exact rational arithmetic (numpy object arrays of
Fractions, the same code): when the floats differ from the exact result,
the value keeps the exact values beside them. A matrix product on a
selection of an activation (its identity, a slice of it) is exact in
floats and skips the rational pass, which keeps loading ACAS Xu-sized
models fast.

Shape operators (`SHAPE_OPS`: Flatten, Reshape, Squeeze, Unsqueeze,
Identity) only relabel the tensor: they are accepted as long as the data
stays one feature vector where a matrix product needs it.

Every tensor may hold at most `MAX_FEATURES` values, checked before
anything that size is built (a declared input of 10^12 features once
asked numpy for an identity that size). Shapes are multiplied as Python
integers, which cannot overflow.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Mapping, Protocol, TypeAlias

import numpy as np
import onnx
from onnx import helper

from ._errors import ModelError
from ._rational import integer_form, rational_array

SHAPE_OPS = ("Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity")
SELECTION_OPS = ("Slice", "Gather", "Split", "Concat")
# The widest benchmark network has 512 neurons a layer; folding an elementwise operator into a fresh
# layer of n features handles n^2 rationals (about 12 s at 1024).
MAX_FEATURES = 1024


class Constant(Protocol):
    """What the fold reads of a constant of the graph (`certfsm._onnx_graph` keeps them, with their provenance)."""

    value: np.ndarray

    def weights(self, where: str, label: str) -> np.ndarray:
        """The finite float64 values; ModelError naming the constant, `where` and `label` otherwise."""
        ...


Constants: TypeAlias = Mapping[str, Constant]
"""The constants seen so far, by tensor name."""

Fold: TypeAlias = Callable[..., tuple[np.ndarray, np.ndarray]]
"""``fold(weight, bias, *constants) -> (weight, bias)``, the same code on float and on Fraction arrays."""


@dataclass(frozen=True, eq=False)
class Affine:
    """A tensor as ``weight @ concat(activations in reads) + bias``, flattened in C order.

    `reads`: the activation numbers (0 the input, then one per Relu node in
    graph order), ascending; `widths` their sizes. `exact`: the exact
    (weight, bias) as Fraction arrays when the floats only approximate
    them, else None. `sources`: the nodes folded in since the activations.
    Values are immutable: every operation returns a new one.
    """

    where: str
    shape: tuple[int, ...]
    reads: tuple[int, ...]
    widths: tuple[int, ...]
    weight: np.ndarray
    bias: np.ndarray
    exact: tuple[np.ndarray, np.ndarray] | None = None
    sources: tuple[str, ...] = ()

    @classmethod
    def activation(cls, where: str, number: int, shape: tuple[int, ...]) -> "Affine":
        """The identity on one activation of this shape."""
        size = math.prod(shape)
        return cls(where, tuple(shape), (number,), (size,), np.eye(size), np.zeros(size))

    @property
    def size(self) -> int:
        return int(self.weight.shape[0])

    def _with(self, **changes: Any) -> "Affine":
        return dataclasses.replace(self, **changes)

    def exact_pair(self) -> tuple[np.ndarray, np.ndarray]:
        """(weight, bias) as Fraction arrays, the exact values."""
        return self.exact or (rational_array(self.weight), rational_array(self.bias))

    def folded(
        self, name: str, fold: Fold, *constants: np.ndarray, exact_in_floats: bool = False, bias_only: bool = False
    ) -> "Affine":
        """Apply ``fold(weight, bias, *constants) -> (weight, bias)`` in float64 and in exact rationals.

        `exact_in_floats` says the float result is known to be exact,
        which skips the rational pass; `bias_only` says the weights pass
        through unchanged (Add, Sub of a constant), so only the biases are
        compared.
        """
        weight, bias = fold(self.weight, self.bias, *constants)
        sources = self.sources + (name,)
        _check_finite(self.where, sources, weight, bias)
        changed: dict[str, Any] = dict(weight=weight, bias=bias, sources=sources)
        if exact_in_floats and self.exact is None:
            return self._with(**changed)
        if bias_only and self.exact is None:
            start = (self.weight, rational_array(self.bias))
        else:
            start = self.exact_pair()
        exact_weight, exact_bias = fold(*start, *(rational_array(c) for c in constants))
        same_bias = _equal(bias, exact_bias)
        if bias_only and self.exact is None:
            return self._with(**changed, exact=None if same_bias else (rational_array(weight), exact_bias))
        same = same_bias and _equal(weight, exact_weight)
        return self._with(**changed, exact=None if same else (exact_weight, exact_bias))

    def is_selection(self) -> bool:
        """True when each row picks one activation value and no two rows the same (exact under a matrix product)."""
        weight = self.weight
        return (
            self.exact is None
            and not np.any(self.bias)
            and bool(np.all((weight == 0.0) | (weight == 1.0)))
            and bool(np.all(np.count_nonzero(weight, axis=1) == 1))
            and bool(np.all(np.count_nonzero(weight, axis=0) <= 1))
        )

    def rows(self, name: str | None, order: np.ndarray) -> "Affine":
        """The rows in `order` (an array of flat indices, its shape the new one): Slice, Gather, Split (exact)."""
        flat = order.reshape(-1)
        exact = None if self.exact is None else (self.exact[0][flat], self.exact[1][flat])
        sources = self.sources + ((name,) if name else ())
        return self._with(
            shape=order.shape, weight=self.weight[flat], bias=self.bias[flat], exact=exact, sources=sources
        )

    @classmethod
    def constant(cls, where: str, value: np.ndarray) -> "Affine":
        """A constant tensor as a value that reads no activation (a Concat operand)."""
        flat = np.asarray(value, dtype=np.float64).reshape(-1)
        return cls(where, np.shape(value), (), (), np.zeros((flat.size, 0)), flat)

    def widened(self, reads: tuple[int, ...], widths: tuple[int, ...]) -> "Affine":
        """The same function over more activations (`reads` a superset of this value's, ascending)."""
        if reads == self.reads:
            return self
        start = dict(zip(reads, np.cumsum((0,) + widths[:-1])))
        ranges = [np.arange(start[r], start[r] + w) for r, w in zip(self.reads, self.widths)]
        columns = np.concatenate(ranges).astype(np.int64) if ranges else np.zeros(0, dtype=np.int64)

        def spread(weight: np.ndarray) -> np.ndarray:
            result = np.zeros((weight.shape[0], sum(widths)), dtype=weight.dtype)
            if weight.dtype == object:
                result[:] = Fraction(0)
            result[:, columns] = weight
            return result

        exact = None if self.exact is None else (spread(self.exact[0]), self.exact[1])
        return self._with(reads=reads, widths=widths, weight=spread(self.weight), exact=exact)

    def check_width(self, width: int, label: str) -> None:
        """Refuse a tensor that would hold more than MAX_FEATURES values, before it is computed."""
        if width > MAX_FEATURES:
            raise ModelError(
                f"{self.where}: {label} gives {width} values, more than the {MAX_FEATURES} a layer may "
                "have in certfsm (it verifies small controller networks); use a narrower network"
            )


def combined(
    name: str, parts: list[Affine], fold: Callable[..., tuple[np.ndarray, np.ndarray]], shape: tuple[int, ...]
) -> Affine:
    """``fold(*(weight, bias) pairs)`` over values widened to the activations they read together.

    Concat stacks rows (exact); Add and Sub of two tensors add their
    matrices, which can round in floats, so the rational pass runs and
    keeps the exact sum when it differs.
    """
    widths_of = {r: w for part in parts for r, w in zip(part.reads, part.widths)}
    reads = tuple(sorted(widths_of))
    widths = tuple(widths_of[r] for r in reads)
    parts = [part.widened(reads, widths) for part in parts]
    weight, bias = fold(*((p.weight, p.bias) for p in parts))
    sources = tuple(dict.fromkeys(s for p in parts for s in p.sources)) + (name,)
    _check_finite(parts[0].where, sources, weight, bias)
    result = Affine(parts[0].where, tuple(shape), reads, widths, weight, bias, None, sources)
    if all(p.exact is None for p in parts) and fold is stacked:
        return result
    exact_weight, exact_bias = fold(*(p.exact_pair() for p in parts))
    if _equal(bias, exact_bias) and _equal(weight, exact_weight):
        return result
    return result._with(exact=(exact_weight, exact_bias))


def _check_finite(where: str, sources: tuple[str, ...], weight: np.ndarray, bias: np.ndarray) -> None:
    if not (np.all(np.isfinite(weight)) and np.all(np.isfinite(bias))):
        raise ModelError(f"{where}: folding {'+'.join(sources)} overflows float64; check the model's constants")


def stacked(*pairs: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate (weight, bias) pairs row-wise (the fold of a Concat along the flattened rows)."""
    return np.concatenate([w for w, _ in pairs]), np.concatenate([b for _, b in pairs])


def fold_node(value: Affine, node: onnx.NodeProto, name: str, label: str, constants: Constants) -> Affine:
    """The value after an affine operator of it with constants (Gemm, MatMul, Add, Sub, Mul, Div, Neg)."""
    op = node.op_type
    if op == "Neg":
        return value.folded(name, lambda w, b: (-w, -b), exact_in_floats=True)
    folds = {"Gemm": _gemm, "MatMul": _matmul, "Add": _add, "Sub": _sub, "Mul": _mul, "Div": _div}
    return folds[op](value, node, name, label, constants)


def _constant_operand(value: Affine, node: onnx.NodeProto, label: str, constants: Constants) -> tuple[np.ndarray, bool]:
    """The constant operand of a binary op and whether the data is the first operand."""
    first, second = node.input[0], node.input[1]
    is_data_first = first not in constants
    constant = constants[second if is_data_first else first]
    return constant.weights(value.where, label), is_data_first


def broadcast(first: tuple[int, ...], second: tuple[int, ...]) -> tuple[int, ...] | None:
    """numpy's broadcast shape of the two, or None where they do not broadcast."""
    try:
        return tuple(np.broadcast_shapes(first, second))
    except ValueError:
        return None


def per_feature(value: Affine, constant: np.ndarray, label: str, op: str) -> tuple[np.ndarray, tuple[int, ...]]:
    """A constant broadcast onto the tensor (flattened), and the shape; refused if it would grow the tensor."""
    result = broadcast(value.shape, constant.shape)
    if result is None or math.prod(result) != math.prod(value.shape):
        raise ModelError(
            f"{value.where}: {label} ({op}) combines the data of shape {list(value.shape)} with a constant of shape "
            f"{list(constant.shape)}; certfsm needs a scalar or per-feature constant that keeps one feature vector"
        )
    return np.broadcast_to(constant, result).reshape(-1), tuple(result)


def _add(value: Affine, node: onnx.NodeProto, name: str, label: str, constants: Constants) -> Affine:
    constant, _ = _constant_operand(value, node, label, constants)
    offset, shape = per_feature(value, constant, label, "Add")
    return value.folded(name, lambda w, b, c: (w, b + c), offset, bias_only=True)._with(shape=shape)


def _sub(value: Affine, node: onnx.NodeProto, name: str, label: str, constants: Constants) -> Affine:
    constant, is_data_first = _constant_operand(value, node, label, constants)
    offset, shape = per_feature(value, constant, label, "Sub")
    if is_data_first:
        return value.folded(name, lambda w, b, c: (w, b - c), offset, bias_only=True)._with(shape=shape)
    return value.folded(name, lambda w, b, c: (-w, c - b), offset)._with(shape=shape)


def _mul(value: Affine, node: onnx.NodeProto, name: str, label: str, constants: Constants) -> Affine:
    constant, _ = _constant_operand(value, node, label, constants)
    scale, shape = per_feature(value, constant, label, "Mul")
    return value.folded(name, lambda w, b, c: (w * c[:, None], b * c), scale)._with(shape=shape)


def _div(value: Affine, node: onnx.NodeProto, name: str, label: str, constants: Constants) -> Affine:
    constant, is_data_first = _constant_operand(value, node, label, constants)
    if not is_data_first:
        raise ModelError(
            f"{value.where}: {label} (Div) divides a constant by the data, which is not linear; "
            "certfsm supports Div of the data by a constant"
        )
    scale, shape = per_feature(value, constant, label, "Div")
    if np.any(scale == 0.0):
        raise ModelError(
            f"{value.where}: {label} (Div) divides by zero in constant '{node.input[1]}'; fix the model's normalisation"
        )
    return value.folded(name, lambda w, b, c: (w / c[:, None], b / c), scale)._with(shape=shape)


def _matmul(value: Affine, node: onnx.NodeProto, name: str, label: str, constants: Constants) -> Affine:
    if node.input[0] in constants:
        raise ModelError(
            f"{value.where}: {label} (MatMul) multiplies a constant by the data from the left; "
            "certfsm supports data @ constant (re-export with the weight as the second input)"
        )
    matrix = constants[node.input[1]].weights(value.where, label)
    new_tail: tuple[int, ...]
    if matrix.ndim == 1:
        matrix, new_tail = matrix[:, None], ()
    else:
        new_tail = matrix.shape[1:2]
    if matrix.ndim != 2 or value.shape[-1:] != matrix.shape[:1] or math.prod(value.shape[:-1]) != 1:
        raise ModelError(
            f"{value.where}: {label} (MatMul) multiplies data of shape {list(value.shape)} by a constant of shape "
            f"{list(constants[node.input[1]].value.shape)}; "
            "certfsm needs one feature row [1, k] times a [k, m] matrix"
        )
    value.check_width(matrix.shape[1], label)
    result = value.folded(
        name, lambda w, b, m: (_dot(m.T, w), _dot(b, m)), matrix, exact_in_floats=value.is_selection()
    )
    return result._with(shape=value.shape[:-1] + new_tail)


def _gemm(value: Affine, node: onnx.NodeProto, name: str, label: str, constants: Constants) -> Affine:
    attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if node.input[0] in constants:
        raise ModelError(
            f"{value.where}: {label} (Gemm) takes the data as operand B; "
            "certfsm supports Gemm with the data as A and constant B and C"
        )
    if attributes.get("transA", 0):
        raise ModelError(
            f"{value.where}: {label} (Gemm) has transA=1; "
            "certfsm supports Gemm with transA=0, re-export without transposing A"
        )
    matrix = constants[node.input[1]].weights(value.where, label)
    if attributes.get("transB", 0):
        matrix = matrix.T
    if len(value.shape) != 2 or value.shape[0] != 1 or matrix.ndim != 2 or matrix.shape[0] != value.shape[1]:
        raise ModelError(
            f"{value.where}: {label} (Gemm) multiplies data of shape {list(value.shape)} by B of shape "
            f"{list(matrix.shape)} (after transB); certfsm needs data [1, k] and B [k, m]"
        )
    value.check_width(matrix.shape[1], label)
    alpha, beta = float(attributes.get("alpha", 1.0)), float(attributes.get("beta", 1.0))
    result = value.folded(
        name,
        lambda w, b, m, a: (a * _dot(m.T, w), a * _dot(b, m)),
        matrix,
        np.array(alpha),
        exact_in_floats=value.is_selection() and alpha == 1.0,
    )._with(shape=(1, matrix.shape[1]))
    if len(node.input) > 2 and node.input[2]:
        offset, _ = per_feature(result, constants[node.input[2]].weights(value.where, label), label, "Gemm")
        result = result.folded(name, lambda w, b, c, s: (w, b + s * c), offset, np.array(beta), bias_only=True)
        result = result._with(sources=result.sources[:-1])
    return result


def _dot(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """``left @ right`` for float arrays, or exactly for Fraction object arrays.

    Exactly means on integers: each side is scaled to integer numerators
    over one common denominator, the product is one matrix product of
    Python integers, and only its entries become Fractions again. A
    product of two 512 x 256 matrices then takes seconds, not minutes.
    """
    if left.dtype != object:
        floats: np.ndarray = left @ right  # numpy types @ as Any
        return floats
    left_numerators, left_denominator = integer_form(left)
    right_numerators, right_denominator = integer_form(right)
    product = left_numerators @ right_numerators
    denominator = left_denominator * right_denominator
    result = np.empty(product.shape, dtype=object)
    result.reshape(-1)[:] = [Fraction(int(v), denominator) for v in np.asarray(product).reshape(-1)]
    return result


def _equal(floats: np.ndarray, rationals: np.ndarray) -> bool:
    """Every float equals its rational counterpart exactly."""
    return all(Fraction(*float(f).as_integer_ratio()) == r for f, r in zip(floats.reshape(-1), rationals.reshape(-1)))


def _integers(node: onnx.NodeProto, name: str, position: int, constants: Constants) -> list[int] | None:
    """An integer list given as an attribute (old opsets) or as the constant input at `position` (new opsets)."""
    for attribute in node.attribute:
        if attribute.name == name:
            value = helper.get_attribute_value(attribute)
            return [int(v) for v in np.atleast_1d(value)]
    if len(node.input) > position and node.input[position]:
        return [int(v) for v in np.asarray(constants[node.input[position]].value).reshape(-1)]
    return None


def _axis(node: onnx.NodeProto, rank: int, default: int | None, fail: Callable[[str], ModelError]) -> int:
    axis = next((int(helper.get_attribute_value(a)) for a in node.attribute if a.name == "axis"), default)
    if axis is None:
        raise fail("has no axis")
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank:
        raise fail(f"has axis {axis} out of range")
    return axis


def selection_orders(
    node: onnx.NodeProto, shapes: list[tuple[int, ...]], constants: Constants, where: str, label: str
) -> list[np.ndarray]:
    """Where each output value of a Slice, Gather, Split or Concat comes from: one index array per output.

    The indices count the operands' values flattened in C order one after
    the other (Concat), and each array has its output's shape. Applying
    them to an `Affine` or to a constant is exact, whatever the axis.
    """
    op, shape = node.op_type, shapes[0]

    def fail(detail: str) -> ModelError:
        return ModelError(f"{where}: {label} ({op}) {detail} for data of shape {list(shape)}; fix the model's shapes")

    numbers = np.arange(math.prod(shape)).reshape(shape)
    if op == "Concat":
        axis = _axis(node, len(shape), None, fail)
        parts, start = [], 0
        for part in shapes:
            if len(part) != len(shape) or any(a != b for i, (a, b) in enumerate(zip(part, shape)) if i != axis):
                raise fail(f"joins a tensor of shape {list(part)} along axis {axis}")
            parts.append(np.arange(start, start + math.prod(part)).reshape(part))
            start += math.prod(part)
        return [np.concatenate(parts, axis=axis)]
    if op == "Gather":
        indices = constants.get(node.input[1])
        if indices is None or indices.value.dtype.kind not in "iu":
            raise fail("needs constant integer indices")
        axis = _axis(node, len(shape), 0, fail)
        try:
            return [np.take(numbers, np.asarray(indices.value, dtype=np.int64), axis=axis)]
        except IndexError:
            raise fail(f"has indices {indices.value.reshape(-1).tolist()[:8]} out of range") from None
    if op == "Slice":
        starts, ends = _integers(node, "starts", 1, constants), _integers(node, "ends", 2, constants)
        axes = _integers(node, "axes", 3, constants) or list(range(len(starts or [])))
        steps = _integers(node, "steps", 4, constants) or [1] * len(axes)
        if starts is None or ends is None or not len(starts) == len(ends) == len(axes) == len(steps):
            raise fail("needs constant starts, ends, axes and steps of one length")
        slices = [slice(None)] * len(shape)
        for start, end, axis, step in zip(starts, ends, axes, steps):
            axis = axis + len(shape) if axis < 0 else axis
            if not 0 <= axis < len(shape) or step == 0:
                raise fail(f"slices axis {axis} with step {step}")
            slices[axis] = slice(start, end, step)
        return [numbers[tuple(slices)]]
    axis = _axis(node, len(shape), 0, fail)
    sizes = _integers(node, "split", 1, constants)
    count = len(node.output)
    if sizes is None:
        chunk = -(-shape[axis] // count)
        sizes = [min(chunk, shape[axis] - i * chunk) for i in range(count)]
    if len(sizes) != count or sum(sizes) != shape[axis] or min(sizes) < 0:
        raise fail(f"splits axis {axis} into {sizes} for {count} outputs")
    return list(np.split(numbers, np.cumsum(sizes)[:-1], axis=axis))


def reshaped(
    node: onnx.NodeProto, shape: tuple[int, ...], constants: Constants, where: str, label: str
) -> tuple[int, ...]:
    """The shape after a Flatten/Reshape/Squeeze/Unsqueeze/Identity node (C-order data unchanged)."""
    op, rank, size = node.op_type, len(shape), math.prod(shape)

    def fail(detail: str) -> ModelError:
        return ModelError(f"{where}: {label} ({op}) {detail} for data of shape {list(shape)}; fix the model's shapes")

    if op == "Identity":
        return tuple(shape)
    if op == "Flatten":
        axis = next((int(helper.get_attribute_value(a)) for a in node.attribute if a.name == "axis"), 1)
        axis = axis + rank if axis < 0 else axis
        if not 0 <= axis <= rank:
            raise fail("has axis out of range")
        return (math.prod(shape[:axis]), math.prod(shape[axis:]))
    if op == "Reshape":
        target = _integers(node, "shape", 1, constants)
        allow_zero = any(a.name == "allowzero" and helper.get_attribute_value(a) for a in node.attribute)
        if target is None:
            raise fail("has no target shape")
        dims = [shape[i] if d == 0 and not allow_zero and i < rank else d for i, d in enumerate(target)]
        if dims.count(-1) == 1:
            known = math.prod(d for d in dims if d != -1)
            dims[dims.index(-1)] = size // known if known and size % known == 0 else -2
        if any(d < 0 for d in dims) or math.prod(dims) != size:
            raise fail(f"cannot reshape to {target}")
        return tuple(dims)
    axes = _integers(node, "axes", 1, constants)
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
