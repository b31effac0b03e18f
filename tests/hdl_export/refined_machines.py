"""Refined machines for the hardware tests: the tiny machine with two reviewed trees, and random trees on any machine.

The export reads a `Machine` only (`Machine.from_artifact` builds it from
an artifact), so these build the refinement directly; the artifact path
(`tests/runtime/refined_tables.refined_artifact`) is exercised in
test_refined_export.py.
"""

from __future__ import annotations

import dataclasses
import math
import random
from fractions import Fraction

from tiny_machine import tiny_machine

from certfsm import Box, BoxTree, Leaf, LeafStatus, Refinement, Split
from certfsm.machine import Machine


def cell_box(machine: Machine, cell: int) -> Box:
    lower, upper = machine.cell_bounds(cell)
    return Box.of_bounds(lower, upper, [hi == e[-1] for hi, e in zip(upper, machine.edges)])


def tiny_refined_machine() -> Machine:
    """The tiny machine with cell 1 (speed in [-2, -0.5), load in [10, 20]) split at speed -1.25 and, above it, at
    load 15 (three leaves), and cell 5 (speed in [0, 1.25), load in [10, 20]) split at load 14 (two leaves, the
    low one allowing fewer tokens than its cell)."""
    machine = tiny_machine()
    one = Split(
        0,
        Fraction(-5, 4),
        Leaf(LeafStatus.EXACT, 2, 0b101),
        Split(1, Fraction(15), Leaf(LeafStatus.CONSERVATIVE, 0, 0b101), Leaf(LeafStatus.EXACT, 2, 0b101)),
    )
    five = Split(1, Fraction(14), Leaf(LeafStatus.EXACT, 1, 0b011), Leaf(LeafStatus.EXACT, 2, 0b111))
    trees = tuple(BoxTree(cell_box(machine, cell), root, machine.frac_bits) for cell, root in ((1, one), (5, five)))
    return dataclasses.replace(machine, refinement=Refinement((1, 5), trees))


def refine_at_random(machine: Machine, rng: random.Random, share: float = 0.5, max_depth: int = 3) -> Machine:
    """`machine` with about `share` of its cells split at random on the inputs' fixed-point grid (at least one
    cell when any can be split), each leaf with a random mask holding the conservative token and a random token
    it allows."""
    params = machine.params
    cells, trees = [], []

    def grow(box: Box, depth: int):
        split = (
            _split(box, machine.frac_bits, rng) if depth < max_depth and (depth == 0 or rng.random() < 0.5) else None
        )
        if split is None:
            mask = rng.randrange(1 << params.n_tokens) | 1 << params.conservative
            token = rng.choice([t for t in range(params.n_tokens) if mask >> t & 1])
            return Leaf(rng.choice(list(LeafStatus)), token, mask)
        input, threshold = split
        low, high = box.split(input, threshold)
        return Split(input, threshold, grow(low, depth + 1), grow(high, depth + 1))

    order = list(range(machine.n_cells))
    for cell in order:
        if rng.random() >= share and (cells or cell != order[-1]):
            continue
        box = cell_box(machine, cell)
        root = grow(box, 0)
        if isinstance(root, Split):
            cells.append(cell)
            trees.append(BoxTree(box, root, machine.frac_bits))
    if not cells:
        return machine
    return dataclasses.replace(machine, refinement=Refinement(tuple(cells), tuple(trees)))


def _split(box: Box, frac_bits, rng: random.Random) -> tuple[int, Fraction] | None:
    """A random (input, threshold) strictly inside `box` on the input's 2^-f grid; None when no input has room."""
    order = list(range(len(box.intervals)))
    rng.shuffle(order)
    for i in order:
        side, scale = box.intervals[i], 1 << frac_bits[i]
        low, high = math.floor(side.low * scale) + 1, math.ceil(side.high * scale) - 1
        if low <= high:
            return i, Fraction(rng.randint(low, high), scale)
    return None
