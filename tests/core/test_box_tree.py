"""Box trees (docs/design.md, "Box trees"): the codec round-trips, leaves partition their box, the lookup finds the
leaf a reference written from the half-open rule alone finds, and bad lists are refused with pinned messages.

The reference derives each leaf's box from the encoded list itself, with `fractions.Fraction`, and places a point
by ``low <= x < high`` (``<=`` high on a closed side); it shares no code with `certfsm._box_tree`.
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from certfsm._box_tree import (
    Box,
    BoxTree,
    Interval,
    Leaf,
    LeafStatus,
    Split,
    TreeBudget,
    decode_tree,
    encode_tree,
    leaf_allowed_mask,
)
from certfsm._errors import BoxTreeError
from certfsm.machine import exact_reading_value

STATUSES = list(LeafStatus)


@st.composite
def boxes(draw):
    """1..3 inputs, each with frac_bits None or 0..6, bounds on its grid (dyadic for None), a closed top or not."""
    frac_bits, intervals = [], []
    for _ in range(draw(st.integers(1, 3))):
        bits = draw(st.one_of(st.none(), st.integers(0, 6)))
        scale = 1 << (bits if bits is not None else 8)
        low = draw(st.integers(-200, 200))
        high = low + draw(st.integers(2, 400))
        frac_bits.append(bits)
        intervals.append(Interval(Fraction(low, scale), Fraction(high, scale), draw(st.booleans())))
    return Box(tuple(intervals)), tuple(frac_bits)


@st.composite
def trees(draw, max_depth=5):
    box, frac_bits = draw(boxes())

    def node(part: Box, depth: int):
        if depth < max_depth and draw(st.integers(0, 2)) > 0:
            i = draw(st.integers(0, len(part.intervals) - 1))
            cut = part.intervals[i]
            bits = frac_bits[i]
            if bits is not None:
                low, high = cut.low * (1 << bits), cut.high * (1 << bits)
                inside = range(math.floor(low) + 1, math.ceil(high))
                if inside:
                    threshold = Fraction(draw(st.sampled_from(inside)), 1 << bits)
                    below, above = part.split(i, threshold)
                    return Split(i, threshold, node(below, depth + 1), node(above, depth + 1))
            else:
                share = Fraction(draw(st.integers(1, 2**20 - 1)), 2**20)
                threshold = Fraction(float(cut.low + (cut.high - cut.low) * share))
                if cut.low < threshold < cut.high:
                    below, above = part.split(i, threshold)
                    return Split(i, threshold, node(below, depth + 1), node(above, depth + 1))
        return Leaf(draw(st.sampled_from(STATUSES)), draw(st.integers(0, 15)), draw(st.integers(0, 0xFFFF)))

    return BoxTree(box, node(box, 0), frac_bits)


# ------------------------------------------------------------------ the reference


def reference_boxes(encoded, box: Box, frac_bits):
    """Each leaf's box as [(low, high, closed) per input], derived from the pre-order list alone."""
    result, at = [], 0

    def walk(bounds):
        nonlocal at
        item = encoded[at]
        at += 1
        if item[0] == "leaf":
            result.append(bounds)
            return
        i, written = item[1], item[2]
        t = Fraction(written, 1 << frac_bits[i]) if frac_bits[i] is not None else Fraction(written)
        low, high, closed = bounds[i]
        walk(bounds[:i] + [(low, t, False)] + bounds[i + 1 :])
        walk(bounds[:i] + [(t, high, closed)] + bounds[i + 1 :])

    walk([(c.low, c.high, c.closed) for c in box.intervals])
    return result


def holds(bounds, point) -> bool:
    return all(low <= x and (x < high or (closed and x == high)) for (low, high, closed), x in zip(bounds, point))


def reference_leaf(encoded, box, frac_bits, point) -> int:
    found = [k for k, bounds in enumerate(reference_boxes(encoded, box, frac_bits)) if holds(bounds, point)]
    assert len(found) == 1, found
    return found[0]


def thresholds_of(encoded, frac_bits):
    return [
        (item[1], Fraction(item[2], 1 << frac_bits[item[1]]) if frac_bits[item[1]] is not None else Fraction(item[2]))
        for item in encoded
        if item[0] == "split"
    ]


def adversarial_values(t: Fraction) -> list:
    """A threshold as float, Fraction and Decimal, 2 ulps either side and 2^-80 either side."""
    f = float(t)
    below, above = math.nextafter(f, -math.inf), math.nextafter(f, math.inf)
    return [
        f,
        t,
        decimal.Decimal(f),
        below,
        above,
        math.nextafter(below, -math.inf),
        math.nextafter(above, math.inf),
        t - Fraction(1, 2**80),
        t + Fraction(1, 2**80),
    ]


