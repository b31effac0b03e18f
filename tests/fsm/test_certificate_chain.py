"""The chain ONNX -> proof certificate -> artifact: the artifact's cells-exact entry names the proof certificate of
the exact cells and leaves and its SHA-256, `inspect --report` compares that file with it, and the loader refuses
a malformed link with the field and the fix."""

from __future__ import annotations

import copy
import hashlib
import json

import pytest

from certfsm import CELLS_EXACT, ArtifactError, inspect_artifact, load_artifact, write_artifact
from test_refine import run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def distilled(tmp_path_factory):
    folder = tmp_path_factory.mktemp("chain")
    run(folder, "tiny", 1)
    return folder / "tiny.cfsm", folder / "tiny-report"


def test_the_cells_exact_entry_names_the_proof_certificate_and_its_hash(distilled):
    artifact_path, report = distilled
    entry = next(e for e in load_artifact(artifact_path).certificate if e.property == CELLS_EXACT)
    summary = json.loads((report / "summary.json").read_text())["cell_certificate"]
    assert entry.proof_certificate == summary["file"] == "cells-exact.cert.json"
    digest = hashlib.sha256((report / entry.proof_certificate).read_bytes()).hexdigest()
    assert entry.proof_certificate_sha256 == summary["sha256"] == digest
    inspection = inspect_artifact(artifact_path, report=report)
    assert inspection.is_ok, "\n".join(inspection)
    assert any("proof certificate cells-exact.cert.json" in line for line in inspection)


def test_inspect_refuses_a_report_whose_proof_certificate_was_changed(distilled, tmp_path):
    artifact_path, report = distilled
    copied = tmp_path / "report"
    copied.mkdir()
    for file in report.iterdir():
        if file.is_file():
            (copied / file.name).write_bytes(file.read_bytes())
    certificate = copied / "cells-exact.cert.json"
    certificate.write_bytes(certificate.read_bytes().replace(b'"leaf"', b'"leaf" ', 1))
    inspection = inspect_artifact(artifact_path, report=copied)
    assert not inspection.is_ok
    failed = next(check for check in inspection.checks if check.passed is False)
    assert failed.name == "smt2 files" and "cells-exact.cert.json hashes to" in failed.detail


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda e: e.pop("proof_certificate_sha256"), r"proof_certificate_sha256 is missing; give proof_certificate"),
        (
            lambda e: e.update(proof_certificate="../x.cert.json"),
            r'proof_certificate="\.\./x\.cert\.json" is not a plain \.cert\.json file name',
        ),
        (lambda e: e.update(proof_certificate="cells.smt2"), r'proof_certificate="cells\.smt2" is not a plain'),
        (lambda e: e.update(proof_certificate_sha256="00"), r"proof_certificate_sha256"),
        (
            lambda e: e.update(proof_certificates="x"),
            r"proof_certificates is not a field of artifact format 2 \(expected only",
        ),
    ],
)
def test_the_loader_refuses_a_malformed_link_naming_the_field(distilled, tmp_path, change, message):
    artifact_path, _ = distilled
    payload = copy.deepcopy(load_artifact(artifact_path).payload())
    entry = next(e for e in payload["certificate"] if e["property"] == CELLS_EXACT)
    change(entry)
    with pytest.raises(ArtifactError, match=r"payload\.certificate\[\d+\]\." + message):
        write_artifact(tmp_path / "bad.cfsm", payload)
    assert not (tmp_path / "bad.cfsm").exists()
