"""The network and sound bounds: an ONNX DAG read by its own loader, rigorous interval and linear bounds.

The model. `read_model` turns the graph into operations in the order of
its node list, each reading earlier values: value 0 is the input, value
i + 1 the output of operation i, the last value the graph's output, each
a flat vector (C order of its tensor). Reshapes are free; Concat, Slice,
Split, Gather and broadcasting become one selection ("pick": every
entry a copy of an entry of its inputs or a constant of the file).
Hidden neurons are numbered as the certificate counts them: the hidden
layers are the Relu nodes grouped by depth, where the depth of a Relu
node is the largest number of Relu nodes on any path from the graph
input to it, itself included; within a depth, Relu nodes come in the
order of the graph's node list; within a node, its neurons in C order.
For a chain that is the order of the chain. Nodes that the output does
not depend on are dropped, Relu nodes too (they number no neuron).

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
- Interval bounds of every value follow from these (`forward`); a
  selection and a negation are exact, a sum of two values is rounded
  outward. Linear bounds (`lower_bound`) keep the invariant ``target >=
  sum_v coef_v . v + const`` over the values v not yet substituted, for
  every input of the box; operations are substituted from the last to
  the first, so a value's coefficients are complete (every reader
  substituted) before it is. Through ``w = v M`` the float ``coef M^T``
  replaces the exact one and the difference, at most E, costs at most
  ``E . |v|`` (bounded by v's interval); through ``+ c`` the constant
  grows by a lower bound of ``coef . c``; a negation, a sum ``a + b``
  (coef goes to both) and a selection (coef goes to the entries picked,
  a constant entry's part to const) are exact, except that a selection
  that picks an entry twice sums its coefficients, a product with a 0/1
  matrix charged as above; where two readers of v give it coefficients
  c1 and c2, the float sum replaces c1 + c2, off by at most 2^-52 of
  itself, which costs that times ``|v|`` (the two bounds' error terms
  add). Through a ReLU, ``relu(z) >= alpha z`` for every real z and
  alpha in [0, 1] (any slope the certificate gives, clipped), and
  ``relu(z) <= s z + t`` on [l, u] for the line that lies above relu at
  l and at u (relu is convex, so above it on the whole interval), with t
  rounded up; each float product coef * slope is off by at most 2^-52 of
  itself, which costs that times ``|z|``; so does each product or
  quotient by a constant of ``Mul`` and ``Div`` (one rounding each; the
  interval of ``v c`` or ``v / c`` has its ends at those of v). At the
  input, ``coef . x`` is smallest at the box's vertex chosen by the
  signs of coef.

So every value returned is a true bound for every real input of the
closed box, whatever slopes and weights the certificate gives.
"""

from __future__ import annotations

import numpy as np

_TINY = np.finfo(np.float64).tiny
_HALF_ULP = 2.0**-52
_LARGEST = 1 << 24
"""The most entries a tensor may have (the networks read are small; a larger one is refused, not allocated)."""
_SELECTIONS = ("Identity", "Flatten", "Reshape", "Squeeze", "Unsqueeze", "Concat", "Slice", "Split", "Gather")


class ModelError(ValueError):
    """The ONNX file is not a graph this checker reads (the message names the node)."""


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