def points(tree: BoxTree, encoded, draw_middle=True):
    """Points of the root box: each interval's ends and middle, with each threshold's adversarial values swapped in."""
    middle = [(c.low + c.high) / 2 for c in tree.box.intervals]
    result = [list(middle)]
    for i, t in thresholds_of(encoded, tree.frac_bits):
        for value in adversarial_values(t):
            point = list(middle)
            point[i] = value
            result.append(point)
    for i, cut in enumerate(tree.box.intervals):
        for value in [cut.low] + ([cut.high] if cut.closed else [cut.high - Fraction(1, 2**80)]):
            point = list(middle)
            point[i] = value
            result.append(point)
    return [p for p in result if holds([(c.low, c.high, c.closed) for c in tree.box.intervals], [exact(v) for v in p])]


def exact(value) -> Fraction:
    return Fraction(value) if not isinstance(value, float) else Fraction(*value.as_integer_ratio())


# ------------------------------------------------------------------ the properties


@given(trees())
@settings(max_examples=examples(200), deadline=None)
def test_encode_decode_round_trips_and_re_derives_every_box(tree):
    encoded = encode_tree(tree)
    again = decode_tree(encoded, tree.box, tree.frac_bits, tree.leaves, where="tree")
    assert encode_tree(again) == encoded and again.leaves == tree.leaves and again.depth == tree.depth
    derived = reference_boxes(encoded, tree.box, tree.frac_bits)
    assert [[(c.low, c.high, c.closed) for c in box.intervals] for box in again.boxes] == derived
    assert all(box.inside(tree.box) for box in again.boxes)
    first = 5
    shifted = encode_tree(tree, first)
    assert (
        decode_tree(
            shifted, tree.box, tree.frac_bits, [None] * first + list(tree.leaves), where="t", first_leaf=first
        ).leaves
        == tree.leaves
    )


@given(trees(), st.data())
@settings(max_examples=examples(200), deadline=None)
def test_leaves_partition_the_box_and_the_lookup_finds_the_one_leaf(tree, data):
    encoded = encode_tree(tree)
    sampled = points(tree, encoded)
    for _ in range(20):
        sampled.append(
            [
                c.low + (c.high - c.low) * Fraction(data.draw(st.integers(0, 2**12 - 1)), 2**12)
                for c in tree.box.intervals
            ]
        )
    for point in sampled:
        values = [exact_reading_value(f"x{i}", v, "reading") for i, v in enumerate(point)]
        expected = reference_leaf(encoded, tree.box, tree.frac_bits, [exact(v) for v in point])
        assert tree.leaf_index(values) == expected, point
        assert sum(box.contains([exact(v) for v in point]) for box in tree.boxes) == 1


@given(trees())
@settings(max_examples=examples(200), deadline=None)
def test_the_fixed_point_lookup_compares_integers_as_the_reference(tree):
    if any(bits is None for bits in tree.frac_bits):
        return
    encoded = encode_tree(tree)
    middle = [math.floor((c.low + c.high) / 2 * (1 << f)) for c, f in zip(tree.box.intervals, tree.frac_bits)]
    readings = [middle]
    for i, t in thresholds_of(encoded, tree.frac_bits):
        v = int(t * (1 << tree.frac_bits[i]))
        for near in (v - 1, v, v + 1):
            readings.append(middle[:i] + [near] + middle[i + 1 :])
    for reading in readings:
        point = [Fraction(v, 1 << f) for v, f in zip(reading, tree.frac_bits)]
        if tree.box.contains(point):
            assert tree.leaf_index_fixed(reading) == reference_leaf(encoded, tree.box, tree.frac_bits, point)


@given(trees(), st.data())
@settings(max_examples=examples(100), deadline=None)
def test_a_threshold_moved_onto_or_past_its_node_is_refused(tree, data):
    encoded = encode_tree(tree)
    splits = [j for j, item in enumerate(encoded) if item[0] == "split"]
    if not splits:
        return
    j = data.draw(st.sampled_from(splits))
    i = encoded[j][1]
    node_box = _node_box(encoded, j, tree)
    cut = node_box.intervals[i]
    bits = tree.frac_bits[i]
    outside = data.draw(st.sampled_from([cut.low, cut.high, cut.low - 1, cut.high + 1]))
    bad = [list(item) for item in encoded]
    bad[j][2] = int(outside * (1 << bits)) if bits is not None else float(outside)
    with pytest.raises(BoxTreeError, match=rf"^tree\[{j}\]: the threshold .* on input {i} is not strictly inside"):
        decode_tree(bad, tree.box, tree.frac_bits, tree.leaves, where="tree")


