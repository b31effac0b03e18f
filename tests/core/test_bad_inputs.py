"""The files that once crashed or hung the parsers (../shared/benchmarks/bad-inputs), answered as the README promises.

Each must give one line on stderr naming the file, exit code 2, no
traceback, within a few seconds, and leave what was already written
untouched. The folder is read in place ($CERTFSM_BAD_INPUTS, else
../shared/benchmarks/bad-inputs beside the checkout); the tests are skipped
with the reason when it is absent. Its bad inputs are the files named
vnn_*, spec_*, onnx_* and artifact_*; coadapt.onnx is the model the specs name.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from certfsm._errors import ArtifactError, ModelError, SpecError, VnnlibError
from cli_in_process import run_main
from parse_contract import Parser

BAD_INPUTS = Path(
    os.environ.get("CERTFSM_BAD_INPUTS") or Path(__file__).resolve().parents[3] / "shared" / "benchmarks" / "bad-inputs"
)
ACASXU_NETWORK = BAD_INPUTS.parent / "acasxu" / "onnx" / "ACASXU_run2a_1_1_batch_2000.onnx"
TIME_LIMIT = 60.0
"""Seconds for one CLI run, start-up included: a hang detector, far above the parsers' well-under-one-second
answers so that a loaded machine does not turn it into a flake."""

PARSERS = {
    "vnn_": ("certfsm.verify._vnnlib.parse_vnnlib", VnnlibError),
    "spec_": ("certfsm._spec_reading.load_spec", SpecError),
    "onnx_": ("certfsm._onnx.load_onnx", ModelError),
    "artifact_": ("certfsm._artifact.load_artifact", ArtifactError),
}

FILES = sorted(path.name for path in BAD_INPUTS.glob("*") if path.name.startswith(tuple(PARSERS))) or [
    pytest.param(
        None,
        marks=pytest.mark.skip(reason=f"bad inputs not found at {BAD_INPUTS}; set CERTFSM_BAD_INPUTS to the folder"),
    )
]

# A VNN-LIB property over 5 inputs and 5 outputs, the shape of the ACAS Xu networks and of coadapt.onnx.
PROPERTY = (
    "".join(f"(declare-const X_{i} Real)\n(assert (>= X_{i} 0))\n(assert (<= X_{i} 1))\n" for i in range(5))
    + "".join(f"(declare-const Y_{j} Real)\n" for j in range(5))
    + "(assert (>= Y_0 Y_1))\n"
)


ONE_PER_KIND = {
    "vnn_deep_and_or.vnnlib",
    "spec_deep_nesting_3000.json",
    "onnx_node_name_not_utf8.onnx",
    "artifact_rule_missing_max.cfsm",
}
"""The files that also run through a fresh interpreter: the deepest nesting of each parser, where a recursion
limit or a stack would differ first between the test process and a shell's."""


def _kind(name: str) -> str:
    return next(prefix for prefix in PARSERS if name.startswith(prefix))


@pytest.fixture(scope="module")
def parsers():
    workers = {prefix: Parser(target) for prefix, (target, _) in PARSERS.items()}
    yield workers
    for worker in workers.values():
        worker.close()


@pytest.mark.slow
@pytest.mark.parametrize("name", FILES)
def test_the_parser_refuses_it_in_one_line(name, parsers):
    path = BAD_INPUTS / name
    kind, message = parsers[_kind(name)](path)
    assert kind == PARSERS[_kind(name)][1].__name__, f"{name}: {kind}: {message}"
    assert "\n" not in message and message.startswith(str(path)), message


