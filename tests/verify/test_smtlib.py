"""SMT-LIB report files: exact decimals, the script's meaning, the header, golden text, the re-check.

Meaning is checked with solvers, not only text: a script with the input
pinned to a point must make z3 compute exactly the network's outputs
(compared with an exact Fraction evaluation), written files must re-run
under the stock `z3` command to their recorded status, and `recheck_folder`
must flag files that were changed after the report was written.

Regenerate the golden file on purpose with CERTFSM_REGEN_GOLDEN=1.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import struct
import subprocess
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import z3
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from cli_in_process import run_main
from recheck_files import EASY_UNSAT, UNDECIDED, pigeonhole, write_files

from certfsm import EngineError, ReportError
from certfsm import AffineLayer, Network
from certfsm.verify import _recheck
from certfsm.verify._exact import exact_decimal
from certfsm.verify._property import Conjunction, Property, chosen_conjunction
from certfsm.verify._recheck import recheck_folder
from certfsm.verify._smtlib import (
    linear_expression,
    read_header,
    read_status,
    smtlib_script,
    write_smtlib,
)

GOLDEN = Path(__file__).parent / "golden"
HAS_Z3_COMMAND = shutil.which("z3") is not None


def smt_value(text: str) -> Fraction:
    """The rational an SMT-LIB decimal term such as "0.5" or "(- 0.5)" denotes."""
    match = re.fullmatch(r"\(- (\S+)\)", text)
    return -Fraction(match.group(1)) if match else Fraction(text)


# --- exact decimals -----------------------------------------------------------


@pytest.mark.parametrize(
    "value, text",
    [
        (0.0, "0.0"),
        (-0.0, "0.0"),
        (3.0, "3.0"),
        (0.1, "0.1000000000000000055511151231257827021181583404541015625"),
        (-0.5, "(- 0.5)"),
        (np.float32(0.1), "0.100000001490116119384765625"),
        (1e22, "10000000000000000000000.0"),
    ],
)
def test_exact_decimal_examples(value, text):
    assert exact_decimal(value) == text


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, np.float32("nan")])
def test_exact_decimal_rejects_non_finite(value):
    with pytest.raises(ValueError, match=r"^x=(nan|inf|-inf) is not a finite float; only finite floats"):
        exact_decimal(value)


def _float_from_bits(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


finite_floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.integers(1, 2**52 - 1).map(_float_from_bits),  # subnormals
    st.sampled_from([5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, -1.7976931348623157e308]),
)


@given(finite_floats)
def test_exact_decimal_is_exact(value):
    text = exact_decimal(value)
    assert smt_value(text) == Fraction(value)
    assert re.fullmatch(r"\d+\.\d+|\(- \d+\.\d+\)", text)
    assert text.startswith("(-") == (value < 0)


@given(st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_exact_decimal_of_float32_arrays_is_the_float32_value(value):
    stored = np.array([value], dtype=np.float32).astype(np.float64)[0]
    assert smt_value(exact_decimal(stored)) == Fraction(float(np.float32(value)))


# --- the script ---------------------------------------------------------------


def tiny_network() -> Network:
    """Two inputs, two ReLUs, two outputs, with a long decimal (0.1), a zero and a -1 weight."""
    return Network(
        (
            AffineLayer([[1.0, 0.1], [-1.0, 0.0]], [0.0, 0.25], "Gemm_0"),
            AffineLayer([[1.0, -2.0], [0.5, 1.0]], [0.0, -0.125], "Gemm_1"),
        ),
        source_path="/somewhere/tiny.onnx",
        sha256="ab" * 32,
    )


def tiny_property() -> Property:
    return Property(
        "tiny_y0_chosen",
        [-1.0, 0.0],
        [1.0, 0.5],
        (chosen_conjunction(0, 2, "argmax"), Conjunction([[0.0, 1.0]], [-3.0], ("y1 <= -3",))),
        description="output 0 can be chosen, or output 1 drops to -3",
    )


def test_linear_expression_drops_zeros_and_simplifies_units():
    assert linear_expression([0.0, 1.0, -1.0, 2.5], ["a", "b", "c", "d"]) == "(+ b (- c) (* 2.5 d))"
    assert linear_expression([0.0, 0.0], ["a", "b"]) == "0.0"
    assert linear_expression([0.0], ["a"], -0.5) == "(- 0.5)"
    assert linear_expression([3.0], ["a"]) == "(* 3.0 a)"


def test_script_has_the_standard_frame_and_drops_zero_weights():
    text = smtlib_script(tiny_network(), tiny_property(), status="sat")
    lines = text.splitlines()
    assert lines[:3] == ["(set-info :smt-lib-version 2.6)", "(set-logic QF_LRA)", "(set-info :status sat)"]
    assert lines[-2:] == ["(check-sat)", "(exit)"]
    assert "(assert (= Z_0_1 (+ (- X_0) 0.25)))" in lines  # the zero weight on X_1 is gone
    assert "(assert (= Z_0_0 (+ X_0 (* 0.1000000000000000055511151231257827021181583404541015625 X_1))))" in lines
    assert "(assert (and (<= (- 1.0) X_0) (<= X_0 1.0)))" in lines
    assert read_status(text) == "sat"


@pytest.mark.parametrize("status", ["SAT", "proved", ""])
def test_script_rejects_a_bad_status(status):
    with pytest.raises(ValueError, match=r"^status='.*' is not one of \('sat', 'unsat', 'unknown'\)$"):
        smtlib_script(tiny_network(), tiny_property(), status=status)


def test_script_rejects_a_property_for_another_network():
    prop = Property("p3", [0.0] * 3, [1.0] * 3, ())
    with pytest.raises(ValueError, match=r"^property 'p3' has an input box over 3 inputs but tiny.onnx takes 2; "):
        smtlib_script(tiny_network(), prop)
    prop = Property("wide", [0.0, 0.0], [1.0, 1.0], (Conjunction([[1.0, 0.0, 0.0]], [0.0]),))
    with pytest.raises(ValueError, match=r"^property 'wide': unsafe\[0\] constrains 3 outputs but tiny.onnx gives 2; "):
        smtlib_script(tiny_network(), prop)


def _exact_outputs(network: Network, x) -> list[Fraction]:
    values = [Fraction(float(v)) for v in x]
    for index, layer in enumerate(network.layers):
        values = [
            sum((Fraction(float(w)) * v for w, v in zip(row, values)), Fraction(float(b)))
            for row, b in zip(layer.weight, layer.bias)
        ]
        if index < len(network.layers) - 1:
            values = [max(v, Fraction(0)) for v in values]
    return values


def _z3_outputs(script: str, n_outputs: int) -> list[Fraction]:
    context = z3.Context()
    solver = z3.Solver(ctx=context)
    solver.add(z3.parse_smt2_string(script, ctx=context))
    assert solver.check() == z3.sat
    model = solver.model()
    return [model.eval(z3.Real(f"Y_{j}", context)).as_fraction() for j in range(n_outputs)]


float32s = st.floats(-4.0, 4.0, width=32)


@settings(max_examples=examples(25), deadline=None)
@given(st.data())
def test_script_computes_exactly_the_network(data):
    """With the input pinned to one point and an unsafe set of 'everything', z3's Y is the exact output."""
    sizes = [2, data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4)), 2]
    layers = [
        AffineLayer(
            np.array(data.draw(st.lists(float32s, min_size=a * b, max_size=a * b))).reshape(b, a),
            data.draw(st.lists(float32s, min_size=b, max_size=b)),
            f"layer{i}",
        )
        for i, (a, b) in enumerate(zip(sizes, sizes[1:]))
    ]
    network = Network(tuple(layers))
    x = data.draw(st.lists(float32s, min_size=2, max_size=2))
    everything = Conjunction(np.zeros((0, 2)), np.zeros(0))
    script = smtlib_script(network, Property("point", x, x, (everything,)))
    assert _z3_outputs(script, 2) == _exact_outputs(network, x)


