"""`certfsm audit report`: figures and a report.md for people, from a logged run of the example trace."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from cli_in_process import run_main
from cli_run import run_cli

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def logged_run(distilled_example, tmp_path_factory):
    log = tmp_path_factory.mktemp("report") / "run.log"
    code, _, err = run_main("run", distilled_example[2], "--probe", "example-trace", "--audit", log)
    assert code == 0, err
    return log


@pytest.mark.slow
def test_the_report_holds_pngs_and_a_markdown_that_counts_the_logged_tokens(distilled_example, logged_run, tmp_path):
    from certfsm.runtime import load_machine, read_log
    from certfsm.runtime._audit_format import StepRecord

    out = tmp_path / "report"
    code, stdout, err = run_main("audit", "report", logged_run, "--out", out, "--artifact", distilled_example[2])
    assert code == 0, err
    for name in ("timeline.png", "probes.png", "reasons.png", "decision_map.png"):
        data = (out / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and 10_000 < len(data) < 2_000_000, name
    text = (out / "report.md").read_text()
    machine = load_machine(distilled_example[2])
    logged = Counter(machine.tokens[r.token] for r in read_log(logged_run) if isinstance(r, StepRecord))
    for token in machine.tokens:
        assert f"| {token} | {logged[token]} |" in text
    assert all(f"]({name})" in text for name in ("timeline.png", "probes.png", "reasons.png", "decision_map.png"))
    assert machine.artifact_sha256 in text and "**verifies**" in text and "% of cycles with sla_ok" in text
    assert re.search(r"\| FALLBACK_SLA \| [1-9]\d* \|", text)


@pytest.mark.slow
def test_a_tampered_log_gets_a_report_that_names_the_bad_record_and_exit_1(logged_run, tmp_path):
    tampered = tmp_path / "tampered.log"
    data = bytearray(logged_run.read_bytes())
    data[len(data) // 2] ^= 0x10
    tampered.write_bytes(bytes(data))
    out = tmp_path / "report"
    code, stdout, err = run_cli("audit", "report", tampered, "--out", out)
    assert code == 1, err
    index = int(re.search(r"record (\d+) is bad", stdout).group(1))
    text = (out / "report.md").read_text()
    assert "**DOES NOT VERIFY**" in text and f"record {index} is bad" in text and 800 <= index <= 1200
    assert (
        "- token names: not given (give the artifact the log was written with); tokens are named by output index "
        "and code" in text.splitlines()
    )
    assert f"- steps reported: {index}" in text


@pytest.mark.parametrize(
    "args, message",
    [
        (("--x", "nowhere"), r"^certfsm: error: --x nowhere is not an input of the log; the inputs are compute_util, "),
        (("--x", "compute_util", "--y", "compute_util"), r"^certfsm: error: --x and --y both name compute_util"),
    ],
)
def test_bad_report_flags_are_one_line_and_exit_2(logged_run, tmp_path, args, message):
    code, _, err = run_main("audit", "report", logged_run, "--out", tmp_path / "r", *args)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and re.match(message, lines[0]), err
    assert not (tmp_path / "r").exists()


def test_write_audit_report_names_its_parameters_not_the_flags(logged_run, coarse_example, tmp_path):
    from certfsm import ReportError, UsageError
    from certfsm.runtime import write_audit_report

    in_the_way = tmp_path / "file"
    in_the_way.write_text("not a folder")
    refusals = [
        (
            {"x_input": "nowhere"},
            UsageError,
            r"^x_input='nowhere' is not an input of the log; the inputs are "
            r"compute_util, ",
        ),
        (
            {"x_input": "compute_util", "y_input": "compute_util"},
            UsageError,
            r"^x_input= and y_input= both name compute_util; give two different inputs$",
        ),
        (
            {"artifact": coarse_example},
            UsageError,
            rf"^artifact={re.escape(repr(str(coarse_example)))}: artifact [0-9a-f]{{12}} is not the one the log names "
            r"\([0-9a-f]{12}\); give the artifact the log was written with$",
        ),
    ]
    for kwargs, error_type, pattern in refusals:
        with pytest.raises(error_type, match=pattern) as error:
            write_audit_report(logged_run, tmp_path / "r", **kwargs)
        assert "--" not in str(error.value)
    with pytest.raises(
        ReportError,
        match=rf"^{re.escape(str(in_the_way))}: exists and is not a folder; choose "
        r"another out= path$",
    ):
        write_audit_report(logged_run, in_the_way)
    assert not (tmp_path / "r").exists()


def test_the_report_flags_name_what_the_user_typed(logged_run, coarse_example, tmp_path):
    in_the_way = tmp_path / "file"
    in_the_way.write_text("not a folder")
    for args, message in [
        (
            ("--out", in_the_way),
            rf"^certfsm: error: {re.escape(str(in_the_way))}: exists and is not a folder; "
            r"choose another --out path$",
        ),
        (
            ("--out", tmp_path / "r", "--artifact", coarse_example),
            rf"^certfsm: error: --artifact {re.escape(str(coarse_example))}: artifact [0-9a-f]{{12}} is not the one the "
            r"log names \([0-9a-f]{12}\); give the artifact the log was written with$",
        ),
    ]:
        code, _, err = run_main("audit", "report", logged_run, *args)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and re.match(message, lines[0]) and "Traceback" not in err, err
    assert not (tmp_path / "r").exists()


def test_a_missing_log_is_one_line_and_exit_2(tmp_path):
    code, _, err = run_main("audit", "report", tmp_path / "none.log", "--out", tmp_path / "r")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no such audit log" in err


def test_fixed_point_steps_are_pictured_as_real_values_and_left_out_without_the_artifact():
    from certfsm.machine import Machine, MachineParams
    from certfsm.runtime._audit_format import LoggedState, StepRecord
    from certfsm.runtime._report import _real_reading

    machine = Machine(
        names=("a", "b"),
        edges=((0.0, 1.0), (0.0, 8.0)),
        frac_bits=(4, 0),
        tokens=("T",),
        proposal=(0,),
        exact=(True,),
        allowed=(1,),
        params=MachineParams(1, 0, 1, 0, frozenset(), (0,)),
    )

    def record(reading, fixed):
        return StepRecord(0, 0.0, reading, {}, 0, 0, 0, 0, True, None, LoggedState(0, -1, 0, 0), "", fixed)

    assert _real_reading(record((8, 3), True), machine) == (0.5, 3.0)
    assert all(v != v for v in _real_reading(record((8, 3), True), None))
    assert _real_reading(record((0.25, 2.0), False), None) == (0.25, 2.0)
