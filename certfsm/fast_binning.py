"""Binning compiled for one grid: the twin of `Machine.cell_of` and `cell_of_fixed` that the runtime calls every cycle.

Why compiled: `Machine.cell_of` walks its inputs in a Python loop and
checks the envelope with two comparisons per input; in CPython the loop
and the checks cost more than the bisections themselves. Here the grid
becomes one straight-line function, generated once per machine (as
`collections.namedtuple` and `dataclasses` generate their methods), with
one `bisect_right` and one tuple index per input and no allocation:

    cell = o0[bisect_right(k0, x0)] + o1[bisect_right(k1, x1)] + ...

Why it equals `Machine.cell_of` (tests/core/test_fast_binning.py checks
it on random, edge, NaN, infinite and out-of-range readings): input i
with edges e0 < e1 < ... < en gets the keys ``(t0, t1, ..., t(n-1),
u)`` of `certfsm.machine.reading_thresholds` (tk the smallest float >= ek, u
the float just above the largest float <= en), so for a float x

- ``bisect_right(keys, x)`` is the number of keys <= x: 0 when x < e0,
  k + 1 when x is in bin k = [ek, ek+1) (the last bin [e(n-1), en] closed,
  since x <= en exactly when x < u for floats), n + 1 when x > en; NaN
  compares false with everything, so bisect_right sends it to n + 1 too;
- the offsets ``(OUT, 0, s, 2s, ..., (n-1)s, OUT)`` (s the input's stride)
  turn that count into the bin's share of the flat C-order index, and
  OUT = -n_cells into a share that no sum of in-envelope shares (at most
  n_cells - 1) can bring back to >= 0. So the sum is the flat cell when
  every input is inside [e0, en], and negative otherwise: out of
  envelope.

The fixed-point twin uses the integer keys ``(lo, t1, ..., t(n-1), hi +
1)`` of `Machine.fixed_point` the same way (v <= hi exactly when v < hi +
1 for integers).

Only readings the fast path can decide exactly take it: a list or tuple
of exactly one `float` (fixed point: one `int`) per input. Anything else
(None for a missing value, numpy scalars, other numbers, a wrong length,
a mapping, a string) returns None, and the caller asks `Machine.cell_of`,
which converts, falls back or raises the error naming the input.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from typing import TYPE_CHECKING, Any, Callable, Sequence, cast

from ._errors import SpecError
from .machine import OUT_OF_ENVELOPE, Machine, c_order_strides, reading_key, reading_thresholds

if TYPE_CHECKING:
    import numpy as np

CellOf = Callable[[object], "int | None"]
"""A compiled binning: takes any reading, and bins only those on its fast path (None for the others)."""


ROWS_PER_PASS = 1 << 15
"""`RowBinning` bins this many rows per pass: its temporaries stay in the cache (a third faster than one pass over
a million rows)."""


def binning_tables(machine: Machine) -> list[tuple[tuple[float, ...], tuple[int, ...]]]:
    """Per input, the keys and the offsets of the real-valued binning (the module docstring says why they bin
    exactly)."""
    return _tables(machine.edges, machine.shape)


def _tables(edges: Sequence[Sequence[float]], shape: Sequence[int]) -> list[tuple[tuple[float, ...], tuple[int, ...]]]:
    n_cells = math.prod(shape)
    return [
        (reading_thresholds(e), _offsets(n_cells, len(e), stride)) for e, stride in zip(edges, c_order_strides(shape))
    ]


class RowBinning:
    """The real-valued binning of a grid for numpy rows of float64: `Machine.cell_of`, vectorised.

    The one vectorised binning of certfsm: the distiller's grid, the
    runtime's batch decisions and the audit report's heat maps all bin
    through it, with the keys and offsets of the compiled binning (the
    module docstring says why they bin exactly as the decimal edges say).
    numpy is imported only here, so the scalar runtime needs none.
    """

    def __init__(self, edges: Sequence[Sequence[float]], shape: Sequence[int]) -> None:
        import numpy as np

        self._columns: list[tuple[np.ndarray, np.ndarray]] = [
            (np.asarray(keys, dtype=np.float64), np.asarray(offsets, dtype=np.int64))
            for keys, offsets in _tables(edges, shape)
        ]

    def cells(self, rows: np.ndarray) -> np.ndarray:
        """Flat cell per row of a (m, n_inputs) float64 array (int64), OUT_OF_ENVELOPE outside [min, max],
        for NaN and for inf."""
        import numpy as np

        cells = np.empty(rows.shape[0], dtype=np.int64)
        for start in range(0, rows.shape[0], ROWS_PER_PASS):
            part = rows[start : start + ROWS_PER_PASS]
            flat = np.zeros(part.shape[0], dtype=np.int64)
            for column, (keys, offsets) in zip(part.T, self._columns):
                flat += offsets.take(np.searchsorted(keys, column, side="right"))
            np.maximum(flat, OUT_OF_ENVELOPE, out=flat)
            cells[start : start + ROWS_PER_PASS] = flat
        return cells


def compile_cell_of(machine: Machine) -> CellOf:
    """The real-valued binning of `machine`: a flat cell, OUT_OF_ENVELOPE, or None (not a fast-path reading)."""
    return _compile(machine, [keys for keys, _ in binning_tables(machine)], "float", float)


def compile_cell_of_fixed(machine: Machine) -> CellOf:
    """The fixed-point binning of `machine` (integers v meaning v * 2^-frac_bits); always None without frac_bits."""
    try:
        tables = machine.fixed_point
    except SpecError:  # no frac_bits, or edges off the grid: Machine.cell_of_fixed raises the error naming the input
        return lambda values: None
    keys = [(low, *interior, high + 1) for interior, low, high in tables]
    return _compile(machine, keys, "int", int)


def _offsets(n_cells: int, n_keys: int, stride: int) -> tuple[int, ...]:
    """What each bisect_right count adds to the flat cell: OUT below and above, bin k * stride inside."""
    out = -n_cells
    return (out, *(k * stride for k in range(n_keys - 1)), out)


def _compile(machine: Machine, keys: Sequence[Sequence[float]], type_name: str, number: type) -> CellOf:
    namespace: dict[str, Any] = {  # what exec's code reads, and then what it defines
        "bisect_right": bisect_right,
        "number": number,
        "OUT_OF_ENVELOPE": OUT_OF_ENVELOPE,
        "SEQUENCES": (list, tuple),
    }
    for i, (key, stride) in enumerate(zip(keys, machine.strides)):
        namespace[f"k{i}"] = tuple(key)
        namespace[f"o{i}"] = _offsets(machine.n_cells, len(key), stride)
    xs = [f"x{i}" for i in range(machine.n_inputs)]
    source = "\n".join(
        [
            "def cell_of(reading):",
            f'    """Flat cell of a list or tuple of {machine.n_inputs} {type_name}s, OUT_OF_ENVELOPE, or None: '
            f'{", ".join(machine.names)}."""',
            "    if type(reading) not in SEQUENCES:",
            "        return None",
            "    try:",
            f"        {', '.join(xs)}, = reading",
            f"    except ValueError:  # not {machine.n_inputs} values",
            "        return None",
            f"    if {' and '.join(f'type({x}) is number' for x in xs)}:",
            f"        cell = {' + '.join(f'o{i}[bisect_right(k{i}, {x})]' for i, x in enumerate(xs))}",
            "        return cell if cell >= 0 else OUT_OF_ENVELOPE",
            "    return None",
        ]
    )
    exec(compile(source, f"<certfsm binning of {machine.artifact_sha256[:12] or 'a machine'}>", "exec"), namespace)
    function = namespace["cell_of"]
    function.source = source
    return cast(CellOf, function)