def test_empty_unsafe_set_is_false_and_one_disjunct_is_unwrapped():
    network = tiny_network()
    assert "(assert false)" in smtlib_script(network, Property("none", [0, 0], [1, 1], ()))
    single = smtlib_script(network, Property("one", [0, 0], [1, 1], (Conjunction([[1.0, 0.0]], [0.5]),)))
    assert "(assert (<= Y_0 0.5))" in single


# --- the report file ----------------------------------------------------------


def test_golden_file(tmp_path):
    path = tmp_path / "tiny.smt2"
    sha = write_smtlib(
        path,
        tiny_network(),
        tiny_property(),
        verdict="violated",
        engine="z3",
        seconds=1.25,
        property_text="(assert (>= Y_0 Y_1))",
        extra={"query": "1 of 1"},
        stable=True,
    )
    produced = path.read_bytes()
    assert sha == hashlib.sha256(produced).hexdigest()
    golden = GOLDEN / "tiny.smt2"
    if os.environ.get("CERTFSM_REGEN_GOLDEN") == "1":
        golden.parent.mkdir(exist_ok=True)
        golden.write_bytes(produced)
    assert golden.exists(), f"{golden} is missing; run with CERTFSM_REGEN_GOLDEN=1 to create it"
    assert produced.decode() == golden.read_text()
    if HAS_Z3_COMMAND:
        answer = subprocess.run(["z3", "-T:30", str(path)], capture_output=True, text=True, check=True).stdout
        assert answer.split() == ["sat"]  # the recorded status is the true one: x = (1, 0) gives y0 >= y1