def _commands(name: str, tmp_path: Path) -> list[list[str]]:
    """The README's command lines for this file, writing to outputs that already exist."""
    path = BAD_INPUTS / name
    report, out = tmp_path / "report", tmp_path / "result.txt"
    if name.startswith("spec_"):
        return [["spec", "check", str(path)], ["verify", str(path), "--report", str(report), "--no-progress"]]
    if name.startswith("vnn_"):
        network = ACASXU_NETWORK if ACASXU_NETWORK.is_file() else BAD_INPUTS / "coadapt.onnx"
        return [
            [
                "vnnlib",
                str(network),
                str(path),
                "--timeout",
                "5",
                "--out",
                str(out),
                "--report",
                str(report),
                "--no-progress",
            ]
        ]
    if name.startswith("artifact_"):
        return [
            ["run", str(path), "--probe", "example-trace", "--steps", "1", "--audit", str(tmp_path / "run.log")],
            ["export-verilog", str(path), "--out", str(report)],
        ]
    prop = tmp_path / "property.vnnlib"
    prop.write_text(PROPERTY)
    return [
        ["vnnlib", str(path), str(prop), "--timeout", "5", "--out", str(out), "--report", str(report), "--no-progress"]
    ]


class _Hang(Exception):
    """Raised in the test by the alarm: the command gave no answer within TIME_LIMIT."""


@contextlib.contextmanager
def _answer_within(seconds: float):
    """Raise _Hang in this (main) thread when the block runs longer than `seconds`."""

    def alarm(signum, frame):
        raise _Hang

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _run_in_process(arguments: list[str]) -> tuple[int, str]:
    try:
        with _answer_within(TIME_LIMIT):
            code, _, err = run_main(*arguments)
    except _Hang:
        pytest.fail(f"certfsm {' '.join(arguments)} gave no answer within {TIME_LIMIT} s")
    return code, err


def _run_in_a_process(arguments: list[str]) -> tuple[int, str]:
    try:
        done = subprocess.run(
            [sys.executable, "-m", "certfsm.cli", *arguments], capture_output=True, text=True, timeout=TIME_LIMIT
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"certfsm {' '.join(arguments)} gave no answer within {TIME_LIMIT} s")
    return done.returncode, done.stderr


def _answers_in_one_line_with_exit_2(name: str, tmp_path: Path, run) -> None:
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "summary.json").write_text("old and precious")
    (tmp_path / "result.txt").write_text("old result")
    for arguments in _commands(name, tmp_path):
        code, stderr = run(arguments)
        lines = stderr.splitlines()
        assert code == 2, f"exit {code}:\n{stderr}"
        assert "Traceback" not in stderr
        assert len(lines) == 1, stderr
        assert lines[0].startswith("certfsm: error: ") and name in lines[0], lines[0]
    assert (tmp_path / "report" / "summary.json").read_text() == "old and precious"
    assert (tmp_path / "result.txt").read_text() == "old result"
    assert sorted(p.name for p in (tmp_path / "report").iterdir()) == ["summary.json"]


@pytest.mark.parametrize("name", FILES)
def test_the_cli_answers_in_one_line_with_exit_2(name, tmp_path):
    """Through the console entry point in this process (an exception that escapes `main` fails the test, as a
    traceback would): an interpreter per file cost more than the answers themselves."""
    _answers_in_one_line_with_exit_2(name, tmp_path, _run_in_process)


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name in FILES if name in ONE_PER_KIND] or FILES[:1])
def test_the_installed_command_answers_the_same_in_its_own_process(name, tmp_path):
    """One file per parser through a fresh interpreter: the exit status and stderr as a shell sees them."""
    _answers_in_one_line_with_exit_2(name, tmp_path, _run_in_a_process)


@pytest.mark.parametrize("name", [name for name in FILES if isinstance(name, str) and name.startswith("artifact_")])
def test_inspect_names_the_failing_structure_check_of_a_bad_artifact(name):
    """inspect reports every check it ran and exits 1 when one fails (README), naming the field, never a traceback."""
    code, out, err = run_main("inspect", BAD_INPUTS / name)
    assert code == 1 and not err, err
    assert re.search(rf"^  FAILED  structure: {re.escape(str(BAD_INPUTS / name))}: payload\.spec\.", out, re.M), out
    assert out.splitlines()[-1].startswith("verdict: FAILED")