def _node_box(encoded, j, tree) -> Box:
    """The box of the node at position `j` of the pre-order list (by the reference's rule)."""
    at, found = 0, None

    def walk(bounds):
        nonlocal at, found
        here = at
        item = encoded[at]
        at += 1
        if here == j:
            found = bounds
        if item[0] == "leaf":
            return
        i = item[1]
        t = Fraction(item[2], 1 << tree.frac_bits[i]) if tree.frac_bits[i] is not None else Fraction(item[2])
        low, high, closed = bounds[i]
        walk(bounds[:i] + [(low, t, False)] + bounds[i + 1 :])
        walk(bounds[:i] + [(t, high, closed)] + bounds[i + 1 :])

    walk([(c.low, c.high, c.closed) for c in tree.box.intervals])
    return Box(tuple(Interval(*b) for b in found))


# ------------------------------------------------------------------ refusals, pinned

BOX = Box((Interval(Fraction(0), Fraction(1), False), Interval(Fraction(0), Fraction(10), True)))
FRAC_BITS = (None, 2)
LEAVES = [Leaf(LeafStatus.EXACT, 1, 7), Leaf(LeafStatus.CONSERVATIVE, 0, 7), Leaf(LeafStatus.UNDECIDED, 0, 3)]
GOOD = [["split", 0, 0.5], ["leaf", 0], ["split", 1, 20], ["leaf", 1], ["leaf", 2]]

BAD_LISTS = [
    ({}, r"t is a dict, expected a non-empty list of nodes in pre-order"),
    ([], r"t is an empty list, expected a non-empty list of nodes in pre-order"),
    ([["leaf"]], r"t\[0\]=\['leaf'\] is not a node; write \[\"split\", input, threshold\] or \[\"leaf\", number\]"),
    ([["cut", 0, 0.5]], r"t\[0\]=\['cut', 0, 0\.5\] is not a node"),
    ([["split", 2, 0.5]], r"t\[0\]\[1\]=2 is not an input index 0\.\.1"),
    (
        [["split", 0, 1]],
        r"t\[0\]\[2\]=1 is not a finite float; a threshold on an input without frac_bits is written as a float64",
    ),
    (
        [["split", 1, 20.0]],
        r"t\[0\]\[2\]=20\.0 is not an integer; a threshold on an input with frac_bits=2 is written as the integer v meaning v \* 2\^-2",
    ),
    (
        [["split", 1, 40], ["leaf", 0], ["leaf", 1]],
        r"t\[0\]: the threshold 10\.0 on input 1 is not strictly inside the node's interval \[0\.0, 10\.0\], so a part would be empty; move the threshold inside or drop the split",
    ),
    (
        [["split", 0, 0.5], ["split", 0, 0.75], ["leaf", 0], ["leaf", 1], ["leaf", 2]],
        r"t\[1\]: the threshold 0\.75 on input 0 is not strictly inside the node's interval \[0\.0, 0\.5\)",
    ),
    (
        [["split", 0, 0.5], ["leaf", 0], ["split", 0, 0.25], ["leaf", 1], ["leaf", 2]],
        r"t\[2\]: the threshold 0\.25 on input 0 is not strictly inside the node's interval \[0\.5, 1\.0\)",
    ),
    ([["leaf", 1]], r"t\[0\]\[1\]=1 is not the next leaf number 0; number leaves in pre-order"),
    ([["split", 0, 0.5], ["leaf", 0]], r"t ends before its tree is complete \(1 splits lack a child\)"),
    (
        [["leaf", 0], ["leaf", 1]],
        r"t\[1\] follows a complete tree \(1 nodes\); a tree's list ends with its last leaf, drop what follows",
    ),
    (GOOD[:2] + [["split", 1, 20], ["leaf", 1], ["leaf", 3]], r"t\[4\]\[1\]=3 is not the next leaf number 2"),
]


@pytest.mark.parametrize("encoded, message", BAD_LISTS, ids=[str(k) for k in range(len(BAD_LISTS))])
def test_each_malformed_list_is_refused_naming_its_json_path(encoded, message):
    with pytest.raises(BoxTreeError, match=f"^{message}"):
        decode_tree(encoded, BOX, FRAC_BITS, LEAVES, where="t")


