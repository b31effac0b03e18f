"""The leaf lookup of a refined table as hardware: split tests, the ROM address of the reading's leaf, leaf words.

docs/design.md, "Box trees": a reading finds its cell by the bin rule,
then descends its cell's tree, comparing with each split's threshold by
the same rule (on the fixed-point path, ``v >= ceil(t * 2^f)``); the
leaf's token and allowed mask then stand where the cell's would. The
module does it in the sampling clock, beside the binning:

- one `SplitTest` per distinct (input, integer threshold) among the
  trees' splits: ``bus >= threshold``, one constant comparator, shared by
  every cell split there (cells of one bin column often are);
- ``reading_entry`` (a `Select` on ``reading_cell``): in a refined cell,
  its tree as nested 2:1 muxes on those split bits, giving the ROM
  address of the reading's leaf; in every other cell the cell's own
  address;
- the table and mask ROMs hold the cells' words at addresses
  0 .. n_cells - 1, then the leaves' words at n_cells + k, k the leaf's
  number across the table's trees in pre-order (as the artifact numbers
  them). A refined cell's own word (the conservative token) stays at its
  address and is never read.

Why not a walk of node ROMs, one tree level per pipeline stage: the
split comparators compare buses with constants, so they do not wait for
the cell index and run beside the comparator banks; what the leaf adds
on the path to the ROM address is the case on the cell (a parallel
multiplexer) and at most `BoxTree.depth` 2:1 multiplexers. So the
latency stays `LATENCY` (2), one decision per clock, the formal
equivalence keeps its one-edge claims, and block RAM grows by one word per
leaf and nothing else. A node-ROM walk would carry the reading through
depth more pipeline registers, each stage with its own node ROM and a
comparator against a threshold read from it, for depth cycles more
latency; it pays only when the trees' distinct thresholds need more
comparators than the logic holds (docs/benchmarks.md has the example's
figures).

A flat machine gets none of these nodes, and its module is the same text
as before refinement existed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, TypeVar

from certfsm import BoxTree, Leaf, SpecError, Split
from certfsm.machine import Machine, integer_thresholds

from ._netlist import ComparatorBank, Const, Expr, Ref, RomEntry, Select, SplitTest, mux, op

if TYPE_CHECKING:
    from ._hardware import _Widths

_Term = TypeVar("_Term")


def walk(tree: BoxTree, on_split: Callable[[int, int, _Term, _Term], _Term], on_leaf: Callable[[int], _Term]) -> _Term:
    """Fold `tree` bottom up: ``on_leaf(k)`` for leaf k (its number in the tree, pre-order, low child first, as
    `BoxTree.leaves`), ``on_split(input, integer threshold, low, high)`` for a split; every input has frac_bits
    (the hardware's buses). The one reading of a tree's shape for the module, the C and the equivalence claims."""
    count = 0

    def fold(node) -> _Term:
        nonlocal count
        if isinstance(node, Leaf):
            count += 1
            return on_leaf(count - 1)
        assert isinstance(node, Split)
        bits = tree.frac_bits[node.input]
        assert bits is not None
        threshold = integer_thresholds((node.threshold,), bits)[0]
        low = fold(node.low)
        return on_split(node.input, threshold, low, fold(node.high))

    return fold(tree.root)


def first_leaves(machine: Machine) -> dict[int, int]:
    """Per refined cell, the number of its first leaf across the table's trees (leaves are numbered tree after
    tree, in the order of `Refinement.cells`)."""
    firsts, count = {}, 0
    if machine.refinement is not None:
        for cell, tree in zip(machine.refinement.cells, machine.refinement.trees):
            firsts[cell] = count
            count += tree.n_leaves
    return firsts


def entry_count(machine: Machine) -> int:
    """Words of each ROM: one per cell, and one per leaf of a refined table."""
    return machine.n_cells + (0 if machine.refinement is None else machine.refinement.n_leaves)


def split_name(bank: ComparatorBank, threshold: int) -> str:
    """The split test's signal: the input's bus name, ``_ge_`` and the integer threshold (``m`` for minus)."""
    return f"{bank.bus.name}_ge_{'m' if threshold < 0 else ''}{abs(threshold)}"


def leaf_lookup(machine: Machine, banks: list[ComparatorBank], w: _Widths) -> tuple[list[SplitTest | Select], Ref]:
    """The split tests and the ``reading_entry`` select of a refined machine, and the ROMs' address.

    A flat machine gets no node, and its ROMs are addressed by ``reading_cell`` as they always were. A split test
    whose name another signal of the module already has is a SpecError naming both (input names are the spec's).
    """
    reading_cell = Ref("reading_cell", w.cell)
    if machine.refinement is None:
        return [], reading_cell
    entry = Ref("reading_entry", w.entry)
    tests: dict[tuple[int, int], SplitTest] = {}
    split_cells: dict[tuple[int, int], list[int]] = {}
    cases = []
    firsts = first_leaves(machine)
    for cell, tree in zip(machine.refinement.cells, machine.refinement.trees):

        def on_split(input: int, threshold: int, low: Expr, high: Expr, cell=cell) -> Expr:
            key = (input, threshold)
            split_cells.setdefault(key, []).append(cell)
            return mux(Ref(split_name(banks[input], threshold), 1), high, low)

        def on_leaf(k: int, cell=cell) -> Expr:
            return Const(machine.n_cells + firsts[cell] + k, w.entry)

        first = machine.n_cells + firsts[cell]
        cases.append(
            (
                cell,
                walk(tree, on_split, on_leaf),
                f"cell {cell}: its {tree.n_leaves} leaves at {first}..{first + tree.n_leaves - 1}, depth {tree.depth}",
            )
        )
    taken = {bank.bus.name for bank in banks} | {bank.bin.name for bank in banks}
    taken |= {bank.in_envelope.name for bank in banks}
    for (input, threshold), cells in sorted(split_cells.items()):
        bank = banks[input]
        name = split_name(bank, threshold)
        if name in taken:
            raise SpecError(
                f"the split test {name} of input {machine.names[input]} has the name of another signal of the "
                "module; rename that input in the spec so that they stay apart"
            )
        shown = sorted(set(cells))
        where = ", ".join(map(str, shown[:6])) + (f" and {len(shown) - 6} more" if len(shown) > 6 else "")
        real = threshold / (1 << bank.frac_bits)
        tests[(input, threshold)] = SplitTest(
            name,
            bank.bus,
            bank.signed,
            threshold,
            f"{bank.input_name} >= {real:g}: a split of cell{'s' if len(shown) > 1 else ''} {where}",
        )
    default = reading_cell if w.entry == w.cell else op("zext", reading_cell, width=w.entry)
    select = Select(
        "reading_entry",
        w.entry,
        reading_cell,
        tuple(cases),
        default,
        "the ROM address of the reading's entry: in a refined cell its leaf (the tree's splits, low child x < t, "
        "high child x >= t), else the cell's own word",
    )
    return [*tests.values(), select], entry


def leaf_rom_entries(machine: Machine, words: Callable[[Leaf], int], describe: Callable[[Leaf], str]) -> list[RomEntry]:
    """One ROM word per leaf, tree after tree, each commented with its number in the artifact (from 0), its cell,
    its box and what `describe` says."""
    entries: list[RomEntry] = []
    if machine.refinement is None:
        return entries
    number = 0
    for cell, tree in zip(machine.refinement.cells, machine.refinement.trees):
        for leaf, box in zip(tree.leaves, tree.boxes):
            where = ", ".join(side.describe(name) for side, name in zip(box.intervals, machine.names))
            entries.append(RomEntry(words(leaf), f"leaf {number} (cell {cell}): {where}: {describe(leaf)}"))
            number += 1
    return entries