# ------------------------------------------------------------- leaves of a refined table


LeafWalk = Callable[[Sequence[Any]], int]
"""A refined cell's tree compiled for one reading: a list or tuple of floats (ints, fixed point) -> the leaf's value."""


def leaf_nodes(machine: Machine, value_of: Callable[[int, int], int], fixed: bool = False) -> dict[int, Any]:
    """Per refined cell of `machine`, its tree as nested tuples (input, key, low, high) whose leaves hold
    ``value_of(cell, leaf number)``; keys as `compile_leaf_walks` compares them. An empty dict for a flat table,
    and with `fixed` for a machine without a fixed-point path."""
    from ._box_tree import Leaf

    if machine.refinement is None:
        return {}
    if fixed:
        try:
            machine.fixed_point
        except SpecError:
            return {}
    nodes = {}
    for cell, tree in zip(machine.refinement.cells, machine.refinement.trees):
        numbers = iter(range(tree.n_leaves))

        def nested(node: Any, cell: int = cell, numbers: Any = numbers, frac_bits: Any = tree.frac_bits) -> Any:
            if isinstance(node, Leaf):
                return value_of(cell, next(numbers))
            low = nested(node.low)  # pre-order: the low subtree's leaves are numbered first
            high = nested(node.high)
            bits = frac_bits[node.input]
            key = math.ceil(node.threshold * (1 << bits)) if fixed else reading_key(node.threshold)
            return (node.input, key, low, high)

        nodes[cell] = nested(tree.root)
    return nodes