def test_the_budget_refuses_a_deeper_tree_and_more_leaves():
    assert decode_tree(GOOD, BOX, FRAC_BITS, LEAVES, where="t", budget=TreeBudget(2, 3)).n_leaves == 3
    with pytest.raises(
        BoxTreeError,
        match=r"^t\[2\] splits at depth 1, so its leaves would lie deeper than max_depth=1; keep the tree within the spec's refine\.max_depth$",
    ):
        decode_tree(GOOD, BOX, FRAC_BITS, LEAVES, where="t", budget=TreeBudget(1, 3))
    with pytest.raises(
        BoxTreeError,
        match=r"^t\[4\] is leaf 3 of its tree, more than max_leaves=2; keep the tree within the spec's refine\.max_leaves$",
    ):
        decode_tree(GOOD, BOX, FRAC_BITS, LEAVES, where="t", budget=TreeBudget(2, 2))
    with pytest.raises(BoxTreeError, match=r"^t\[4\]\[1\]=2 names no leaf: 2 are listed$"):
        decode_tree(GOOD, BOX, FRAC_BITS, LEAVES[:2], where="t")


def test_a_tree_built_in_python_checks_its_thresholds_too():
    with pytest.raises(BoxTreeError, match=r"^split at depth 0: the threshold 1/3 on input 0 is not a float64"):
        BoxTree(BOX, Split(0, Fraction(1, 3), LEAVES[0], LEAVES[1]), FRAC_BITS)
    with pytest.raises(
        BoxTreeError, match=r"^split at depth 0: the threshold 0\.125 on input 1 is not a multiple of 2\^-2"
    ):
        BoxTree(BOX, Split(1, Fraction(1, 8), LEAVES[0], LEAVES[1]), FRAC_BITS)


def test_a_float_threshold_means_its_binary_value_not_its_decimal():
    """0.1 as a threshold is the float 0.1000000000000000055..., above 1/10: 1/10 lies below it, the float at it."""
    tree = decode_tree([["split", 0, 0.1], ["leaf", 0], ["leaf", 1]], BOX, FRAC_BITS, LEAVES, where="t")
    assert tree.leaf_index([Fraction(1, 10), 5.0]) == 0
    assert tree.leaf_index([0.1, 5.0]) == 1
    assert tree.leaf_index([math.nextafter(0.1, 0), 5.0]) == 0


def test_a_leaf_mask_is_the_cell_rule_on_the_leafs_half_open_box():
    """A rule box starting at 0.5 meets [0.5, 1) but not [0, 0.5); one ending at 0.5 meets both (closed rule box)."""
    tree = decode_tree(GOOD, BOX, FRAC_BITS, LEAVES, where="t")
    starting, ending = [((0.5, 0.0), (1.0, 10.0), 0b100)], [((0.0, 0.0), (0.5, 10.0), 0b100)]
    assert [leaf_allowed_mask(box, 0b111, starting) for box in tree.boxes] == [0b111, 0b011, 0b011]
    assert [leaf_allowed_mask(box, 0b111, ending) for box in tree.boxes] == [0b011, 0b011, 0b011]
    decimal_rule = [((0.0, 0.0), (0.1, 10.0), 0b100)]  # ends at 1/10, below the float 0.1 where the leaf starts
    split = decode_tree([["split", 0, 0.1], ["leaf", 0], ["leaf", 1]], BOX, FRAC_BITS, LEAVES, where="t")
    assert [leaf_allowed_mask(box, 0b111, decimal_rule) for box in split.boxes] == [0b011, 0b111]


@settings(max_examples=examples(300), deadline=None)
@given(data=st.data())
def test_a_leaf_mask_equals_the_cell_rule_on_the_one_cell_grid_of_the_leaf(data):
    """`leaf_allowed_mask` spells the meet test out for speed; `cell_allowed_masks` (the one statement of the rule)
    on the leaf's sides as a grid of one cell (a second bin above a half-open side) must give the same mask."""
    from certfsm.machine import cell_allowed_masks

    box, _ = data.draw(boxes())
    n = len(box.intervals)
    sides = [c.low for c in box.intervals] + [c.high for c in box.intervals]
    quarter = st.one_of(st.sampled_from([float(v) for v in sides]), st.integers(-800, 2400).map(lambda q: q / 4))
    rules = []
    for _ in range(data.draw(st.integers(0, 3))):
        ends = [sorted(data.draw(st.tuples(quarter, quarter))) for _ in range(n)]
        rules.append((tuple(e[0] for e in ends), tuple(e[1] for e in ends), data.draw(st.integers(1, 7))))
    edges = [(c.low, c.high) if c.closed else (c.low, c.high, c.high + 1) for c in box.intervals]
    exact = [(tuple(map(Fraction, lo)), tuple(map(Fraction, hi)), f) for lo, hi, f in rules]
    assert leaf_allowed_mask(box, 0b1111, rules) == cell_allowed_masks(edges, 0b1111, exact)[0]
