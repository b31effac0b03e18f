"""The sample claim in pieces: boxes of bins that together hold every bus value, each piece its own Z3 query.

Why: the ``sample`` claim (`_claims.py`) is one query over every reading,
and Z3 answers it by bit-blasting the module's ROM multiplexer trees and
the artifact's decode trees whole and searching over the readings; each
step of that search touches the whole of both ROMs, so on a refined table
(the ROM address goes through a case of one box tree per refined cell)
the time grows faster than the table. The example refined with
``--refine 4,8`` (21 867 ROM words) did not finish in 600 s as one query;
as pieces of at most `PIECE_WORDS` words, each piece restricted to its
own words on the artifact's side, it is proved (docs/benchmarks.md,
"Refined tables", has the times). A refined table of at most
`PIECE_WORDS` words stays one query, as it always was (the 288-cell
refined grid, 1 344 words, keeps its file and its time), and so does a
flat table of any size: there the module's ROM address is the cell
itself, both sides decode the same cell bits, and Z3 settles the claim
fast (the flat example's 7 200 words in under 2 s, where 1 800 words of
the refined example's take some 20 s).

The pieces, each a set of readings (bus values) stated from the artifact
alone (its integer thresholds and envelope, `Machine.fixed_point`; never
from the module):

- ``outside``: the readings out of envelope, ``(not envelope)``;
- one piece per box of bins, ``bins[i] = (low, high)`` an inclusive range
  of input i's bins: ``envelope`` and, for each input, ``bus >=
  T[low - 1]`` when low > 0 and ``bus < T[high]`` when high is not the
  last bin (T the input's interior integer thresholds, signed comparisons
  on a signed bus), as the binning reads them.

Coverage (why the pieces' assumptions hold every bus value): per input,
the interior thresholds are non-decreasing (ceil is monotone and the edges
increase), so for consecutive ranges [0, h0], [h0 + 1, h1], ...,
[.., n - 1] of its n bins the sets ``T[low - 1] <= v < T[high]`` (no
lower bound for the first, no upper bound for the last) tile every value
v of the bus: each v falls in the range whose upper threshold is the
first above it. The boxes come from splitting the whole grid one input at
a time into consecutive ranges (`sample_pieces`), each split tiling the
box it splits, so the boxes' assumptions without ``envelope`` tile every
combination of bus values; with ``envelope`` they tile the envelope, and
``outside`` takes the rest. So every reading lies in some piece, and the
pieces' claims together are the sample claim. This argument is also
checked, not only written: the cover query (`Claims.cover`) asks Z3 for
a reading in no piece, and the split claim is proved only when it is
unsat and every piece is.

In a box piece the artifact's side holds only the box's words: the cells
of the box, their leaves, and nothing else (a word of another cell is
given its neighbour's value, so the decode trees fold it away), which
makes each piece about half as much work for Z3. That is sound because a
reading of the piece has its bins in the box (with the thresholds
non-decreasing, ``T[low - 1] <= v < T[high]`` puts between low and high
thresholds at or below v), so its cell is one of the box's and its entry
(the cell, or one of the cell's leaves) one of the words kept; the cover
query checks this too, for every box piece.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from certfsm.machine import Machine

PIECE_WORDS = 2048
"""The most ROM words (cells, and leaves of refined cells) a piece holds, and of a refined table whose sample claim
stays one query. Measured on the example refined with ``--refine 4,8`` (Z3's resource count over all pieces, which
does not depend on the machine's load): least at 2 048 words a piece (16 queries), 14 % more at 4 096 (9), 22 % more
at 8 192 (5) and 17 % more at 1 024 (31, where each query's fixed cost of reading and bit-blasting the whole
module adds up); docs/benchmarks.md, "Refined tables", has the times."""


@dataclass(frozen=True)
class Piece:
    """One piece of the sample claim: the readings in a box of bins (`bins`, per input its inclusive range of
    bins), or out of envelope (`bins` None); `cells` and `words` count what the box holds."""

    name: str
    bins: tuple[tuple[int, int], ...] | None
    cells: int = 0
    words: int = 0

    def describe(self, machine: Machine) -> str:
        """The piece's readings as a person reads them: the box's bounds on the inputs it limits, from the edges."""
        if self.bins is None:
            return "readings out of envelope"
        sides = [
            f"{name} in [{edges[low]:g}, {edges[high + 1]:g}{']' if high + 1 == len(edges) - 1 else ')'}"
            for name, edges, (low, high) in zip(machine.names, machine.edges, self.bins)
            if (low, high) != (0, len(edges) - 2)
        ]
        where = ", ".join(sides) or "every reading in envelope"
        return f"{where}: {self.cells} cell{'s' if self.cells != 1 else ''}, {self.words} ROM words"

    def cells_of(self, machine: Machine) -> list[int]:
        """The flat indices of the box's cells, in order (none out of envelope)."""
        return [] if self.bins is None else box_cells(machine, self.bins)


def box_cells(machine: Machine, box) -> list[int]:
    """The flat indices of the cells in `box` (per input an inclusive range of bins), in order."""
    ranges = [range(low, high + 1) for low, high in box]
    return sorted(sum(b * s for b, s in zip(bins, machine.strides)) for bins in itertools.product(*ranges))


def cell_words(machine: Machine) -> list[int]:
    """Per cell, its ROM words: its own, and in a refined cell one per leaf."""
    words = [1] * machine.n_cells
    if machine.refinement is not None:
        for cell, tree in zip(machine.refinement.cells, machine.refinement.trees):
            words[cell] += tree.n_leaves
    return words


def sample_pieces(machine: Machine, most: int | None = None) -> tuple[Piece, ...]:
    """The pieces of the sample claim: none for a flat table or one of at most `most` ROM words (`PIECE_WORDS`
    when None; the claim stays one query), else ``outside`` and boxes of at most `most` words each.

    The grid is split along the first input into runs of consecutive bins, each run as long as it stays within
    `most` words; a single bin with more is split along the next input the same way, and so on (a single cell
    with more words than `most` is a piece of its own). Boxes are numbered in C order of their cells.
    """
    most = PIECE_WORDS if most is None else most
    words = cell_words(machine)
    if machine.refinement is None or sum(words) <= most:
        return ()
    shape = machine.shape

    def weight(box: list[tuple[int, int]]) -> int:
        return sum(words[cell] for cell in box_cells(machine, box))

    boxes: list[tuple[list[tuple[int, int]], int]] = []

    def split(box: list[tuple[int, int]], axis: int) -> None:
        low, high = box[axis]
        slabs = [weight([*box[:axis], (b, b), *box[axis + 1 :]]) for b in range(low, high + 1)]
        start = low
        while start <= high:
            end, total = start, slabs[start - low]
            while end < high and total + slabs[end + 1 - low] <= most:
                end, total = end + 1, total + slabs[end + 1 - low]
            run = [*box[:axis], (start, end), *box[axis + 1 :]]
            if total > most and axis + 1 < len(shape):
                split(run, axis + 1)
            else:
                boxes.append((run, total))
            start = end + 1

    split([(0, n - 1) for n in shape], 0)
    width = len(str(len(boxes)))
    pieces = [Piece("outside", None)]
    for number, (box, total) in enumerate(boxes, 1):
        cells = math.prod(high - low + 1 for low, high in box)
        pieces.append(Piece(f"{number:0{width}d}", tuple(box), cells, total))
    return tuple(pieces)
