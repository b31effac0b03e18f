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
- Interval bounds of every node follow from these (`forward`). Linear
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
  costs that times ``|z|``; so does each product or quotient by a
  constant of ``Mul`` and ``Div`` (one rounding each; the interval of
  ``v c`` or ``v / c`` has its ends at those of v). At the input, ``coef . x`` is smallest at the
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
    """A lower bound of the exact row-wise dot products of a and b (both (..., n), or b (n,))."""
    if b.ndim == 1:  # a product with a vector: matmul is faster than einsum
        value, size = a @ b, np.abs(a) @ np.abs(b)
    else:
        value, size = np.einsum("...n,...n->...", a, b), np.einsum("...n,...n->...", np.abs(a), np.abs(b))
    n = a.shape[-1]
    return _down(value - _up(size * ((n + 3) * _HALF_ULP) + (n + 1) * _TINY))


def _dot_up(a, b):
    """An upper bound of the exact row-wise dot products of non-negative (P, n) arrays."""
    n = a.shape[-1]
    return _up(np.einsum("pn,pn->p", a, b) * (1.0 + (n + 3) * _HALF_ULP) + (n + 1) * _TINY)


def read_model(path) -> list[tuple]:
    """The chain of operations from the ONNX file: ("matmul", M) (v -> v @ M), ("add", c), ("mul", c), ("div", c)
    (elementwise by constants) and ("relu",)."""
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
        elif node.op_type in ("Mul", "Div") and len(others) == 1 and others[0] is not None:
            if node.op_type == "Div" and (node.input[0] != current or not np.all(others[0] != 0.0)):
                raise ModelError(f"{path}: node {node.name}: only x / constant (no zero) is read")
            ops.append((node.op_type.lower(), others[0].reshape(-1)))
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


def hidden_widths(ops) -> list[int]:
    """The width of each ReLU, in order: that of the product before it."""
    products = [i for i, op in enumerate(ops) if op[0] == "matmul"]
    if any(op[0] == "relu" for op in ops[: products[0] if products else len(ops)]):
        raise ModelError("a Relu before any MatMul or Gemm is not read by this checker")
    return [ops[max(j for j in products if j < i)][1].shape[1] for i, op in enumerate(ops) if op[0] == "relu"]


SLOPES = (0.0, 1.0, -1.0)
"""The lower slopes tried besides the adaptive ones when a ReLU input is bounded again: 0, 1 and u / (u - l) (codes
of `lower_bound`)."""


def forward(ops, lower, upper, choices=SLOPES, known=None):
    """Interval bounds of every node v_0 .. v_K over boxes (B, n): lists of (B, n_i) arrays.

    Each ReLU input that some ReLU or a second product precedes is bounded
    again by `lower_bound` (rows +e_j and -e_j, with the adaptive slopes
    and each of `choices`), and the tightest bound is kept: intervals lose
    the correlation between consecutive products, which the prover folds
    into one layer (a TLL network's first ReLU follows three). `known`:
    (lows, highs) proved for boxes that contain these (their parents in a
    tree), intersected in at every node, so bounds only tighten down a tree.
    """
    lows, highs = [lower], [upper]
    relus_seen = 0
    for index, op in enumerate(ops):
        low, high = lows[-1], highs[-1]
        if op[0] == "relu":
            low, high = np.maximum(low, 0.0), np.maximum(high, 0.0)
            relus_seen += 1
        elif op[0] == "add":
            low, high = _down(low + op[1]), _up(high + op[1])
        elif op[0] in ("mul", "div"):
            ends = (low * op[1], high * op[1]) if op[0] == "mul" else (low / op[1], high / op[1])
            low, high = _down(np.minimum(*ends)), _up(np.maximum(*ends))
        else:
            centre = (low + high) * 0.5
            radius = np.maximum(_up(centre - low), _up(high - centre))
            middle, error = _product(centre, op[1])
            spread, spread_error = _product(radius, np.abs(op[1]))
            reach = _up(_up(spread + spread_error) + error)
            low, high = _down(middle - reach), _up(middle + reach)
        if known is not None:
            low, high = np.maximum(low, known[0][index + 1]), np.minimum(high, known[1][index + 1])
        lows.append(low)
        highs.append(high)
        is_relu_input = index + 1 < len(ops) and ops[index + 1][0] == "relu"
        products = sum(o[0] == "matmul" for o in ops[: index + 1])
        if is_relu_input and (relus_seen or products > 1):
            boxes, neurons = np.nonzero((low < 0.0) & (high > 0.0))
            if boxes.size:
                rows = np.zeros((2 * boxes.size, low.shape[1]))
                rows[np.arange(boxes.size), neurons] = 1.0
                rows[np.arange(boxes.size, 2 * boxes.size), neurons] = -1.0
                owner = np.concatenate([boxes, boxes])
                bound = np.max(lower_bound(ops, lows, highs, index + 1, rows, owner, (np.nan, *choices)), axis=0)
                low[boxes, neurons] = np.maximum(low[boxes, neurons], bound[: boxes.size])
                high[boxes, neurons] = np.minimum(high[boxes, neurons], -bound[boxes.size :])
    return lows, highs