def _selected(op, tensors, attributes, constant, outputs: int) -> list:
    """The outputs of a selection `op` on `tensors` (ONNX's semantics on numpy's arrays); `constant(i)` is input i,
    an int array, or None where it is absent."""
    data, axis = tensors[0], attributes.get("axis", 0)

    def ints(i, name):
        given = attributes.get(name) if constant(i) is None else constant(i).reshape(-1)
        return None if given is None else [int(v) for v in given]

    if op == "Flatten":
        axis = attributes.get("axis", 1)
        return [data.reshape(int(np.prod(data.shape[: axis + data.ndim if axis < 0 else axis])), -1)]
    if op == "Reshape":
        keep = not attributes.get("allowzero", 0)
        return [data.reshape([data.shape[i] if d == 0 and keep else d for i, d in enumerate(ints(1, ""))])]
    if op == "Squeeze":
        return [np.squeeze(data, axis=None if ints(1, "axes") is None else tuple(ints(1, "axes")))]
    if op == "Unsqueeze":
        return [np.expand_dims(data, tuple(ints(1, "axes")))]
    if op == "Concat":
        return [np.concatenate(tensors, axis=axis)]
    if op == "Gather":
        return [np.take(data, constant(1), axis=axis)]
    if op == "Split":
        sizes, size = ints(1, "split"), data.shape[axis]
        sizes = sizes or [-(-size // outputs)] * (outputs - 1) + [size - -(-size // outputs) * (outputs - 1)]
        if len(sizes) != outputs or sum(sizes) != size or min(sizes) < 0:
            raise ValueError(f"split sizes {sizes} do not cut {size} entries into {outputs} outputs")
        return np.split(data, np.cumsum(sizes)[:-1], axis=axis)
    if op == "Slice":
        starts, ends, axes, steps = (ints(i, name) for i, name in enumerate(("starts", "ends", "axes", "steps"), 1))
        cut = [slice(None)] * data.ndim
        for k, a in enumerate(axes or range(len(starts))):
            cut[a] = slice(starts[k], ends[k], steps[k] if steps else 1)
        return [data[tuple(cut)]]
    return [data]  # Identity


def read_model(path) -> list[tuple]:
    """The operations of the ONNX graph, each ``(kind, values read, parameter)`` (see the module docstring):
    ("matmul", (a,), M): v_a @ M; ("add", (a,), c), ("mul", (a,), c), ("div", (a,), c): elementwise by constants;
    ("neg", (a,), None); ("sum", (a, b), None): v_a + v_b; ("pick", reads, (index, constant)): entry j is entry
    index[j] of the reads' concatenation, or constant[j] where index[j] < 0; ("relu", (a,), (first neuron of the
    hidden numbering, depth, width)). A value made from the input is held as (number, shape) while reading, a
    constant as its array."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(path)).graph
    names: dict = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in names]
    if len(inputs) != 1 or len(graph.output) != 1:
        raise ModelError(
            f"{path}: the graph has inputs {[i.name for i in inputs]} and {len(graph.output)} outputs; "
            "this checker reads one input and one output"
        )
    shape = tuple(max(d.dim_value, 1) for d in inputs[0].type.tensor_type.shape.dim)
    names[inputs[0].name], ops, depth, sizes = (0, shape), [], [0], [int(np.prod(shape))]
    if sizes[0] > _LARGEST:
        raise ModelError(f"{path}: the input has shape {shape}, larger than this checker reads")

    def emit(kind, reads, param, shape):
        if not 0 < int(np.prod(shape)) <= _LARGEST:
            raise ModelError(f"its output of shape {tuple(shape)} is empty or larger than this checker reads")
        ops.append((kind, tuple(r[0] for r in reads), param))
        depth.append(max(depth[r] for r in ops[-1][1]) + (kind == "relu"))
        sizes.append(int(np.prod(shape)))
        return len(ops), tuple(shape)

    def select(entries, apply):
        """`apply` on index tensors, the data entries' numbers and -1 - k for the k-th constant: a pick."""
        tagged, reads, pool, count, made = [], [], [], 0, []
        for entry in entries:
            if isinstance(entry, tuple):
                tagged.append(count + np.arange(int(np.prod(entry[1]))).reshape(entry[1]))
                reads, count = reads + [entry], count + tagged[-1].size
            else:
                tagged.append(-1 - sum(p.size for p in pool) - np.arange(entry.size).reshape(entry.shape))
                pool.append(entry.reshape(-1).astype(np.float64))
        pool = np.concatenate(pool + [np.zeros(1)])
        for out in apply(tagged):
            if out.size > _LARGEST:
                raise ModelError(f"its output of shape {out.shape} is larger than this checker reads")
            flat = out.reshape(-1)
            if flat.size and np.all(flat < 0):
                made.append(pool[-1 - flat].reshape(out.shape))
            elif len(reads) == 1 and np.array_equal(flat, np.arange(count)):
                made.append((reads[0][0], out.shape))
            else:
                fixed = np.where(flat < 0, pool[np.where(flat < 0, -1 - flat, 0)], 0.0)
                made.append(emit("pick", reads, (np.where(flat >= 0, flat, -1), fixed), out.shape))
        return made

    for node in graph.node:
        where = f"{path}: node {node.name or '?'} ({node.op_type})"
        missing = [n for n in node.input if n and n not in names]
        if missing:
            raise ModelError(
                f"{where} reads {missing[0]!r}, which no earlier node, initializer or input makes; "
                "give the nodes in an order where each follows what it reads"
            )
        attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        try:
            if node.op_type == "Constant":
                value = next(iter(attributes.values()))
                names[node.output[0]] = numpy_helper.to_array(value) if hasattr(value, "dims") else np.array(value)
                continue
            read = [names[n] if n else None for n in node.input]
            if node.op_type == "Shape" and isinstance(read[0], tuple):  # one row: the shape is a constant
                dims = np.array(read[0][1], dtype=np.int64)
                names[node.output[0]] = dims[attributes.get("start", 0) : attributes.get("end", len(dims))]
                continue
            names.update(zip(node.output, _read_node(node, read, attributes, emit, select)))
        except ModelError as error:
            raise ModelError(f"{where}: {error}") from None
        except (ValueError, IndexError, TypeError, KeyError, StopIteration) as error:
            raise ModelError(f"{where} cannot be read ({error}); fix the node") from None
    out = names.get(graph.output[0].name)
    if not isinstance(out, tuple):
        raise ModelError(f"{path}: the output {graph.output[0].name!r} is not made from the input")
    used = {out[0]}
    for i in range(len(ops) - 1, -1, -1):
        used.update(ops[i][1] if i + 1 in used else ())
    number = {v: k for k, v in enumerate(sorted(used | {0}))}
    depth, sizes = [depth[v] for v in number], [sizes[v] for v in number]
    ops = [
        (kind, tuple(number[r] for r in reads), param) for i, (kind, reads, param) in enumerate(ops) if i + 1 in used
    ]
    relus = sorted((depth[i + 1], i) for i, op in enumerate(ops) if op[0] == "relu")
    for first, (d, i) in zip(np.cumsum([0] + [sizes[i + 1] for _, i in relus]), relus):
        ops[i] = ("relu", ops[i][1], (int(first), d, sizes[i + 1]))
    return ops


def _read_node(node, read, attributes, emit, select) -> list:
    """The node's outputs (see `read_model`); a ModelError says why the node is not read."""
    op, data = node.op_type, [r for r in read if isinstance(r, tuple)]
    constants = [np.asarray(r, dtype=np.float64) for r in read if r is not None and not isinstance(r, tuple)]
    if not data and op not in _SELECTIONS:
        raise ModelError("reads no value made from the input; this checker folds only selections of constants")
    if op in _SELECTIONS:

        def constant(i):
            if len(read) <= i or read[i] is None:
                return None
            if isinstance(read[i], tuple):
                raise ModelError(f"input {i} must be a constant")
            return np.asarray(read[i]).astype(np.int64)

        return select(
            read if op == "Concat" else read[:1], lambda t: _selected(op, t, attributes, constant, len(node.output))
        )
    if op in ("Relu", "Neg"):
        return [emit(op.lower(), data, None, data[0][1])]
    if op in ("MatMul", "Gemm"):
        if not isinstance(read[0], tuple) or len(data) > 1 or len(read) > 3:
            raise ModelError("only data @ constant (+ constant) is read")
        (a,), (matrix, *bias) = data, constants
        if op == "Gemm":
            if attributes.get("transA") or attributes.get("alpha", 1.0) != 1.0 or attributes.get("beta", 1.0) != 1.0:
                raise ModelError("Gemm with alpha or beta other than 1, or transA, is not read")
            matrix = matrix.T if attributes.get("transB") else matrix
        if matrix.ndim != 2 or matrix.shape[0] != a[1][-1] or (op == "Gemm" and len(a[1]) != 2):
            raise ModelError(f"a tensor of shape {a[1]} @ a constant of shape {matrix.shape} is not read")
        blocks = int(np.prod(a[1][:-1]))  # a (k, n) tensor times M is the (k n) vector times k copies of M
        out = emit("matmul", [a], np.kron(np.eye(blocks), matrix), a[1][:-1] + matrix.shape[1:])
        read, op = [out, *bias], "Add" if bias else "Identity"
    elif op not in ("Add", "Sub", "Mul", "Div"):
        raise ModelError("this operator is not read by this checker")
    elif len(data) == 2:
        if op in ("Mul", "Div"):
            raise ModelError("a product or quotient of two values is not read")
        shape = np.broadcast_shapes(data[0][1], data[1][1])
        a, b = (select([d], lambda t: [np.broadcast_to(t[0], shape)])[0] for d in data)
        return [emit("sum", [a, emit("neg", [b], None, shape) if op == "Sub" else b], None, shape)]
    elif not isinstance(read[0], tuple):  # constant op x
        if op == "Div":
            raise ModelError("constant / x is not read; only x / constant")
        read, op = (
            ([emit("neg", data, None, data[0][1])] if op == "Sub" else data) + constants,
            op.replace("Sub", "Add"),
        )
    if op == "Identity":
        return read[:1]
    shape = np.broadcast_shapes(read[0][1], np.shape(read[1]))
    entry = select(read[:1], lambda t: [np.broadcast_to(t[0], shape)])[0]
    constant = np.broadcast_to(np.asarray(read[1], dtype=np.float64), shape).reshape(-1) * (
        -1.0 if op == "Sub" else 1.0
    )  # negation is exact
    if op == "Div" and not np.all(constant != 0.0):
        raise ModelError("only x / constant with no zero is read")
    return [emit({"Add": "add", "Sub": "add", "Mul": "mul", "Div": "div"}[op], [entry], constant, shape)]


def hidden_widths(ops) -> list[int]:
    """The width of each hidden layer (Relu nodes of one depth), in order."""
    widths: dict = {}
    for param in (param for kind, _, param in ops if kind == "relu"):
        widths[param[1]] = widths.get(param[1], 0) + param[2]
    return [widths[d] for d in sorted(widths)]


SLOPES = (0.0, 1.0, -1.0)
"""The lower slopes tried besides the adaptive ones when a ReLU input is bounded again: 0, 1 and u / (u - l) (codes
of `lower_bound`)."""


def _rebounded(ops) -> set:
    """The ReLU inputs that `forward` bounds again: those after a ReLU, a sum or a selection of several values or
    two products (an interval over one product of the box is already as tight as a linear bound)."""
    products = [0]
    for kind, reads, _ in ops:
        most = max(products[r] for r in reads)
        products.append(2 if kind == "relu" or len(reads) > 1 else most + (kind == "matmul"))
    return {reads[0] for kind, reads, _ in ops if kind == "relu" and products[reads[0]] > 1}


def forward(ops, lower, upper, choices=SLOPES, known=None):
    """Interval bounds of every value v_0 .. v_K over boxes (B, n): lists of (B, n_i) arrays.

    Each ReLU input that `_rebounded` names is bounded again by
    `lower_bound` (rows +e_j and -e_j, with the adaptive slopes and each
    of `choices`), and the tightest bound is kept: intervals lose the
    correlation between consecutive products and between branches, which
    the prover folds into one layer (a TLL network's first ReLU follows
    three). `known`: (lows, highs) proved for boxes that contain these
    (their parents in a tree), intersected in at every value, so bounds
    only tighten down a tree.
    """
    lows, highs, again = [lower], [upper], _rebounded(ops)
    for index, (kind, reads, param) in enumerate(ops):
        low, high = lows[reads[0]], highs[reads[0]]
        if kind == "relu":
            low, high = np.maximum(low, 0.0), np.maximum(high, 0.0)
        elif kind == "add":
            low, high = _down(low + param), _up(high + param)
        elif kind in ("mul", "div"):
            ends = (low * param, high * param) if kind == "mul" else (low / param, high / param)
            low, high = _down(np.minimum(*ends)), _up(np.maximum(*ends))
        elif kind == "neg":
            low, high = -high, -low
        elif kind == "sum":
            low, high = _down(low + lows[reads[1]]), _up(high + highs[reads[1]])
        elif kind == "pick":
            picked = param[0] >= 0
            low, high = (
                np.where(picked, np.concatenate([s[r] for r in reads], 1)[:, param[0]], param[1]) for s in (lows, highs)
            )
        else:
            centre = (low + high) * 0.5
            radius = np.maximum(_up(centre - low), _up(high - centre))
            middle, error = _product(centre, param)
            spread, spread_error = _product(radius, np.abs(param))
            reach = _up(_up(spread + spread_error) + error)
            low, high = _down(middle - reach), _up(middle + reach)
        if known is not None:
            low, high = np.maximum(low, known[0][index + 1]), np.minimum(high, known[1][index + 1])
        lows.append(low)
        highs.append(high)
        if index + 1 in again:
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


def _relu_lines(low, high, slopes, first: int):
    """A ReLU's (lower slopes per choice, upper slope, intercept) on its input's bounds; its neurons are `first`
    onwards in the codes of `slopes` (see `lower_bound`)."""
    unstable = (low < 0.0) & (high > 0.0)
    width = np.where(unstable, high - low, 1.0)
    upper = np.where(low >= 0.0, 1.0, np.where(unstable, np.clip(high / width, 0.0, 1.0), 0.0))
    intercept = np.where(unstable, np.maximum(_up(-upper * low), _up(high - _down(upper * high))), 0.0)
    alpha = []
    for code in slopes:
        code = code if np.ndim(code) == 0 else code[:, first : first + low.shape[1]]
        given = np.clip(np.where(np.isnan(code), high > -low, np.where(code == -1.0, upper, code)), 0.0, 1.0)
        alpha.append(np.where(low >= 0.0, 1.0, np.where(unstable, given, 0.0)))
    return np.concatenate(alpha), upper, intercept


def lower_bound(ops, lows, highs, node, coef, owner, slopes):
    """(C, P): a lower bound of ``coef[p] . v_node`` over box ``owner[p]`` with each of C lower slopes.

    `slopes`: a tuple of slope codes, each a number or a (B, hidden
    neurons) array of them (in the hidden numbering of the module
    docstring): NaN adaptive (1 where u > -l, else 0), -1 parallel
    (u / (u - l)), else the slope itself; every slope is clipped to
    [0, 1] (see the module docstring for every charge below).
    """
    count, rows = lows[0].shape[0], coef.shape[0]
    choice_owner = (np.arange(len(slopes))[:, None] * count + owner[None, :]).reshape(-1)
    owner = np.tile(owner, len(slopes))
    const, extra = np.zeros(len(owner)), np.zeros(count)
    coefs = {node: np.tile(coef, (len(slopes), 1))}

    def charge(c, value, scale=_HALF_ULP):
        """The cost of coefficients c on `value` that are off by at most `scale` of themselves (+ tiny each)."""
        nonlocal const, extra
        magnitude = np.maximum(np.abs(lows[value]), np.abs(highs[value]))
        const = _down(const - _dot_up(np.abs(c), _up(magnitude * scale)[owner]))
        extra = _up(extra + _up(_sum_up(magnitude) * _TINY))

    for index in range(node - 1, -1, -1):
        c = coefs.pop(index + 1, None)
        if c is None:
            continue
        kind, reads, param = ops[index]
        if kind == "add":
            const, out = _down(const + _dot_low(c, param)), [c]
        elif kind in ("neg", "sum"):
            out = [-c] if kind == "neg" else [c, c]
        elif kind == "pick":
            picked = param[0] >= 0
            const = _down(const + _dot_low(c, param[1]))
            selection = np.zeros((int(picked.sum()), sum(lows[r].shape[1] for r in reads)))
            selection[np.arange(len(selection)), param[0][picked]] = 1.0
            new, error = _product(c[:, picked], selection)  # exact when no entry is picked twice
            if np.unique(param[0][picked]).size < len(selection):
                magnitude = np.concatenate([np.maximum(np.abs(lows[r]), np.abs(highs[r])) for r in reads], 1)
                const = _down(const - _dot_up(error, magnitude[owner]))
            out = np.split(new, np.cumsum([lows[r].shape[1] for r in reads])[:-1], axis=1)
        elif kind == "matmul":
            inner, width = param.shape
            magnitude = np.maximum(np.abs(lows[reads[0]]), np.abs(highs[reads[0]]))
            reach = _up((magnitude @ np.abs(param)) * (1.0 + (inner + 2) * _HALF_ULP) + (inner + 1) * _TINY)
            const = _down(const - _dot_up(np.abs(c), _up(reach * ((width + 2) * _HALF_ULP))[owner]))
            extra = _up(extra + _up(_sum_up(magnitude) * ((width + 1) * _TINY)))
            out = [c @ param.T]
        elif kind in ("mul", "div"):
            out = [c * param if kind == "mul" else c / param]
            charge(out[0], reads[0])
        else:
            alpha, upper, intercept = _relu_lines(lows[reads[0]], highs[reads[0]], slopes, param[0])
            const = _down(const - _dot_up(np.maximum(-c, 0.0), intercept[owner]))
            out = [c * np.where(c < 0.0, upper[owner], alpha[choice_owner])]
            charge(out[0], reads[0])
        for value, more in zip(reads, out):
            if value in coefs:
                more = coefs[value] + more
                charge(more, value)
            coefs[value] = more
    coef = coefs.pop(0, np.zeros((len(owner), lows[0].shape[1])))
    const = _down(const - extra[owner])
    vertex = np.where(coef >= 0.0, lows[0][owner], highs[0][owner])
    return _down(const + _dot_low(coef, vertex)).reshape(len(slopes), rows)
