"""The network and sound bounds: an ONNX chain read by its own loader, rigorous interval and linear bounds.

Soundness. Every number below is a float64 that bounds a real quantity
of the exact network (float32 weights read as the rationals they are):

- One IEEE operation rounds to nearest, so ``np.nextafter(fl(a op b),
  -inf)`` is at most the exact ``a op b`` and the step up at least it
  (`_down`, `_up`; at a binade edge the step is the smaller ulp, still
  past the rounding error).
- A matrix product, in any order, with or without FMA, satisfies
  ``|fl(A B) - A B| <= gamma_n |A| |B|`` with ``gamma_n = n u / (1 - n u)``,
  u = 2^-53, plus at most 2^-1074 per product lost to underflow; and
  ``fl(|A| |B|) >= (1 - gamma_n) |A| |B|``. `_product` returns fl(A B)
  with the bound ``(n + 2) 2^-52 fl(|A| |B|) + (n + 1) tiny``, rounded up,
  which exceeds both (n <= 2^40).
- Interval bounds of every node follow from these (`forward`), and so do
  forward linear bounds (`_linear_step`): functions ``F_lo . [x, 1] <=
  v_i <= F_hi . [x, 1]`` over the box, carried node by node. Through
  ``v M`` the lower function takes ``F_lo`` where ``M >= 0`` and ``F_hi``
  where ``M < 0`` (the upper one the reverse); through ``+ c`` the
  constant moves outward; through a ReLU the lower function is ``alpha
  F_lo`` with alpha 0 or 1 (exact; ``alpha z <= relu(z)``) and the upper
  one ``s F_hi + t`` with the line above relu on the node's interval (see
  below). Each float product's error is bounded as above and costs at
  most that error times ``|x|`` (or 1 for the constant), moved into the
  constant outward; the function's bound over the box is taken at the
  vertex chosen by its signs (`_concretise`). Linear
  bounds (`lower_bound`) keep the invariant ``target >= coef . v_i +
  const`` for every input of the box: through ``v_{i+1} = v_i M`` the
  float ``coef M^T`` replaces the exact one and the difference, at most
  E, costs at most ``E . |v_i|`` (bounded by node i's interval); through
  ``+ c`` the constant grows by a lower bound of ``coef . c``; through a
  ReLU, ``relu(z) >= alpha z`` for every real z and alpha in [0, 1]
  (any slope the certificate gives, clipped), and ``relu(z) <= s z + t``
  on [l, u] for the line that lies above relu at l and at u (relu is
  convex, so above it on the whole interval), with t rounded up; each
  float product coef * slope is off by at most 2^-52 of itself, which
  costs that times ``|z|``. At the input, ``coef . x`` is smallest at the
  box's vertex chosen by the signs of coef.

So every value returned is a true bound for every real input of the
closed box, whatever slopes and weights the certificate gives.
"""

from __future__ import annotations

import numpy as np

_TINY = np.finfo(np.float64).tiny
_HALF_ULP = 2.0**-52


class ModelError(ValueError):
    """The ONNX file is not a chain this checker reads (the message names the node)."""


def _down(x):
    return np.nextafter(x, -np.inf)


def _up(x):
    return np.nextafter(x, np.inf)


def _product(a, b):
    """(fl(a @ b), an upper bound of its error)."""
    n = a.shape[-1]
    return a @ b, _up(((np.abs(a) @ np.abs(b)) * ((n + 2) * _HALF_ULP)) + (n + 1) * _TINY)


def _sum_up(x):
    """An upper bound of the exact row sums of a non-negative (P, n) array."""
    n = x.shape[-1]
    return _up(np.sum(x, axis=-1) * (1.0 + (n + 2) * _HALF_ULP) + (n + 1) * _TINY)


def _dot_low(a, b):
    """A lower bound of the exact row-wise dot products of a and b (both (P, n), or b (n,))."""
    products = a * b
    n = products.shape[-1]
    error = _up(_sum_up(np.abs(products)) * ((n + 3) * _HALF_ULP) + (n + 1) * _TINY)
    return _down(np.sum(products, axis=-1) - error)


