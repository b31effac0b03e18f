"""Folding the chain's operators into affine layers, exactly.

Consecutive affine operators (Gemm, MatMul, Add, Sub, Mul, Div by
constants) fold into one `AffineLayer`, so input normalisation merges into
the first layer; a Relu ends a layer. Each layer's `source` names the
nodes merged into it.

Folding in float64 can round (a division by a standard deviation, a
mean pushed through a matrix product), and then the folded layer is no
longer the function the ONNX file stores. So every fold is also done in
exact rational arithmetic (numpy object arrays of Fractions, the same
code): when the floats differ from the exact result, the layer keeps the
exact values beside them (`AffineLayer.exact`). A matrix product on a
freshly started layer (an identity) is exact in floats and skips the
rational pass, which keeps loading ACAS Xu-sized models fast.

Shape operators (`SHAPE_OPS`: Flatten, Reshape, Squeeze, Unsqueeze,
Identity) only relabel the tensor: the IR works on the tensor flattened
in C order, so they are accepted as long as the data stays one feature
vector (every dimension but one is 1 where a matrix product needs it).

`certfsm._onnx_graph` feeds `Chain` the nodes that read the data, with the
constants seen so far (each has a ``value`` array and ``weights(where,
label)``, the finite float64 values).

The chain starts each layer from an identity matrix as wide as the
layer's input and folds in exact rationals too, so its cost grows with
the square of the width: every tensor of the chain may hold at most
`MAX_FEATURES` values, checked before anything that size is built (a
declared input of 10^12 features once asked numpy for an identity that
size). Shapes are multiplied as Python integers, which cannot overflow.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Callable, Mapping, Protocol, TypeAlias

import numpy as np
import onnx
from onnx import helper

from ._errors import ModelError
from ._network import AffineLayer, Network
from ._rational import integer_form, rational_array

SHAPE_OPS = ("Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity")
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


class Chain:
    """Folds the chain into affine layers; ``weight @ x + bias`` maps the layer's input x to the current tensor.

    Invariant: `shape` is the current tensor's shape (batch 1) and its C-order
    flattening has `weight.shape[0]` entries.
    """

    def __init__(self, where: str, input_shape: tuple[int, ...]) -> None:
        self.where, self.input_shape = where, input_shape
        self.shape = input_shape
        self.layers: list[AffineLayer] = []
        self._restart(math.prod(input_shape))

    def _restart(self, size: int) -> None:
        self.weight: np.ndarray = np.eye(size)
        self.bias: np.ndarray = np.zeros(size)
        self.sources: list[str] = []
        self.exact: tuple[np.ndarray, np.ndarray] | None = None  # (weight, bias) as Fraction arrays when floats round
        self.is_fresh = True

    def _close(self, fallback: str) -> None:
        source = "+".join(self.sources) or fallback
        if self.weight.shape[0] == 0:
            raise ModelError(
                f"{self.where}: {source} gives 0 values, so the network would have a layer without "
                "neurons or no outputs; fix the model's weight shapes"
            )
        if not (np.all(np.isfinite(self.weight)) and np.all(np.isfinite(self.bias))):
            raise ModelError(f"{self.where}: folding {source} overflows float64; check the model's constants")
        exact = None
        if self.exact is not None:
            weight, bias = self.exact
            exact = (tuple(tuple(row) for row in weight.tolist()), tuple(bias.tolist()))
        self.layers.append(AffineLayer(self.weight, self.bias, source, exact))

    def _fold(self, fold: Fold, *constants: np.ndarray, exact_in_floats: bool = False, bias_only: bool = False) -> None:
        """Apply ``fold(weight, bias, *constants) -> (weight, bias)`` in float64 and in exact rationals.

        `exact_in_floats` says the float result is known to be exact (a
        plain matrix product on a fresh identity), which skips the
        rational pass; `bias_only` says the weights pass through unchanged
        (Add, Sub of the data), so only the biases are compared.
        """
        weight, bias = fold(self.weight, self.bias, *constants)
        if exact_in_floats and self.exact is None:
            self.weight, self.bias, self.is_fresh = weight, bias, False
            return
        if bias_only and self.exact is None:
            start = (self.weight, rational_array(self.bias))
        else:
            start = self.exact or (rational_array(self.weight), rational_array(self.bias))
        exact_weight, exact_bias = fold(*start, *(rational_array(c) for c in constants))
        self.weight, self.bias, self.is_fresh = weight, bias, False
        same_bias = _equal(bias, exact_bias)
        if bias_only and self.exact is None:
            self.exact = None if same_bias else (rational_array(weight), exact_bias)
            return
        self.exact = None if same_bias and _equal(weight, exact_weight) else (exact_weight, exact_bias)

    def finish(self, input_name: str) -> Network:
        self._close("identity output layer" if self.layers else "identity")
        return Network(tuple(self.layers), input_name=input_name, input_shape=self.input_shape)

    def apply(self, node: onnx.NodeProto, name: str, label: str, running: str, constants: Constants) -> None:
        op = node.op_type
        if op in ("Relu",) + SHAPE_OPS and node.input[0] != running:
            raise ModelError(
                f"{self.where}: {label} ({op}) takes the data as a later operand; "
                f"certfsm supports {op} with the data as its first input"
            )
        if op == "Relu":
            self._close(f"identity before {name}")
            self._restart(self.weight.shape[0])
            return
        if op in SHAPE_OPS:
            self.shape = reshaped(node, self.shape, constants, self.where, label)
            return
        getattr(self, f"_{op.lower()}")(node, label, constants)
        self.sources.append(name)

    def _check_width(self, width: int, label: str) -> None:
        """Refuse a matrix product that would give more than MAX_FEATURES values, before it is computed."""
        if width > MAX_FEATURES:
            raise ModelError(
                f"{self.where}: {label} gives {width} values, more than the {MAX_FEATURES} a layer may "
                "have in certfsm (it verifies small controller networks); use a narrower network"
            )

    def _constant_operand(self, node: onnx.NodeProto, label: str, constants: Constants) -> tuple[np.ndarray, bool]:
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
        if result is None or math.prod(result) != math.prod(self.shape):
            raise ModelError(
                f"{self.where}: {label} ({op}) combines the data of shape {list(self.shape)} with a constant of shape "
                f"{list(value.shape)}; certfsm needs a scalar or per-feature constant that keeps one feature vector"
            )
        self.shape = tuple(result)
        return np.broadcast_to(value, result).reshape(-1)

    def _add(self, node: onnx.NodeProto, label: str, constants: Constants) -> None:
        value, _ = self._constant_operand(node, label, constants)
        self._fold(lambda w, b, offset: (w, b + offset), self._per_feature(value, label, "Add"), bias_only=True)

    def _sub(self, node: onnx.NodeProto, label: str, constants: Constants) -> None:
        value, is_data_first = self._constant_operand(node, label, constants)
        offset = self._per_feature(value, label, "Sub")
        if is_data_first:
            self._fold(lambda w, b, c: (w, b - c), offset, bias_only=True)
        else:
            self._fold(lambda w, b, c: (-w, c - b), offset)

    def _mul(self, node: onnx.NodeProto, label: str, constants: Constants) -> None:
        value, _ = self._constant_operand(node, label, constants)
        scale = self._per_feature(value, label, "Mul")
        self._fold(lambda w, b, c: (w * c[:, None], b * c), scale)

    def _div(self, node: onnx.NodeProto, label: str, constants: Constants) -> None:
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
        self._fold(lambda w, b, c: (w / c[:, None], b / c), scale)

    def _matmul(self, node: onnx.NodeProto, label: str, constants: Constants) -> None:
        if node.input[0] in constants:
            raise ModelError(
                f"{self.where}: {label} (MatMul) multiplies a constant by the data from the left; "
                "certfsm supports data @ constant (re-export with the weight as the second input)"
            )
        matrix = constants[node.input[1]].weights(self.where, label)
        new_tail: tuple[int, ...]
        if matrix.ndim == 1:
            matrix, new_tail = matrix[:, None], ()
        else:
            new_tail = matrix.shape[1:2]
        if matrix.ndim != 2 or self.shape[-1:] != matrix.shape[:1] or math.prod(self.shape[:-1]) != 1:
            raise ModelError(
                f"{self.where}: {label} (MatMul) multiplies data of shape {list(self.shape)} by a constant of shape "
                f"{list(constants[node.input[1]].value.shape)}; "
                "certfsm needs one feature row [1, k] times a [k, m] matrix"
            )
        self._check_width(matrix.shape[1], label)
        self._fold(lambda w, b, m: (_dot(m.T, w), _dot(b, m)), matrix, exact_in_floats=self.is_fresh)
        self.shape = self.shape[:-1] + new_tail

    def _gemm(self, node: onnx.NodeProto, label: str, constants: Constants) -> None:
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
        self._check_width(matrix.shape[1], label)
        alpha, beta = float(attributes.get("alpha", 1.0)), float(attributes.get("beta", 1.0))
        scale = np.array(alpha)
        self._fold(
            lambda w, b, m, a: (a * _dot(m.T, w), a * _dot(b, m)),
            matrix,
            scale,
            exact_in_floats=self.is_fresh and alpha == 1.0,
        )
        self.shape = (1, matrix.shape[1])
        if len(node.input) > 2 and node.input[2]:
            offset = self._per_feature(constants[node.input[2]].weights(self.where, label), label, "Gemm")
            self._fold(lambda w, b, c, s: (w, b + s * c), offset, np.array(beta), bias_only=True)


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


def _shape_operand(node: onnx.NodeProto, name: str, constants: Constants) -> list[int] | None:
    """An integer list given as an attribute (old opsets) or as the constant second input (new opsets)."""
    for attribute in node.attribute:
        if attribute.name == name:
            return [int(v) for v in helper.get_attribute_value(attribute)]
    if len(node.input) > 1 and node.input[1]:
        return [int(v) for v in np.asarray(constants[node.input[1]].value).reshape(-1)]
    return None


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
        target = _shape_operand(node, "shape", constants)
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