def test_header_fields(tmp_path):
    path = tmp_path / "q.smt2"
    write_smtlib(
        path,
        tiny_network(),
        tiny_property(),
        verdict="proved",
        engine="marabou",
        seconds=2.5,
        tool_version="9.9.9",
        extra={"reason": "Marabou:\nUNSAT", "sub box": 3},
    )
    text = path.read_text()
    header = read_header(text)
    assert header == {
        "certfsm-version": "9.9.9",
        "property": "tiny_y0_chosen",
        "description": "output 0 can be chosen, or output 1 drops to -3",
        "verdict": "proved",
        "status": "unsat",
        "engine": "marabou",
        "seconds": "2.500",
        "network": "tiny.onnx",
        "network-sha256": "ab" * 32,
        "reason": "Marabou: UNSAT",
        "sub-box": "3",
        "rerun": "z3 q.smt2",
    }
    assert "; rerun: cvc5 q.smt2" in text and "; rerun: certfsm recheck ." in text
    assert read_status(text) == "unsat"
    assert text.index("; network:") < text.index("(set-info :smt-lib-version 2.6)")


def test_stable_header_leaves_out_time_and_version(tmp_path):
    first, second = tmp_path / "a.smt2", tmp_path / "b" / "a.smt2"
    second.parent.mkdir()
    sha_first = write_smtlib(
        first, tiny_network(), tiny_property(), verdict="unknown", engine="z3", seconds=1.0, stable=True
    )
    sha_second = write_smtlib(
        second, tiny_network(), tiny_property(), verdict="unknown", engine="z3", seconds=7.0, stable=True
    )
    assert sha_first == sha_second
    header = read_header(first.read_text())
    assert "seconds" not in header and "certfsm-version" not in header
    write_smtlib(tmp_path / "c.smt2", tiny_network(), tiny_property(), verdict="unknown", engine="z3", seconds=3.0)
    unstable = read_header((tmp_path / "c.smt2").read_text())
    assert unstable["certfsm-version"] and unstable["seconds"] == "3.000"