def read_model(path) -> list[tuple]:
    """The chain of operations from the ONNX file: ("matmul", M) (v -> v @ M), ("add", c), ("relu",)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    graph = model.graph
    values = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in graph.initializer}
    inputs = [i.name for i in graph.input if i.name not in values]
    if len(inputs) != 1:
        raise ModelError(f"{path}: the graph has inputs {inputs}; this checker reads one input")
    current, ops = inputs[0], []
    for node in graph.node:
        if node.op_type == "Constant":
            values[node.output[0]] = numpy_helper.to_array(node.attribute[0].t).astype(np.float64)
            continue
        if current not in node.input:
            raise ModelError(f"{path}: node {node.name or node.op_type} does not follow the chain; one chain only")
        others = [values.get(name) for name in node.input if name != current]
        attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type in ("Flatten", "Reshape", "Identity", "Squeeze", "Unsqueeze"):
            pass
        elif node.op_type == "Relu":
            ops.append(("relu",))
        elif node.op_type == "MatMul" and node.input[0] == current and others[0] is not None:
            ops.append(("matmul", others[0]))
        elif node.op_type in ("Add", "Sub") and len(others) == 1 and others[0] is not None:
            if node.op_type == "Sub" and node.input[0] != current:
                raise ModelError(f"{path}: node {node.name}: constant - x is not read; write x - constant")
            ops.append(("add", (-1.0 if node.op_type == "Sub" else 1.0) * others[0].reshape(-1)))
        elif node.op_type == "Gemm" and node.input[0] == current and others[0] is not None:
            if attributes.get("alpha", 1.0) != 1.0 or attributes.get("beta", 1.0) != 1.0 or attributes.get("transA"):
                raise ModelError(f"{path}: node {node.name}: Gemm with alpha, beta or transA is not read")
            ops.append(("matmul", others[0].T if attributes.get("transB") else others[0]))
            if len(others) > 1 and others[1] is not None:
                ops.append(("add", others[1].reshape(-1)))
        else:
            raise ModelError(f"{path}: node {node.name or '?'} ({node.op_type}) is not read by this checker")
        current = node.output[0]
    return ops


_CHOICES = (
    lambda relu, low, high, parallel: np.zeros_like(low),
    lambda relu, low, high, parallel: np.ones_like(low),
    lambda relu, low, high, parallel: parallel,
)
"""The lower slopes tried besides the adaptive ones when a ReLU input is bounded again: 0, 1 and u / (u - l)."""


def _concretise(functions, lower, upper, side):
    """A bound of each function ``F . [x, 1]`` over its box, (B, n): `side` +1 a lower bound, -1 an upper one."""
    ones = np.ones((lower.shape[0], 1))
    low1, high1 = np.concatenate([lower, ones], 1)[:, None, :], np.concatenate([upper, ones], 1)[:, None, :]
    coef = np.swapaxes(functions, 1, 2) * side
    return side * _dot_low(coef, np.where(coef >= 0.0, low1, high1))


def _linear_step(op, low_fn, high_fn, magnitude, low, high):
    """The forward linear functions (B, n_in + 1, n) of the node after `op` (see the module docstring); `low`,
    `high`: the interval of the node before it (a ReLU's input)."""
    if op[0] == "add":
        low_fn, high_fn = low_fn.copy(), high_fn.copy()
        low_fn[:, -1], high_fn[:, -1] = _down(low_fn[:, -1] + op[1]), _up(high_fn[:, -1] + op[1])
        return low_fn, high_fn
    if op[0] == "matmul":
        positive, negative = np.maximum(op[1], 0.0), np.minimum(op[1], 0.0)
        both = np.concatenate([low_fn, high_fn], 2)
        value, error = _product(both, np.block([[positive, negative], [negative, positive]]))
        width = op[1].shape[1]
        low_fn, high_fn = value[:, :, :width], value[:, :, width:]
    else:
        unstable = (low < 0.0) & (high > 0.0)
        width = np.where(unstable, high - low, 1.0)
        slope = np.where(low >= 0.0, 1.0, np.where(unstable, np.clip(high / width, 0.0, 1.0), 0.0))
        intercept = np.where(unstable, np.maximum(_up(-slope * low), _up(high - _down(slope * high))), 0.0)
        alpha = np.where(low >= 0.0, 1.0, np.where(unstable & (high > -low), 1.0, 0.0))
        low_fn, high_fn = low_fn * alpha[:, None, :], high_fn * slope[:, None, :]
        error = np.concatenate([np.zeros_like(low_fn), _up(np.abs(high_fn) * _HALF_ULP + _TINY)], 2)
        high_fn[:, -1] = _up(high_fn[:, -1] + intercept)
    cost = _sum_up(np.swapaxes(error, 1, 2) * magnitude[:, None, :] * (1.0 + _HALF_ULP) + _TINY)
    width = low_fn.shape[2]
    low_fn[:, -1], high_fn[:, -1] = _down(low_fn[:, -1] - cost[:, :width]), _up(high_fn[:, -1] + cost[:, width:])
    return low_fn, high_fn


def forward(ops, lower, upper, choices=_CHOICES, known=None):
    """Interval bounds of every node v_0 .. v_K over boxes (B, n): lists of (B, n_i) arrays.

    Each ReLU input that some ReLU precedes is bounded again by
    `lower_bound` (rows +e_j and -e_j, with the adaptive slopes and each of
    `choices`), and the tightest bound is kept. `known`:
    (lows, highs) proved for boxes that contain these (their parents in a
    tree), intersected in at every node, so bounds only tighten down a tree.
    """
    lows, highs = [lower], [upper]
    relus_seen = 0
    identity = np.concatenate([np.eye(lower.shape[1]), np.zeros((1, lower.shape[1]))])
    low_fn = high_fn = np.broadcast_to(identity, (lower.shape[0],) + identity.shape)
    magnitude = np.concatenate([np.maximum(np.abs(lower), np.abs(upper)), np.ones((lower.shape[0], 1))], 1)
    for index, op in enumerate(ops):
        low, high = lows[-1], highs[-1]
        low_fn, high_fn = _linear_step(op, low_fn, high_fn, magnitude, low, high)
        if op[0] == "relu":
            low, high = np.maximum(low, 0.0), np.maximum(high, 0.0)
            relus_seen += 1
        elif op[0] == "add":
            low, high = _down(low + op[1]), _up(high + op[1])
        else:
            centre = (low + high) * 0.5
            radius = np.maximum(_up(centre - low), _up(high - centre))
            middle, error = _product(centre, op[1])
            spread, spread_error = _product(radius, np.abs(op[1]))
            reach = _up(_up(spread + spread_error) + error)
            low, high = _down(middle - reach), _up(middle + reach)
        if known is not None:
            low, high = np.maximum(low, known[0][index + 1]), np.minimum(high, known[1][index + 1])
        if op[0] != "relu":
            low = np.maximum(low, _concretise(low_fn, lower, upper, 1.0))
            high = np.minimum(high, _concretise(high_fn, lower, upper, -1.0))
        lows.append(low)
        highs.append(high)
        is_relu_input = index + 1 < len(ops) and ops[index + 1][0] == "relu"
        if is_relu_input and relus_seen:
            boxes, neurons = np.nonzero((low < 0.0) & (high > 0.0))
            if boxes.size:
                rows = np.zeros((2 * boxes.size, low.shape[1]))
                rows[np.arange(boxes.size), neurons] = 1.0
                rows[np.arange(boxes.size, 2 * boxes.size), neurons] = -1.0
                owner = np.concatenate([boxes, boxes])
                bound = lower_bound(ops, lows, highs, index + 1, rows, owner, None)
                for choice in choices:
                    bound = np.maximum(bound, lower_bound(ops, lows, highs, index + 1, rows, owner, choice))
                low[boxes, neurons] = np.maximum(low[boxes, neurons], bound[: boxes.size])
                high[boxes, neurons] = np.minimum(high[boxes, neurons], -bound[boxes.size :])
    return lows, highs


def lower_bound(ops, lows, highs, node, coef, owner, slopes):
    """A lower bound of ``coef[p] . v_node`` over box ``owner[p]`` (see the module docstring).

    `slopes`: None (adaptive: 1 where u > -l, else 0), or a callable
    (relu number, l, u) -> (P, n) lower slopes for the unstable neurons.
    """
    const = np.zeros(coef.shape[0])
    relu = sum(op[0] == "relu" for op in ops[:node])
    for index in range(node - 1, -1, -1):
        op, low, high = ops[index], lows[index][owner], highs[index][owner]
        magnitude = np.maximum(np.abs(low), np.abs(high))
        if op[0] == "add":
            const = _down(const + _dot_low(coef, op[1]))
        elif op[0] == "matmul":
            coef, error = _product(coef, op[1].T)
            const = _down(const - _sum_up(error * magnitude * (1.0 + _HALF_ULP) + _TINY))
        else:
            relu -= 1
            unstable = (low < 0.0) & (high > 0.0)
            width = np.where(unstable, high - low, 1.0)
            upper_slope = np.where(unstable, np.clip(high / width, 0.0, 1.0), 0.0)
            intercept = np.maximum(_up(-upper_slope * low), _up(high - _down(upper_slope * high)))
            if slopes is None:
                alpha = (high > -low).astype(np.float64)
            else:
                alpha = np.clip(np.nan_to_num(slopes(relu, low, high, upper_slope), nan=0.0), 0.0, 1.0)
            negative = coef < 0.0
            slope = np.where(low >= 0.0, 1.0, np.where(unstable, np.where(negative, upper_slope, alpha), 0.0))
            new = coef * slope
            lost = _up(np.abs(new) * _HALF_ULP + _TINY)
            const = _down(
                const + _dot_low(np.where(negative & unstable, coef, 0.0), np.where(unstable, intercept, 0.0))
            )
            const = _down(const - _sum_up(lost * magnitude * (1.0 + _HALF_ULP) + _TINY))
            coef = new
    vertex = np.where(coef >= 0.0, lows[0][owner], highs[0][owner])
    return _down(const + _dot_low(coef, vertex))
