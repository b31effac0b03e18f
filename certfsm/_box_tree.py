"""Box trees: a box cut by half-open splits into leaves, each with a status, a token and an allowed mask.

docs/design.md, "Box trees": a refined table keeps one tree under each
grid cell that it refines, and a proof certificate will keep one under a
property's input box; both are this object, so one codec and one lookup
serve them.

- A node is a `Leaf` or a `Split` (input i, threshold t): the low child
  holds the points of the node with x_i < t, the high child those with
  x_i >= t, half-open exactly like bins, the top of the envelope closed
  (`Interval.closed`). Every threshold lies strictly inside its node's
  interval on that input, so every leaf box is a non-empty part and the
  leaves partition the root box by construction.
- A threshold is an exact dyadic rational: on an input with ``frac_bits``
  f a multiple of 2^-f (written as the integer v meaning v * 2^-f, what
  the hardware compares), elsewhere a float64 (written as that float; it
  means its exact binary value, not the decimal of its repr).
- The canonical encoding is the pre-order list ``["split", i, t]``,
  ``["leaf", k]``, k the leaf's number in pre-order (from ``first_leaf``,
  so that the trees of a table number their leaves one after another);
  `decode_tree` re-derives every leaf's box from the root box and the
  splits and refuses, naming the JSON path and the fix, a malformed
  node, a threshold off the grid or outside its node, a leaf out of
  order, and a tree deeper or with more leaves than its `TreeBudget`.
- A lookup compares a reading with each threshold by the rule that bins
  it (docs/semantics.md, "Cells"; `certfsm.machine.reading_key`,
  `certfsm.machine.integer_thresholds`): a float x against the smallest
  float64 at or above t, any other real number exactly, an integer v
  against ceil(t * 2^f); at most `BoxTree.depth` comparisons.

A leaf's allowed mask for its own box is `leaf_allowed_mask`, the
legality rule of docs/semantics.md ("Legality rules") applied through
`certfsm.machine.cell_allowed_masks` to the leaf's half-open box.

Standard library only, like `certfsm.machine`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from fractions import Fraction
import functools
from typing import Any, Iterable, Sequence, Union

from ._decimal import decimal_value
from ._errors import BoxTreeError
from .machine import integer_thresholds, reading_key


class LeafStatus(enum.Enum):
    """What a leaf's token means: proved for the whole closed box, the conservative token with a witness pair
    inside the box, or the conservative token because the budget ran out (docs/semantics.md, "Certified
    distillation")."""

    EXACT = "exact"
    CONSERVATIVE = "conservative"
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class Evidence:
    """What closes a leaf, by reference: the kind of record (bound-propagation data, an SMT-LIB query, a witness
    pair) and the SHA-256 of its canonical bytes, which live in their own file."""

    kind: str
    sha256: str


@dataclass(frozen=True)
class Leaf:
    """One part of a box: its status, its token (output index) and allowed mask (bit k: output k may be emitted
    there), and the evidence that closes it (None: none recorded)."""

    status: LeafStatus
    token: int
    allowed: int
    evidence: Evidence | None = None


@dataclass(frozen=True)
class Interval:
    """[low, high) on one input, or [low, high] when `closed` (the top of the envelope); exact rationals."""

    low: Fraction
    high: Fraction
    closed: bool

    def contains(self, value: Fraction) -> bool:
        return self.low <= value and (value < self.high or (self.closed and value == self.high))

    def describe(self, name: str) -> str:
        return f"{name} in [{_show(self.low)}, {_show(self.high)}{']' if self.closed else ')'}"


@dataclass(frozen=True)
class Box:
    """A product of one `Interval` per input."""

    intervals: tuple[Interval, ...]

    @classmethod
    def of_bounds(cls, lower: Sequence[float], upper: Sequence[float], closed: Sequence[bool]) -> Box:
        """The box of spec numbers (exact decimals, `decimal_value`): a grid cell from `Machine.cell_bounds`."""
        return cls(tuple(Interval(decimal_value(lo), decimal_value(hi), c) for lo, hi, c in zip(lower, upper, closed)))

    def split(self, input: int, threshold: Fraction) -> tuple[Box, Box]:
        """(low, high) parts: x_input < threshold and x_input >= threshold."""
        cut = self.intervals[input]
        low = Interval(cut.low, threshold, False)
        high = Interval(threshold, cut.high, cut.closed)
        return (
            Box(self.intervals[:input] + (low,) + self.intervals[input + 1 :]),
            Box(self.intervals[:input] + (high,) + self.intervals[input + 1 :]),
        )

    def contains(self, point: Sequence[Fraction]) -> bool:
        return all(interval.contains(value) for interval, value in zip(self.intervals, point))

    def inside(self, other: Box) -> bool:
        """Every point of this box lies in `other`."""
        return all(
            b.low <= a.low and (a.high < b.high or (a.high == b.high and (b.closed or not a.closed)))
            for a, b in zip(self.intervals, other.intervals)
        )


@dataclass(frozen=True)
class Split:
    """A node cut at x_input = threshold: `low` holds x_input < threshold, `high` holds x_input >= threshold."""

    input: int
    threshold: Fraction
    low: Node
    high: Node


Node = Union[Leaf, Split]


MAX_TREE_DEPTH = 24
"""The deepest a spec's ``refine.max_depth`` may ask for: 24 comparisons after the cell."""
MAX_TREE_LEAVES = 1 << 16
"""The most leaves a spec's ``refine.max_leaves`` may allow under one cell."""


@dataclass(frozen=True)
class TreeBudget:
    """The most one tree may hold: leaves at most `max_depth` splits deep, at most `max_leaves` leaves (the
    spec's ``refine`` object, per refined cell; counted in boxes, never in seconds)."""

    max_depth: int
    max_leaves: int


_Compiled = Union[int, tuple[int, float, Fraction, "int | None", int]]
"""A node of the lookup's pre-order list: a leaf's number, or (input, float key, exact threshold, integer threshold
or None without frac_bits, index of the high child); the low child follows its split."""


@dataclass(frozen=True, eq=False)
class BoxTree:
    """A partition of `box` (one `Interval` per input) into leaves, as the splits of `root` cut it.

    `frac_bits` holds one entry per input (None: no fixed-point grid).
    Invariants, refused at construction (BoxTreeError): every split
    names an input and a threshold that is dyadic (on the 2^-f grid with
    frac_bits, a float64 without) and strictly inside its node's interval.
    Leaves are numbered in pre-order from 0 (`leaves`, `boxes`).
    """

    box: Box
    root: Node
    frac_bits: tuple[int | None, ...]
    _compiled: tuple[_Compiled, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        compiled: list[Any] = []
        leaves: list[Leaf] = []
        boxes: list[Box] = []
        depth = 0
        pending: list[tuple[Node, Box, int, int | None]] = [(self.root, self.box, 0, None)]
        while pending:
            node, box, level, parent = pending.pop()
            if parent is not None:
                split = compiled[parent]
                compiled[parent] = (*split[:4], len(compiled))
            if isinstance(node, Leaf):
                compiled.append(len(leaves))
                leaves.append(node)
                boxes.append(box)
                depth = max(depth, level)
                continue
            problem = threshold_problem(box, node.input, node.threshold, self.frac_bits)
            if problem:
                raise BoxTreeError(f"split at depth {level}: {problem}")
            bits = self.frac_bits[node.input]
            integer = None if bits is None else integer_thresholds((node.threshold,), bits)[0]
            compiled.append((node.input, reading_key(node.threshold), node.threshold, integer, -1))
            low, high = box.split(node.input, node.threshold)
            pending.append((node.high, high, level + 1, len(compiled) - 1))
            pending.append((node.low, low, level + 1, None))
        object.__setattr__(self, "_compiled", tuple(compiled))
        object.__setattr__(self, "leaves", tuple(leaves))
        object.__setattr__(self, "boxes", tuple(boxes))
        object.__setattr__(self, "depth", depth)

    leaves: tuple[Leaf, ...] = field(init=False, repr=False)
    """The leaves in pre-order."""
    boxes: tuple[Box, ...] = field(init=False, repr=False)
    """Each leaf's box, in the order of `leaves`; they partition `box`."""
    depth: int = field(init=False, repr=False)
    """The most splits above a leaf: a lookup makes at most this many comparisons."""

    @property
    def n_leaves(self) -> int:
        return len(self.leaves)

    def leaf_index(self, values: Sequence[float | Fraction]) -> int:
        """The number of the leaf that holds a point of `box`: one float or exact Fraction per input, as
        `certfsm.machine.Machine` checks a reading. A float is compared with each threshold's float key, any
        other value exactly (docs/semantics.md, "Cells")."""
        nodes, at = self._compiled, 0
        while True:
            node = nodes[at]
            if type(node) is int:
                return node
            assert not isinstance(node, int)
            value = values[node[0]]
            at = node[4] if value >= (node[1] if type(value) is float else node[2]) else at + 1

    def leaf_index_fixed(self, integers: Sequence[int]) -> int:
        """`leaf_index` for fixed-point integers v meaning v * 2^-frac_bits: integer compares only."""
        nodes, at = self._compiled, 0
        while True:
            node = nodes[at]
            if type(node) is int:
                return node
            assert not isinstance(node, int)
            if node[3] is None:
                raise BoxTreeError(
                    f"a split on input {node[0]}, which has no frac_bits, has no fixed-point threshold; add "
                    "frac_bits to that input"
                )
            at = node[4] if integers[node[0]] >= node[3] else at + 1


def threshold_problem(box: Box, input: int, threshold: Fraction, frac_bits: Sequence[int | None]) -> str | None:
    """Why `threshold` cannot split `box` on `input` (None when it can): the one statement of what a split needs."""
    if not 0 <= input < len(box.intervals):
        return f"input {input} is not one of the box's inputs 0..{len(box.intervals) - 1}; split a listed input"
    bits = frac_bits[input]
    if bits is not None and (threshold * (1 << bits)).denominator != 1:
        return (
            f"the threshold {_show(threshold)} on input {input} is not a multiple of 2^-{bits}; place it on "
            "the input's fixed-point grid"
        )
    if bits is None and Fraction(float(threshold)) != threshold:
        return f"the threshold {threshold} on input {input} is not a float64; round it to one"
    cut = box.intervals[input]
    if not cut.low < threshold < cut.high:
        return (
            f"the threshold {_show(threshold)} on input {input} is not strictly inside the node's interval "
            f"[{_show(cut.low)}, {_show(cut.high)}{']' if cut.closed else ')'}, so a part would be empty; move the "
            "threshold inside or drop the split"
        )
    return None


def leaf_allowed_mask(box: Box, legal_mask: int, rules: Iterable[tuple[Sequence[float], Sequence[float], int]]) -> int:
    """The allowed mask of `box` under the legality rules (lower, upper, forbidden mask), as for a cell.

    docs/semantics.md, "Legality rules": a rule's closed box meets the
    leaf when, on every input, ``lower < high`` (``<=`` where the leaf is
    closed) and ``upper >= low``, which is `certfsm.machine.cell_allowed_masks`
    on the one-cell grid of the leaf's sides, spelt out because a refined
    table asks it for every leaf (tests/core/test_box_tree.py holds the
    two equal). Rule bounds are spec decimals (`decimal_value`).
    """
    mask = legal_mask
    for rule in rules:
        lower, upper, forbidden = _exact_rule(tuple(rule[0]), tuple(rule[1]), rule[2])
        if all(
            (lo <= cut.high if cut.closed else lo < cut.high) and hi >= cut.low
            for lo, hi, cut in zip(lower, upper, box.intervals)
        ):
            mask &= ~forbidden
    return mask


@functools.lru_cache(maxsize=256)
def _exact_rule(lower: tuple[float, ...], upper: tuple[float, ...], forbidden: int) -> tuple[Any, Any, int]:
    """A rule's bounds read exactly (`decimal_value`), once per rule: a refined table asks for every leaf."""
    return tuple(decimal_value(v) for v in lower), tuple(decimal_value(v) for v in upper), forbidden


@dataclass(frozen=True, eq=False)
class Refinement:
    """The box trees of a refined table: `trees[j]` under the flat cell `cells[j]` (ascending, each tree split at
    least once); every other cell is its own single leaf. Its root box is the cell's (`Machine.cell_box`)."""

    cells: tuple[int, ...]
    trees: tuple[BoxTree, ...]

    @functools.cached_property
    def _by_cell(self) -> dict[int, BoxTree]:
        return dict(zip(self.cells, self.trees))

    def tree_of(self, cell: int) -> BoxTree | None:
        """The tree under `cell`, None when the cell is not refined."""
        return self._by_cell.get(cell)

    @property
    def n_leaves(self) -> int:
        return sum(tree.n_leaves for tree in self.trees)

    @property
    def has_exact(self) -> bool:
        return any(leaf.status is LeafStatus.EXACT for tree in self.trees for leaf in tree.leaves)


# ------------------------------------------------------------- the canonical encoding


def threshold_json(threshold: Fraction, frac_bits: int | None) -> int | float:
    """How a threshold is written: the integer v = t * 2^f on an input with frac_bits f, else the float64 t."""
    return int(threshold * (1 << frac_bits)) if frac_bits is not None else float(threshold)


def encode_tree(tree: BoxTree, first_leaf: int = 0) -> list[list[Any]]:
    """The canonical pre-order list of `tree`; leaf numbers count from `first_leaf`."""
    encoded: list[list[Any]] = []
    pending: list[Node] = [tree.root]
    count = first_leaf
    while pending:
        node = pending.pop()
        if isinstance(node, Leaf):
            encoded.append(["leaf", count])
            count += 1
        else:
            encoded.append(["split", node.input, threshold_json(node.threshold, tree.frac_bits[node.input])])
            pending += [node.high, node.low]
    return encoded


def decode_tree(
    encoded: Any,
    box: Box,
    frac_bits: Sequence[int | None],
    leaves: Sequence[Leaf],
    *,
    where: str,
    first_leaf: int = 0,
    budget: TreeBudget | None = None,
) -> BoxTree:
    """The tree of a canonical pre-order list over `box`; `leaves[k]` is the leaf that ``["leaf", k]`` names.

    Refuses (BoxTreeError naming ``where[j]``, the value and the fix): a
    value that is not a list of nodes, a malformed node, a threshold not
    written as `threshold_json` writes it or outside its node (the box of
    each node is re-derived from `box` and the splits above it), a leaf
    number other than the next in pre-order, a tree deeper than
    ``budget.max_depth`` or with more than ``budget.max_leaves`` leaves,
    a list that ends before its tree does or goes on after it.
    """
    if not isinstance(encoded, list) or not encoded:
        raise BoxTreeError(f"{where} is {_kind(encoded)}, expected a non-empty list of nodes in pre-order")
    frames: list[list[Any]] = []  # per open split: [input, threshold, high box, depth, low child or None]
    node_box, depth, count, done = box, 0, first_leaf, None
    for j, item in enumerate(encoded):
        at = f"{where}[{j}]"
        if done is not None:
            raise BoxTreeError(
                f"{at} follows a complete tree ({j} nodes); a tree's list ends with its last leaf, drop what follows"
            )
        node: Node
        if _is_node(item, "split", 3):
            input, written = item[1], item[2]
            if type(input) is not int or not 0 <= input < len(box.intervals):
                raise BoxTreeError(f"{at}[1]={_show_json(input)} is not an input index 0..{len(box.intervals) - 1}")
            threshold = _read_threshold(written, frac_bits[input], f"{at}[2]")
            problem = threshold_problem(node_box, input, threshold, frac_bits)
            if problem:
                raise BoxTreeError(f"{at}: {problem}")
            if budget is not None and depth + 1 > budget.max_depth:
                raise BoxTreeError(
                    f"{at} splits at depth {depth}, so its leaves would lie deeper than max_depth="
                    f"{budget.max_depth}; keep the tree within the spec's refine.max_depth"
                )
            low, high = node_box.split(input, threshold)
            frames.append([input, threshold, high, depth, None])
            node_box, depth = low, depth + 1
            continue
        if not _is_node(item, "leaf", 2):
            raise BoxTreeError(
                f'{at}={_show_json(item)} is not a node; write ["split", input, threshold] or ["leaf", number]'
            )
        if type(item[1]) is not int or item[1] != count:
            raise BoxTreeError(
                f"{at}[1]={_show_json(item[1])} is not the next leaf number {count}; number leaves in pre-order"
            )
        if count >= len(leaves):
            raise BoxTreeError(f"{at}[1]={count} names no leaf: {len(leaves)} are listed")
        if budget is not None and count - first_leaf + 1 > budget.max_leaves:
            raise BoxTreeError(
                f"{at} is leaf {count - first_leaf + 1} of its tree, more than max_leaves={budget.max_leaves}; keep "
                "the tree within the spec's refine.max_leaves"
            )
        node, count = leaves[count], count + 1
        while frames and frames[-1][4] is not None:
            input, threshold, _, _, low_child = frames.pop()
            node = Split(input, threshold, low_child, node)
        if frames:
            frames[-1][4] = node
            node_box, depth = frames[-1][2], frames[-1][3] + 1
        else:
            done = node
    if done is None:
        raise BoxTreeError(f"{where} ends before its tree is complete ({len(frames)} splits lack a child)")
    return BoxTree(box, done, tuple(frac_bits))


def _is_node(item: Any, kind: str, length: int) -> bool:
    return isinstance(item, list) and len(item) == length and item[0] == kind


def _read_threshold(written: Any, frac_bits: int | None, at: str) -> Fraction:
    if frac_bits is not None:
        if type(written) is not int:
            raise BoxTreeError(
                f"{at}={_show_json(written)} is not an integer; a threshold on an input with frac_bits={frac_bits} "
                f"is written as the integer v meaning v * 2^-{frac_bits}"
            )
        return Fraction(written, 1 << frac_bits)
    if type(written) is not float or written != written or written in (float("inf"), float("-inf")):
        raise BoxTreeError(
            f"{at}={_show_json(written)} is not a finite float; a threshold on an input without frac_bits is "
            "written as a float64"
        )
    return Fraction(written)


def _show(value: Fraction) -> str:
    """An exact value as its float when the float is exact, else as p/q."""
    return repr(float(value)) if Fraction(float(value)) == value else str(value)


def _show_json(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(value: Any) -> str:
    return "an empty list" if value == [] else f"a {type(value).__name__}"