def test_write_is_atomic_and_leaves_no_temporary_files(tmp_path):
    path = tmp_path / "q.smt2"
    path.write_text("old")
    write_smtlib(path, tiny_network(), tiny_property(), verdict="violated", engine="z3", seconds=0.1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.smt2"]
    assert read_status(path.read_text()) == "sat"


def test_write_into_a_missing_folder_is_a_report_error(tmp_path):
    path = tmp_path / "missing" / "q.smt2"
    with pytest.raises(ReportError, match=r"^.*missing/q\.smt2: cannot write the SMT-LIB file \(.*\); check that"):
        write_smtlib(path, tiny_network(), tiny_property(), verdict="proved", engine="z3", seconds=0.1)


@pytest.mark.parametrize(
    "verdict, status, message",
    [
        ("holds", None, r"^verdict='holds' is not one of \('proved', 'violated', 'unknown'\)$"),
        ("proved", "sat", r"^verdict=proved needs status unsat, got status='sat'$"),
        ("violated", "maybe", r"^status='maybe' is not one of \('sat', 'unsat', 'unknown'\)$"),
    ],
)
def test_write_rejects_inconsistent_verdicts(tmp_path, verdict, status, message):
    with pytest.raises(ValueError, match=message):
        write_smtlib(
            tmp_path / "q.smt2",
            tiny_network(),
            tiny_property(),
            verdict=verdict,
            status=status,
            engine="z3",
            seconds=0.0,
        )
    assert not (tmp_path / "q.smt2").exists()


def test_a_sub_box_of_a_violated_property_may_record_unsat(tmp_path):
    write_smtlib(
        tmp_path / "q.smt2",
        tiny_network(),
        tiny_property(),
        verdict="violated",
        status="unsat",
        engine="z3",
        seconds=0.0,
    )
    assert read_status((tmp_path / "q.smt2").read_text()) == "unsat"


# --- re-running files and the auditor's re-check -------------------------------

needs_z3_command = pytest.mark.skipif(not HAS_Z3_COMMAND, reason="no z3 command on PATH; pip install z3-solver")

# |x| = relu(x) + relu(-x) on [-1, 1]: |x| <= -0.25 is impossible, |x| >= 0.5 happens.
ABS = Network(
    (AffineLayer([[1.0], [-1.0]], [0.0, 0.0], "hidden"), AffineLayer([[1.0, 1.0]], [0.0], "output")),
    source_path="abs.onnx",
    sha256="cd" * 32,
)
NEGATIVE = Property("abs_negative", [-1.0], [1.0], (Conjunction([[1.0]], [-0.25]),))
LARGE = Property("abs_large", [-1.0], [1.0], (Conjunction([[-1.0]], [-0.5]),))


def report_folder(folder: Path, *, with_summary: bool = True) -> Path:
    """00 proved (unsat), 01 violated (sat), 02 unknown, and a summary.json shaped like the lead's."""
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for index, (prop, verdict) in enumerate([(NEGATIVE, "proved"), (LARGE, "violated"), (LARGE, "unknown")]):
        name = f"{index:02d}_{prop.name}.smt2"
        sha = write_smtlib(folder / name, ABS, prop, verdict=verdict, engine="z3", seconds=0.01)
        entries.append({"property": prop.name, "verdict": verdict, "smt2": name, "smt2_sha256": sha})
    if with_summary:
        (folder / "summary.json").write_text(json.dumps({"certfsm_summary": 1, "properties": entries}))
    return folder


@needs_z3_command
def test_recheck_confirms_an_untouched_folder(tmp_path):
    rows = recheck_folder(report_folder(tmp_path / "r"), timeout=30)
    assert [(r.file, r.recorded_status, r.answer, r.outcome, r.label, r.ok) for r in rows] == [
        ("00_abs_negative.smt2", "unsat", "unsat", "confirmed", "confirmed", True),
        ("01_abs_large.smt2", "sat", "sat", "confirmed", "confirmed", True),
        ("02_abs_large.smt2", "unknown", "skipped", "confirmed", "confirmed", True),
    ]
    assert rows[0].note == "solver confirms unsat"
    assert rows[2].note == "recorded status unknown: nothing to confirm"
    assert rows[0].sha256 == hashlib.sha256((tmp_path / "r" / "00_abs_negative.smt2").read_bytes()).hexdigest()


def _recheck_or_skip(folder: Path, solver: str) -> list:
    try:
        return recheck_folder(folder, solver=solver, timeout=30)
    except EngineError as error:
        pytest.skip(str(error))


@pytest.mark.parametrize("solver", ["z3", pytest.param("cvc5", marks=pytest.mark.slow)])  # cvc5 answers: below
def test_recheck_flags_a_flipped_status(tmp_path, solver):
    folder = report_folder(tmp_path / "r")
    path = folder / "01_abs_large.smt2"
    path.write_text(path.read_text().replace("(set-info :status sat)", "(set-info :status unsat)"))
    row = _recheck_or_skip(folder, solver)[1]
    assert (row.recorded_status, row.answer, row.outcome, row.label, row.ok) == (
        "unsat",
        "sat",
        "mismatch",
        "MISMATCH",
        False,
    )
    assert "sha256 differs from summary.json" in row.note
    assert "header says status sat but the script says unsat" in row.note
    assert "solver answered sat but the file records unsat" in row.note


@needs_z3_command
def test_recheck_without_summary_still_catches_a_wrong_answer(tmp_path):
    folder = report_folder(tmp_path / "r", with_summary=False)
    path = folder / "00_abs_negative.smt2"
    # A changed output bias makes |x| - 1 <= -0.25 reachable.
    changed = path.read_text().replace("(assert (= Y_0 (+ H_0_0 H_0_1)))", "(assert (= Y_0 (+ H_0_0 H_0_1 (- 1.0))))")
    assert changed != path.read_text()
    path.write_text(changed)
    rows = recheck_folder(folder, timeout=30)
    assert (rows[0].answer, rows[0].outcome, rows[0].ok) == ("sat", "mismatch", False)
    assert rows[0].note == "solver answered sat but the file records unsat"
    assert all(row.ok for row in rows[1:])


@needs_z3_command
def test_recheck_flags_a_changed_weight_by_its_hash(tmp_path):
    folder = report_folder(tmp_path / "r")
    path = folder / "00_abs_negative.smt2"
    path.write_text(path.read_text().replace("(assert (= Z_0_0 X_0))", "(assert (= Z_0_0 (* 0.5 X_0)))"))
    row = recheck_folder(folder, timeout=30)[0]
    assert row.answer == "unsat"  # still unsat, but not the network that was verified
    assert (row.outcome, row.label, row.ok) == ("invalid", "INVALID", False)
    assert row.note == "sha256 differs from summary.json: the file changed after the report was written"


@needs_z3_command
def test_recheck_flags_missing_and_unlisted_files(tmp_path):
    folder = report_folder(tmp_path / "r")
    (folder / "02_abs_large.smt2").unlink()
    shutil.copy(folder / "00_abs_negative.smt2", folder / "03_extra.smt2")
    rows = recheck_folder(folder, timeout=30)
    by_file = {row.file: row for row in rows}
    assert (by_file["02_abs_large.smt2"].answer, by_file["02_abs_large.smt2"].outcome) == ("missing", "invalid")
    assert by_file["03_extra.smt2"].note.startswith("not listed in summary.json")
    assert by_file["03_extra.smt2"].outcome == "invalid" and not by_file["03_extra.smt2"].ok


@needs_z3_command
def test_recheck_reports_a_solver_error(tmp_path):
    folder = report_folder(tmp_path / "r", with_summary=False)
    path = folder / "00_abs_negative.smt2"
    path.write_text(path.read_text().replace("(assert (= Z_0_0 X_0))", "(assert (= Z_0_0 X_9))"))
    row = recheck_folder(folder, timeout=30)[0]
    assert (row.answer, row.outcome, row.ok) == ("error", "unconfirmed", False)
    assert re.fullmatch(r"solver failed, exit status \d+", row.reason), row.reason
    assert row.label == f"unconfirmed ({row.reason})"
    assert re.match(
        r"^nothing contradicts the recorded unsat, but the solver stopped without an answer: \(error .*X_9", row.note
    )


@needs_z3_command
def test_recheck_without_status_is_not_ok(tmp_path):
    folder = report_folder(tmp_path / "r", with_summary=False)
    path = folder / "00_abs_negative.smt2"
    path.write_text(path.read_text().replace("(set-info :status unsat)\n", ""))
    row = recheck_folder(folder, timeout=30)[0]
    assert (row.outcome, row.ok) == ("invalid", False)
    assert "no (set-info :status sat|unsat|unknown) in the file" in row.note


@needs_z3_command
@pytest.mark.slow
@pytest.mark.parametrize("timeout", [1, 0.2])
def test_recheck_calls_a_solver_timeout_unconfirmed_not_a_mismatch(tmp_path, timeout):
    """A query no solver finishes in 1 s (z3 takes whole seconds, so 0.2 s is 1 s) next to an easy one."""
    folder = write_files(tmp_path / "r", a_easy=EASY_UNSAT, b_hard=pigeonhole())
    easy, hard = recheck_folder(folder, timeout=timeout)
    assert (easy.outcome, easy.label) == ("confirmed", "confirmed")
    assert (hard.recorded_status, hard.answer, hard.outcome, hard.ok) == ("unsat", "timeout", "unconfirmed", False)
    assert hard.reason == "timeout after 1 s"
    assert hard.label == "unconfirmed (timeout after 1 s)"
    assert hard.note == "nothing contradicts the recorded unsat, but the solver did not finish; give it more time"
    assert hard.seconds < 1 + _recheck._GRACE_SECONDS + 5


@needs_z3_command
def test_recheck_calls_an_unknown_answer_unconfirmed(tmp_path):
    row = recheck_folder(write_files(tmp_path / "r", undecided=UNDECIDED), timeout=30)[0]
    assert (row.recorded_status, row.answer, row.outcome) == ("sat", "unknown", "unconfirmed")
    assert row.label == "unconfirmed (solver answered unknown)"
    assert row.note == "nothing contradicts the recorded sat, but the solver could not decide; try the other solver"


@pytest.mark.slow
@needs_z3_command
def test_a_changed_file_whose_solver_times_out_is_invalid_not_unconfirmed(tmp_path):
    """Unconfirmed means nothing contradicts the file: a hash that differs from summary.json does."""
    folder = write_files(tmp_path / "r", hard=pigeonhole())
    (folder / "summary.json").write_text(json.dumps({"properties": [{"smt2": "hard.smt2", "smt2_sha256": "0" * 64}]}))
    row = recheck_folder(folder, timeout=1)[0]
    assert (row.answer, row.outcome, row.label) == ("timeout", "invalid", "INVALID")
    assert row.note == (
        "sha256 differs from summary.json: the file changed after the report was written; timeout after 1 s"
    )


@pytest.mark.slow
def test_recheck_with_cvc5(tmp_path):
    rows = _recheck_or_skip(report_folder(tmp_path / "r"), "cvc5")
    assert [(r.answer, r.ok) for r in rows] == [("unsat", True), ("sat", True), ("skipped", True)]


def test_recheck_without_cvc5_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setattr(_recheck.shutil, "which", lambda name: None)
    monkeypatch.setattr(_recheck.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(
        EngineError,
        match=r"^recheck: cvc5 is not installed \(.*\); pip install cvc5, or use "
        r"solver='z3'$",
    ):
        recheck_folder(report_folder(tmp_path / "r"), solver="cvc5")
    code, out, err = run_main("recheck", tmp_path / "r", "--solver", "cvc5")
    assert (code, out) == (2, "") and re.fullmatch(
        r"certfsm: error: recheck: cvc5 is not installed \(.*\); pip "
        r"install cvc5, or use --solver z3\n",
        err,
    ), err
    with pytest.raises(EngineError, match=r"^recheck: no z3 command on PATH; pip install z3-solver"):
        recheck_folder(tmp_path / "r", solver="z3")


@pytest.mark.parametrize(
    "setup, kwargs, error, message",
    [
        (lambda f: None, {}, ReportError, r"^.*/r: no such report folder; give the folder that certfsm verify wrote$"),
        (lambda f: f.mkdir(), {}, ReportError, r"^.*/r: holds no \.smt2 files, so there is nothing to re-check; "),
        (
            lambda f: report_folder(f),
            {"solver": "yices"},
            EngineError,
            r"^recheck: solver='yices' is not one of \('z3', 'cvc5'\); choose z3 or cvc5$",
        ),
        (
            lambda f: report_folder(f),
            {"timeout": 0},
            EngineError,
            r"^recheck: timeout=0 is not a positive number of seconds; give e\.g\. 60$",
        ),
        (
            lambda f: (report_folder(f) / "summary.json").write_text("{not json"),
            {},
            ReportError,
            r"^.*/r/summary\.json: cannot be read as JSON \(.*\); restore it or remove it",
        ),
    ],
)
def test_recheck_bad_arguments(tmp_path, setup, kwargs, error, message):
    setup(tmp_path / "r")
    with pytest.raises(error, match=message):
        recheck_folder(tmp_path / "r", **kwargs)


# --- ACAS Xu size ----------------------------------------------------------------


def _acasxu_network(root: Path) -> Network:
    from certfsm import load_onnx

    return load_onnx(root / "onnx" / "ACASXU_run2a_1_1_batch_2000.onnx")


def _acasxu_property(root: Path, network: Network) -> Property:
    from certfsm.verify._vnnlib import parse_vnnlib

    return parse_vnnlib(root / "vnnlib" / "prop_7.vnnlib", network.n_inputs, network.n_outputs)[0]


def test_acasxu_script_is_linear_exact_and_parses_in_z3(acasxu):
    root = acasxu
    network = _acasxu_network(root)
    prop = _acasxu_property(root, network)
    script = smtlib_script(network, prop)
    assertions = z3.parse_smt2_string(script, ctx=z3.Context())
    relus = sum(network.hidden_sizes)
    assert relus == 300
    # box + one equation per neuron (hidden and output) + one ReLU per hidden neuron + the unsafe set
    assert len(assertions) == network.n_inputs + relus + network.n_outputs + relus + 1
    weight = float(network.layers[2].weight[3, 7])
    assert weight not in (0.0, 1.0, -1.0)
    line = next(line for line in script.splitlines() if line.startswith("(assert (= Z_2_3 "))
    assert f"(* {exact_decimal(weight)} H_1_7)" in line


@pytest.mark.slow
@needs_z3_command
def test_recheck_calls_an_acasxu_timeout_unconfirmed(tmp_path, acasxu):
    root = acasxu
    network = _acasxu_network(root)
    folder = tmp_path / "r"
    folder.mkdir()
    write_smtlib(
        folder / "acas.smt2", network, _acasxu_property(root, network), verdict="proved", engine="marabou", seconds=1.0
    )
    [row] = recheck_folder(folder, timeout=1)
    assert (row.answer, row.outcome, row.ok) == ("timeout", "unconfirmed", False)
    assert row.label == "unconfirmed (timeout after 1 s)"
