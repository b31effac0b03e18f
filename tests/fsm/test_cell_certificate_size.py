"""The report's proof certificate of the exact cells: checked from the report, and bounded: a large table says why
it has none."""

from __future__ import annotations

import json

import numpy as np

from certfsm.cli import main
from certfsm.fsm import EXACT, distill_controller
from test_refine import spec


def test_a_table_larger_than_the_certified_size_says_why_its_cells_have_no_certificate(tmp_path, monkeypatch):
    from certfsm.fsm import _cell_problem

    monkeypatch.setattr(_cell_problem, "CERTIFIED_CELLS_AT_MOST", 5)
    result = distill_controller(spec(folder=tmp_path), out=tmp_path / "t.cfsm", report=tmp_path / "r", jobs=1)
    entry = json.loads((tmp_path / "r" / "summary.json").read_text())["cell_certificate"]
    exact = int(np.count_nonzero(result.distillation.table.status == EXACT))
    assert entry["exact_cells"] == exact > 0 and entry["certified_cells"] == 0
    assert entry["not_certified"].startswith(f"all {exact}: the table has 6 cells, and distill keeps the proofs of")
    monkeypatch.setattr(_cell_problem, "CERTIFIED_CELLS_AT_MOST", 6)
    distill_controller(spec(folder=tmp_path), out=tmp_path / "u.cfsm", report=tmp_path / "s", jobs=1)
    entry = json.loads((tmp_path / "s" / "summary.json").read_text())["cell_certificate"]
    assert entry["certified_cells"] == entry["exact_cells"] == exact and "not_certified" not in entry


def test_check_proof_reads_a_distill_report_and_checks_its_cells(tmp_path, capsys):
    distill_controller(spec(folder=tmp_path), out=tmp_path / "t.cfsm", report=tmp_path / "r", jobs=1)
    assert main(["check-proof", "--report", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{tmp_path / 'r' / 'cells-exact.cert.json'}: checked (") and " leaves) in " in out
    edited = tmp_path / "r" / "cells-exact.cert.json"
    edited.write_bytes(edited.read_bytes().replace(b'"cell ', b'"Cell ', 1))
    assert main(["check-proof", "--report", str(tmp_path / "r")]) == 1
    assert "missing or changed since summary.json hashed it" in capsys.readouterr().out
