"""The command line as a user meets it: exit codes, one-line errors, report folders that never half-write."""

import json
import re

import pytest

from certfsm.examples import example_spec_path

from cli_in_process import run_main
from cli_run import run_cli


def assert_one_line_error(code, stderr, pattern):
    import re

    assert code == 2, stderr
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert re.match(pattern, lines[0]), lines[0]


@pytest.fixture(scope="module")
def example_report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli") / "report"
    code, out, err = run_cli("verify", "--example", "--report", folder, "--no-progress")
    return code, out, err, folder


@pytest.mark.slow
def test_verify_example_proves_everything_and_writes_the_report(example_report):
    code, out, err, folder = example_report
    assert code == 0, out + err
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["overall"] == "proved"
    assert [p["verdict"] for p in summary["properties"]] == ["proved"] * 6
    for entry in summary["properties"]:
        text = (folder / entry["smt2"]).read_text()
        assert "(set-info :smt-lib-version 2.6)" in text and "(set-info :status unsat)" in text
    assert "proved" in (folder / "report.md").read_text()


@pytest.mark.slow
def test_unsafe_example_reports_a_validated_counterexample_in_input_units(tmp_path):
    folder = tmp_path / "report"
    code, out, err = run_cli(
        "verify", "--example", "--example-name", "coadapt_unsafe", "--report", folder, "--no-progress"
    )
    assert code == 1, out + err
    summary = json.loads((folder / "summary.json").read_text())
    hot = next(p for p in summary["properties"] if p["property"] == "legality:no-int4-when-hot")
    assert hot["verdict"] == "violated"
    assert hot["counterexample"]["temperature"] >= 85.0
    assert hot["decision"] == "INT4"
    assert "(set-info :status sat)" in (folder / hot["smt2"]).read_text()


def test_bad_spec_is_one_line_exit_2_and_leaves_an_old_report_untouched(tmp_path, example_spec_with):
    report = tmp_path / "report"
    report.mkdir()
    (report / "summary.json").write_text("old and precious")
    spec = example_spec_with(decision="softmax")
    code, out, err = run_main("verify", spec, "--report", report, "--no-progress")
    assert_one_line_error(code, err, r"^certfsm: error: .*spec\.json: decision")
    assert (report / "summary.json").read_text() == "old and precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report", "spec.json"]


def test_malformed_onnx_named_by_the_spec_is_one_line_exit_2(tmp_path, example_spec_with):
    model = tmp_path / "broken.onnx"
    model.write_bytes(b"\x08\x07this is not protobuf")
    spec = example_spec_with(model=str(model))
    code, out, err = run_main("verify", spec, "--report", tmp_path / "r", "--no-progress")
    assert_one_line_error(code, err, r"^certfsm: error: .*broken\.onnx")
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_debug_flag_shows_the_traceback(tmp_path, example_spec_with):
    spec = example_spec_with(decision="softmax")
    code, out, err = run_cli("--debug", "verify", spec, "--no-progress")
    assert code != 0 and "Traceback" in err


MISTAKES = [
    (("verify", "--no-progress"), r"^certfsm: error: missing SPEC; give a controller spec file or --example$"),
    (
        ("verify", "--example", "--engine", "magic"),
        r"^certfsm: error: --engine magic is not one of auto, marabou, z3, both, bounds; give e\.g\. --engine auto$",
    ),
    (("verify", "--example", "--jobs", "0"), r"^certfsm: error: --jobs 0 is not a number of worker processes; "),
    (("vnnlib", "a.onnx", "b.vnnlib", "--jobs", "0"), r"^certfsm: error: --jobs 0 is not a number of worker "),
    (("distill", "--example", "--out", "x.cfsm", "--jobs", "0"), r"^certfsm: error: --jobs 0 is not a number "),
    (
        ("vnnlib", "a.onnx", "b.vnnlib", "--timeout", "-1"),
        r"^certfsm: error: --timeout -1 is not a positive number of seconds; give e\.g\. --timeout 60$",
    ),
    (("verify", "--example", "--timeout", "nan"), r"^certfsm: error: --timeout nan is not a positive number "),
    (("distill", "--example", "--out", "x.cfsm", "--timeout", "0"), r"^certfsm: error: --timeout 0 is not a "),
    (("recheck", ".", "--timeout", "-5"), r"^certfsm: error: --timeout -5 is not a positive number of seconds"),
    (
        ("verify", "--example", "--jobs", "many"),
        r"^certfsm: error: Invalid value for '--jobs': .*; see certfsm verify --help$",
    ),
    (("verify", "--example", "--bogus"), r"^certfsm: error: No such option: --bogus.*; see certfsm verify --help$"),
    (("vnnlib",), r"^certfsm: error: Missing argument 'network'.*; see certfsm vnnlib --help$"),
    (
        ("inspect", "missing.cfsm"),
        r"^certfsm: error: missing\.cfsm: no such file .*; give the path of a \.cfsm artifact",
    ),
    (("verify", "model.onnx"), r"^certfsm: error: SPEC model\.onnx is an ONNX model, not a controller spec; "),
    (
        ("recheck", ".", "--solver", "yices"),
        r"^certfsm: error: recheck: --solver yices is not one of \('z3', 'cvc5'\); choose z3 or cvc5$",
    ),
    (
        ("keygen", "--out", "missing/k"),
        r"^certfsm: error: missing/k: cannot create the key file \(No such file or "
        r"directory\); choose a writable --out path$",
    ),
]


