"""`certfsm vnnlib-batch` as a user meets it: the verdicts of `certfsm vnnlib`, resumable, refusals in one line.

Why: a batch row must mean what `certfsm vnnlib` prints for the same
instance (the batch reuses its code path, and this holds it to that), a
wrong answer against the list's known ones must fail the command, and bad
input must cost neither solver time nor an existing results file.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from batch_instances import INSTANCES, make_benchmark
from cli_in_process import run_main
from cli_run import one_line_error, run_cli

REPRO = Path(
    os.environ.get("CERTFSM_SOUNDNESS_REPRO")
    or Path(__file__).resolve().parents[3] / "shared" / "benchmarks" / "soundness-repro"
)


def rows(path: Path) -> list[list[str]]:
    import csv

    with open(path, newline="") as handle:
        return list(csv.reader(handle))[1:]


def vnnlib_alone(onnx: Path, vnnlib: Path) -> str:
    """What `certfsm vnnlib --jobs 1` answers for one instance: its first line, or "error" for a refusal."""
    code, out, err = run_main("vnnlib", onnx, vnnlib, "--timeout", "10", "--jobs", "1", "--no-progress")
    return "error" if code == 2 else out.splitlines()[0]


@pytest.mark.slow
def test_each_row_is_what_vnnlib_answers_alone_and_a_run_again_checks_nothing(tmp_path):
    csv_path = make_benchmark(tmp_path / "bench")
    out = tmp_path / "results.csv"
    code, stdout, err = run_main("vnnlib-batch", csv_path, "--out", out, "--jobs", "1", "--no-progress")
    assert code == 0, stdout + err
    found = {(row[0], row[1]): row for row in rows(out)}
    for onnx, vnnlib, _ in INSTANCES:
        row = found[onnx, vnnlib]
        assert row[2] == vnnlib_alone(csv_path.parent / onnx, csv_path.parent / vnnlib), row
        if row[2] == "sat":
            witness = (out.parent / row[5]).read_text()
            assert witness.startswith("sat\n((X_0 ") and witness.endswith(")\n")
    assert re.search(r"(?m)^4 instances: sat 2, unsat 1, error 1; instance time .* median .*, 1 job$", stdout)
    assert "known answers: 3 compared, 0 wrong" in stdout
    before = out.read_bytes()
    code, stdout, err = run_main("vnnlib-batch", csv_path, "--out", out, "--no-progress")
    assert code == 0 and out.read_bytes() == before
    assert "resumed: 4 instances already in" in stdout and "this run 0 instances" in stdout


@pytest.mark.slow
def test_known_answers_in_worker_processes_match_vnnlib_alone(tmp_path):
    """Four soundness-repro cases (each once answered wrongly) on two worker processes, against the list's answers."""
    if not (REPRO / "instances.csv").is_file():
        pytest.skip(f"soundness-repro benchmark not found at {REPRO}; set CERTFSM_SOUNDNESS_REPRO to its folder")
    names = ("hi_round", "strict_gt", "wrong_sat_110", "wrong_unsat_501")
    listed = [
        line for line in (REPRO / "instances.csv").read_text().splitlines()[1:] if line.split(",")[0][5:-5] in names
    ]
    csv_path = tmp_path / "instances.csv"
    csv_path.write_text(
        "onnx,vnnlib,timeout_s,expected\n"
        + "".join(f"{REPRO / o},{REPRO / v},{t},{e}\n" for o, v, t, e in (line.split(",") for line in listed))
    )
    out = tmp_path / "results.csv"
    code, stdout, err = run_cli(
        "vnnlib-batch", csv_path, "--out", out, "--jobs", "2", "--timeout-cap", "10", "--sorted"
    )
    assert code == 0, stdout + err
    assert "known answers: 4 compared, 0 wrong" in stdout
    assert [Path(row[1]).stem for row in rows(out)] == sorted(names, key=[n for n in names].index)
    for row in rows(out):
        assert row[2] == vnnlib_alone(Path(row[0]), Path(row[1])), row


@pytest.mark.slow
def test_a_wrong_answer_fails_the_command_by_name(tmp_path):
    csv_path = make_benchmark(tmp_path / "bench", rows=[("onnx/line.onnx", "vnnlib/above_2.vnnlib", "sat")])
    code, stdout, err = run_main("vnnlib-batch", csv_path, "--out", tmp_path / "r.csv", "--no-progress")
    assert code == 1, stdout + err
    assert "WRONG: onnx/line.onnx vnnlib/above_2.vnnlib: answered unsat, the known answer is sat" in stdout
    assert "known answers: 1 compared, 1 wrong" in stdout


@pytest.mark.slow
def test_a_torn_last_line_is_dropped_with_a_warning_and_its_instance_runs_again(tmp_path):
    csv_path = make_benchmark(tmp_path / "bench")
    out = tmp_path / "r.csv"
    assert run_main("vnnlib-batch", csv_path, "--out", out, "--no-progress", "--sorted")[0] == 0
    whole = out.read_text()
    out.write_text(whole[: whole.rindex("onnx/sigmoid.onnx") + 12])
    code, stdout, err = run_main("vnnlib-batch", csv_path, "--out", out, "--no-progress")
    assert code == 0, stdout + err
    assert re.match(r"^certfsm: warning: .*r\.csv: line 5 is incomplete \(a write cut short", err.splitlines()[0])
    assert "this run 1 instances" in stdout
    assert [row[2] for row in rows(out)] == ["unsat", "sat", "sat", "error"]


BAD_INPUT = [
    (lambda bench: ("vnnlib-batch", bench / "none.csv"), r"^certfsm: error: .*none\.csv: no such instance list"),
    (
        lambda bench: (
            (bench / "instances.csv").write_text("onnx/line.onnx,vnnlib/at_1.vnnlib,9\nonnx/line.onnx,9\n")
            and ("vnnlib-batch", bench / "instances.csv")
        ),
        r"^certfsm: error: .*instances\.csv:2: row 'onnx/line\.onnx,9' is not onnx,vnnlib,timeout\[,expected\]; write the paths",
    ),
    (
        lambda bench: ("vnnlib-batch", bench / "instances.csv", "--timeout-cap", "0"),
        r"^certfsm: error: --timeout-cap 0 is not a positive number of seconds",
    ),
    (
        lambda bench: ("vnnlib-batch", bench / "instances.csv", "--jobs", "0"),
        r"^certfsm: error: --jobs 0 is not a number of worker processes",
    ),
]


@pytest.mark.parametrize("make, pattern", BAD_INPUT, ids=["missing list", "short row", "cap", "jobs"])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, make, pattern):
    arguments = make(make_benchmark(tmp_path / "bench").parent)
    code, out, err = run_main(*arguments, "--out", tmp_path / "r.csv", "--no-progress")
    assert one_line_error(code, err, pattern), err
    assert not (tmp_path / "r.csv").exists()


def test_a_results_file_with_a_foreign_header_is_refused_untouched(tmp_path):
    csv_path = make_benchmark(tmp_path / "bench")
    for text in ("onnx,vnnlib,timeout_s,expected\nx,y,1,sat\n", csv_path.read_text()):
        out = tmp_path / "r.csv"
        out.write_text(text)
        code, stdout, err = run_main("vnnlib-batch", csv_path, "--out", out, "--no-progress")
        assert one_line_error(
            code, err, r"^certfsm: error: .*r\.csv: line 1 is 'onnx,vnnlib,timeout_s,expected', not the header "
        ), err
        assert "left as it is: give another --out" in err
        assert out.read_text() == text
    assert not (tmp_path / "r.witnesses").exists()
