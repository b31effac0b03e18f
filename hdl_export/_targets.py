"""Which FPGA targets a machine's table fits, said before anything is synthesized or written.

The table lives in two ROMs read as block RAM (`_hardware.py`), laid out
as `certfsm.TableSize` says: one table word and one mask word per cell
(and per leaf of a refined table, after the cells: `_leaves.py`).
A synthesis tool drops a ROM bit that is the same in every cell (yosys
keeps it a constant), so what block RAM must hold is the words times the
word bits that vary between them; a target fits when its block RAM has
at least that many bits. That is necessary, not sufficient: block RAMs
come in fixed shapes (a 4 kbit iCE40 block holds 2 048 words of 2 bits, so
a 3-bit word wastes one bit in four), and the rest of the module needs
logic; place and route is the real check (``export-verilog --check`` runs
it for `ICE40_DEVICE`, or on the smallest ECP5 here that holds the
module where the HX8K does not: `_ecp5.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from certfsm import SpecError, TableSize
from certfsm.machine import Machine


@dataclass(frozen=True)
class Target:
    """An FPGA the Verilog may go to: its name, its block RAMs and the bits each holds, its LUT4s."""

    name: str
    block_rams: int
    bits_per_block: int
    luts: int
    """LUT4s of its logic (an iCE40 logic cell, an ECP5 slice's half, holds one)."""

    @property
    def block_ram_bits(self) -> int:
        return self.block_rams * self.bits_per_block

    def describe(self) -> str:
        """``iCE40 HX8K (32 x 4 kbit = 128 kbit)``."""
        return (
            f"{self.name} ({self.block_rams} x {self.bits_per_block // 1024} kbit = "
            f"{self.block_ram_bits // 1024:,} kbit)"
        )


# Block RAM and logic of each target, smallest first. Sources: Lattice, iCE40 LP/HX Family Data Sheet (DS1040),
# Table 1.1: HX8K, 32 RAM4K blocks of 4 kbit (128 kbit) and 7 680 logic cells; Lattice, ECP5 and ECP5-5G Family Data
# Sheet (FPGA-DS-02012), Table 1.1: sysMEM EBR blocks of 18 kbit, 56 in LFE5U-25F (1 008 kbit), 108 in LFE5U-45F
# (1 944 kbit) and 208 in LFE5U-85F (3 744 kbit), and 24K, 44K and 84K LUTs, which Table 1.1 rounds to thousands:
# the exact counts are nextpnr-ecp5's, the TRELLIS_COMB its chip database makes available on each device (24 288,
# 43 848 and 83 640, as its placement report prints them).
TARGETS = (
    Target("iCE40 HX8K", 32, 4 * 1024, 7_680),
    Target("ECP5 LFE5U-25F", 56, 18 * 1024, 24_288),
    Target("ECP5 LFE5U-45F", 108, 18 * 1024, 43_848),
    Target("ECP5 LFE5U-85F", 208, 18 * 1024, 83_640),
)
CHECK_TARGET = TARGETS[0]
"""The target ``export-verilog --check`` synthesizes for and places (`ICE40_DEVICE`; a test holds them together)."""


@dataclass(frozen=True)
class TableFit:
    """A machine's table against `TARGETS`: its layout, the bits block RAM must hold, the targets that hold them."""

    size: TableSize
    varying_bits: int
    fits: tuple[Target, ...]
    leaves: int = 0
    """Leaves of a refined table: one word each in both ROMs, after the cells' (0: a flat table)."""

    @property
    def fits_check_target(self) -> bool:
        return CHECK_TARGET in self.fits

    def line(self) -> str:
        """One line for the user: the table's bits, then the targets it fits and those it does not."""
        varying = (
            "all of them vary between cells"
            if self.varying_bits == self.size.bits
            else f"{self.varying_bits:,} of them vary between cells and need block RAM"
        )
        head = f"table: {self.size.describe()} of ROM, {varying}"
        if self.leaves:
            size = self.size
            bits = (size.n_cells + self.leaves) * size.word_bits
            head = (
                f"table: {size.n_cells:,} cells and {self.leaves:,} leaves of refined cells x ({size.token_bits} token "
                f"bits + {size.mask_bits} mask bits) = {bits:,} bits of ROM, {self.varying_bits:,} of them vary and "
                "need block RAM"
            )
        if not self.fits:
            largest = TARGETS[-1]
            return (
                f"{head}: fits none of the targets (the largest, {largest.describe()}); "
                "the Verilog needs a larger device, or fewer bins"
            )
        others = [t.name for t in TARGETS if t not in self.fits]
        return f"{head}: fits {', '.join(f'{t.name} ({t.block_ram_bits // 1024:,} kbit)' for t in self.fits)}" + (
            f"; not {', '.join(others)}" if others else ""
        )

    def as_json(self) -> dict[str, object]:
        return {
            "cells": self.size.n_cells,
            **({"leaves": self.leaves} if self.leaves else {}),
            "token_bits": self.size.token_bits,
            "mask_bits": self.size.mask_bits,
            "bits": self.size.bits,
            "varying_bits": self.varying_bits,
            "fits": [t.name for t in self.fits],
        }


def table_fit(machine: Machine) -> TableFit:
    """Where `machine`'s table fits: every ROM bit counted by `TableSize`, those that vary by the cells' words (and
    a refined table's leaves' words, which follow the cells' in the same ROMs: `_leaves.py`)."""
    size = TableSize(machine.shape, machine.params.n_tokens)
    leaves = () if machine.refinement is None else [leaf for tree in machine.refinement.trees for leaf in tree.leaves]
    tokens = (*machine.proposal, *(leaf.token for leaf in leaves))
    masks = (*machine.allowed, *(leaf.allowed for leaf in leaves))
    varying = _varying_bits(tokens) + _varying_bits(masks)
    stored = varying * len(tokens)
    return TableFit(size, stored, tuple(t for t in TARGETS if stored <= t.block_ram_bits), len(leaves))


def _varying_bits(words: tuple[int, ...]) -> int:
    """How many bit positions differ from the first word in some word."""
    first, differ = words[0], 0
    for word in words:
        differ |= word ^ first
    return differ.bit_count()


def check_fit_for_check(fit: TableFit) -> None:
    """SpecError when ``check`` would place and route a table that no target's block RAM holds.

    A table the HX8K (`CHECK_TARGET`) cannot hold but an ECP5 can is placed on that ECP5 (`_ecp5.py`). Why refuse
    the rest rather than run: synthesis takes minutes on such a table and place and route could only fail; without
    ``check`` the Verilog is still written, for a larger device.
    """
    if fit.fits:
        return
    raise SpecError(
        f"the table needs {fit.varying_bits:,} bits of block RAM ({fit.size.n_cells:,} cells), more than any device "
        f"that check=True places and routes on holds, so place and route cannot pass (it fits none of the targets, "
        f"the largest being {TARGETS[-1].describe()}); export without check=True for a larger device, or distil a "
        "grid with fewer bins"
    )