@pytest.mark.parametrize("args, message", MISTAKES, ids=[" ".join(a) for a, _ in MISTAKES])
def test_each_command_line_mistake_is_one_line_and_exit_2(args, message, tmp_path):
    """Flags are named as typed (--jobs, --timeout), never by internal parameter names."""
    code, _, err = run_main(*args, cwd=tmp_path)
    assert_one_line_error(code, err, message)


FLAG_WORDS = [
    (
        "r: exists and is not a folder; choose another report= path",
        "r: exists and is not a folder; choose another --report path",
    ),
    (
        "probe='nowhere' is not a probe; give probe='trace:FILE.csv'",
        "--probe nowhere is not a probe; give --probe trace:FILE.csv",
    ),
    ("port=0 is not a TCP port; e.g. port=9108", "--metrics-port 0 is not a TCP port; e.g. --metrics-port 9108"),
    ("port=9: cannot listen", "--metrics-port 9: cannot listen"),
    ("x_input= and y_input= both name a", "--x and --y both name a"),
    ("x_input='my dir' is not an input", "--x 'my dir' is not an input"),
    ('out="it\'s" (report=, report=)', "--out 'it'\"'\"'s' (--report, --report)"),
    ("give report=DIR", "give --report DIR"),
    ("inputs[2].report=1, my_report=2, samples=3", "inputs[2].report=1, my_report=2, samples=3"),
]


@pytest.mark.parametrize("text, expected", FLAG_WORDS)
def test_the_cli_writes_each_parameter_the_library_names_as_its_flag(text, expected):
    """A parameter (``report=``, ``probe='x'``) becomes the flag as typed, a value as the shell takes it; a name
    the command does not map, or a field of a larger name, stays as it is."""
    from certfsm.cli import _flag_words

    flags = {
        "report": "--report",
        "probe": "--probe",
        "port": "--metrics-port",
        "x_input": "--x",
        "y_input": "--y",
        "out": "--out",
    }
    assert _flag_words(text, flags) == expected


def test_the_cli_names_the_check_flag_in_the_table_fit_refusal():
    """export-verilog's refusal of a table the iCE40 HX8K cannot hold (tests/hdl_export/test_targets.py)."""
    from certfsm.cli import _flag_words

    text = "more than the iCE40 HX8K that check=True places and routes on; export without check=True for more"
    assert _flag_words(text, {"check": "--check"}) == (
        "more than the iCE40 HX8K that --check places and routes on; export without --check for more"
    )


def test_a_library_error_leaves_a_command_in_the_flags_words_with_its_type_kept():
    from certfsm import ReportError
    from certfsm.cli import _in_flags

    with pytest.raises(ReportError, match=r"^r: exists and is not a folder; choose another --out path$"):
        with _in_flags(folder="--out"):
            raise ReportError("r: exists and is not a folder; choose another folder= path")


def test_inspect_of_a_file_that_is_not_an_artifact_is_bad_input(tmp_path):
    not_json = tmp_path / "model.cfsm"
    not_json.write_bytes(b"\x08\x07binary")
    assert_one_line_error(*run_main("inspect", not_json)[::2], r"^certfsm: error: .*model\.cfsm: ")
    other_json = tmp_path / "other.cfsm"
    other_json.write_text('{"a": 1}')
    assert_one_line_error(
        *run_main("inspect", other_json)[::2], r"^certfsm: error: .*other\.cfsm: .*not a certfsm artifact"
    )


def test_version_is_printed():
    code, out, _ = run_cli("--version")
    assert code == 0 and re.match(r"^certfsm \d+\.\d+\.\d+", out)


