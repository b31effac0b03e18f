"""A distillation's exact cells come with a proof certificate that the independent checker re-checks.

The binding matters as much as the proofs: each certificate entry must be
about one exact cell of the artifact, with the artifact's token, on a box
that covers the cell; and an entry that claims another token must be
refused by the checker, naming the cell.
"""

from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pytest

from certfsm import load_artifact
from certfsm.checker import check_certificate

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def report(distilled_example):
    _, run, artifact = distilled_example
    return run.report_path, load_artifact(artifact), run.distillation


def test_every_exact_cell_of_the_example_has_an_entry_and_a_tenth_of_them_check(report, tmp_path):
    """All entries are checked by bench/check_proof.py and the README's example (about 11 s); here every tenth, so
    that the suite stays short, and the report's hash of the whole file."""
    folder, artifact, distillation = report
    entry = json.loads((folder / "summary.json").read_text())["cell_certificate"]
    whole = json.loads((folder / entry["file"]).read_text())
    sample = {**whole, "properties": whole["properties"][::10]}
    (tmp_path / entry["file"]).write_text(json.dumps(sample))
    queries = folder / entry["file"].replace(".json", ".queries")
    if queries.is_dir():  # the Z3 leaves' query files, which entries name relative to the certificate
        shutil.copytree(queries, tmp_path / queries.name)
    model = json.loads((folder / "summary.json").read_text())["model"]["path"]
    checked = check_certificate(tmp_path / entry["file"], model)
    assert checked.ok and checked.leaves > len(sample["properties"]), checked.failure
    assert hashlib.sha256((folder / entry["file"]).read_bytes()).hexdigest() == entry["sha256"]
    exact = np.flatnonzero(artifact.exact.reshape(-1))
    assert entry["certified_cells"] == entry["exact_cells"] == len(exact) > 0 and "not_certified" not in entry
    document = json.loads((folder / entry["file"]).read_text())
    outputs, tokens = artifact.spec["outputs"], artifact.proposal.reshape(-1)
    names = [item["property"]["name"] for item in document["properties"]]
    assert names == [f"cell {cell}: the decision is {outputs[tokens[cell]]}" for cell in exact]
    grid = distillation.table.grid
    for cell, item in zip(exact.tolist()[::97], document["properties"][::97]):
        lower, upper = grid.cell_bounds(cell)
        stated = item["property"]["inputs"]
        assert all(float(i["lower"]) <= lo and hi <= float(i["upper"]) for i, lo, hi in zip(stated, lower, upper))


def test_an_entry_that_claims_another_token_is_refused_naming_the_cell(report, tmp_path):
    folder, artifact, _ = report
    document = json.loads((folder / "cells-exact.cert.json").read_text())
    entries = document["properties"]
    first = entries[0]
    other = next(
        e for e in entries if e["property"]["name"].split(" is ")[1] != first["property"]["name"].split(" is ")[1]
    )
    first["property"]["unsafe"] = other["property"]["unsafe"]
    mutated = tmp_path / "cells-exact.cert.json"
    mutated.write_text(json.dumps(document))
    model = json.loads((folder / "summary.json").read_text())["model"]["path"]
    checked = check_certificate(mutated, model)
    assert not checked.ok and checked.failure.startswith(f"property {first['property']['name']}, disjunct ")
