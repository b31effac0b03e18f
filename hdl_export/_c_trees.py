"""The C of a refined table's leaf lookup: the `Select` of `_leaves.py` as static const node arrays and one loop.

The Verilog writes each refined cell's tree as multiplexers in a case on
the cell; the C keeps the same trees as data, because code per tree (a
``switch`` of nested ``if``) grows the flash by some 14 bytes per leaf
and takes cppcheck's MISRA addon beyond half an hour on the example
refined with ``--refine 4,8`` (14 667 leaves), where arrays of numbers
take it seconds. The arrays:

- ``tree_root[cell]``: where the lookup of a reading in that cell starts,
  as a *code*: a code below ``TREE_NODES`` is a split node, a code at or
  above it the ROM address code - ``TREE_NODES`` (an unrefined cell's own
  word: its cell number);
- ``tree_test[k]``, ``tree_low[k]``, ``tree_high[k]``: split node k
  (pre-order, tree after tree) tests ``split_bits[tree_test[k]]`` (the
  `SplitTest` values of the call, ``bus >= threshold``) and goes on to
  its low or high child, each a code.

The loop follows codes until it reaches a ROM address: at most the
tree's depth comparisons after the cell, integers only.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._netlist import Const, Op, Ref, Select, SplitTest


@dataclass(frozen=True)
class TreeArrays:
    """The trees of a `Select` numbered for C: split nodes (test index, low, high, comment), per cell its root."""

    nodes: tuple[tuple[int, tuple[str, int], tuple[str, int], str], ...]
    roots: tuple[tuple[str, int], ...]
    tests: tuple[str, ...]

    @classmethod
    def of(cls, select: Select, tests: list[SplitTest], n_cells: int) -> TreeArrays:
        """Number `select`'s trees; its default must be the cell itself (zero-extended), as `_leaves.py` builds it."""
        default = select.default.args[0] if isinstance(select.default, Op) else select.default
        if not (isinstance(default, Ref) and default.name == select.selector.name):
            raise TypeError(f"the C prints a Select whose default is its selector, not {select.default!r}")
        index = {test.name: k for k, test in enumerate(tests)}
        docs = {test.name: test.doc.split(":", 1)[0] for test in tests}
        nodes: list = []
        roots: list[tuple[str, int]] = [("leaf", cell) for cell in range(n_cells)]

        def number(expr, where: str) -> tuple[str, int]:
            if isinstance(expr, Const):
                return ("leaf", expr.value)
            if not (isinstance(expr, Op) and expr.op == "?:" and isinstance(expr.args[0], Ref)):
                raise TypeError(f"the C prints trees of split tests and constants, not {expr!r}")
            test, high, low = expr.args
            at = len(nodes)
            nodes.append(None)
            low_code = number(low, where)
            nodes[at] = (index[test.name], low_code, number(high, where), f"{where}: {docs[test.name]}")
            return ("split", at)

        for key, expr, _ in select.cases:
            roots[key] = number(expr, f"cell {key}")
        return cls(tuple(nodes), tuple(roots), tuple(test.name for test in tests))

    def code(self, child: tuple[str, int]) -> int:
        """A child as the C stores it: a split node's index, or TREE_NODES + a ROM address."""
        kind, value = child
        return value if kind == "split" else len(self.nodes) + value

    @property
    def largest(self) -> int:
        """The largest code any array holds: a leaf's ROM address can sit under a split node, past every root's."""
        children = [self.code(child) for _, low, high, _ in self.nodes for child in (low, high)]
        return max([self.code(root) for root in self.roots] + children + [len(self.tests)])


def print_tree_lookup(
    select: Select, tests: list[SplitTest], n_cells: int, indent: str, comment, word_type
) -> list[str]:
    """The C lines that set ``select.name`` (the ROM address of the reading's cell or leaf): the arrays, then the
    loop. `comment` and `word_type` are the C printer's (one comment style, one choice of integer type)."""
    trees = TreeArrays.of(select, tests, n_cells)
    kind = word_type(max(trees.largest, 1).bit_length())
    nodes, cell = len(trees.nodes), select.selector.name
    lines = [
        comment(
            f"{select.name}: {select.doc}. The trees as data: a code below {nodes} is split node k, which tests "
            f"split_bits[tree_test[k]] and goes on to tree_low[k] or tree_high[k]; a code from {nodes} on is the "
            f"ROM address code - {nodes}"
        ),
        f"const uint32_t split_bits[{len(tests)}] = {{{', '.join(trees.tests)}}};",
        *_array(
            f"static const {kind} tree_root[{n_cells}]",
            [trees.code(root) for root in trees.roots],
            "cells",
            indent,
            comment,
        ),
        f"static const {word_type(max(len(tests) - 1, 1).bit_length())} tree_test[{nodes}] = {{",
    ]
    lines += [f"{indent}{test}u,  {comment(f'node {k}, {where}')}" for k, (test, _, _, where) in enumerate(trees.nodes)]
    lines += [
        "};",
        *_array(
            f"static const {kind} tree_low[{nodes}]",
            [trees.code(low) for _, low, _, _ in trees.nodes],
            "nodes",
            indent,
            comment,
        ),
        *_array(
            f"static const {kind} tree_high[{nodes}]",
            [trees.code(high) for _, _, high, _ in trees.nodes],
            "nodes",
            indent,
            comment,
        ),
        f"uint32_t tree_code = ({cell} < {n_cells}u) ? (uint32_t) tree_root[{cell}] : {nodes}u;",
        f"while (tree_code < {nodes}u) {{",
        f"{indent}tree_code = (split_bits[tree_test[tree_code]] != 0u) ? (uint32_t) tree_high[tree_code] : "
        "(uint32_t) tree_low[tree_code];",
        "}",
        f"const uint32_t {select.name} = tree_code - {nodes}u;",
    ]
    return lines


def _array(declaration: str, values: list[int], what: str, indent: str, comment) -> list[str]:
    """A static const array, 16 values a line, each line commented with the range it holds. One-dimensional:
    cppcheck reads a two-dimensional table of the example's 12 582 split nodes six times slower."""
    lines = [f"{declaration} = {{"]
    for first in range(0, len(values), 16):
        last = min(first + 16, len(values)) - 1
        shown = ", ".join(f"{value}u" for value in values[first : last + 1])
        lines.append(f"{indent}{shown},  {comment(f'{what} {first}..{last}')}")
    return [*lines, "};"]