def compile_leaf_walks(
    machine: Machine, value_of: Callable[[int, int], int], fixed: bool = False
) -> dict[int, LeafWalk]:
    """Per refined cell of `machine`, a function of a reading that bins into the cell: the value
    ``value_of(cell, leaf number)`` of the leaf that holds it.

    Why generated: a walk over the tree's nodes costs an interpreted loop
    and a tuple per level, about as much again as the cell's binning; here
    each tree becomes straight-line nested ifs with its keys as constants,
    one compare per level (as `compile_cell_of` generates the binning).
    The keys are the tree's own (`certfsm._box_tree.BoxTree`): a float
    reading x goes to the high child exactly when x >= the smallest float64
    at or above the threshold (`certfsm.machine.reading_key`; `repr` writes
    that float exactly), an integer v (fixed point) when v >= ceil(t * 2^f).
    So on a list or tuple of floats (ints with `fixed`) a walk finds the leaf
    `BoxTree.leaf_index` (`leaf_index_fixed`) finds, in at most
    `BoxTree.depth` comparisons; tests/test_decoders.py holds it to the
    split rule. An empty dict for a flat table, and with `fixed` for a
    machine without a fixed-point path.
    """
    nodes = leaf_nodes(machine, value_of, fixed)
    lines: list[str] = []

    def emit(node: Any, depth: int) -> None:
        pad = "    " * depth
        while type(node) is tuple:
            lines.append(f"{pad}if r[{node[0]}] >= {node[1]!r}:")
            emit(node[3], depth + 1)
            node = node[2]
        lines.append(f"{pad}return {node!r}")

    for cell, node in nodes.items():
        lines.append(f"def leaf_{cell}(r):")
        emit(node, 1)
    namespace: dict[str, Any] = {}
    kind = "fixed-point " if fixed else ""
    exec(compile("\n".join(lines), f"<certfsm {kind}leaf walks of {machine.artifact_sha256[:12]}>", "exec"), namespace)
    return {cell: cast(LeafWalk, namespace[f"leaf_{cell}"]) for cell in nodes}


class LeafBinning:
    """`compile_leaf_walks` for numpy rows of float64: per row of a refined cell, the value of its leaf.

    Every tree's nodes lie in one set of arrays; each row starts at its
    cell's root and moves down one level per pass, `depth` passes in all,
    so only rows of refined cells are touched, vectorised.
    """

    def __init__(self, machine: Machine, value_of: Callable[[int, int], int]) -> None:
        import numpy as np

        inputs: list[int] = []
        keys: list[float] = []
        children: list[list[int]] = []  # per node: [low, high] node numbers; a leaf's own twice (a row stays)
        values: list[int] = []
        roots = {}

        def add(walk: Any) -> int:
            at = len(inputs)
            inputs.append(0)
            keys.append(0.0)
            children.append([at, at])
            values.append(0)
            if type(walk) is tuple:
                inputs[at], keys[at] = walk[0], walk[1]
                children[at] = [add(walk[2]), add(walk[3])]
            else:
                values[at] = walk
            return at

        for cell, walk in leaf_nodes(machine, value_of).items():
            roots[cell] = add(walk)
        trees = () if machine.refinement is None else machine.refinement.trees
        self.depth = max((tree.depth for tree in trees), default=0)
        self._root = np.full(machine.n_cells, -1, dtype=np.int64)
        for cell, root in roots.items():
            self._root[cell] = root
        self._input = np.asarray(inputs, dtype=np.int64)
        self._key = np.asarray(keys, dtype=np.float64)
        self._children = np.asarray(children, dtype=np.int64).reshape(-1, 2)
        self._value = np.asarray(values, dtype=np.int64)

    def apply(self, rows: np.ndarray, cells: np.ndarray, flat: np.ndarray) -> np.ndarray:
        """`flat` (one value per row, from its cell) with the rows of refined cells given their leaf's value."""
        import numpy as np

        inside = cells >= 0
        roots = np.full(cells.shape[0], -1, dtype=np.int64)
        roots[inside] = self._root.take(cells[inside])
        picked = np.flatnonzero(roots >= 0)
        if picked.size == 0:
            return flat
        at, part = roots[picked], rows[picked]
        for _ in range(self.depth):
            high = part[np.arange(at.shape[0]), self._input.take(at)] >= self._key.take(at)
            at = self._children[at, high.astype(np.int64)]
        result = flat.copy()
        result[picked] = self._value.take(at)
        return result
