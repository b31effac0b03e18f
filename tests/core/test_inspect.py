"""`certfsm inspect`: the summary of an artifact, every check even past a failure, and the .smt2 files of a report."""

from __future__ import annotations

import json
import re

import pytest

from certfsm._artifact import load_artifact, write_artifact
from certfsm._canonical import canonical_bytes, sha256_hex
from certfsm._errors import ReportError
from certfsm._inspect import inspect_artifact, verify_smt2_files
from cli_in_process import run_main
from test_artifact import PAYLOAD, SMT_A, SMT_B


@pytest.fixture
def artifact_path(tmp_path):
    path = tmp_path / "CONTROLLER.cfsm"
    write_artifact(path, PAYLOAD)
    return path


def test_inspect_summarises_a_good_artifact_and_passes_every_check(artifact_path):
    inspection = inspect_artifact(artifact_path)
    assert inspection.is_ok and inspection.artifact is not None
    lines = list(inspection)
    assert (
        lines[0] == f"artifact: {artifact_path} ({artifact_path.stat().st_size} bytes, format 2, written by "
        "certfsm 0.1.0)"
    )
    assert "grid: 3 x 3 = 9 cells: 8 exact (88.9%), 1 conservative" in lines
    assert "  0: KEEP = 0 (conservative, overridable), proposed in 4 cells" in lines
    assert "  2: TURBO = 9, proposed in 2 cells" in lines
    assert "  b: 3 bins over [0, 30]" in lines and "  a: 3 bins over [0, 3], frac_bits 4" in lines
    assert [c.name for c in inspection.checks] == [
        "file",
        "JSON",
        "format",
        "sha256",
        "canonical form",
        "structure",
        "certificate",
    ]
    assert all(c.passed for c in inspection.checks)
    assert "certificate (18 entries, 18 required):" in lines
    assert (
        "  ok      certificate: exactly the 18 properties certfsm distill proves, each required and proved by an "
        "engine that can prove it" in lines
    )
    assert lines[-1] == "verdict: ok: every check passed, the artifact is certified"


def test_inspect_reports_a_hash_mismatch_and_still_shows_the_rest(artifact_path):
    document = json.loads(artifact_path.read_bytes())
    document["payload"]["certificate"][0]["verdict"] = "unknown"
    artifact_path.write_bytes(canonical_bytes(document))
    inspection = inspect_artifact(artifact_path)
    assert not inspection.is_ok
    verdicts = {c.name: c.passed for c in inspection.checks}
    assert verdicts == {
        "file": True,
        "JSON": True,
        "format": True,
        "sha256": False,
        "canonical form": True,
        "structure": True,
        "certificate": False,
    }
    assert (
        "  [0] table-tokens: unknown by z3, required, table-tokens.smt2 (sha256 "
        f"{sha256_hex(SMT_A)[:16]}...)" in inspection.lines
    )
    assert any(line.startswith("  FAILED  sha256: ") and "sha256 mismatch" in line for line in inspection.lines)
    assert inspection.lines[-1] == "verdict: FAILED: the sha256 check did not pass"


def test_inspect_of_a_damaged_file_marks_later_checks_not_run(artifact_path):
    artifact_path.write_bytes(artifact_path.read_bytes()[:100])
    inspection = inspect_artifact(artifact_path, report=artifact_path.parent)
    assert [(c.name, c.passed) for c in inspection.checks] == [
        ("file", True),
        ("JSON", False),
        ("format", None),
        ("sha256", None),
        ("canonical form", None),
        ("structure", None),
        ("certificate", None),
        ("smt2 files", None),
    ]
    assert inspection.artifact is None and not inspection.is_ok
    assert inspection.lines[0] == f"artifact: {artifact_path}"


def test_smt2_files_are_compared_with_the_certificate(artifact_path, tmp_path):
    report = tmp_path / "report"
    report.mkdir()
    (report / "table-tokens.smt2").write_bytes(SMT_A)
    (report / "machine-switch-cooldown.smt2").write_bytes(SMT_B)
    artifact = load_artifact(artifact_path)
    checks = verify_smt2_files(artifact, report)
    assert [(c.index, c.file, c.is_match) for c in checks] == [
        (0, "table-tokens.smt2", True),
        (1, "machine-switch-cooldown.smt2", True),
    ]
    assert inspect_artifact(artifact_path, report=report).is_ok

    (report / "machine-switch-cooldown.smt2").write_bytes(SMT_B + b"; edited\n")
    (report / "table-tokens.smt2").unlink()
    checks = verify_smt2_files(artifact, report)
    assert [c.describe() for c in checks] == [
        "certificate[0] 'table-tokens': table-tokens.smt2 is missing",
        f"certificate[1] 'machine-switch-cooldown': machine-switch-cooldown.smt2 hashes to "
        f"{sha256_hex(SMT_B + b'; edited' + bytes([10]))[:16]}... but the certificate records "
        f"{sha256_hex(SMT_B)[:16]}...",
    ]
    inspection = inspect_artifact(artifact_path, report=report)
    assert not inspection.is_ok and inspection.checks[-1].name == "smt2 files"
    assert inspection.checks[-1].detail.startswith(f"0 of 2 .smt2 files in {report} match the certificate; ")

    with pytest.raises(
        ReportError,
        match=rf"^{re.escape(str(tmp_path / 'nowhere'))}: no such report folder; give "
        r"the folder certfsm distill wrote with report=$",
    ):
        verify_smt2_files(artifact, tmp_path / "nowhere")
    inspection = inspect_artifact(artifact_path, report=tmp_path / "nowhere")
    assert inspection.checks[-1].detail.endswith("give the folder certfsm distill wrote with report=")
    assert not any("--" in line for line in inspection.lines)
    code, out, _ = run_main("inspect", artifact_path, "--report", tmp_path / "nowhere")
    assert (
        code == 1
        and f"  FAILED  smt2 files: {tmp_path / 'nowhere'}: no such report folder; give the folder "
        "certfsm distill wrote with --report"
        in out.splitlines()
    )
