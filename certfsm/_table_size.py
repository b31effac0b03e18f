"""What a grid costs before anything runs: its cells, its table as ROM bits, and a distill cost class.

A spec fixes the grid (each input's bins), so `certfsm spec check` can say
at once what the table will cost, long before a distill or an export:

- the cell count, and whether it is at most `MAX_CELLS`, the largest grid
  `certfsm.fsm` distils (`check_grid_size`);
- `TableSize`: the table as the hardware export lays it out, two ROMs of
  one word per cell (the proposed output index, and the bit mask of the
  tokens allowed in the cell). It is the one home of that layout:
  `certfsm.hdl_export` sizes its ROM words from it, and its target check
  compares these bits with each FPGA's block RAM;
- `distill_cost`: an estimate of the distill's time class from the cells
  and the network's ReLUs (the rule and its calibration are in its
  docstring; it is a rule of thumb, not a bound).

This module needs the standard library alone (the spec and network are
only read, never imported), so the core stays importable on a bare target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._errors import SpecError

if TYPE_CHECKING:
    from ._network import Network
    from ._spec import ControllerSpec

MAX_CELLS = 1 << 22
"""The largest grid distilled: beyond about four million cells the per-cell arrays and the table in the
artifact stop being small, and no hardware ROM holds such a table."""


@dataclass(frozen=True)
class TableSize:
    """A grid's table as `certfsm export-verilog` lays it out: two ROMs with one word per cell.

    The table ROM holds the cell's proposed output index in `token_bits`
    (enough bits for the largest index, n_tokens - 1, and at least one);
    the mask ROM holds the cell's allowed tokens, one bit per token
    (`mask_bits`). `bits` is every ROM bit; a synthesis tool may drop the
    bits that are the same in every cell, so a distilled table can need
    fewer (the export counts those: see `certfsm.hdl_export`).
    """

    shape: tuple[int, ...]
    n_tokens: int

    @classmethod
    def of(cls, spec: ControllerSpec) -> TableSize:
        """The table of `spec`'s grid: its inputs' bin counts, its outputs as tokens."""
        return cls(tuple(item.n_bins for item in spec.inputs), spec.n_outputs)

    @property
    def n_cells(self) -> int:
        return math.prod(self.shape)

    @property
    def token_bits(self) -> int:
        """Bits of one output index (the table word, and every register that holds a token)."""
        return max(1, (self.n_tokens - 1).bit_length())

    @property
    def mask_bits(self) -> int:
        """Bits of one allowed mask: bit t is output index t."""
        return self.n_tokens

    @property
    def word_bits(self) -> int:
        """ROM bits per cell: one table word and one mask word."""
        return self.token_bits + self.mask_bits

    @property
    def bits(self) -> int:
        return self.n_cells * self.word_bits

    def describe(self) -> str:
        """``7,200 cells x (3 token bits + 5 mask bits) = 57,600 bits (56.2 kbit)``."""
        kbit = f" ({show_kbit(self.bits)})" if self.bits >= 1024 else ""
        return (
            f"{self.n_cells:,} cells x ({self.token_bits} token bits + {self.mask_bits} mask bits) = "
            f"{self.bits:,} bits{kbit}"
        )


def show_kbit(bits: int) -> str:
    """Bits in kbit (1 kbit = 1 024 bits, as FPGA block RAMs are counted), to one decimal."""
    return f"{bits / 1024:,.1f} kbit"


def check_grid_size(spec: ControllerSpec) -> None:
    """SpecError naming the spec, each input's bins and the fix when the grid has more than `MAX_CELLS` cells."""
    size = TableSize.of(spec)
    if size.n_cells <= MAX_CELLS:
        return
    bins = ", ".join(f"{item.name} {item.n_bins}" for item in spec.inputs)
    raise SpecError(
        f"{spec.path}: the grid has {show_count(size.n_cells)} cells (bins: {bins}), more than the "
        f"{MAX_CELLS:,} a table holds; give the inputs fewer bins or edges (their product is the cell count)"
    )