def _relaxations(ops, lows, highs, node, slopes) -> dict:
    """Per box and op below `node`: the weight of ``|coef|`` in its rounding cost and a constant, and for a ReLU
    its (lower slopes per choice, upper slope, intercept). A product with M costs at most ``gamma_m |coef| .
    (|v_i| |M|) + m tiny . sum |v_i|``; one rounding per coefficient ``2^-52 |new| . |v_i| + tiny . sum |v_i|``."""
    found, relu = {}, sum(op[0] == "relu" for op in ops[:node])
    offsets = np.cumsum([0] + [lows[i].shape[1] for i in range(node) if ops[i][0] == "relu"])
    for index in range(node - 1, -1, -1):
        op, low, high = ops[index], lows[index], highs[index]
        magnitude = np.maximum(np.abs(low), np.abs(high))
        if op[0] == "add":
            continue
        if op[0] in ("mul", "div"):
            found[index] = (_up(magnitude * _HALF_ULP), _up(_sum_up(magnitude) * _TINY))
            continue
        if op[0] == "matmul":
            inner, width = op[1].shape
            reach = _up((magnitude @ np.abs(op[1])) * (1.0 + (inner + 2) * _HALF_ULP) + (inner + 1) * _TINY)
            weight = _up(reach * ((width + 2) * _HALF_ULP))
            found[index] = (weight, _up(_sum_up(magnitude) * ((width + 1) * _TINY)))
            continue
        relu -= 1
        unstable = (low < 0.0) & (high > 0.0)
        width = np.where(unstable, high - low, 1.0)
        upper = np.where(low >= 0.0, 1.0, np.where(unstable, np.clip(high / width, 0.0, 1.0), 0.0))
        intercept = np.where(unstable, np.maximum(_up(-upper * low), _up(high - _down(upper * high))), 0.0)
        alpha = []
        for code in slopes:
            code = code if np.ndim(code) == 0 else code[:, offsets[relu] : offsets[relu + 1]]
            given = np.clip(np.where(np.isnan(code), high > -low, np.where(code == -1.0, upper, code)), 0.0, 1.0)
            alpha.append(np.where(low >= 0.0, 1.0, np.where(unstable, given, 0.0)))
        alpha = np.concatenate(alpha)
        weight = _up(magnitude * _HALF_ULP)
        found[index] = (weight, _up(_sum_up(magnitude) * _TINY), alpha, upper, intercept)
    return found


def lower_bound(ops, lows, highs, node, coef, owner, slopes):
    """(C, P): a lower bound of ``coef[p] . v_node`` over box ``owner[p]`` with each of C lower slopes.

    `slopes`: a tuple of slope codes, each a number or a (B, hidden
    neurons) array of them: NaN adaptive (1 where u > -l, else 0), -1
    parallel (u / (u - l)), else the slope itself; every slope is clipped
    to [0, 1] (see the module docstring). The rounding costs of a ReLU
    and of the product below it are charged together, since the
    coefficients between them do not change.
    """
    found, count = _relaxations(ops, lows, highs, node, slopes), lows[0].shape[0]
    rows = coef.shape[0]
    coef = np.tile(coef, (len(slopes), 1))
    choice_owner = (np.arange(len(slopes))[:, None] * count + owner[None, :]).reshape(-1)
    owner = np.tile(owner, len(slopes))
    const = np.zeros(coef.shape[0])
    pending, extra = None, np.zeros(lows[0].shape[0])
    for index in range(node - 1, -1, -1):
        op = ops[index]
        if op[0] == "add":
            const = _down(const + _dot_low(coef, op[1]))
            continue
        weight, more = found[index][:2]
        extra = _up(extra + more)
        if op[0] == "matmul":
            pending = weight if pending is None else _up(pending + weight)
            const = _down(const - _dot_up(np.abs(coef), pending[owner]))
            coef, pending = coef @ op[1].T, None
            continue
        if pending is not None:
            const = _down(const - _dot_up(np.abs(coef), pending[owner]))
        if op[0] in ("mul", "div"):
            coef, pending = (coef * op[1] if op[0] == "mul" else coef / op[1]), weight
            continue
        alpha, upper, intercept = found[index][2][choice_owner], found[index][3][owner], found[index][4][owner]
        const = _down(const - _dot_up(np.maximum(-coef, 0.0), intercept))
        coef, pending = coef * np.where(coef < 0.0, upper, alpha), weight
    if pending is not None:
        const = _down(const - _dot_up(np.abs(coef), pending[owner]))
    const = _down(const - extra[owner])
    vertex = np.where(coef >= 0.0, lows[0][owner], highs[0][owner])
    return _down(const + _dot_low(coef, vertex)).reshape(len(slopes), rows)