def test_spec_check_loads_the_model_and_refuses_one_that_is_not_onnx(tmp_path, example_spec_with):
    fake = tmp_path / "fake.onnx"
    fake.write_bytes(b"this is not a model")
    code, _, err = run_main("spec", "check", example_spec_with(model=str(fake)))
    assert_one_line_error(code, err, r"^certfsm: error: .*fake\.onnx: is not an ONNX model")


def test_spec_check_accepts_the_example_and_rejects_a_bad_one(tmp_path, example_spec_with):
    code, out, err = run_main("spec", "check", example_spec_path("coadapt"))
    assert code == 0 and out.strip().endswith("ok")
    code, out, err = run_main("spec", "check", example_spec_with(legal_tokens=["KEEP", "WARP"]))
    assert_one_line_error(code, err, r"^certfsm: error: .*spec\.json: legal_tokens")


def test_spec_check_says_what_a_float16_model_means_for_the_proofs(tmp_path, example_spec_with):
    """A float16 model is read exactly, but onnxruntime rounds in float16: spec check says so before a distill."""
    import numpy as np
    import onnx
    from onnx import TensorProto, numpy_helper

    model = onnx.load(example_spec_path("coadapt").parent / "coadapt.onnx")
    for tensor in model.graph.initializer:
        tensor.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(tensor).astype(np.float16), tensor.name))
    for value in [*model.graph.input, *model.graph.output]:
        value.type.tensor_type.elem_type = TensorProto.FLOAT16
    half = tmp_path / "half.onnx"
    onnx.save(model, half)
    code, out, err = run_main("spec", "check", example_spec_with(model=str(half)))
    assert code == 0, err
    assert re.search(
        r"^model: 5 inputs, 5 outputs, hidden layers \[8, 8\], computed in float16 by onnxruntime$", out, re.M
    )
    assert re.search(
        r"^model: note: .* onnxruntime rounds every operation to float16, .* export the model in float32", out, re.M
    )
    code, out, err = run_main("spec", "check", example_spec_path("coadapt"))
    assert "computed in float32 by onnxruntime" in out and "note:" not in out


def test_bad_vnnlib_is_one_line_naming_the_line(tmp_path):
    prop = tmp_path / "bad.vnnlib"
    prop.write_text("(declare-const X_0 Real)\n(assert (<= X_0 1.0)\n")
    model = example_spec_path("coadapt").parent / "coadapt.onnx"
    code, out, err = run_main("vnnlib", model, prop, "--out", tmp_path / "result.txt")
    assert_one_line_error(code, err, r"^certfsm: error: .*bad\.vnnlib:2: unbalanced parentheses")
    assert not (tmp_path / "result.txt").exists()


@pytest.mark.slow
def test_vnnlib_writes_a_vnncomp_witness_for_a_sat_instance(tmp_path, acasxu):
    out_file = tmp_path / "result.txt"
    code, out, err = run_cli(
        "vnnlib",
        acasxu / "onnx/ACASXU_run2a_1_9_batch_2000.onnx",
        acasxu / "vnnlib/prop_4.vnnlib",
        "--timeout",
        "116",
        "--out",
        out_file,
    )
    assert code == 1, err
    text = out_file.read_text()
    assert text.startswith("sat\n((X_0 ") and "(Y_4 " in text and text.endswith(")\n")


@pytest.mark.slow
def test_recheck_confirms_the_example_report_and_catches_a_flipped_status(example_report, tmp_path):
    import shutil

    code, out, err, folder = example_report
    assert code == 0
    code, out, err = run_cli("recheck", folder, "--solver", "z3", "--timeout", "120")
    assert code == 0, out + err
    tampered = tmp_path / "tampered"
    shutil.copytree(folder, tampered)
    first = sorted(tampered.glob("*.smt2"))[0]
    first.write_text(first.read_text().replace("(set-info :status unsat)", "(set-info :status sat)"))
    code, out, err = run_cli("recheck", tampered, "--solver", "z3", "--timeout", "120")
    assert code == 1
    assert "MISMATCH" in out


def test_every_file_states_the_installed_version_and_a_bare_source_tree_says_unknown(monkeypatch):
    """One definition (`certfsm_version`) for --version, the SMT-LIB headers and the reports."""
    import importlib.metadata

    from certfsm import certfsm_version

    assert certfsm_version() == importlib.metadata.version("certfsm")

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", not_installed)  # what importlib.metadata.version reads
    assert certfsm_version() == "unknown"
    assert run_main("--version")[:2] == (0, "certfsm unknown\n")