def show_count(count: int) -> str:
    """A count with thousands separators, or as a power of ten when it is too long to read (10^21)."""
    return f"{count:,}" if count < 10**12 else f"about 10^{len(str(count)) - 1}"


SECONDS_PER_CELL = 3e-4
"""`distill_cost`'s seconds per cell for `REFERENCE_RELUS` ReLUs, on one core of the project's 2-core machine."""
REFERENCE_RELUS = 16
RELU_EXPONENT = 2.7
COST_CLASSES = ((60.0, "seconds"), (3600.0, "minutes"), (86400.0, "hours"), (math.inf, "days or more"))
"""(upper limit in seconds, name) of each distill cost class, in increasing order."""


@dataclass(frozen=True)
class DistillCost:
    """An estimate of one distill's time on one core: `seconds` and its class (`COST_CLASSES`)."""

    seconds: float
    cost_class: str


def distill_cost(n_cells: int, n_relus: int) -> DistillCost:
    """An estimate, not a bound: seconds ~ cells x SECONDS_PER_CELL x (max(ReLUs, 1) / REFERENCE_RELUS) ^ RELU_EXPONENT.

    Why this rule: a cell costs little when bound propagation settles it
    and a lot when it sits on a decision boundary and needs branch and
    bound, whose work grows faster than linearly with the ReLUs. Three
    distills on this project's 2-core machine, per core, fix the constants:
    the example (16 ReLUs, 7 200 cells, about 2 s: 0.28 ms a cell), a random
    2x32 controller (64 ReLUs, 100 000 cells, about 20 min: 12 ms a cell)
    and ACAS Xu 1_1 (300 ReLUs, 512 cells, 410 s: 0.8 s a cell). The share
    of boundary cells, the input count and the machine move the real time
    by a factor of several either way; `--jobs` divides it.
    """
    scale = (max(n_relus, 1) / REFERENCE_RELUS) ** RELU_EXPONENT
    seconds = n_cells * SECONDS_PER_CELL * scale
    cost_class = next(name for limit, name in COST_CLASSES if seconds < limit)
    return DistillCost(seconds, cost_class)


def size_lines(spec: ControllerSpec, network: Network | None = None) -> list[str]:
    """The summary lines about cost: the grid, the table's ROM bits, the distill cost class (with `network`), and
    the inputs the fixed-point exports still need `frac_bits` for."""
    size = TableSize.of(spec)
    lines = [f"grid: {' x '.join(str(n) for n in size.shape)} = {size.n_cells} cells"]
    if size.n_cells > MAX_CELLS:
        lines.append(f"  more than the {MAX_CELLS:,} cells a table holds: distill refuses this grid")
    lines.append(f"table: {size.describe()} of ROM, as export-verilog lays it out")
    if network is not None:
        relus = sum(network.hidden_sizes)
        cost = distill_cost(size.n_cells, relus)
        lines.append(
            f"distill cost: {cost.cost_class} (an estimate: about {_show_seconds(cost.seconds)} of one core for "
            f"{size.n_cells:,} cells of a {relus}-ReLU network; cells on decision boundaries can take far longer)"
        )
    missing = [item.name for item in spec.inputs if item.frac_bits is None]
    if missing:
        which = f"input {missing[0]} has" if len(missing) == 1 else f"inputs {', '.join(missing)} have"
        lines.append(
            f"hardware: export-verilog and export-c will refuse this spec's artifact: {which} no frac_bits; "
            "give each input frac_bits f (its hardware value v means v * 2^-f) before you distil"
        )
    return lines


def _show_seconds(seconds: float) -> str:
    value, unit = seconds / 86400.0, "days"
    for limit, name, size in ((120.0, "s", 1.0), (7200.0, "min", 60.0), (172800.0, "h", 3600.0)):
        if seconds < limit:
            value, unit = seconds / size, name
            break
    return f"{value:.2g} {unit}" if value < 10 else f"{value:,.0f} {unit}"
